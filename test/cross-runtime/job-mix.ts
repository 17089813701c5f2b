// The job mix every cross-runtime test produces from each runtime, and the TypeScript side of the
// test handler that emq-go and EchoMQ.CLI mirror: the same Work asks the same of every runtime.
import { UnrecoverableError } from '../../src/consumer/consumer.js';
import type { EnqueueOptions, Job, JobContext } from '../../src/core/types.js';
import type { Queue } from '../../src/queue/queue.js';

/** What a job asks of any runtime's test handler (the same in all). */
export interface Work {
  n: number;
  fail?: number;
  sleepMs?: number;
  unrecoverable?: boolean;
  progress?: boolean;
}

/** One job of the mix: its data, its options, and a delay when it is scheduled. */
export interface Spec {
  data: Work;
  opts: EnqueueOptions;
  delayMs?: number;
}

/** The TypeScript side of the test handler: the same behaviour as emq-go's and EchoMQ.CLI's. */
export async function tsHandler(job: Job<Work>, ctx: JobContext): Promise<unknown> {
  const data = job.data;
  if (data.sleepMs) await new Promise((r) => setTimeout(r, data.sleepMs));
  if (data.progress) await ctx.progress({ at: job.attempts, by: 'ts' });
  if (data.unrecoverable) throw new UnrecoverableError('ts: unrecoverable');
  if (job.attempts <= (data.fail ?? 0)) throw new Error(`ts: attempt ${job.attempts} fails on purpose`);
  return { by: 'ts', attempt: job.attempts, data };
}

/** The same mix from each producer (n from `offset`): flat, grouped, delayed, failing (retried), exhausted, unrecoverable. */
export function jobMix(offset: number): Spec[] {
  const specs: Spec[] = [];
  for (let i = 0; i < 40; i++) {
    const data: Work = { n: offset + i, sleepMs: 5 + (i % 4) * 5 };
    const opts: EnqueueOptions = { name: 'cross', backoff: { kind: 'fixed', ms: 30 } };
    if (i % 3 === 0) opts.group = `g${i % 4}`;
    if (i % 4 === 1) data.fail = 1 + (i % 2); // retried once or twice, then completes
    if (i % 5 === 2) data.progress = true;
    if (i % 10 === 7) specs.push({ data, opts, delayMs: 300 + i * 10 });
    else specs.push({ data, opts });
  }
  specs.push({
    data: { n: offset + 40, fail: 9 },
    opts: { name: 'cross', attempts: 2, backoff: { kind: 'fixed', ms: 30 } },
  });
  specs.push({ data: { n: offset + 41, unrecoverable: true }, opts: { name: 'cross', priority: 3 } });
  return specs;
}

/** The mix as another runtime's `produce` command reads it on stdin. */
export function specsWire(specs: Spec[]): string {
  return JSON.stringify(specs.map((s) => ({ data: s.data, ...s.opts, delayMs: s.delayMs })));
}

/** The status each spec's enqueue answers: `scheduled` for a delayed one. */
export function expectedStatuses(specs: Spec[]): string[] {
  return specs.map((s) => (s.delayMs === undefined ? 'enqueued' : 'scheduled'));
}

/** Enqueues the mix from TypeScript; the ids in order. */
export async function enqueueSpecs(q: Queue<Work, unknown>, specs: Spec[]): Promise<string[]> {
  const ids: string[] = [];
  for (const s of specs) {
    const r =
      s.delayMs === undefined
        ? await q.enqueue(s.data, s.opts)
        : await q.enqueueIn(s.data, s.delayMs, s.opts);
    ids.push(r.id);
  }
  return ids;
}

/** A spec meant to end dead: unrecoverable, or failing more often than its attempts. */
export function endsDead(spec: Spec): boolean {
  return spec.data.unrecoverable === true || (spec.data.fail ?? 0) >= 9;
}
