// The web dashboard: pages over the Inspector, actions through the Queue's verbs, live updates
// over server-sent events, and Prometheus metrics. What a request goes through, in order:
//   1. mount   — outside the base path it is not ours: next() (or 404 on our own server)
//   2. host    — a Host header outside allowedHosts is refused (DNS rebinding)
//   3. auth    — basic and/or bearer credentials when configured (401 otherwise)
//   4. reads   — GET pages, JSON, the chart SVG, the event stream, assets, /metrics
//   5. actions — POST only, 403 in read-only mode, then the CSRF token (header x-csrf-token or
//                form field _csrf) and a same-origin Origin/Referer; then the verb
// Every response carries a CSP without inline script or style, nosniff, no framing and no
// caching. Nothing a job holds is ever markup: pages escape it, the page script sets text.
import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Registry } from 'prom-client';
import { DASHBOARD_CSS, DASHBOARD_JS } from './dashboard/assets.js';
import {
  errorPage,
  jobPage,
  overviewPage,
  type PageContext,
  queuePage,
  schedulersPage,
  sumRates,
  throughputSvg,
} from './dashboard/pages.js';
import { EchoMQ } from './echomq.js';
import { EchoMQError } from './errors.js';
import { EventHub } from './events/hub.js';
import { Inspector } from './inspect.js';
import { JOB_STATES, type JobState } from './jobs.js';
import { type EchoMQMetrics, registerMetrics } from './telemetry/metrics.js';

export interface DashboardOptions {
  /** The port startDashboard listens on. Default 3000; 0 picks a free port (see the returned url). */
  port?: number;
  /** The interface startDashboard binds. Default '127.0.0.1': reachable from this machine only. */
  host?: string;
  /** Redis URL, used when `mq` is not given; the dashboard opens and closes that connection. Default: REDIS_URL, then redis://127.0.0.1:6379. */
  url?: string;
  /** An open connection to read through; the dashboard never closes it. */
  mq?: EchoMQ;
  /** Credentials every request must carry: HTTP basic, a bearer token, or either when both are set. Default: none. */
  auth?: { basic?: { user: string; password: string }; bearer?: string };
  /** No action buttons, and every POST answers 403. Default false. */
  readOnly?: boolean;
  /** The path the dashboard is mounted under, e.g. '/admin/queues'. Default '' (the root). */
  basePath?: string;
  /** Serve Prometheus metrics at `<basePath>/metrics` (registerMetrics on the same connection). Default true. */
  metrics?: boolean;
  /**
   * Host header names accepted (DNS-rebinding guard), e.g. ['queues.internal']. Default:
   * startDashboard on a loopback host accepts localhost, 127.0.0.1 and [::1] only; otherwise any.
   */
  allowedHosts?: string[];
  /** Origins allowed to POST besides the page's own (a proxy that rewrites Host). Default: none. */
  allowedOrigins?: string[];
  /**
   * The CSRF token pages carry and actions must return. Default: a random one per process;
   * give several dashboard processes behind one load balancer the same secret.
   */
  csrfToken?: string;
}

/** A request handler for a Node HTTP server, Express, or Fastify through @fastify/middie. */
export type DashboardHandler = ((req: IncomingMessage, res: ServerResponse, next?: () => void) => void) & {
  /** Ends the event streams, stops the readers and metrics, and closes a connection it opened. */
  close(): Promise<void>;
  /** The metrics handle (observe this process's consumers with it), once connected. */
  metrics(): Promise<EchoMQMetrics | undefined>;
};

const PAGE_SIZE = 25;
const MAX_PAGE_SIZE = 200;
const MAX_BODY_BYTES = 16 * 1024;
const MAX_STREAMS = 100;
const MAX_STREAM_QUEUES = 100;
const CHART_QUEUES = 100;
const PING_MS = 15_000;
const LOOPBACK_HOSTS = ['localhost', '127.0.0.1', '[::1]'];
/** The CSRF token of every dashboard in this process that is not given one. */
const PROCESS_CSRF = randomBytes(32).toString('base64url');

