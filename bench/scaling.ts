// Scaling workloads: does a job cost the same when the queue is small and when it is large?
// Each runs a small and a large case in one run and reports the per-job figures of both side by
// side (Redis CPU µs per job: load-independent, unlike jobs/s on a shared host) and their ratio.
// Every case uses a queue of its own (`<queue>-<case>`), so the cases never see each other's keys.
import { type Adapter, type Data, type Runner, type Session, sleep } from './adapters/adapter.js';
import {
  bulkAdd,
  Counter,
  deadline,
  type Metric,
  payload,
  payloads,
  type RunContext,
  rate,
  structures,
  usedMemory,
  type Workload,
} from './workloads.js';

const CONCURRENCY = 100;

/** Opens a session on the case's own queue, runs `fn`, and closes what it opened. */
async function onQueue<T>(
  adapter: Adapter,
  ctx: RunContext,
  name: string,
  fn: (session: Session, runners: Runner[]) => Promise<T>,
): Promise<T> {
  const session = await adapter.open(ctx.url, `${ctx.queue}-${name}`);
  const runners: Runner[] = [];
  try {
    return await fn(session, runners);
  } finally {
    await Promise.allSettled(runners.map((r) => r.close()));
    await session.close();
  }
}

/** Processes `n` jobs at CONCURRENCY inside ctx.timed: jobs/s and Redis µs per job. */
async function process(
  ctx: RunContext,
  session: Session,
  runners: Runner[],
  n: number,
  onStart?: (data: Data) => void,
): Promise<{ jobsPerS: number; redisUs: number }> {
  const done = new Counter();
  const runner = await session.consume(CONCURRENCY, {
    onCompleted: done.tick,
    ...(onStart ? { onStart: (_id: string, data: Data) => onStart(data) } : {}),
  });
  runners.push(runner);
  const { ms, redisUs } = await ctx.timed(n, async () => {
    runner.start();
    await done.until(n, deadline(n), 'scale');
  });
  return { jobsPerS: rate(n, ms), redisUs };
}

const us = (key: string, unit = 'µs/job'): Metric => ({ key, unit, better: 'lower', decimals: 1 });
const jobsPerS = (key: string): Metric => ({ key, unit: 'jobs/s', better: 'higher', decimals: 0 });
const ratio = (key: string): Metric => ({ key, unit: 'large/small', better: 'lower', decimals: 2 });

/** The metrics of a small and a large case processed: Redis µs per job of each, growth, jobs/s. */
const SMALL_LARGE: Metric[] = [
  us('small_redis_us'),
  us('large_redis_us'),
  ratio('growth'),
  jobsPerS('small'),
  jobsPerS('large'),
];

type Processed = Awaited<ReturnType<typeof process>>;

/** SMALL_LARGE's figures of the two cases. */
function smallLarge(small: Processed, large: Processed): Record<string, number> {
  return {
    small_redis_us: small.redisUs,
    large_redis_us: large.redisUs,
    growth: large.redisUs / small.redisUs,
    small: small.jobsPerS,
    large: large.jobsPerS,
  };
}

const backlog: Workload = {
  id: 'scale-backlog',
  title:
    'processing out of a small and a large backlog (concurrency 100, the same number processed from' +
    ' each): Redis µs per job and jobs/s of each; growth = large / small Redis µs (1.00 = flat)',
  metrics: SMALL_LARGE,
  n: (s) => s.backlogLarge,
  ceiling: 'ceiling-claim-complete',
  async run(adapter, ctx) {
    const measure = (name: string, waiting: number) =>
      onQueue(adapter, ctx, name, async (session, runners) => {
        await bulkAdd(session, payloads(waiting));
        return process(ctx, session, runners, Math.min(ctx.sizes.backlogProcess, waiting));
      });
    const small = await measure('small', ctx.sizes.backlogSmall);
    const large = await measure('large', ctx.sizes.backlogLarge); // last: the run's diagnostics
    return smallLarge(small, large);
  },
};

/**
 * Fairness: of the first `lanes` jobs started, the share from distinct lanes (1.00: one job of
 * every lane before a second of any, as a round-robin does; jobs are added lane after lane).
 */
