// The web dashboard: pages over the Inspector, actions through the Queue's verbs, live updates
// over server-sent events, and Prometheus metrics. What a request goes through, in order:
//   1. mount   — outside the base path it is not ours: next() (or 404 on our own server)
//   2. host    — a Host header outside allowedHosts is refused (DNS rebinding)
//   3. auth    — basic and/or bearer credentials (401 otherwise), unless told auth: false
//   4. reads   — GET pages, JSON, the chart SVG, the event stream, assets, /metrics
//   5. actions — POST only, 403 in read-only mode, then the CSRF token (header x-csrf-token or
//                form field _csrf) and a same-origin Origin/Referer; then the verb
// Every response carries a CSP without inline script or style, nosniff, no framing and no
// caching. Nothing a job holds is ever markup: pages escape it, the page script sets text.
// The files of this folder, one part each:
//   index.ts  — options, the handler (steps 1-3 in order, then 4 or 5), startDashboard
//   guard.ts  — the checks of steps 2, 3 and 5 as predicates, and the security headers
//   routes.ts — the reads (4) and actions (5) as a table of named routes
//   http.ts   — HttpError, replies, request bodies
//   pages.ts, assets.ts — the HTML pages; the page's own script and style
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Registry } from 'prom-client';
import { knownKeys } from '../core/check.js';
import { EchoMQError } from '../core/errors.js';
import { EventHub } from '../events/hub.js';
import { Inspector } from '../inspect/inspector.js';
import { EchoMQ } from '../queue/echomq.js';
import { type EchoMQMetrics, registerMetrics } from '../telemetry/metrics.js';
import type { Connector } from '../wire/connector.js';
import { type DashboardAuth, Guard, LOOPBACK_HOSTS, safeReturn } from './guard.js';
import { HttpError, json, readFields, send, statusOf } from './http.js';
import type { PageContext } from './markup.js';
import { errorPage } from './pages.js';
import { type Parts, runAction, type Site, serveRead } from './routes.js';
import { Tasks } from './tasks.js';