const SECURITY_HEADERS: Record<string, string> = {
  'content-security-policy':
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; " +
    "object-src 'none'; base-uri 'none'; frame-ancestors 'none'; form-action 'self'",
  'x-content-type-options': 'nosniff',
  'x-frame-options': 'DENY',
  'referrer-policy': 'same-origin',
  'cross-origin-opener-policy': 'same-origin',
  'cross-origin-resource-policy': 'same-origin',
  'cache-control': 'no-store',
};

class HttpError extends Error {
  constructor(
    readonly status: number,
    message: string,
    readonly headers: Record<string, string> = {},
  ) {
    super(message);
  }
}

function normalizeBase(path: string | undefined): string {
  if (!path || path === '/') return '';
  const withSlash = path.startsWith('/') ? path : `/${path}`;
  return withSlash.replace(/\/+$/, '');
}

/** Compares secrets in constant time (hashing first makes the lengths equal). */
function same(a: string, b: string): boolean {
  const ha = createHash('sha256').update(a).digest();
  const hb = createHash('sha256').update(b).digest();
  return timingSafeEqual(ha, hb);
}

function hostName(host: string | undefined): string {
  if (!host) return '';
  const h = host.trim().toLowerCase();
  if (h.startsWith('[')) return h.slice(0, h.indexOf(']') + 1);
  return h.split(':')[0] ?? '';
}

function statusOf(err: unknown): number {
  if (err instanceof HttpError) return err.status;
  if (err instanceof EchoMQError) {
    if (err.code === 'EMQINPUT' || err.code === 'EMQKIND') return 400;
    if (err.code === 'EMQNOJOB') return 404;
    if (err.code === 'EMQSTATE') return 409;
    if (err.code === 'EMQCLOSED') return 503;
  }
  return 500;
}

function readBody(req: IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    let size = 0;
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => {
      size += chunk.length;
      if (size > MAX_BODY_BYTES) {
        reject(new HttpError(413, 'request body too large'));
        req.destroy();
        return;
      }
      chunks.push(chunk);
    });
    req.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    req.on('error', reject);
  });
}

function wholeParam(value: string | null, what: string, fallback: number, max: number): number {
  if (value === null || value === '') return fallback;
  const n = Number(value);
  if (!Number.isInteger(n) || n < 0 || n > max)
    throw new HttpError(400, `${what} must be a whole number from 0 to ${max}`);
  return n;
}

function stateParam(value: string | null, fallback: JobState): JobState {
  if (value === null || value === '') return fallback;
  if (!(JOB_STATES as readonly string[]).includes(value)) {
    throw new HttpError(400, `state must be one of ${JOB_STATES.join(', ')}`);
  }
  return value as JobState;
}

/**
 * The dashboard as a request handler, to mount in an existing server under `basePath`.
 * @example
 *   const dashboard = dashboardHandler({ mq, basePath: '/admin/queues', auth: { bearer: token } });
 *   http.createServer((req, res) => dashboard(req, res, () => app(req, res)));
 *   // Express: app.use('/admin/queues', dashboardHandler({ mq, basePath: '/admin/queues' }))
 */
