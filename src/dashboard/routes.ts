// The dashboard's routes: every page, JSON read and action as a named path in a table
// ('/queues/:queue/jobs/:id'), matched segment by segment, a `:name` segment standing for any
// one segment. A route with a :queue is only run once that queue is known to exist (404
// otherwise). Reads go through the Inspector, the event hub and the metrics registry; actions
// through the Queue's verbs. Guards (host, auth, CSRF) have run before anything here does.
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Registry } from 'prom-client';
import type { EventHub } from '../events/hub.js';
import type { Inspector } from '../inspect/inspector.js';
import type { EchoMQ } from '../queue/echomq.js';
import type { Queue } from '../queue/queue.js';
import type { EchoMQMetrics } from '../telemetry/metrics.js';
import { DASHBOARD_CSS, DASHBOARD_JS } from './assets.js';
import { CONTROLS_CSS, CONTROLS_JS } from './assets-controls.js';
import { OPS_JS } from './assets-ops.js';
import { bulkAction, cleanTask, drainTask, retryAllTask } from './bulk.js';
import {
  laneConcurrency,
  laneRate,
  pauseLane,
  removeRepeat,
  removeScheduler,
  resumeLane,
  runScheduler,
} from './controls.js';
import { lanesPage, schedulersPage } from './controls-pages.js';
import { SECURITY_HEADERS } from './guard.js';
import { HttpError, html, json, send } from './http.js';
import { logPage } from './job-page.js';
import type { PageContext } from './markup.js';
import { foundPage, jobPage, overviewPage, queuePage, sumRates, throughputSvg } from './pages.js';
import { dataPreview, jobQuery, listJobs } from './search.js';
import type { Tasks } from './tasks.js';

const MAX_STREAMS = 100;
const MAX_STREAM_QUEUES = 100;
const CHART_QUEUES = 100;
const PING_MS = 15_000;
/** How often an open event stream checks that Redis still answers (the connection's state, no call). */
const HEALTH_MS = 1000;

/** The connection, the readers and the metrics of a dashboard, made on its first request. */
export interface Parts {
  mq: EchoMQ;
  inspector: Inspector;
  hub: EventHub;
  registry: Registry | undefined;
  metrics: EchoMQMetrics | undefined;
}

/** What the routes of one dashboard share. */
export interface Site {
  parts(): Promise<Parts>;
  /** The open event streams: at most MAX_STREAMS, ended when the dashboard closes. */
  streams: Set<ServerResponse>;
  /** The long actions this dashboard runs (retry all, clean, drain). */
  tasks: Tasks;
}

/** A GET (or HEAD) request as its route sees it. */
export interface ReadCall {
  req: IncomingMessage;
  res: ServerResponse;
  query: URLSearchParams;
  page: PageContext;
  site: Site;
}

type Params = Readonly<Record<string, string>>;

/** A read route's handler, given the connection and the :queue of the path (known to exist). */
type Read = (c: ReadCall & { params: Params; p: Parts; queue: string }) => Promise<void>;

/** A read route served without a connection to Redis. */
type OfflineRead = (c: ReadCall & { params: Params }) => Promise<void>;

/** An action route's handler: a verb on a known queue, whose result is sent back. */
type Action = (
  queue: Queue,
  params: Params,
  fields: Readonly<Record<string, string>>,
  site: Site,
) => Promise<unknown>;

interface Route<H> {
  readonly pattern: string;
  readonly segments: readonly string[];
  readonly handle: H;
}

function route<H>(pattern: string, handle: H): Route<H> {
  return { pattern, segments: pattern.split('/').filter(Boolean), handle };
}

/** The route whose pattern `path` (decoded segments) fits, with its `:name` segments. */
export function match<R extends { readonly segments: readonly string[] }>(
  routes: readonly R[],
  path: readonly string[],
): { route: R; params: Params } | undefined {
  for (const r of routes) {
    if (r.segments.length !== path.length) continue;
    const params: Record<string, string> = {};
    const fits = r.segments.every((s, i) => {
      if (s.startsWith(':')) params[s.slice(1)] = path[i]!;
      return s.startsWith(':') || s === path[i];
    });
    if (fits) return { route: r, params };
  }
  return undefined;
}

