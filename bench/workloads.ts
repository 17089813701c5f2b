// The workloads: each is one function that runs against any Adapter, so EchoMQ and BullMQ
// do exactly the same thing. A workload opens its own sessions, brackets the part it
// measures with ctx.timed() (the runner snapshots Redis and Node CPU and commandstats
// around it) and closes everything it opened, also when it fails.
import type { Redis } from 'ioredis';
import { type Adapter, type Data, inFlight, type Runner, type Session, sleep } from './adapters/adapter.js';
import { latencySummary } from './stats.js';

export interface Sizes {
  /** Jobs per add workload (serial and 100 in flight). */
  add: number;
  /** Jobs per bulk-add workload (in chunks of 1,000). */
  bulk: number;
  /** Jobs pre-added for the process workloads at concurrency 10, 100 and 4 × 50. */
  process: number;
  /** Jobs pre-added for process at concurrency 1 (the slowest). */
  processC1: number;
  /** Jobs sent at the steady rate for the latency workload (after 20 warm-up jobs). */
  latencyJobs: number;
  /** The steady enqueue rate of the latency workload, jobs/s. */
  latencyRate: number;
  /** Delayed jobs in the lateness workload, and their delay in ms. */
  delayedJobs: number;
  delayMs: number;
  /** Delayed jobs (50-250 ms) sent among the steady stream of delayed-under-load. */
  underLoadDelayed: number;
  /** How long scheduler-slots watches its every-200 scheduler, ms. */
  slotsMs: number;
  /** Jobs added (and processed) for the memory workloads. */
  memory: number;
  /** Jobs per ceiling measurement. */
  ceiling: number;
  /** scale-backlog: the small and the large backlog, and the jobs processed out of each. */
  backlogSmall: number;
  backlogLarge: number;
  backlogProcess: number;
  /** scale-lanes: jobs per case, and the lanes of its many-lanes case (the other has 10). */
  lanesJobs: number;
  lanesMany: number;
  /** scale-retention: jobs run through the queue (added as it goes). */
  retentionJobs: number;
  /** scale-promote: jobs scheduled in its small and large case (1 % of scheduledLarge due in both). */
  scheduledSmall: number;
  scheduledLarge: number;
  /** scale-stalled: jobs active in its small and large case (1 % of stalledLarge stalled in both). */
  stalledSmall: number;
  stalledLarge: number;
  /** scale-stalled: the stalled jobs' lease, ms: it must outlast their claim and one check. */
  stallLeaseMs: number;
}

const FULL: Sizes = {
  add: 20_000,
  bulk: 50_000,
  process: 30_000,
  processC1: 10_000,
  latencyJobs: 5_000,
  latencyRate: 500,
  delayedJobs: 1_000,
  delayMs: 1_000,
  underLoadDelayed: 300,
  slotsMs: 10_000,
  memory: 10_000,
  ceiling: 50_000,
  // Issue 18's 1,000,000 waiting is ~0.7 GB per library and minutes of BullMQ adds per round on
  // the shared 2-core machine: 200,000 shows the same growth (a 20x larger backlog); --large
  // runs the sizes.
  backlogSmall: 10_000,
  backlogLarge: 200_000,
  backlogProcess: 10_000,
  lanesJobs: 20_000,
  lanesMany: 2_000,
  retentionJobs: 100_000,
  // 1,000,000 scheduled (issue 18, --large) is minutes of single adds per library and round
  // here: 200,000 against 10,000 shows the same growth (20x the schedule).
  scheduledSmall: 10_000,
  scheduledLarge: 200_000,
  stalledSmall: 10_000,
  stalledLarge: 100_000,
  stallLeaseMs: 3_000,
};