export function dashboardHandler(opts: DashboardOptions = {}): DashboardHandler {
  const base = normalizeBase(opts.basePath);
  const readOnly = opts.readOnly ?? false;
  const csrf = opts.csrfToken ?? PROCESS_CSRF;
  if (csrf.length < 16) throw new EchoMQError('EMQINPUT', 'csrfToken must be at least 16 characters');
  const allowedHosts = opts.allowedHosts?.map((h) => hostName(h));
  const allowedOrigins = new Set(opts.allowedOrigins ?? []);
  const auth = opts.auth;
  const basic = auth?.basic;
  const bearer = auth?.bearer;
  if (basic && (!basic.user || !basic.password))
    throw new EchoMQError('EMQINPUT', 'auth.basic needs a user and a password');
  if (bearer !== undefined && bearer.length < 16) {
    throw new EchoMQError('EMQINPUT', 'auth.bearer must be at least 16 characters (a random token)');
  }

  // ── the connection, the readers and the metrics, made on first use ──────────
  let closed = false;
  let connecting: Promise<Parts> | undefined;
  interface Parts {
    mq: EchoMQ;
    inspector: Inspector;
    hub: EventHub;
    registry: Registry | undefined;
    metrics: EchoMQMetrics | undefined;
  }
  const parts = (): Promise<Parts> => {
    if (closed) return Promise.reject(new HttpError(503, 'the dashboard is closed'));
    connecting ??= (async () => {
      const mq = opts.mq ?? (await EchoMQ.connect(opts.url === undefined ? {} : { url: opts.url }));
      const hub = new EventHub((queue, blockMs) => mq.queue(queue).events({ blockMs }));
      let registry: Registry | undefined;
      let metrics: EchoMQMetrics | undefined;
      if (opts.metrics ?? true) {
        registry = new Registry();
        metrics = registerMetrics(registry, { mq, hub });
      }
      return { mq, inspector: new Inspector(mq), hub, registry, metrics };
    })().catch((err) => {
      connecting = undefined; // try again on the next request
      throw new HttpError(503, `cannot reach Redis: ${(err as Error).message}`);
    });
    return connecting;
  };
  const streams = new Set<ServerResponse>();

  // ── responses ────────────────────────────────────────────────────────────────
  const send = (
    res: ServerResponse,
    status: number,
    type: string,
    body: string,
    headers: Record<string, string> = {},
  ) => {
    if (res.headersSent) {
      res.end();
      return;
    }
    res.writeHead(status, { ...SECURITY_HEADERS, 'content-type': type, ...headers });
    res.end(body);
  };
  const html = (res: ServerResponse, body: string, status = 200) =>
    send(res, status, 'text/html; charset=utf-8', body);
  const json = (res: ServerResponse, value: unknown, status = 200) =>
    send(res, status, 'application/json; charset=utf-8', JSON.stringify(value));
  const wantsJson = (req: IncomingMessage, path: string[]) =>
    path[0] === 'api' ||
    (req.headers.accept ?? '').startsWith('application/json') ||
    req.headers['x-csrf-token'] !== undefined;

  // ── 3. auth ──────────────────────────────────────────────────────────────────
  const authorized = (req: IncomingMessage): boolean => {
    if (!basic && bearer === undefined) return true;
    const header = req.headers.authorization ?? '';
    const space = header.indexOf(' ');
    const scheme = header.slice(0, space).toLowerCase();
    const value = header.slice(space + 1).trim();
    if (bearer !== undefined && scheme === 'bearer') return same(value, bearer);
    if (basic && scheme === 'basic') {
      const decoded = Buffer.from(value, 'base64').toString('utf8');
      const colon = decoded.indexOf(':');
      if (colon < 0) return false;
      // Both compared, always: no early exit tells which one was wrong.
      const userOk = same(decoded.slice(0, colon), basic.user);
      const passOk = same(decoded.slice(colon + 1), basic.password);
      return userOk && passOk;
    }
    return false;
  };
  const challenge = (): Record<string, string> => {
    const schemes: string[] = [];
    if (basic) schemes.push('Basic realm="EchoMQ dashboard", charset="UTF-8"');
    if (bearer !== undefined) schemes.push('Bearer realm="EchoMQ dashboard"');
    return { 'www-authenticate': schemes.join(', ') };
  };

  // ── 5. the CSRF checks of an action ──────────────────────────────────────────
  const sameOrigin = (req: IncomingMessage): boolean => {
    if (req.headers['sec-fetch-site'] === 'cross-site') return false;
    const source = req.headers.origin ?? req.headers.referer;
    if (source === undefined) return true; // no browser sent this; the token still must match
    if (allowedOrigins.has(source)) return true;
    try {
      const u = new URL(source);
      return u.host === req.headers.host && (u.protocol === 'http:' || u.protocol === 'https:');
    } catch {
      return false;
    }
  };

  // ── 4. reads ─────────────────────────────────────────────────────────────────
  async function knownQueue(p: Parts, name: string | undefined): Promise<string> {
    if (!name || !(await p.inspector.has(name)))
      throw new HttpError(404, `no queue named ${JSON.stringify(name ?? '')}`);
    return name;
  }

  async function get(
    req: IncomingMessage,
    res: ServerResponse,
    path: string[],
    query: URLSearchParams,
    ctx: PageContext,
  ) {
    const [a, b, c, d, e] = path;
    if (a === 'assets' && path.length === 2) {
      if (b === 'dashboard.js') return send(res, 200, 'text/javascript; charset=utf-8', DASHBOARD_JS);
      if (b === 'dashboard.css') return send(res, 200, 'text/css; charset=utf-8', DASHBOARD_CSS);
      throw new HttpError(404, 'no such asset');
    }
    const p = await parts();
    if (path.length === 0) {
      const queues = await p.inspector.queues();
      return html(
        res,
        overviewPage(
          ctx,
          queues,
          await allRates(
            p,
            queues.map((s) => s.name),
          ),
        ),
      );
    }
    if (a === 'metrics' && path.length === 1) {
      if (!p.registry) throw new HttpError(404, 'metrics are off (metrics: false)');
      return send(res, 200, p.registry.contentType, await p.registry.metrics());
    }
    if (a === 'queues' && b !== undefined) {
      const name = await knownQueue(p, b);
      if (path.length === 2) return html(res, queuePage(ctx, await queueView(p, name, query)));
      if (c === 'jobs' && d !== undefined && path.length === 4) {
        const job = await p.inspector.job(name, d);
        if (!job) throw new HttpError(404, `no job ${d} in queue ${name}`);
        return html(res, jobPage(ctx, name, job));
      }
      if (c === 'schedulers' && path.length === 3) {
        return html(res, schedulersPage(ctx, name, await p.inspector.schedulers(name)));
      }
    }
    if (a === 'api') {
      if (b === 'overview' && path.length === 2) {
        const queues = await p.inspector.queues();
        return json(res, {
          queues,
          perMinute: await allRates(
            p,
            queues.map((s) => s.name),
          ),
        });
      }
      if (b === 'events' && path.length === 2) return stream(req, res, p, query.getAll('queue'));
      if (b === 'chart.svg' && path.length === 2) {
        const queue = query.get('queue');
        const rates = queue
          ? (await p.inspector.stats(await knownQueue(p, queue))).rates.perMinute
          : await allRates(
              p,
              (await p.inspector.queues()).map((s) => s.name),
            );
        return send(res, 200, 'image/svg+xml; charset=utf-8', throughputSvg(rates, queue ?? 'all queues'));
      }
      if (b === 'queues' && c !== undefined) {
        const name = await knownQueue(p, c);
        if (d === 'stats' && path.length === 4) return json(res, await p.inspector.stats(name));
        if (d === 'schedulers' && path.length === 4) return json(res, await p.inspector.schedulers(name));
        if (d === 'jobs' && path.length === 4) {
          const v = await jobsPage(p, name, query, 'pending');
          return json(res, { total: v.total, jobs: v.jobs });
        }
        if (d === 'jobs' && e !== undefined && path.length === 5) {
          const job = await p.inspector.job(name, e);
          if (!job) throw new HttpError(404, `no job ${e} in queue ${name}`);
          return json(res, job);
        }
      }
    }
    throw new HttpError(404, 'not found');
  }

  async function allRates(p: Parts, names: string[]) {
    const stats = await Promise.all(names.slice(0, CHART_QUEUES).map((n) => p.inspector.stats(n)));
    return sumRates(stats.map((s) => s.rates.perMinute));
  }

  async function jobsPage(p: Parts, name: string, query: URLSearchParams, fallback: JobState) {
    const lane = query.get('lane') || undefined;
    const state = lane === undefined ? stateParam(query.get('state'), fallback) : 'pending';
    const offset = wholeParam(query.get('offset'), 'offset', 0, Number.MAX_SAFE_INTEGER);
    const limit = Math.max(1, wholeParam(query.get('limit'), 'limit', PAGE_SIZE, MAX_PAGE_SIZE));
    const page = await p.inspector.jobs(
      name,
      state,
      lane === undefined ? { offset, limit } : { offset, limit, group: lane },
    );
    return { state, lane, offset, limit, total: page.total, jobs: page.jobs };
  }

  async function queueView(p: Parts, name: string, query: URLSearchParams) {
    const [stats, v] = await Promise.all([p.inspector.stats(name), jobsPage(p, name, query, 'pending')]);
    return { stats, ...v };
  }

  /** Server-sent events of the given queues: `job` per stream entry, `ready` once subscribed. */
  async function stream(req: IncomingMessage, res: ServerResponse, p: Parts, names: string[]) {
    const queues = [...new Set(names)];
    if (queues.length === 0 || queues.length > MAX_STREAM_QUEUES) {
      throw new HttpError(400, `name 1 to ${MAX_STREAM_QUEUES} queues: /api/events?queue=a&queue=b`);
    }
    for (const q of queues) await knownQueue(p, q);
    if (streams.size >= MAX_STREAMS) throw new HttpError(503, 'too many open event streams');
    res.writeHead(200, {
      ...SECURITY_HEADERS,
      'content-type': 'text/event-stream; charset=utf-8',
      connection: 'keep-alive',
      'x-accel-buffering': 'no',
    });
    res.write('retry: 2000\n\n');
    streams.add(res);
    const unsubscribe = queues.map((q) =>
      p.hub.subscribe(q, (queue, e) => {
        res.write(`event: job\ndata: ${JSON.stringify({ queue, ...e })}\n\n`);
      }),
    );
    const ping = setInterval(() => res.write(': ping\n\n'), PING_MS);
    const end = () => {
      clearInterval(ping);
      for (const u of unsubscribe) u();
      streams.delete(res);
    };
    req.on('close', end);
    res.on('close', end);
    await Promise.all(queues.map((q) => p.hub.ready(q)));
    if (!res.destroyed && !res.writableEnded) res.write('event: ready\ndata: {}\n\n');
  }

  // ── 5. actions ───────────────────────────────────────────────────────────────
  async function post(
    req: IncomingMessage,
    res: ServerResponse,
    path: string[],
    linkBase: string,
    jsonReply: boolean,
  ) {
    if (readOnly) throw new HttpError(403, 'the dashboard is read-only');
    const raw = await readBody(req);
    const type = (req.headers['content-type'] ?? '').split(';')[0]!.trim().toLowerCase();
    let fields: Record<string, string> = {};
    if (type === 'application/x-www-form-urlencoded') fields = Object.fromEntries(new URLSearchParams(raw));
    else if (type === 'application/json' && raw.trim() !== '') {
      try {
        const parsed = JSON.parse(raw) as unknown;
        if (parsed && typeof parsed === 'object') {
          for (const [k, v] of Object.entries(parsed)) if (typeof v === 'string') fields[k] = v;
        }
      } catch {
        throw new HttpError(400, 'the body is not JSON');
      }
    }
    const headerToken = req.headers['x-csrf-token'];
    const token = (typeof headerToken === 'string' ? headerToken : undefined) ?? fields._csrf;
    if (!token || !same(token, csrf)) throw new HttpError(403, 'missing or wrong CSRF token');
    if (!sameOrigin(req)) throw new HttpError(403, 'cross-origin request refused');

    const p = await parts();
    const [a, b, c, d, e] = path;
    if (a !== 'queues' || b === undefined) throw new HttpError(404, 'no such action');
    const name = await knownQueue(p, b);
    const queue = p.mq.queue(name);
    let result: unknown;
    if (c === 'jobs' && d !== undefined && path.length === 5) {
      if (e === 'retry') result = await queue.retry(d);
      else if (e === 'cancel') result = await queue.cancel(d);
      else if (e === 'remove') {
        result = await queue.remove(d);
        if (result === false) throw new HttpError(404, `no job ${d} in queue ${name}`);
      } else throw new HttpError(404, 'no such action');
    } else if (path.length === 3 && c === 'retry-all') {
      const state = fields.state === 'cancelled' ? 'cancelled' : 'dead';
      result = await queue.retryAll({ state });
    } else if (path.length === 3 && c === 'pause') result = await queue.pause();
    else if (path.length === 3 && c === 'resume') result = await queue.resume();
    else throw new HttpError(404, 'no such action');

    if (jsonReply) return json(res, { ok: true, result: result ?? null });
    const ret = fields.return ?? '';
    const safe =
      /^[\x21-\x7e]+$/.test(ret) &&
      ret.startsWith('/') &&
      !ret.startsWith('//') &&
      !ret.includes('\\') &&
      (linkBase === '' ||
        ret === linkBase ||
        ret.startsWith(`${linkBase}/`) ||
        ret.startsWith(`${linkBase}?`));
    send(res, 303, 'text/plain; charset=utf-8', 'done', { location: safe ? ret : `${linkBase}/` });
  }

  // ── the handler ──────────────────────────────────────────────────────────────
  const handler = ((req: IncomingMessage, res: ServerResponse, next?: () => void) => {
    let url: URL;
    try {
      url = new URL(req.url ?? '/', 'http://dashboard.invalid');
    } catch {
      return send(res, 400, 'text/plain; charset=utf-8', 'bad request');
    }
    // 1. mount: req.url carries the base path (a plain server), or a framework stripped it
    // (Express: req.baseUrl; middie and others keep the full path in req.originalUrl).
    let pathname = url.pathname;
    let linkBase = base;
    const r = req as IncomingMessage & { baseUrl?: string; originalUrl?: string };
    if (base !== '') {
      if (pathname === base || pathname.startsWith(`${base}/`)) pathname = pathname.slice(base.length) || '/';
      else if (r.baseUrl !== base && !(r.originalUrl ?? '').startsWith(base)) {
        if (next) return next();
        return send(res, 404, 'text/plain; charset=utf-8', 'not found');
      }
    } else if (r.baseUrl) linkBase = r.baseUrl;
    let path: string[];
    try {
      path = pathname.split('/').filter(Boolean).map(decodeURIComponent);
    } catch {
      return send(res, 400, 'text/plain; charset=utf-8', 'malformed path');
    }
    const ctx: PageContext = { base: linkBase, csrf: readOnly ? null : csrf };
    const jsonReply = wantsJson(req, path);
    const fail = (err: unknown) => {
      const status = statusOf(err);
      const message =
        status === 500 ? `internal error: ${(err as Error)?.message ?? String(err)}` : (err as Error).message;
      const headers = err instanceof HttpError ? err.headers : {};
      if (res.headersSent) return void res.end();
      if (jsonReply)
        send(res, status, 'application/json; charset=utf-8', JSON.stringify({ error: message }), headers);
      else send(res, status, 'text/html; charset=utf-8', errorPage(ctx, status, message), headers);
    };
    // 2. host
    if (allowedHosts && !allowedHosts.includes(hostName(req.headers.host))) {
      return fail(new HttpError(403, 'this Host is not allowed (see allowedHosts)'));
    }
    // 3. auth
    if (!authorized(req)) return fail(new HttpError(401, 'authentication required', challenge()));
    const method = req.method ?? 'GET';
    const work =
      method === 'GET' || method === 'HEAD'
        ? get(req, res, path, url.searchParams, ctx)
        : method === 'POST'
          ? post(req, res, path, linkBase, jsonReply)
          : Promise.reject(new HttpError(405, 'method not allowed', { allow: 'GET, HEAD, POST' }));
    work.catch(fail);
  }) as DashboardHandler;

  handler.close = async () => {
    closed = true;
    for (const res of streams) res.end();
    streams.clear();
    const p = await connecting?.catch(() => undefined);
    connecting = undefined;
    if (!p) return;
    await p.metrics?.close();
    await p.hub.close();
    if (!opts.mq) await p.mq.close();
  };
  handler.metrics = async () => (await parts()).metrics;
  return handler;
}

/**
 * Starts the dashboard on its own HTTP server, bound to 127.0.0.1:3000 by default.
 * @example
 *   const { url, close } = await startDashboard({ url: 'redis://127.0.0.1:6379', auth: { basic: { user, password } } });
 */
export async function startDashboard(
  opts: DashboardOptions = {},
): Promise<{ url: string; server: Server; handler: DashboardHandler; close(): Promise<void> }> {
  const host = opts.host ?? '127.0.0.1';
  const loopback = host === '127.0.0.1' || host === 'localhost' || host === '::1';
  const handler = dashboardHandler({
    ...opts,
    allowedHosts: opts.allowedHosts ?? (loopback ? LOOPBACK_HOSTS : undefined),
  });
  const base = normalizeBase(opts.basePath);
  const server = createServer((req, res) => handler(req, res));
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(opts.port ?? 3000, host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const addr = server.address() as AddressInfo;
  const shown = addr.family === 'IPv6' ? `[${addr.address}]` : addr.address;
  return {
    url: `http://${shown}:${addr.port}${base}/`,
    server,
    handler,
    async close() {
      await handler.close();
      await new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      });
    },
  };
}
