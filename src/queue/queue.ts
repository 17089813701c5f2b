// The job verbs of one queue: admit (enqueue, enqueueAt, enqueueIn, enqueueMany), look up (get,
// counts, a flow's tree), change a job that has not started, end (cancel, remove, retry), and
// process or watch (consume, claim, events, waitFor). The verbs about the queue as a whole (pause,
// configure, clean, drain, obliterate and the sweeps) are in queue/upkeep.ts, which Queue extends.
// Each method checks its input and delegates to one room function or one protocol script.

import { type BatchHandler, type BatchOptions, consumeBatch } from '../consumer/batch.js';
import { type ConsumeOptions, Consumer } from '../consumer/consumer.js';
import { type ClaimedJob, type ClaimOptions, claimJobs } from '../consumer/manual.js';
import { handlerFor, type SandboxConsumeOptions } from '../consumer/sandbox/consume.js';
import { wholeNumber } from '../core/check.js';
import { optionsObject } from '../core/errors.js';
import { assertJobId } from '../core/ids.js';
import type {
  EnqueueOptions,
  EnqueueStatus,
  Handler,
  JobState,
  JobView,
  QueueOptions,
  ScheduleStatus,
} from '../core/types.js';
import { type EventsOptions, QueueEvents, waitFor } from '../events/reader.js';
import { deliverNotices } from '../flows/handoff.js';
import { Admissions } from '../jobs/admit.js';
import { type RunWhen, reprioritize, reschedule, updateData } from '../jobs/control.js';
import { type LogPage, readLogs } from '../jobs/logs.js';
import { type RetryAllOptions, retryAll, retryOne } from '../jobs/retry.js';
import { Lanes } from '../lanes/lanes.js';
import { Repeat } from '../recurring/repeat.js';
import { JobSchedulers } from '../recurring/schedulers.js';
import { type Admission, encodeJob } from '../wire/admission.js';
import type { Connector } from '../wire/connector.js';
import type { Durability, Replication } from '../wire/durability.js';
import { type DependencyPage, type FlowTree, readDependencies, readFlow } from '../wire/flow-reads.js';
import type { Keyspace } from '../wire/keyspace.js';
import { QueueWire, queueLimits } from '../wire/queue-wire.js';
import * as reads from '../wire/reads.js';
import type { ScriptName } from '../wire/scripts.js';
import * as verbs from '../wire/verbs/index.js';
import { QueueUpkeep } from './upkeep.js';

export class Queue<D = unknown, R = unknown> extends QueueUpkeep {
  /** Lanes (groups): per-lane concurrency, rate limits and pause. */
  readonly lanes: Lanes;
  /** Fixed cadences swept by a pump: register, unregister, list, pump. */
  readonly repeat: Repeat;
  /** Job schedulers (every / cron pattern / immediately): upsert, get, list, count, remove. */
  readonly schedulers: JobSchedulers;
  private readonly started = new Set<Consumer<D, R>>();
  private readonly admissions: Admissions;

  constructor(connector: Connector, name: string, opts: QueueOptions = {}) {
    super(new QueueWire(connector, name, queueLimits(opts)));
    this.admissions = new Admissions(this.wire);
    this.lanes = new Lanes(this.wire);
    this.repeat = new Repeat(this.wire);
    this.schedulers = new JobSchedulers(this.wire);
  }

  /** The queue's name, as given to `mq.queue(name)`. */
  get name(): string {
    return this.wire.name;
  }

  /** @internal The queue's key names (src/wire's Keyspace), for tests and tools. */
  get keys(): Keyspace {
    return this.wire.keys;
  }

  /** @internal The connection the queue runs on, for the runtime's own rooms. */
  get connector(): Connector {
    return this.wire.connector;
  }

  /** The largest encoded payload an enqueue accepts (QueueOptions.maxPayloadBytes). */
  get maxPayloadBytes(): number {
    return this.wire.limits.maxPayloadBytes;
  }

  /**
   * Runs a protocol script with KEYS built from its contract; `jobId` fills the `job` key.
   * @internal tests and tools; the verbs go through src/wire.
   */
  run(
    name: ScriptName,
    argv: readonly (string | number)[],
    jobId?: string,
    durability?: Replication,
  ): Promise<unknown> {
    return this.wire.run(name, argv, jobId, durability);
  }

  /** @internal A call's `durability` option, the connection's default when absent. */
  durabilityFor(value: unknown, where: string): Replication | undefined {
    return this.wire.durabilityFor(value, where);
  }

  // ── admission ───────────────────────────────────────────────────────────────