export const SIZES: Record<'full' | 'large' | 'quick' | 'tiny', Sizes> = {
  full: FULL,
  // --large: the scaling workloads at issue 18's sizes (minutes per library and case here).
  large: {
    ...FULL,
    backlogLarge: 1_000_000,
    lanesJobs: 100_000,
    lanesMany: 10_000,
    retentionJobs: 1_000_000,
    scheduledSmall: 20_000, // the 10,000 due (1 % of 1,000,000) and 10,000 an hour away
    scheduledLarge: 1_000_000,
  },
  quick: {
    add: 5_000,
    bulk: 20_000,
    process: 10_000,
    processC1: 3_000,
    latencyJobs: 1_500,
    latencyRate: 500,
    delayedJobs: 1_000,
    delayMs: 1_000,
    underLoadDelayed: 150,
    slotsMs: 5_000,
    memory: 5_000,
    ceiling: 20_000,
    backlogSmall: 10_000,
    backlogLarge: 50_000,
    backlogProcess: 5_000,
    lanesJobs: 5_000,
    lanesMany: 500,
    retentionJobs: 20_000,
    scheduledSmall: 2_000,
    scheduledLarge: 20_000,
    stalledSmall: 2_000,
    stalledLarge: 20_000,
    stallLeaseMs: 2_000,
  },
  tiny: {
    add: 200,
    bulk: 2_000,
    process: 400,
    processC1: 100,
    latencyJobs: 100,
    latencyRate: 500,
    delayedJobs: 100,
    delayMs: 1_000,
    underLoadDelayed: 15,
    slotsMs: 1_000,
    memory: 300,
    ceiling: 2_000,
    backlogSmall: 300,
    backlogLarge: 1_000,
    backlogProcess: 200,
    lanesJobs: 200,
    lanesMany: 20,
    retentionJobs: 1_000,
    scheduledSmall: 200,
    scheduledLarge: 1_000,
    stalledSmall: 200,
    stalledLarge: 1_000,
    stallLeaseMs: 1_000,
  },
};

export interface RunContext {
  /** The bench's own redis-server, flushed before this run. */
  readonly url: string;
  /** The queue name to use (the same for every run; Redis is flushed between runs). */
  readonly queue: string;
  readonly sizes: Sizes;
  /** A plain client for INFO and the like; never used to drive the libraries. */
  readonly admin: Redis;
  /**
   * Runs the measured section; the runner snapshots CPU and commandstats around it (the last
   * section of a run is the one its diagnostics show). `redisUs`: Redis CPU µs per job in it;
   * `scriptUs`: µs Redis spent running scripts and module commands per job (INFO commandstats
   * usec of EVALSHA, EVAL, FCALL and EMQ.*: no network I/O, less sensitive to a busy host).
   */
  timed<T>(
    jobs: number,
    fn: () => Promise<T>,
  ): Promise<{ ms: number; value: T; redisUs: number; scriptUs: number }>;
}

export interface Metric {
  key: string;
  unit: string;
  /** Which way is better for EchoMQ's ratio (EchoMQ / BullMQ). */
  better: 'higher' | 'lower';
  /** Decimals shown in the table. */
  decimals: number;
}

export interface Workload {
  id: string;
  /** One line for the table's legend. */
  title: string;
  metrics: Metric[];
  /** The job count it runs with, for the report. */
  n(sizes: Sizes): number;
  /**
   * The ceiling (bench/ceiling.ts id) bounding it: the diagnostics print how close EchoMQ's Redis
   * µs per job comes to that ceiling's (its last measured section's, for a scaling workload).
   */
  ceiling?: string;
  run(adapter: Adapter, ctx: RunContext): Promise<Record<string, number>>;
}

// ── helpers ───────────────────────────────────────────────────────────────────

const PAYLOAD_BYTES = 100;

/** A JSON payload of exactly 100 bytes once encoded, carrying `fields` and padding. */
export function payload(fields: Data): Data {
  const base = JSON.stringify({ ...fields, pad: '' }).length;
  return { ...fields, pad: 'x'.repeat(Math.max(0, PAYLOAD_BYTES - base)) };
}

export function payloads(n: number): Data[] {
  return Array.from({ length: n }, (_, i) => payload({ i }));
}

/** Counts completions and lets a workload wait for a total, with a deadline. */
export class Counter {
  count = 0;
  private waiter: { target: number; resolve: () => void } | undefined;

  readonly tick = (): void => {
    this.count += 1;
    if (this.waiter && this.count >= this.waiter.target) {
      this.waiter.resolve();
      this.waiter = undefined;
    }
  };

  async until(target: number, timeoutMs: number, what: string): Promise<void> {
    if (this.count >= target) return;
    let timer: NodeJS.Timeout | undefined;
    try {
      await Promise.race([
        new Promise<void>((resolve) => {
          this.waiter = { target, resolve };
        }),
        new Promise<never>((_, reject) => {
          timer = setTimeout(
            () => reject(new Error(`${what}: ${this.count}/${target} completed after ${timeoutMs} ms`)),
            timeoutMs,
          );
        }),
      ]);
    } finally {
      clearTimeout(timer);
      this.waiter = undefined;
    }
  }
}

