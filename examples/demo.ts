// `npm start`: a producer and a consumer on one queue, printing what happens with timestamps.
// Uses REDIS_URL (which must answer), else a Redis answering on 127.0.0.1:6379, else the
// in-process memory engine. Ends by itself after DEMO_SECONDS (default 5) or on Ctrl-C.
import { EchoMQ, EchoMQError, type Job, mintJobId } from '../src/index.js';
import { findRedis } from '../tools/dev-redis.js';

interface Task {
  kind: 'resize' | 'report' | 'flaky';
  label: string;
  ms: number;
}

const started = performance.now();
const seconds = Number(process.env.DEMO_SECONDS) > 0 ? Number(process.env.DEMO_SECONDS) : 5;
const labels = new Map<string, string>();

function log(who: string, message: string): void {
  const at = ((performance.now() - started) / 1000).toFixed(3).padStart(7);
  console.log(`[+${at}s] ${who.padEnd(8)} ${message}`);
}

/** An epoch-ms instant (the server's clock) as a time of day, UTC. */
function clock(ms: number): string {
  return `${new Date(ms).toISOString().slice(11, 23)}Z`;
}

function label(id: string): string {
  return labels.get(id) ?? id;
}

// ── a Redis to talk to ──────────────────────────────────────────────────────────

let server: Awaited<ReturnType<typeof findRedis>>;
try {
  server = await findRedis();
} catch (err) {
  if (err instanceof EchoMQError && err.code === 'EMQNOSERVER') {
    console.error(`The demo cannot reach the Redis it was given.\n${err.message}`);
    process.exit(1);
  }
  throw err;
}
log('redis', server.note);

// A queue of its own, so a Redis shared with other work is left as it was found.
const queueName = `demo-${Date.now().toString(36)}`;
const mq = await EchoMQ.connect({ url: server.url });
const queue = mq.queue<Task, string>(queueName);

// ── watch ───────────────────────────────────────────────────────────────────────

const events = queue.events();
events.subscribe((e) => {
  const extra = Object.entries(e.fields)
    .filter(([k]) => k !== 'name')
    .map(([k, v]) => (k === 'at' ? `at=${clock(Number(v))}` : `${k}=${v}`))
    .join(' ');
  log('event', `${e.event.padEnd(16)} ${e.id ? label(e.id) : ''} ${extra}`.trimEnd());
});
await events.ready;

// ── consume ─────────────────────────────────────────────────────────────────────

async function handle(job: Job<Task>): Promise<string> {
  const task = job.data;
  log('consumer', `start ${task.label} (attempt ${job.attempts} of ${job.maxAttempts})`);
  await new Promise((r) => setTimeout(r, task.ms));
  if (task.kind === 'flaky' && job.attempts === 1) throw new Error('the mail server timed out');
  return `${task.label} done in ${task.ms} ms`;
}

const consumer = queue.consume(handle, { concurrency: 2, leaseMs: 5000 });
consumer.on('completed', (job, result) => log('consumer', `completed ${label(job.id)}: ${String(result)}`));
consumer.on('failed', (job, error, outcome) =>
  log(
    'consumer',
    `failed ${label(job.id)}: ${error.message} (${outcome === 'retry' ? 'will retry' : outcome})`,
  ),
);
consumer.on('degraded', (error, retryInMs) =>
  log('consumer', `Redis trouble, retrying in ${retryInMs} ms: ${error}`),
);

// ── produce ─────────────────────────────────────────────────────────────────────

async function produce(task: Task, opts: { delayMs?: number; priority?: number } = {}): Promise<void> {
  // Minting the id up front lets the event reader name the job from its very first event.
  const id = mintJobId();
  labels.set(id, task.label);
  const enqueueOpts = {
    id,
    name: task.kind,
    ...(opts.priority ? { priority: opts.priority } : {}),
    ...(task.kind === 'flaky' ? { attempts: 3, backoff: { kind: 'fixed' as const, ms: 300 } } : {}),
  };
  if (opts.delayMs === undefined) await queue.enqueue(task, enqueueOpts);
  else await queue.enqueueIn(task, opts.delayMs, enqueueOpts);
  const when = opts.delayMs === undefined ? 'now' : `in ${opts.delayMs} ms`;
  log('producer', `enqueued ${task.label} (${id}), runs ${when}`);
}

await produce({ kind: 'resize', label: 'resize photo-1.jpg', ms: 200 });
await produce({ kind: 'resize', label: 'resize photo-2.jpg', ms: 300 });
await produce({ kind: 'flaky', label: 'send welcome email', ms: 100 });
await produce({ kind: 'resize', label: 'resize photo-3.jpg', ms: 150 }, { priority: 5 });
await produce({ kind: 'report', label: 'nightly report', ms: 250 }, { delayMs: 1000 });

// ── shut down ───────────────────────────────────────────────────────────────────

let stopping: Promise<void> | undefined;
function shutdown(why: string): Promise<void> {
  stopping ??= (async () => {
    log('demo', `${why}: closing`);
    clearTimeout(timer);
    await consumer.close({ timeoutMs: 2000 });
    const counts = await queue.counts();
    log('demo', `jobs by state: ${JSON.stringify(counts)}`);
    await events.close();
    // Every key of the queue, and its entry in the registry of queues (emq:queues) that
    // `echomq queues` and the dashboard list: nothing of this run is left behind.
    await queue.obliterate();
    await mq.close();
    log(
      'demo',
      'next: `npx echomq dashboard --no-auth` shows the queues of a Redis in the browser (README, Quick start)',
    );
  })();
  return stopping;
}

const timer = setTimeout(() => void shutdown(`${seconds} s are up`), seconds * 1000);
// One Ctrl-C reaches this process several times (from the terminal, relayed by npm and by tsx):
// signals within a second of the first are that same one. A later one means "now": exit at
// once.
let firstSignalAt = 0;
function onSignal(signal: NodeJS.Signals): void {
  if (!stopping) {
    firstSignalAt = performance.now();
    void shutdown(signal);
  } else if (performance.now() - firstSignalAt > 1000) {
    log('demo', `${signal} again: exiting now`);
    process.exit(130);
  }
}
process.on('SIGINT', onSignal);
process.on('SIGTERM', onSignal);
log('demo', `running for ${seconds} s (Ctrl-C to stop sooner)`);