// ── reads ───────────────────────────────────────────────────────────────────

/** The page's own script and style: served before connecting, so they load while Redis is away. */
export const OFFLINE: readonly Route<OfflineRead>[] = [
  route<OfflineRead>('/assets/:file', async ({ res, params }) => {
    if (params.file === 'dashboard.js') return send(res, 200, 'text/javascript; charset=utf-8', DASHBOARD_JS);
    // The controls' style and script ride with the operator's parts (assets-controls.ts).
    if (params.file === 'dashboard.css')
      return send(res, 200, 'text/css; charset=utf-8', DASHBOARD_CSS + CONTROLS_CSS);
    if (params.file === 'ops.js')
      return send(res, 200, 'text/javascript; charset=utf-8', OPS_JS + CONTROLS_JS);
    throw new HttpError(404, 'no such asset');
  }),
];

export const READS: readonly Route<Read>[] = [
  route<Read>('/', async (c) => {
    const queues = await c.p.inspector.queues();
    html(c.res, overviewPage(c.page, queues, await allRates(c.p, queues)));
  }),
  route<Read>('/metrics', async ({ res, p }) => {
    if (!p.registry) throw new HttpError(404, 'metrics are off (metrics: false)');
    send(res, 200, p.registry.contentType, await p.registry.metrics());
  }),
  route<Read>('/queues/:queue', async (c) => html(c.res, queuePage(c.page, await queueView(c)))),
  route<Read>('/queues/:queue/jobs/:id', async (c) => html(c.res, jobPage(c.page, c.queue, await jobOf(c)))),
  route<Read>('/queues/:queue/lanes', async (c) =>
    html(c.res, lanesPage(c.page, await c.p.inspector.stats(c.queue), offsetOf(c.query))),
  ),
  route<Read>('/queues/:queue/schedulers', async (c) =>
    html(c.res, schedulersPage(c.page, c.queue, await c.p.inspector.schedulers(c.queue))),
  ),
  route<Read>('/api/overview', async ({ res, p }) => {
    const queues = await p.inspector.queues();
    json(res, { queues, perMinute: await allRates(p, queues) });
  }),
  route<Read>('/api/events', (c) => stream(c, c.query.getAll('queue'))),
  route<Read>('/api/chart.svg', async ({ res, p, query }) => {
    const queue = query.get('queue');
    const rates = queue
      ? (await p.inspector.stats(await knownQueue(p, queue))).rates.perMinute
      : await allRates(p, await p.inspector.queues());
    send(res, 200, 'image/svg+xml; charset=utf-8', throughputSvg(rates, queue ?? 'all queues'));
  }),
  route<Read>('/api/queues/:queue/stats', async (c) => json(c.res, await c.p.inspector.stats(c.queue))),
  route<Read>('/api/queues/:queue/lanes', async (c) => {
    const s = await c.p.inspector.stats(c.queue);
    json(c.res, { lanes: s.lanes, oldestWaitingMs: s.lanesOldestWaitingMs });
  }),
  route<Read>('/api/queues/:queue/schedulers', async (c) =>
    json(c.res, await c.p.inspector.schedulers(c.queue)),
  ),
  route<Read>('/api/queues/:queue/jobs', async (c) => {
    const v = await listJobs(c.p.inspector, c.queue, jobQuery(c.query));
    json(c.res, {
      total: v.total,
      jobs: v.jobs.map((j) => ({ ...j, preview: dataPreview(j.data) })),
      ...(v.search ? { search: v.search } : {}),
    });
  }),
  route<Read>('/api/queues/:queue/jobs/:id', async (c) => json(c.res, await jobOf(c))),
  route<Read>('/api/queues/:queue/jobs/:id/logs', async (c) => json(c.res, await logPage(c.p.mq, c))),
  route<Read>('/api/queues/:queue/tasks', async (c) => json(c.res, c.site.tasks.of(c.queue))),
  route<Read>('/api/tasks/:task', async (c) => {
    const task = c.site.tasks.get(c.params.task!);
    if (!task) throw new HttpError(404, `no task ${c.params.task} (a task is kept 10 minutes after it ends)`);
    json(c.res, task);
  }),
  // Open a job by id: in ?queue when given, else in whichever registered queue holds it.
  route<Read>('/find', async (c) => {
    const id = (c.query.get('id') ?? '').trim();
    if (id === '') throw new HttpError(400, 'give the job id: /find?id=…');
    const only = c.query.get('queue');
    const holders = only
      ? await c.p.inspector.locate(id, [await knownQueue(c.p, only)])
      : await c.p.inspector.locate(id);
    if (holders.length === 0) {
      throw new HttpError(404, `no job ${id} in ${only ? `queue ${only}` : 'any queue'}`);
    }
    if (holders.length > 1) return html(c.res, foundPage(c.page, id, holders));
    send(c.res, 303, 'text/plain; charset=utf-8', 'found', {
      location: `${c.page.base}/queues/${encodeURIComponent(holders[0]!)}/jobs/${encodeURIComponent(id)}`,
    });
  }),
];