/** Opens sessions, hands them to `fn`, and closes them (runners first), whatever happens. */
export async function using<T>(
  adapter: Adapter,
  ctx: RunContext,
  count: number,
  fn: (sessions: Session[], runners: Runner[]) => Promise<T>,
): Promise<T> {
  const sessions: Session[] = [];
  const runners: Runner[] = [];
  try {
    for (let i = 0; i < count; i++) sessions.push(await adapter.open(ctx.url, ctx.queue));
    return await fn(sessions, runners);
  } finally {
    await Promise.allSettled(runners.map((r) => r.close()));
    await Promise.allSettled(sessions.map((s) => s.close()));
  }
}

export async function bulkAdd(session: Session, items: readonly Data[]): Promise<void> {
  for (let i = 0; i < items.length; i += 1000) await session.addBulk(items.slice(i, i + 1000));
}

export const rate = (jobs: number, ms: number) => (jobs * 1000) / ms;
/** A generous deadline for `jobs` at a very slow 500 jobs/s, at least 30 s. */
export const deadline = (jobs: number) => Math.max(30_000, jobs * 2);

const THROUGHPUT: Metric[] = [{ key: 'jobs_per_s', unit: 'jobs/s', better: 'higher', decimals: 0 }];

// ── adding ────────────────────────────────────────────────────────────────────

const addSerial: Workload = {
  id: 'add-serial',
  title: 'add one job per call, awaiting each before the next',
  metrics: THROUGHPUT,
  n: (s) => s.add,
  ceiling: 'ceiling-enqueue-1',
  run: (adapter, ctx) =>
    using(adapter, ctx, 1, async ([s]) => {
      const items = payloads(ctx.sizes.add);
      const { ms } = await ctx.timed(items.length, async () => {
        for (const d of items) await s!.add(d);
      });
      return { jobs_per_s: rate(items.length, ms) };
    }),
};

const addInFlight: Workload = {
  id: 'add-100-in-flight',
  title: 'add one job per call, 100 calls in flight',
  metrics: THROUGHPUT,
  n: (s) => s.add,
  ceiling: 'ceiling-enqueue-1',
  run: (adapter, ctx) =>
    using(adapter, ctx, 1, async ([s]) => {
      const items = payloads(ctx.sizes.add);
      const { ms } = await ctx.timed(items.length, () => inFlight(items, 100, (d) => s!.add(d)));
      return { jobs_per_s: rate(items.length, ms) };
    }),
};

const bulk: Workload = {
  id: 'bulk-add-1000',
  title: 'bulk add in chunks of 1,000, one chunk at a time (enqueueMany / addBulk)',
  metrics: THROUGHPUT,
  n: (s) => s.bulk,
  ceiling: 'ceiling-enqueue-1000',
  run: (adapter, ctx) =>
    using(adapter, ctx, 1, async ([s]) => {
      const items = payloads(ctx.sizes.bulk);
      const { ms } = await ctx.timed(items.length, () => bulkAdd(s!, items));
      return { jobs_per_s: rate(items.length, ms) };
    }),
};

// ── processing ────────────────────────────────────────────────────────────────

function processing(id: string, consumers: number, concurrency: number, c1 = false): Workload {
  const shape = consumers === 1 ? `concurrency ${concurrency}` : `${consumers} consumers × ${concurrency}`;
  return {
    id,
    title:
      `process pre-added jobs, no-op handler, ${shape}` +
      (consumers > 1 ? ' (consumer objects in one process, a connection set each)' : ''),
    metrics: THROUGHPUT,
    n: (s) => (c1 ? s.processC1 : s.process),
    ceiling: 'ceiling-claim-complete',
    run: (adapter, ctx) =>
      using(adapter, ctx, consumers, async (sessions, runners) => {
        const n = c1 ? ctx.sizes.processC1 : ctx.sizes.process;
        await bulkAdd(sessions[0]!, payloads(n));
        const done = new Counter();
        for (const s of sessions) runners.push(await s.consume(concurrency, { onCompleted: done.tick }));
        const { ms } = await ctx.timed(n, async () => {
          for (const r of runners) r.start();
          await done.until(n, deadline(n), id);
        });
        return { jobs_per_s: rate(n, ms) };
      }),
  };
}

