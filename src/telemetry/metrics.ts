// Prometheus metrics for EchoMQ queues, through prom-client. What it measures, and from where:
//   1. gauges     — jobs per state, per lane (pending, running), paused queues and lanes, live
//                   consumers, and the wait of the job next in line (per queue and lane): read
//                   through the Inspector when the registry is scraped, never between scrapes
//   2. counters   — completed jobs, failed attempts (by reason) and dead-lettered jobs, from each queue's events
//                   stream, so they count the work of every consumer on the queue, anywhere
//   3. wait       — enqueue-to-start latency, also from the events stream: the time between the
//                   entry that made a job claimable (`added`, or `waiting` after a delay, a retry
//                   or a hand-back) and its `active` entry; stream ids are the server's ms, so no
//                   row is read and no client clock is involved
//   4. processing — handler duration, up to the acknowledgement, of the consumers passed to
//                   observe() (this process's consumers only)
//   5. scripts    — every script call's duration and outcome, at the connector's observer seam
// The stream readers start on the first scrape (or ready()): a registry nobody scrapes holds
// no connection. Counters count from then on, as Prometheus counters do after a restart.
import { Counter, Gauge, Histogram, type Registry } from 'prom-client';
import { streamMs } from '../core/attempts.js';
import type { Job, QueueEvent } from '../core/types.js';
import { JOB_STATES } from '../core/types.js';
import { EventHub } from '../events/hub.js';
import { Inspector, type QueueStats } from '../inspect/inspector.js';
import type { EchoMQ } from '../queue/echomq.js';

/** The server-clock ms of an event's stream id, for a reader that times events itself. */
export { streamMs };

export interface MetricsOptions {
  /** The connection whose queues are measured. */
  mq: EchoMQ;
  /** The queues to measure. Default: every queue in the registry of queue names, re-read at each scrape. */
  queues?: readonly string[] | undefined;
  /** Prefix of every metric name. Default 'echomq_'. */
  prefix?: string | undefined;
  /**
   * Follow the events stream for the counters and the wait histogram. Default true; false
   * leaves those two empty and opens no connection.
   */
  events?: boolean | undefined;
  /** Share a dashboard's event readers instead of opening readers of its own (internal). */
  hub?: EventHub;
}

export interface EchoMQMetrics {
  /** Measures the processing duration of this consumer's jobs; returns a function that stops. */
  observe(consumer: ObservedConsumer): () => void;
  /** Starts the stream readers now (they start on the first scrape otherwise) and waits for them. */
  ready(): Promise<void>;
  /** Stops the readers and the observers, the connector's included (other observers stay). */
  close(): Promise<void>;
}

/** What observe() needs of a consumer (any Consumer<D, R>). */
export interface ObservedConsumer {
  readonly queue: { readonly name: string };
  on(event: 'completed', listener: (job: Job, result: unknown) => void): unknown;
  on(event: 'failed', listener: (job: Job, error: Error, outcome: FailOutcome) => void): unknown;
  off(event: 'completed', listener: (job: Job, result: unknown) => void): unknown;
  off(event: 'failed', listener: (job: Job, error: Error, outcome: FailOutcome) => void): unknown;
}

type FailOutcome = 'retry' | 'dead' | 'cancelled';

// Seconds. Queue waits run from milliseconds (a busy consumer) to hours (a backlog).
const WAIT_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600];
const PROCESSING_BUCKETS = [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300];
const SCRIPT_BUCKETS = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1];
/** Claimable instants remembered per queue, awaiting their `active` entry (oldest dropped first). */
const MAX_WAITING = 100_000;
/** Scrapes within this many ms share one read of the queues. */
const SNAPSHOT_MS = 1000;

/**
 * Registers EchoMQ's metrics in `registry` and returns the handle that observes consumers and
 * closes the readers. Scrape with `await registry.metrics()`.
 * @example
 *   const registry = new Registry();
 *   const metrics = registerMetrics(registry, { mq });
 *   metrics.observe(queue.consume(handler));
 */