/** Serves a GET of `path` by its route: 404 when none fits, or when its :queue does not exist. */
export async function serveRead(c: ReadCall, path: readonly string[]): Promise<void> {
  const offline = match(OFFLINE, path);
  if (offline) return offline.route.handle({ ...c, params: offline.params });
  const found = match(READS, path);
  if (!found) throw new HttpError(404, 'not found');
  const { route: r, params } = found;
  const p = await c.site.parts();
  const queue = params.queue === undefined ? '' : await knownQueue(p, params.queue);
  await r.handle({ ...c, params, p, queue });
}

/** ?offset as a whole number (0 when absent). */
function offsetOf(query: URLSearchParams): number {
  const text = query.get('offset') ?? '0';
  if (!/^\d{1,9}$/.test(text)) throw new HttpError(400, 'offset must be a whole number');
  return Number(text);
}

async function knownQueue(p: Parts, name: string | undefined): Promise<string> {
  if (!name || !(await p.inspector.has(name)))
    throw new HttpError(404, `no queue named ${JSON.stringify(name ?? '')}`);
  return name;
}

async function jobOf(c: { p: Parts; queue: string; params: Params }) {
  const id = c.params.id!;
  const job = await c.p.inspector.job(c.queue, id);
  if (!job) throw new HttpError(404, `no job ${id} in queue ${c.queue}`);
  return job;
}

/** The per-minute rates of the first CHART_QUEUES queues, summed. */
async function allRates(p: Parts, queues: readonly { name: string }[]) {
  const stats = await Promise.all(queues.slice(0, CHART_QUEUES).map((q) => p.inspector.stats(q.name)));
  return sumRates(stats.map((s) => s.rates.perMinute));
}

async function queueView(c: { p: Parts; queue: string; query: URLSearchParams }) {
  const [stats, v] = await Promise.all([
    c.p.inspector.stats(c.queue),
    listJobs(c.p.inspector, c.queue, jobQuery(c.query)),
  ]);
  return { stats, ...v };
}