// ── timeliness ────────────────────────────────────────────────────────────────

const LATENCY_CONCURRENCY = 10;
const WARMUP = 20;

const latency: Workload = {
  id: 'latency-500',
  title: `enqueue-to-start latency at a steady 500 jobs/s, concurrency ${LATENCY_CONCURRENCY}, client monotonic clock`,
  metrics: [
    { key: 'p50_ms', unit: 'ms', better: 'lower', decimals: 2 },
    { key: 'p95_ms', unit: 'ms', better: 'lower', decimals: 2 },
    { key: 'p99_ms', unit: 'ms', better: 'lower', decimals: 2 },
  ],
  n: (s) => s.latencyJobs,
  run: (adapter, ctx) =>
    using(adapter, ctx, 2, async ([producer, consumer], runners) => {
      const n = ctx.sizes.latencyJobs;
      const interval = 1000 / ctx.sizes.latencyRate;
      const samples: number[] = [];
      let measuring = false;
      const done = new Counter();
      const runner = await consumer!.consume(LATENCY_CONCURRENCY, {
        onStart: (_id, data) => {
          if (measuring) samples.push(performance.now() - (data.t as number));
        },
        onCompleted: done.tick,
      });
      runners.push(runner);
      runner.start();
      // Warm up (scripts loaded, consumer parked) and let the consumer go idle again.
      await Promise.all(Array.from({ length: WARMUP }, (_, i) => producer!.add(payload({ t: 0, i }))));
      await done.until(WARMUP, 30_000, 'latency warm-up');
      await sleep(100);
      measuring = true;
      const adds: Promise<void>[] = [];
      await ctx.timed(n, async () => {
        const t0 = performance.now();
        let sent = 0;
        while (sent < n) {
          // Jobs due by now on the 500/s grid; each carries its own send instant.
          const due = Math.min(n, Math.floor((performance.now() - t0) / interval) + 1);
          for (; sent < due; sent++) adds.push(producer!.add(payload({ t: performance.now(), i: sent })));
          await sleep(Math.max(0, t0 + sent * interval - performance.now()));
        }
        await Promise.all(adds);
        await done.until(WARMUP + n, deadline(n), 'latency');
      });
      const s = latencySummary(samples);
      return { p50_ms: s.p50, p95_ms: s.p95, p99_ms: s.p99 };
    }),
};

const DELAYED_CONCURRENCY = 100;

const delayed: Workload = {
  id: 'delayed-1000ms',
  title:
    `lateness of jobs delayed 1,000 ms vs their intended instant, concurrency ${DELAYED_CONCURRENCY}` +
    ' (EchoMQ: row runat, server TIME; BullMQ: job.timestamp + delay; start: Date.now() in the handler)',
  metrics: [
    { key: 'p50_late_ms', unit: 'ms', better: 'lower', decimals: 1 },
    { key: 'p99_late_ms', unit: 'ms', better: 'lower', decimals: 1 },
    { key: 'early', unit: 'jobs', better: 'lower', decimals: 0 },
  ],
  n: (s) => s.delayedJobs,
  run: (adapter, ctx) =>
    using(adapter, ctx, 2, async ([producer, consumer], runners) => {
      const n = ctx.sizes.delayedJobs;
      const started = new Map<string, number>();
      const done = new Counter();
      const runner = await consumer!.consume(DELAYED_CONCURRENCY, {
        onStart: (id) => {
          started.set(id, Date.now());
        },
        onCompleted: done.tick,
      });
      runners.push(runner);
      runner.start();
      await sleep(50);
      const { value: intended } = await ctx.timed(n, async () => {
        const intended = await producer!.addDelayed(payloads(n), ctx.sizes.delayMs);
        await done.until(n, ctx.sizes.delayMs + deadline(n), 'delayed');
        return intended;
      });
      const lateness = intended.map(({ id, runAt }) => {
        const at = started.get(id);
        if (at === undefined) throw new Error(`delayed job ${id} never started`);
        return at - runAt;
      });
      const s = latencySummary(lateness);
      return { p50_late_ms: s.p50, p99_late_ms: s.p99, early: lateness.filter((l) => l < 0).length };
    }),
};

// ── time under load ───────────────────────────────────────────────────────────

