// A chaos consumer process: consumes the chaos queue and records every execution in its own
// append-only file (chaos/records.ts), so the record outlives a SIGKILL of this process and a
// crash of Redis. The harness starts it as `node --import tsx chaos/worker.ts` with:
//   REDIS_URL, CHAOS_QUEUE, CHAOS_RECORDS (this worker's record file), CHAOS_LEASE_MS,
//   CHAOS_BEAT_MS, CHAOS_CONCURRENCY, CHAOS_SLOW_MS
// Signals: SIGUSR2 makes the next handler block the event loop for CHAOS_SLOW_MS (longer than
// the lease: no extension can run, so the lease expires under a live handler); SIGTERM closes
// the consumer gracefully (unfinished jobs are handed back) and exits.

import { EchoMQError } from '../src/core/errors.js';
import { EchoMQ } from '../src/queue/echomq.js';
import { type ChaosData, openRecords, QUEUE } from './records.js';

function env(name: string, fallback?: string): string {
  const v = process.env[name] ?? fallback;
  if (v === undefined) {
    process.stderr.write(`chaos worker: ${name} is not set\n`);
    process.exit(2);
  }
  return v;
}

const url = env('REDIS_URL');
const rec = openRecords(env('CHAOS_RECORDS'));
const leaseMs = Number(env('CHAOS_LEASE_MS', '2000'));
const beatMs = Number(env('CHAOS_BEAT_MS', '500'));
const concurrency = Number(env('CHAOS_CONCURRENCY', '4'));
const slowMs = Number(env('CHAOS_SLOW_MS', String(leaseMs * 2)));

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

async function connect(): Promise<EchoMQ> {
  for (let i = 0; ; i++) {
    try {
      return await EchoMQ.connect({ url });
    } catch (err) {
      if (i >= 100) throw err;
      await sleep(200); // the server may be restarting
    }
  }
}
const mq = await connect();
const queue = mq.queue<ChaosData, { p: number; s: number }>(env('CHAOS_QUEUE', QUEUE));

let seq = 0;
const seqOf = new WeakMap<object, number>();
let slowNext = false;
process.on('SIGUSR2', () => {
  slowNext = true;
});

const consumer = queue.consume(
  async (job, ctx) => {
    const s = ++seq;
    seqOf.set(job, s);
    const group = job.data.g ?? '';
    rec.write('start', job.id, job.attempts, s, group);
    if (slowNext) {
      slowNext = false;
      rec.write('slow', job.id, job.attempts, s, group, String(slowMs));
      const until = Date.now() + slowMs;
      while (Date.now() < until) {
        // a handler that hogs the event loop: no lease extension can run meanwhile
      }
    }
    await sleep(job.data.ms);
    const reason = ctx.signal.aborted ? ctx.signal.reason : undefined;
    rec.write('end', job.id, job.attempts, s, group, reason instanceof EchoMQError ? reason.code : '');
    return { p: process.pid, s };
  },
  { concurrency, leaseMs, beatMs },
);
consumer.on('completed', (job) => rec.write('ok', job.id, job.attempts, seqOf.get(job) ?? ''));
consumer.on('lost', (job) => rec.write('lost', job.id, job.attempts, seqOf.get(job) ?? ''));

let closing = false;
process.on('SIGTERM', () => {
  if (closing) return;
  closing = true;
  void (async () => {
    await consumer.close({ timeoutMs: 3000 });
    await mq.close();
    rec.write('exit');
    rec.close();
    process.exit(0);
  })();
});

rec.write('ready', '', process.pid);
process.stdout.write('ready\n');