  /** @internal Validates and encodes one job for the admission scripts (enqueue, schedule, flow_add). */
  admission(data: D, options?: EnqueueOptions): Admission {
    return encodeJob(data, options, this.wire.limits);
  }

  /**
   * Adds a job that can run now. Calls made in the same tick travel as one script call.
   * Resolves `duplicate` when a job with that id exists already (nothing is overwritten), and
   * `deduplicated` with the kept job's id when `dedupe` kept another job.
   */
  async enqueue(data: D, opts?: EnqueueOptions): Promise<{ id: string; status: EnqueueStatus }> {
    return this.admissions.enqueue(data, opts);
  }

  /**
   * Adds many jobs in a few script calls (slices of 250 to 1,000, two in flight), not one per job.
   * Resolves in input order.
   */
  async enqueueMany(
    items: readonly { data: D; opts?: EnqueueOptions }[],
    options?: { durability?: Durability | false },
  ): Promise<{ id: string; status: EnqueueStatus }[]> {
    return this.admissions.many(items, options);
  }

  /** Adds a job that becomes claimable at `runAtMs` (epoch ms, judged on the Redis server's clock). */
  async enqueueAt(
    data: D,
    runAtMs: number,
    opts?: EnqueueOptions,
  ): Promise<{ id: string; status: ScheduleStatus }> {
    return this.admissions.schedule(data, 'at', wholeNumber(runAtMs, 'runAtMs', 0), opts);
  }

  /** Adds a job that becomes claimable `delayMs` from now, measured on the Redis server's clock. */
  async enqueueIn(
    data: D,
    delayMs: number,
    opts?: EnqueueOptions,
  ): Promise<{ id: string; status: ScheduleStatus }> {
    return this.admissions.schedule(data, 'in', wholeNumber(delayMs, 'delayMs', 0), opts);
  }

  // ── lookups ─────────────────────────────────────────────────────────────────

  /** The job's row as a view, or null when no job has that id. */
  async get(id: string): Promise<JobView<D, R> | null> {
    this.connector.assertOpen();
    assertJobId(id);
    return reads.row<D, R>(this.wire, id);
  }

  /** The flow under job `id`: every job of it with its queue and state (null: no such job). */
  async flow(id: string): Promise<FlowTree | null> {
    this.connector.assertOpen();
    assertJobId(id);
    return readFlow(this.connector, this.name, id);
  }

  /**
   * One page of a flow parent's children, in admission order: those it still waits for and those
   * it has counted (with a completed child's result, an ignored failure's reason). Pass the
   * reply's `cursor` for the next page; 0 means this was the last.
   */
  async dependencies(id: string, opts?: { cursor?: number; count?: number }): Promise<DependencyPage> {
    this.connector.assertOpen();
    assertJobId(id);
    return readDependencies(this.connector, this.name, id, opts);
  }

  /**
   * Delivers the flow hand-offs waiting in this queue (children of it whose parents are in other
   * queues ended) to the parents' queues; consumers do this on their beat. Resolves with how
   * many were delivered. Safe to run concurrently: each child is counted once.
   */
  async deliverNotices(): Promise<number> {
    this.connector.assertOpen();
    return deliverNotices(this.wire);
  }

  /** How many jobs are in each state (pending counts flat pending and every lane). */
  async counts(): Promise<Record<JobState, number>> {
    this.connector.assertOpen();
    return reads.counts(this.wire);
  }

  // ── changing a job that has not started (jobs/control.ts) ────────────────────

  /**
   * Moves a scheduled or pending job to a new run-at: `{ at }` epoch ms or `{ in }` ms from now,
   * on the Redis server's clock. Resolves with the new run-at. EMQSTATE when it started, ended or
   * waits for its children (nothing changes).
   */
  reschedule(id: string, when: RunWhen): Promise<number> {
    return reschedule(this.wire, id, when);
  }

  /** Gives a job that has not started a new priority (lower runs first; 0 = none). */
  reprioritize(id: string, priority: number): Promise<void> {
    return reprioritize(this.wire, id, priority);
  }

  /**
   * Replaces the data of a job that has not started (scheduled, pending, waiting for children).
   * EMQSTATE for a running or ended job: a handler changes its own job's data with ctx.update.
   */
  update(id: string, data: D): Promise<void> {
    return updateData(this.wire, id, data);
  }

  /**
   * A page of the job's log (ctx.log lines): `{ logs, count }`, `count` lines from index `from`
   * (defaults 100 from 0, the oldest kept), and how many the log holds.
   */
  logs(id: string, opts?: { from?: number; count?: number }): Promise<LogPage> {
    return readLogs(this.wire, id, opts);
  }