export interface DashboardOptions {
  /** The port startDashboard listens on. Default 3000; 0 picks a free port (see the returned url). */
  port?: number;
  /** The interface startDashboard binds. Default '127.0.0.1': reachable from this machine only. */
  host?: string;
  /** Redis URL, used when `mq` is not given; the dashboard opens and closes that connection. Default: REDIS_URL, then redis://127.0.0.1:6379. */
  url?: string;
  /** An open connection to read through; the dashboard never closes it. */
  mq?: EchoMQ;
  /**
   * Credentials every request must carry: HTTP basic, a bearer token, or either when both are
   * set. Required: `false` serves without credentials, and only when said so; a credential that
   * is undefined, empty or short (an unset variable) refuses to start with EMQINPUT.
   */
  auth: DashboardAuth | false;
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

export type { DashboardAuth } from './guard.js';

const OPTION_KEYS = new Set([
  'port',
  'host',
  'url',
  'mq',
  'auth',
  'readOnly',
  'basePath',
  'metrics',
  'allowedHosts',
  'allowedOrigins',
  'csrfToken',
]);

/** Refuses a missing options object and an unknown option (a typo is never silently ignored). */
function checkOptions(opts: DashboardOptions): void {
  if (opts === null || typeof opts !== 'object') {
    throw new EchoMQError(
      'EMQINPUT',
      'the dashboard takes an options object with auth, e.g. { auth: { bearer: token } } or { auth: false }',
    );
  }
  knownKeys(opts, OPTION_KEYS, 'dashboard option');
}

function normalizeBase(path: string | undefined): string {
  if (!path || path === '/') return '';
  const withSlash = path.startsWith('/') ? path : `/${path}`;
  return withSlash.replace(/\/+$/, '');
}

/**
 * The dashboard as a request handler, to mount in an existing server under `basePath`.
 * @example
 *   const dashboard = dashboardHandler({ mq, basePath: '/admin/queues', auth: { bearer: token } });
 *   http.createServer((req, res) => dashboard(req, res, () => app(req, res)));
 *   // Express: app.use('/admin/queues', dashboardHandler({ mq, basePath: '/admin/queues', auth: { bearer: token } }))
 */
export function dashboardHandler(opts: DashboardOptions): DashboardHandler {
  checkOptions(opts);
  const base = normalizeBase(opts.basePath);
  const readOnly = opts.readOnly ?? false;
  const guard = new Guard(opts);

  // ── the connection, the readers and the metrics, made on first use ──────────
  let closed = false;
  let connecting: Promise<Parts> | undefined;
  /** The connection once made: it names the server and cause when Redis stops answering. */
  let connector: Connector | undefined = opts.mq?.connector;
  const site: Site = {
    streams: new Set<ServerResponse>(),
    tasks: new Tasks(),
    parts() {
      if (closed) return Promise.reject(new HttpError(503, 'the dashboard is closed'));
      connecting ??= (async () => {
        const mq = opts.mq ?? (await EchoMQ.connect(opts.url === undefined ? {} : { url: opts.url }));
        connector = mq.connector;
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
        throw new HttpError(503, (err as Error).message);
      });
      return connecting;
    },
  };

  // ── 5. an action: read-only mode, the CSRF token and the origin, then the verb ──
  async function act(
    req: IncomingMessage,
    res: ServerResponse,
    path: string[],
    linkBase: string,
    jsonReply: boolean,
  ) {
    if (readOnly) throw new HttpError(403, 'the dashboard is read-only');
    const fields = await readFields(req);
    if (!guard.tokenMatches(req, fields)) throw new HttpError(403, 'missing or wrong CSRF token');
    if (!guard.sameOrigin(req)) throw new HttpError(403, 'cross-origin request refused');
    const result = await runAction(site, path, fields);
    if (jsonReply) return json(res, { ok: true, result: result ?? null });
    send(res, 303, 'text/plain; charset=utf-8', 'done', { location: safeReturn(fields.return, linkBase) });
  }

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
    const page: PageContext = { base: linkBase, csrf: readOnly ? null : guard.csrf };
    const jsonReply =
      path[0] === 'api' ||
      (req.headers.accept ?? '').startsWith('application/json') ||
      req.headers['x-csrf-token'] !== undefined;
    const fail = (thrown: unknown) => {
      // Redis not answering is a 503 naming the server and the cause, never a raw 500.
      const err = connector ? connector.explain(thrown) : thrown;
      const status = statusOf(err);
      const message =
        status === 500 ? `internal error: ${(err as Error)?.message ?? String(err)}` : (err as Error).message;
      const headers = err instanceof HttpError ? err.headers : {};
      if (res.headersSent) return void res.end();
      if (jsonReply)
        send(res, status, 'application/json; charset=utf-8', JSON.stringify({ error: message }), headers);
      else send(res, status, 'text/html; charset=utf-8', errorPage(page, status, message), headers);
    };
    // 2. host
    if (!guard.hostAllowed(req))
      return fail(new HttpError(403, 'this Host is not allowed (see allowedHosts)'));
    // 3. auth
    if (!guard.authorized(req)) return fail(new HttpError(401, 'authentication required', guard.challenge()));
    // 4. reads, 5. actions
    const method = req.method ?? 'GET';
    const work =
      method === 'GET' || method === 'HEAD'
        ? serveRead({ req, res, query: url.searchParams, page, site }, path)
        : method === 'POST'
          ? act(req, res, path, linkBase, jsonReply)
          : Promise.reject(new HttpError(405, 'method not allowed', { allow: 'GET, HEAD, POST' }));
    work.catch(fail);
  }) as DashboardHandler;

  handler.close = async () => {
    closed = true;
    for (const res of site.streams) res.end();
    site.streams.clear();
    const p = await connecting?.catch(() => undefined);
    connecting = undefined;
    if (!p) return;
    await p.metrics?.close();
    await p.hub.close();
    if (!opts.mq) await p.mq.close();
  };
  handler.metrics = async () => (await site.parts()).metrics;
  return handler;
}

/**
 * Starts the dashboard on its own HTTP server, bound to 127.0.0.1:3000 by default.
 * @example
 *   const { url, close } = await startDashboard({ url: 'redis://127.0.0.1:6379', auth: { basic: { user, password } } });
 */
export async function startDashboard(
  opts: DashboardOptions,
): Promise<{ url: string; server: Server; handler: DashboardHandler; close(): Promise<void> }> {
  checkOptions(opts);
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