function fairness(starts: number[], lanes: number): number {
  return new Set(starts.slice(0, lanes)).size / Math.min(lanes, starts.length);
}

const lanes: Workload = {
  id: 'scale-lanes',
  title:
    'many small lanes against few large ones (the same jobs: lanesMany lanes of lanesJobs/lanesMany,' +
    ' then 10 lanes), processed at concurrency 100: Redis µs per job of each, growth (many / few) and' +
    ' fairness (BullMQ has no groups in its open-source edition: it runs the same jobs flat)',
  metrics: [
    us('many_redis_us'),
    us('few_redis_us'),
    { key: 'growth', unit: 'many/few', better: 'lower', decimals: 2 },
    { key: 'many_fair', unit: 'share', better: 'higher', decimals: 2 },
    { key: 'few_fair', unit: 'share', better: 'higher', decimals: 2 },
  ],
  n: (s) => s.lanesJobs,
  ceiling: 'ceiling-claim-complete',
  async run(adapter, ctx) {
    const n = ctx.sizes.lanesJobs;
    const measure = (name: string, count: number) =>
      onQueue(adapter, ctx, name, async (session, runners) => {
        const per = Math.ceil(n / count);
        const items = Array.from({ length: n }, (_, i) => {
          const g = Math.floor(i / per);
          return { data: payload({ i, g }), group: `lane-${g}` };
        });
        for (let i = 0; i < items.length; i += 1000) await session.addBulkGrouped(items.slice(i, i + 1000));
        const starts: number[] = [];
        const r = await process(ctx, session, runners, n, (data) => starts.push(Number(data.g)));
        return { ...r, fair: fairness(starts, count) };
      });
    const few = await measure('few', 10);
    const many = await measure('many', ctx.sizes.lanesMany); // last: the run's diagnostics
    return {
      many_redis_us: many.redisUs,
      few_redis_us: few.redisUs,
      growth: many.redisUs / few.redisUs,
      many_fair: many.fair,
      few_fair: few.fair,
    };
  },
};

const retention: Workload = {
  id: 'scale-retention',
  title:
    'a long run (retentionJobs added 1,000 at a time, each chunk once the last completed, concurrency 100):' +
    ' Redis memory added per job over its second half (what retention and the events cap leave' +
    ' growing: EchoMQ the idempotency window, ~100 B an id for a day; BullMQ keeps every completed' +
    ' job), and the events stream and Redis memory at the end',
  metrics: [
    { key: 'growth_bytes_per_job', unit: 'bytes', better: 'lower', decimals: 0 },
    { key: 'events_bytes', unit: 'bytes', better: 'lower', decimals: 0 },
    { key: 'used_mb', unit: 'MB', better: 'lower', decimals: 1 },
  ],
  n: (s) => s.retentionJobs,
  async run(adapter, ctx) {
    return onQueue(adapter, ctx, 'long', async (session, runners) => {
      const n = ctx.sizes.retentionJobs;
      const done = new Counter();
      const runner = await session.consume(CONCURRENCY, { onCompleted: done.tick });
      runners.push(runner);
      let half = 0;
      await ctx.timed(n, async () => {
        runner.start();
        const step = Math.min(1000, Math.ceil(n / 10)); // at least 10 steps, so the half is one
        for (let added = 0; added < n; ) {
          const chunk = Math.min(step, n - added);
          await bulkAdd(session, payloads(chunk));
          added += chunk;
          await done.until(added, deadline(chunk), 'scale-retention');
          if (half === 0 && added >= n / 2) half = await usedMemory(ctx.admin);
        }
      });
      const end = await usedMemory(ctx.admin);
      const { streams } = await structures(ctx.admin, '\0');
      return { growth_bytes_per_job: (end - half) / (n / 2), events_bytes: streams, used_mb: end / 2 ** 20 };
    });
  },
};

const FAR_MS = 3_600_000; // the 99 % not due: an hour away, never promoted during the run
const NEAR_MS = 1_000; // the 1 % due: added last, due before the consumer starts
const ADD_CHUNK = 10_000;