  // ── ending a job ────────────────────────────────────────────────────────────

  /**
   * Cancels a job: a scheduled or pending job ends `cancelled` at once; a running job gets a
   * request its handler sees (ctx.signal aborts at its next lease checkpoint).
   */
  async cancel(id: string): Promise<'cancelled' | 'requested'> {
    assertJobId(id);
    return verbs.cancel(this.wire, id);
  }

  /** Deletes a job that is not running. True when it existed. */
  async remove(id: string): Promise<boolean> {
    assertJobId(id);
    return verbs.remove(this.wire, id);
  }

  /**
   * Returns a dead, cancelled or completed job (a re-run) to pending (its lane when it has a
   * group) with its attempts reset to 0; its error is kept as `lastError`, its result dropped.
   * EMQNOJOB when there is no such job, EMQSTATE when it has not ended, EMQDATA when its row holds
   * a malformed number (bad data: the job could not run; correct the field first).
   */
  async retry(id: string): Promise<void> {
    assertJobId(id);
    return retryOne(this.wire, id);
  }

  /**
   * Retries every job that ended `state` ('dead' by default, 'cancelled' or 'completed') before
   * the call, oldest first, `batch` ids per script call (default 500: 100,000 jobs take about 200
   * calls). `name` keeps only jobs of that name, `error` only jobs whose error message contains
   * that text (or matches that RegExp). Jobs that end again while it runs are not taken twice.
   * Resolves with how many were retried.
   */
  async retryAll(opts: RetryAllOptions = {}): Promise<number> {
    return retryAll(this.wire, opts);
  }

  // ── processing and watching ─────────────────────────────────────────────────

  /**
   * Starts a consumer running `handler` over this queue's jobs. See ConsumeOptions. A handler
   * file's path instead runs it in sandboxes (child processes or worker threads: `sandbox`).
   */
  consume(handler: Handler<D, R> | string, opts?: ConsumeOptions & SandboxConsumeOptions): Consumer<D, R> {
    this.connector.assertOpen();
    const run = handlerFor(handler, opts);
    let consumer: Consumer<D, R>;
    try {
      consumer = new Consumer<D, R>(this.wire, run.handler, run.options);
    } catch (err) {
      run.pool?.close();
      throw err;
    }
    this.started.add(consumer);
    consumer.once('closed', () => {
      this.started.delete(consumer);
      run.pool?.close();
    });
    return consumer.start();
  }

  /**
   * Starts a consumer that hands `handler` up to `size` jobs at once (waiting at most waitMs
   * for a batch to fill); see BatchOptions. Completions of a batch are one acknowledgement call.
   */
  consumeBatch(handler: BatchHandler<D, R>, opts: BatchOptions): Consumer<D, R> {
    this.connector.assertOpen();
    const consumer = consumeBatch<D, R>(this.wire, handler, opts);
    this.started.add(consumer);
    consumer.once('closed', () => this.started.delete(consumer));
    return consumer.start();
  }

  /**
   * Claims up to n jobs by hand, each under a lease of leaseMs (default 30000), for work finished
   * elsewhere: job.complete(result), job.fail(error) and job.extend(ms) are fenced by its lease
   * token (a late call throws EMQLEASE). Resolves with the jobs claimed (none when none waits).
   */
  claim(n: number, opts?: ClaimOptions): Promise<ClaimedJob<D, R>[]> {
    this.connector.assertOpen();
    return claimJobs<D, R>(this.wire, n, opts);
  }

  /** The consumers started on this queue object that have not closed (echomq/testing waits on them). */
  get consumers(): readonly Consumer<D, R>[] {
    return [...this.started];
  }

  /** Follows the queue's events stream (from '$' by default; '0' replays). */
  events(opts?: EventsOptions): QueueEvents {
    this.connector.assertOpen();
    return new QueueEvents(this.wire, opts);
  }

  /** Resolves with the job's result when it completes; rejects when it ends dead or cancelled. */
  waitFor(id: string, options?: { timeoutMs?: number }): Promise<R> {
    this.connector.assertOpen();
    assertJobId(id);
    const opts = optionsObject(options, 'waitFor options');
    const timeoutMs =
      opts.timeoutMs === undefined ? undefined : wholeNumber(opts.timeoutMs, 'timeoutMs', 1, 2 ** 31 - 1);
    return waitFor<R>(this.wire, id, timeoutMs);
  }
}