/** A small seeded generator (mulberry32), so both libraries see the same gaps, delays and work. */
function random(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const UNDER_LOAD_CONCURRENCY = 8;
/** The steady stream: one immediate job every 3 ms (333/s), each working 0-20 ms (~3.3 slots busy). */
const STREAM_GAP_MS = 3;
const STREAM_WORK_MS = 20;

/** Adds immediate jobs on a fixed grid until stopped; stop() resolves once every add is accepted. */
function steadyStream(producer: Session, rng: () => number): { stop(): Promise<number> } {
  let stopped = false;
  const adds: Promise<void>[] = [];
  const loop = (async () => {
    const t0 = performance.now();
    while (!stopped) {
      const due = Math.floor((performance.now() - t0) / STREAM_GAP_MS) + 1;
      while (adds.length < due) adds.push(producer.add(payload({ w: Math.floor(rng() * STREAM_WORK_MS) })));
      await sleep(Math.max(0, t0 + adds.length * STREAM_GAP_MS - performance.now()));
    }
  })();
  return {
    async stop() {
      stopped = true;
      await loop;
      await Promise.all(adds);
      return adds.length;
    },
  };
}

/** Resolves once `ids` all started (polled), or fails after `ms`. */
async function allStarted(ids: readonly string[], started: Map<string, number>, ms: number, what: string) {
  const end = performance.now() + ms;
  while (ids.some((id) => !started.has(id))) {
    if (performance.now() > end) {
      const missing = ids.filter((id) => !started.has(id)).length;
      throw new Error(`${what}: ${missing}/${ids.length} never started within ${ms} ms`);
    }
    await sleep(10);
  }
}

const workOf = (d: Data) => (typeof d.w === 'number' ? d.w : undefined);

const delayedUnderLoad: Workload = {
  id: 'delayed-under-load',
  title:
    `lateness of jobs delayed 50-250 ms (sent 10-50 ms apart) among a steady stream of immediate jobs` +
    ` (one per ${STREAM_GAP_MS} ms, each working 0-${STREAM_WORK_MS} ms), one consumer at concurrency` +
    ` ${UNDER_LOAD_CONCURRENCY}; instants as in delayed-1000ms`,
  metrics: [
    { key: 'p50_late_ms', unit: 'ms', better: 'lower', decimals: 1 },
    { key: 'p99_late_ms', unit: 'ms', better: 'lower', decimals: 1 },
    { key: 'max_late_ms', unit: 'ms', better: 'lower', decimals: 1 },
    { key: 'early', unit: 'jobs', better: 'lower', decimals: 0 },
  ],
  n: (s) => s.underLoadDelayed,
  run: (adapter, ctx) =>
    using(adapter, ctx, 2, async ([producer, consumer], runners) => {
      const n = ctx.sizes.underLoadDelayed;
      const rng = random(11);
      const started = new Map<string, number>();
      const runner = await consumer!.consume(UNDER_LOAD_CONCURRENCY, {
        onStart: (id) => {
          started.set(id, Date.now());
        },
        workMs: workOf,
      });
      runners.push(runner);
      runner.start();
      const load = steadyStream(producer!, rng);
      let intended: { id: string; runAt: number }[] = [];
      try {
        await sleep(300); // the stream runs, the consumer is busy
        ({ value: intended } = await ctx.timed(n, async () => {
          const out: { id: string; runAt: number }[] = [];
          for (let i = 0; i < n; i++) {
            await sleep(10 + Math.floor(rng() * 40));
            out.push(await producer!.addOneDelayed(payload({ d: i }), 50 + Math.floor(rng() * 200)));
          }
          await allStarted(
            out.map((j) => j.id),
            started,
            30_000,
            'delayed-under-load',
          );
          return out;
        }));
      } finally {
        await load.stop();
      }
      const lateness = intended.map(({ id, runAt }) => started.get(id)! - runAt);
      const s = latencySummary(lateness);
      return {
        p50_late_ms: s.p50,
        p99_late_ms: s.p99,
        max_late_ms: Math.max(...lateness),
        early: lateness.filter((l) => l < 0).length,
      };
    }),
};

const SLOT_EVERY_MS = 200;

/** Slots of the grid `every` apart that no run covers, between the first run and `until`. */
function skippedSlots(slots: readonly number[], every: number, until: number): number {
  let skipped = 0;
  for (let i = 1; i < slots.length; i++)
    skipped += Math.max(0, Math.round((slots[i]! - slots[i - 1]!) / every) - 1);
  const last = slots[slots.length - 1];
  if (last !== undefined) skipped += Math.max(0, Math.floor((until - last) / every) - 1);
  return skipped;
}

const schedulerSlots: Workload = {
  id: 'scheduler-slots',
  title:
    `an every-${SLOT_EVERY_MS} job scheduler upserted under a running consumer busy with the` +
    ` delayed-under-load stream, watched for the run's duration: the worst start offset from its` +
    ` slots (the instant named in each occurrence's id), slots skipped, the first occurrence's` +
    ` lateness after upsert, and the first run's lateness of a definition whose first run is now` +
    ` (EchoMQ repeat.register firstRunMs: now; BullMQ upsertJobScheduler, which runs at once)`,
  metrics: [
    { key: 'worst_offset_ms', unit: 'ms', better: 'lower', decimals: 1 },
    { key: 'skipped', unit: 'slots', better: 'lower', decimals: 0 },
    { key: 'first_late_ms', unit: 'ms', better: 'lower', decimals: 1 },
    { key: 'now_first_late_ms', unit: 'ms', better: 'lower', decimals: 1 },
  ],
  n: (s) => Math.floor(s.slotsMs / SLOT_EVERY_MS),
  run: (adapter, ctx) =>
    using(adapter, ctx, 2, async ([producer, consumer], runners) => {
      const rng = random(19);
      const runs: { id: string; slot: number; start: number }[] = [];
      const runner = await consumer!.consume(UNDER_LOAD_CONCURRENCY, {
        onStart: (id, _data, slot) => {
          if (slot !== undefined) runs.push({ id, slot, start: Date.now() });
        },
        workMs: workOf,
      });
      runners.push(runner);
      runner.start();
      const load = steadyStream(producer!, rng);
      let until = 0;
      let nowRun: { slot: number; start: number } | undefined;
      try {
        await sleep(300); // the stream runs, the consumer is busy
        await ctx.timed(Math.floor(ctx.sizes.slotsMs / SLOT_EVERY_MS), async () => {
          await producer!.addRecurring('every', 'slots', SLOT_EVERY_MS, payload({ r: 1 }));
          await sleep(ctx.sizes.slotsMs);
          until = Date.now();
          await producer!.removeRecurring('every', 'slots');
        });
        await producer!.addRecurring('now', 'now', 60_000, payload({ r: 2 }));
        const end = performance.now() + 10_000;
        const isNow = (r: { id: string }) => r.id.includes('now');
        while (!runs.some(isNow)) {
          if (performance.now() > end)
            throw new Error('scheduler-slots: the first run of "now" never started');
          await sleep(5);
        }
        nowRun = runs.find(isNow);
        await producer!.removeRecurring('now', 'now');
      } finally {
        await load.stop();
      }
      const every = runs
        .filter((r) => r.id.includes('slots') && r.slot <= until)
        .sort((a, b) => a.slot - b.slot);
      if (every.length === 0) throw new Error('scheduler-slots: the scheduler never ran');
      return {
        worst_offset_ms: Math.max(...every.map((r) => Math.abs(r.start - r.slot))),
        skipped: skippedSlots(
          every.map((r) => r.slot),
          SLOT_EVERY_MS,
          until,
        ),
        first_late_ms: every[0]!.start - every[0]!.slot,
        now_first_late_ms: nowRun!.start - nowRun!.slot,
      };
    }),
};

// ── memory ────────────────────────────────────────────────────────────────────

export async function usedMemory(admin: Redis): Promise<number> {
  const info = await admin.info('memory');
  const m = /^used_memory:(\d+)/m.exec(info);
  if (!m) throw new Error('INFO memory has no used_memory');
  return Number(m[1]);
}

/**
 * Loads every script and creates the fixed per-queue keys before the baseline: one job is
 * added and processed on a side queue, so the delta after it is what the N jobs cost.
 */
async function warmUp(adapter: Adapter, ctx: RunContext): Promise<void> {
  const side = await adapter.open(ctx.url, `${ctx.queue}-warm`);
  let runner: Runner | undefined;
  try {
    const done = new Counter();
    runner = await side.consume(1, { onCompleted: done.tick });
    runner.start();
    await side.add(payload({ i: 0 }));
    await done.until(1, 30_000, 'memory warm-up');
  } finally {
    await runner?.close();
    await side.close();
  }
}

/**
 * Where the bytes are: MEMORY USAGE (exact, SAMPLES 0) of every sorted set, list and set, and
 * of every stream, of the measured queue. Job rows (hashes) are the rest of the delta, their
 * keyspace entries included.
 */
export async function structures(admin: Redis, skip: string): Promise<{ sets: number; streams: number }> {
  let cursor = '0';
  const out = { sets: 0, streams: 0 };
  do {
    const [next, found] = await admin.scan(cursor, 'COUNT', 1000);
    cursor = next;
    const keys = found.filter((k) => !k.includes(skip));
    const types = await exec(admin, keys, (p, k) => p.type(k));
    const other = keys.filter((_, i) => types[i] !== 'hash' && types[i] !== 'string');
    const sizes = await exec(admin, other, (p, k) => p.call('MEMORY', 'USAGE', k, 'SAMPLES', '0'));
    for (const [i, k] of other.entries()) {
      if (types[keys.indexOf(k)] === 'stream') out.streams += Number(sizes[i] ?? 0);
      else out.sets += Number(sizes[i] ?? 0);
    }
  } while (cursor !== '0');
  return out;
}

type Pipeline = ReturnType<Redis['pipeline']>;

async function exec(
  admin: Redis,
  keys: string[],
  add: (p: Pipeline, key: string) => void,
): Promise<unknown[]> {
  if (keys.length === 0) return [];
  const p = admin.pipeline();
  for (const k of keys) add(p, k);
  return ((await p.exec()) ?? []).map(([err, v]) => {
    if (err) throw err;
    return v;
  });
}

/** The memory metrics of a delta over n jobs. */
async function memoryMetrics(ctx: RunContext, delta: number, n: number): Promise<Record<string, number>> {
  const { sets, streams } = await structures(ctx.admin, `${ctx.queue}-warm`);
  return {
    bytes_per_job: delta / n,
    rows: (delta - sets - streams) / n,
    sets: sets / n,
    streams: streams / n,
  };
}

const BYTES: Metric[] = [
  { key: 'bytes_per_job', unit: 'bytes', better: 'lower', decimals: 0 },
  { key: 'rows', unit: 'bytes', better: 'lower', decimals: 0 },
  { key: 'sets', unit: 'bytes', better: 'lower', decimals: 0 },
  { key: 'streams', unit: 'bytes', better: 'lower', decimals: 0 },
];

const memoryWaiting: Workload = {
  id: 'memory-waiting',
  title:
    'Redis used_memory delta per waiting job (N added in chunks of 1,000), split into job rows (hashes and' +
    ' their keys), sets (sorted sets, lists) and streams (events), per job',
  metrics: BYTES,
  n: (s) => s.memory,
  run: (adapter, ctx) =>
    using(adapter, ctx, 1, async ([s]) => {
      await warmUp(adapter, ctx);
      const n = ctx.sizes.memory;
      const items = payloads(n);
      const before = await usedMemory(ctx.admin);
      await bulkAdd(s!, items);
      const after = await usedMemory(ctx.admin);
      return memoryMetrics(ctx, after - before, n);
    }),
};

const memoryCompleted: Workload = {
  id: 'memory-completed',
  title: 'Redis used_memory delta per completed job, default retention (EchoMQ keeps 1,000; BullMQ all)',
  metrics: BYTES,
  n: (s) => s.memory,
  run: (adapter, ctx) =>
    using(adapter, ctx, 2, async ([producer, consumer]) => {
      await warmUp(adapter, ctx);
      const n = ctx.sizes.memory;
      const before = await usedMemory(ctx.admin);
      await bulkAdd(producer!, payloads(n));
      const done = new Counter();
      const runner = await consumer!.consume(100, { onCompleted: done.tick });
      try {
        runner.start();
        await done.until(n, deadline(n), 'memory-completed');
      } finally {
        await runner.close(); // its connections' buffers are not job memory
      }
      const after = await usedMemory(ctx.admin);
      return memoryMetrics(ctx, after - before, n);
    }),
};

/** Every library workload, in the order they run and print. */
export const WORKLOADS: Workload[] = [
  addSerial,
  addInFlight,
  bulk,
  processing('process-c1', 1, 1, true),
  processing('process-c10', 1, 10),
  processing('process-c100', 1, 100),
  processing('process-4x50', 4, 50),
  latency,
  delayed,
  delayedUnderLoad,
  schedulerSlots,
  memoryWaiting,
  memoryCompleted,
];