const promote: Workload = {
  id: 'scale-promote',
  title:
    'promoting due jobs out of a small and a large schedule: the same due jobs (1 % of scheduledLarge)' +
    ' among scheduledSmall and among scheduledLarge scheduled (the rest an hour away), promoted and' +
    ' processed at concurrency 100: Redis µs per due job of each (promote, claim and complete), growth' +
    ' = large / small',
  metrics: SMALL_LARGE,
  n: (s) => s.scheduledLarge,
  async run(adapter, ctx) {
    // The same due jobs in both cases, so only the jobs not due differ (a per-run fixed cost, the
    // consumer's start, weighs the same on both).
    const due = Math.max(1, Math.round(ctx.sizes.scheduledLarge / 100));
    const measure = (name: string, scheduled: number) =>
      onQueue(adapter, ctx, name, async (session, runners) => {
        const far = scheduled - due;
        for (let i = 0; i < far; i += ADD_CHUNK)
          await session.addDelayed(payloads(Math.min(ADD_CHUNK, far - i)), FAR_MS);
        const near = await session.addDelayed(payloads(due), NEAR_MS);
        const last = Math.max(...near.map((j) => j.runAt));
        await sleep(Math.max(0, last - Date.now()) + 100); // every due job is due before the clock starts
        return process(ctx, session, runners, due);
      });
    const small = await measure('small', ctx.sizes.scheduledSmall);
    const large = await measure('large', ctx.sizes.scheduledLarge); // last: the run's diagnostics
    return smallLarge(small, large);
  },
};

const LIVE_LEASE_MS = 3_600_000; // the other active jobs': live for the whole run

const stalled: Workload = {
  id: 'scale-stalled',
  title:
    'the stalled check among a small and a large number of active jobs (stalledSmall and stalledLarge' +
    ' held by a silent consumer, the same 1 % of stalledLarge among them with an expired lease): Redis' +
    ' script µs (INFO commandstats) per stalled job for the check that recovers them (BullMQ: the' +
    ' second, an earlier one marked them), growth = large / small, and per check finding nothing' +
    ' stalled (what every consumer pays on its timer: EchoMQ sweepStalled every beat, BullMQ' +
    ' moveStalledJobsToWait every stalledInterval)',
  metrics: [
    us('small_us'),
    us('large_us'),
    ratio('growth'),
    us('small_idle_us', 'µs/check'),
    us('large_idle_us', 'µs/check'),
  ],
  n: (s) => s.stalledLarge,
  async run(adapter, ctx) {
    // The same stalled jobs in both cases, so only the live active jobs differ.
    const stalls = Math.max(1, Math.round(ctx.sizes.stalledLarge / 100));
    const measure = (name: string, active: number) =>
      onQueue(adapter, ctx, name, async (session) => {
        await bulkAdd(session, payloads(active));
        const live = await session.hold(active - stalls, LIVE_LEASE_MS);
        // Steady state: BullMQ's check reads what the one before it marked, so idle is the second.
        await session.checkStalled();
        const idle = await ctx.timed(1, () => session.checkStalled());
        const lease = ctx.sizes.stallLeaseMs;
        const held = await session.hold(stalls, lease);
        const heldAt = performance.now(); // every stalled lease runs out by heldAt + lease
        const marked = await session.checkStalled(); // BullMQ marks them; their leases are live yet
        if (live + held !== active || idle.value + marked !== 0)
          throw new Error(`scale-stalled: ${live + held}/${active} held, or a live lease recovered`);
        await sleep(Math.max(0, heldAt + lease + 200 - performance.now()));
        const sweep = await ctx.timed(stalls, () => session.checkStalled());
        if (sweep.value !== stalls) throw new Error(`scale-stalled: ${sweep.value}/${stalls} recovered`);
        return { perJob: sweep.scriptUs, idle: idle.scriptUs };
      });
    const small = await measure('small', ctx.sizes.stalledSmall);
    const large = await measure('large', ctx.sizes.stalledLarge); // last: the run's diagnostics
    return {
      small_us: small.perJob,
      large_us: large.perJob,
      growth: large.perJob / small.perJob,
      small_idle_us: small.idle,
      large_idle_us: large.idle,
    };
  },
};

/** The scaling workloads, run and printed after the others. */
export const SCALING: Workload[] = [backlog, lanes, retention, promote, stalled];