export function registerMetrics(registry: Registry, opts: MetricsOptions): EchoMQMetrics {
  const { mq } = opts;
  const prefix = opts.prefix ?? 'echomq_';
  const inspector = new Inspector(mq);
  const hub = opts.hub ?? new EventHub((queue, blockMs) => mq.queue(queue).events({ blockMs }));
  const ownHub = opts.hub === undefined;
  const followEvents = opts.events ?? true;

  // ── a scrape's view of the queues, shared by the gauges of one scrape ────────
  let snapshot: { at: number; stats: Promise<QueueStats[]> } | undefined;
  const queueNames = async (): Promise<string[]> =>
    opts.queues ? [...opts.queues] : (await inspector.queues()).map((q) => q.name);
  const read = (): Promise<QueueStats[]> => {
    const now = performance.now();
    if (!snapshot || now - snapshot.at > SNAPSHOT_MS) {
      const stats = queueNames().then((names) => {
        follow(names);
        return Promise.all(names.map((n) => inspector.stats(n)));
      });
      stats.catch(() => {}); // reported by the scrape that awaits it
      snapshot = { at: now, stats };
    }
    return snapshot.stats;
  };

  // Every gauge is refilled at scrape time from the scrape's one read of the queues.
  const queueGauge = <L extends string>(
    name: string,
    help: string,
    labelNames: readonly L[],
    fill: (set: (labels: Record<L, string>, value: number) => void, s: QueueStats) => void,
  ): void => {
    new Gauge({
      name: `${prefix}${name}`,
      help,
      labelNames,
      registers: [registry],
      async collect() {
        const all = await read();
        this.reset();
        const set = (labels: Record<L, string>, value: number) => this.set(labels, value);
        for (const s of all) fill(set, s);
      },
    });
  };
  queueGauge(
    'jobs',
    'Jobs in each state (pending counts flat pending and every lane)',
    ['queue', 'state'],
    (set, s) => {
      for (const state of JOB_STATES) set({ queue: s.name, state }, s.counts[state] ?? 0);
    },
  );
  queueGauge('queue_paused', '1 when the queue is paused (nothing is claimed), else 0', ['queue'], (set, s) =>
    set({ queue: s.name }, s.paused ? 1 : 0),
  );
  queueGauge(
    'lane_jobs',
    'Jobs of each lane: pending (waiting in the lane) and running',
    ['queue', 'lane', 'state'],
    (set, s) => {
      for (const l of s.lanes) {
        set({ queue: s.name, lane: l.group, state: 'pending' }, l.pending);
        set({ queue: s.name, lane: l.group, state: 'running' }, l.running);
      }
    },
  );
  queueGauge('lane_paused', '1 when the lane is paused, else 0', ['queue', 'lane'], (set, s) => {
    for (const l of s.lanes) set({ queue: s.name, lane: l.group }, l.paused ? 1 : 0);
  });
  queueGauge(
    'oldest_waiting_seconds',
    'How long the job next in line has waited (the longest over flat pending and the lanes); 0 when none waits',
    ['queue'],
    (set, s) => set({ queue: s.name }, (s.oldestWaitingMs ?? 0) / 1000),
  );
  queueGauge(
    'lane_oldest_waiting_seconds',
    'How long the job next in line in each lane that holds waiting jobs has waited',
    ['queue', 'lane'],
    (set, s) => {
      for (const [lane, ms] of Object.entries(s.lanesOldestWaitingMs))
        set({ queue: s.name, lane }, ms / 1000);
    },
  );
  queueGauge('consumers', 'Consumers that sent a heartbeat recently', ['queue'], (set, s) =>
    set({ queue: s.name }, s.consumers.length),
  );

  const completed = new Counter({
    name: `${prefix}jobs_completed_total`,
    help: 'Jobs completed, counted from the events stream since this process began reading it',
    labelNames: ['queue'] as const,
    registers: [registry],
  });
  const failed = new Counter({
    name: `${prefix}jobs_failed_total`,
    help: 'Failed attempts by reason (error, timeout, unrecoverable, cancelled, stalled), from the events stream',
    labelNames: ['queue', 'reason'] as const,
    registers: [registry],
  });
  const deadLettered = new Counter({
    name: `${prefix}jobs_dead_lettered_total`,
    help: 'Jobs that ended dead (attempts used up, or an unrecoverable error), from the events stream',
    labelNames: ['queue'] as const,
    registers: [registry],
  });
  const wait = new Histogram({
    name: `${prefix}job_wait_seconds`,
    help: 'Enqueue-to-start latency: from claimable (added or waiting) to active, by stream id times',
    labelNames: ['queue'] as const,
    buckets: WAIT_BUCKETS,
    registers: [registry],
  });
  const processing = new Histogram({
    name: `${prefix}job_processing_seconds`,
    help: 'Handler duration up to the acknowledgement, of the observed consumers, by outcome (completed, retry, dead, cancelled)',
    labelNames: ['queue', 'outcome'] as const,
    buckets: PROCESSING_BUCKETS,
    registers: [registry],
  });
  const scripts = new Histogram({
    name: `${prefix}script_duration_seconds`,
    help: 'Protocol script calls made by this process, by script and outcome',
    labelNames: ['script', 'outcome'] as const,
    buckets: SCRIPT_BUCKETS,
    registers: [registry],
  });

  // ── the events stream: counters and waits ──────────────────────────────────
  const followed = new Map<string, () => void>();
  const claimable = new Map<string, Map<string, number>>();
  let closed = false;

  const onEvent = (queue: string, e: QueueEvent): void => {
    if (e.event === 'completed') completed.inc({ queue });
    else if (e.event === 'failed') failed.inc({ queue, reason: e.fields.reason ?? 'error' });
    else if (e.event === 'retries_exhausted') deadLettered.inc({ queue });
    let since = claimable.get(queue);
    if (!since) {
      since = new Map();
      claimable.set(queue, since);
    }
    if (e.event === 'added' || e.event === 'waiting') {
      since.delete(e.id); // re-insert: the Map's order stays oldest first
      since.set(e.id, streamMs(e.streamId));
      if (since.size > MAX_WAITING) since.delete(since.keys().next().value as string);
    } else if (e.event === 'active') {
      const at = since.get(e.id);
      if (at !== undefined) {
        since.delete(e.id);
        wait.observe({ queue }, Math.max(0, streamMs(e.streamId) - at) / 1000);
      }
    } else if (e.event === 'removed' || e.event === 'failed') since.delete(e.id);
  };

  function follow(names: readonly string[]): void {
    if (closed || !followEvents) return;
    for (const name of names) if (!followed.has(name)) followed.set(name, hub.subscribe(name, onEvent));
  }

  // ── the connector seam: every script call of this process ──────────────────
  const unobserveScripts = mq.connector.observe((name, ms, error) => {
    scripts.observe({ script: name, outcome: error === undefined ? 'ok' : 'error' }, ms / 1000);
  });

  // ── consumers of this process: processing durations ────────────────────────
  const unobserve = new Set<() => void>();
  const seconds = (job: Job): number | undefined =>
    job.startedAt === undefined ? undefined : (performance.now() - job.startedAt) / 1000;

  return {
    observe(consumer) {
      const queue = consumer.queue.name;
      const done = (job: Job) => {
        const s = seconds(job);
        if (s !== undefined) processing.observe({ queue, outcome: 'completed' }, s);
      };
      const fail = (job: Job, _error: Error, outcome: FailOutcome) => {
        const s = seconds(job);
        if (s !== undefined) processing.observe({ queue, outcome }, s);
      };
      consumer.on('completed', done);
      consumer.on('failed', fail);
      const stop = () => {
        consumer.off('completed', done);
        consumer.off('failed', fail);
        unobserve.delete(stop);
      };
      unobserve.add(stop);
      return stop;
    },
    async ready() {
      follow(await queueNames());
      await Promise.all([...followed.keys()].map((q) => hub.ready(q)));
    },
    async close() {
      closed = true;
      for (const stop of [...unobserve]) stop();
      for (const unsubscribe of followed.values()) unsubscribe();
      followed.clear();
      claimable.clear();
      unobserveScripts();
      if (ownHub) await hub.close();
    },
  };
}
