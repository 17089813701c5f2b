// The chaos producer: enqueues a seeded set of jobs (flat, grouped into lanes, delayed) spread over
// the fill window, registers the recurring ones (a Repeat cadence and a JobScheduler), and records
// every id the queue ACKNOWLEDGED in its own append-only file: that file is exactly what the
// producer was told is stored, which the harness holds Redis to. Ids are minted here, so a call
// that failed (a killed connection, a restarting server) is retried with the same id: enqueue is
// idempotent on the id, and a `duplicate` reply to a retry means the first try was stored.
// Started by the harness as `node --import tsx chaos/producer.ts` with:
//   REDIS_URL, CHAOS_QUEUE, CHAOS_RECORDS, CHAOS_SEED, CHAOS_JOBS, CHAOS_FILL_MS, CHAOS_GIVE_UP_MS

import { mintJobId } from '../src/core/ids.js';
import { EchoMQ } from '../src/queue/echomq.js';
import { between, mulberry32 } from './faults.js';
import {
  type ChaosData,
  LANES,
  openRecords,
  QUEUE,
  REPEAT_EVERY_MS,
  REPEAT_NAME,
  SCHEDULER_EVERY_MS,
  SCHEDULER_ID,
} from './records.js';

const url = process.env.REDIS_URL;
const path = process.env.CHAOS_RECORDS;
if (!url || !path) {
  process.stderr.write('chaos producer: REDIS_URL and CHAOS_RECORDS must be set\n');
  process.exit(2);
}
const seed = Number(process.env.CHAOS_SEED ?? '1');
const jobs = Number(process.env.CHAOS_JOBS ?? '1000');
const fillMs = Number(process.env.CHAOS_FILL_MS ?? '40000');
const giveUpAt = Date.now() + Number(process.env.CHAOS_GIVE_UP_MS ?? String(fillMs + 30_000));
const TICK_MS = 50;

const rec = openRecords(path);
const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

interface Planned {
  id: string;
  data: ChaosData;
  delayMs: number;
}

/** The seeded plan: which jobs, of which kind, in which lane, working how long. */
function plan(): Planned[] {
  const rand = mulberry32(seed);
  const lanes = Object.keys(LANES);
  const out: Planned[] = [];
  for (let i = 0; i < jobs; i++) {
    const r = rand();
    // Mostly short work; a few jobs run across several lease extensions.
    const ms = rand() < 0.03 ? between(rand, 800, 1500) : between(rand, 2, 40);
    if (r < 0.4) out.push({ id: mintJobId(), data: { k: 'flat', ms }, delayMs: 0 });
    else if (r < 0.8) {
      const g = lanes[between(rand, 0, lanes.length - 1)]!;
      out.push({ id: mintJobId(), data: { k: 'group', g, ms }, delayMs: 0 });
    } else {
      const data: ChaosData = { k: 'delayed', ms };
      if (rand() < 0.3) data.g = lanes[between(rand, 0, lanes.length - 1)]!;
      out.push({ id: mintJobId(), data, delayMs: between(rand, 200, 3000) });
    }
  }
  return out;
}

const mq = await (async () => {
  for (let i = 0; ; i++) {
    try {
      return await EchoMQ.connect({ url });
    } catch (err) {
      if (i >= 100) throw err;
      await sleep(200);
    }
  }
})();
const queue = mq.queue<ChaosData>(process.env.CHAOS_QUEUE ?? QUEUE);

/** Retries `call` until it succeeds or the give-up instant passes (then resolves false). */
async function persist(call: () => Promise<unknown>): Promise<boolean> {
  for (;;) {
    try {
      await call();
      return true;
    } catch {
      if (Date.now() > giveUpAt) return false;
      await sleep(200);
    }
  }
}

await persist(() => queue.repeat.register(REPEAT_NAME, REPEAT_EVERY_MS, { k: 'repeat', ms: 5 }));
await persist(() =>
  queue.schedulers.upsert(SCHEDULER_ID, { every: SCHEDULER_EVERY_MS }, { data: { k: 'sched', ms: 5 } }),
);
process.stdout.write('ready\n');

async function admit(job: Planned): Promise<void> {
  const kind = job.data.k;
  const group = job.data.g ?? '';
  rec.write('sent', job.id, kind, group);
  const ok = await persist(async () => {
    const opts = job.data.g ? { id: job.id, group: job.data.g } : { id: job.id };
    const r =
      job.delayMs > 0
        ? await queue.enqueueIn(job.data, job.delayMs, opts)
        : await queue.enqueue(job.data, opts);
    if (r.status === 'deduplicated') throw new Error(`unexpected dedupe of ${job.id}`);
  });
  if (ok) rec.write('ack', job.id, kind, group);
  else rec.write('gaveup', job.id, kind, group);
}

const planned = plan();
const perTick = Math.max(1, Math.ceil(planned.length / Math.max(1, fillMs / TICK_MS)));
const inFlight: Promise<void>[] = [];
const started = Date.now();
for (let i = 0; i < planned.length; i += perTick) {
  for (const job of planned.slice(i, i + perTick)) inFlight.push(admit(job));
  const next = started + (i / perTick + 1) * TICK_MS;
  await sleep(Math.max(0, next - Date.now()));
}
await Promise.all(inFlight);
rec.write('done');
rec.close();
await mq.close();
process.exit(0);