/** Server-sent events of the given queues: `job` per stream entry, `ready` once subscribed. */
async function stream(c: ReadCall & { p: Parts }, names: string[]): Promise<void> {
  const { req, res, p, site } = c;
  const queues = [...new Set(names)];
  if (queues.length === 0 || queues.length > MAX_STREAM_QUEUES) {
    throw new HttpError(400, `name 1 to ${MAX_STREAM_QUEUES} queues: /api/events?queue=a&queue=b`);
  }
  for (const q of queues) await knownQueue(p, q);
  if (site.streams.size >= MAX_STREAMS) throw new HttpError(503, 'too many open event streams');
  res.writeHead(200, {
    ...SECURITY_HEADERS,
    'content-type': 'text/event-stream; charset=utf-8',
    connection: 'keep-alive',
    'x-accel-buffering': 'no',
  });
  res.write('retry: 2000\n\n');
  site.streams.add(res);
  const unsubscribe = queues.map((q) =>
    p.hub.subscribe(q, (queue, e) => {
      res.write(`event: job\ndata: ${JSON.stringify({ queue, ...e })}\n\n`);
    }),
  );
  const ping = setInterval(() => res.write(': ping\n\n'), PING_MS);
  // The stream to the browser outlives an outage of Redis: say so (event down), and ready again
  // once the connection is back, so the page never shows "live" while nothing can arrive.
  let up = true;
  const health = setInterval(() => {
    const now = p.mq.connector.isReady;
    if (now === up) return;
    up = now;
    res.write(
      now
        ? 'event: ready\ndata: {}\n\n'
        : `event: down\ndata: ${JSON.stringify({ error: `Redis at ${p.mq.connector.where} does not answer` })}\n\n`,
    );
  }, HEALTH_MS);
  const end = () => {
    clearInterval(ping);
    clearInterval(health);
    for (const u of unsubscribe) u();
    site.streams.delete(res);
  };
  req.on('close', end);
  res.on('close', end);
  await Promise.all(queues.map((q) => p.hub.ready(q)));
  if (!res.destroyed && !res.writableEnded) res.write('event: ready\ndata: {}\n\n');
}

// ── actions ─────────────────────────────────────────────────────────────────

export const ACTIONS: readonly Route<Action>[] = [
  route<Action>('/queues/:queue/jobs/:id/promote', (q, { id }) => q.promote(id!)),
  route<Action>('/queues/:queue/jobs/:id/retry', (q, { id }) => q.retry(id!)),
  route<Action>('/queues/:queue/jobs/:id/cancel', (q, { id }) => q.cancel(id!)),
  route<Action>('/queues/:queue/jobs/:id/remove', async (q, { id }) => {
    if (!(await q.remove(id!))) throw new HttpError(404, `no job ${id} in queue ${q.name}`);
    return true;
  }),
  route<Action>('/queues/:queue/retry-all', async (q, _params, fields, site) => ({
    task: retryAllTask(site.tasks, q, fields),
  })),
  route<Action>('/queues/:queue/bulk', (q, _params, fields) => bulkAction(q, fields)),
  route<Action>('/queues/:queue/clean', async (q, _params, fields, site) => ({
    task: cleanTask(site.tasks, q, fields),
  })),
  route<Action>('/queues/:queue/drain', async (q, _params, fields, site) => ({
    task: drainTask(site.tasks, q, fields),
  })),
  route<Action>('/queues/:queue/pause', (q) => q.pause()),
  route<Action>('/queues/:queue/recover', async (q) => (await q.reap(1000)).length),
  route<Action>('/queues/:queue/resume', (q) => q.resume()),
  route<Action>('/queues/:queue/lanes/:lane/pause', (q, { lane }) => pauseLane(q, lane!)),
  route<Action>('/queues/:queue/lanes/:lane/resume', (q, { lane }) => resumeLane(q, lane!)),
  route<Action>('/queues/:queue/lanes/:lane/concurrency', (q, { lane }, fields) =>
    laneConcurrency(q, lane!, fields),
  ),
  route<Action>('/queues/:queue/lanes/:lane/rate', (q, { lane }, fields) => laneRate(q, lane!, fields)),
  route<Action>('/queues/:queue/schedulers/:id/run', (q, { id }) => runScheduler(q, id!)),
  route<Action>('/queues/:queue/schedulers/:id/remove', (q, { id }) => removeScheduler(q, id!)),
  route<Action>('/queues/:queue/repeats/:name/remove', (q, { name }) => removeRepeat(q, name!)),
];

/** Runs the action of `path` on its queue, which must exist; resolves with the verb's result. */
export async function runAction(
  site: Site,
  path: readonly string[],
  fields: Readonly<Record<string, string>>,
): Promise<unknown> {
  const found = match(ACTIONS, path);
  if (!found) throw new HttpError(404, 'no such action');
  const p = await site.parts();
  const name = await knownQueue(p, found.params.queue);
  return found.route.handle(p.mq.queue(name), found.params, fields, site);
}
