// The job verbs of one queue: admit (enqueue, enqueueAt, enqueueIn, enqueueMany), look up
// (get, counts), end (cancel, remove, retry) and the sweeps (promote, reap, sweepStalled). Each verb
// is one protocol script; the consumer and the event reader build on this module.

import { type BatchHandler, type BatchOptions, consumeBatch } from './consumer/batch.js';
import { type ConsumeOptions, Consumer } from './consumer/consumer.js';
import { type ClaimedJob, type ClaimOptions, claimJobs } from './consumer/manual.js';
import { handlerFor, type SandboxConsumeOptions } from './consumer/sandbox/consume.js';
import { promoteJob, type RunWhen, reprioritize, reschedule, updateData } from './control.js';
import { atLeast, knownKeys, wholeNumber } from './core/check.js';
import { EchoMQError, optionsObject, showValue } from './core/errors.js';
import { assertJobId } from './core/ids.js';
import type {
  CleanOptions,
  EnqueueOptions,
  EnqueueStatus,
  Handler,
  JobState,
  JobView,
  QueueOptions,
  QueueSettings,
  ScheduleStatus,
} from './core/types.js';
import { type EventsOptions, QueueEvents, waitFor } from './events/reader.js';
import { deliverNotices } from './flow-handoff.js';
import { type DependencyPage, type FlowTree, readDependencies, readFlow } from './flow-read.js';
import { Lanes, rateSpec } from './lanes.js';
import { type LogPage, readLogs } from './logs.js';
import { Repeat } from './recurring/repeat.js';
import { JobSchedulers } from './recurring/schedulers.js';
import { type DrainOptions, drain, type ObliterateOptions, obliterate } from './sweep.js';
import { type Admission, encodeJob, extended, RETAIN_KEYS } from './wire/admission.js';
import type { Connector } from './wire/connector.js';
import type { Durability, Replication } from './wire/durability.js';
import type { Keyspace } from './wire/keyspace.js';
import { QueueWire, queueLimits } from './wire/queue-wire.js';
import { counts, row } from './wire/reads.js';
import type { ScriptName } from './wire/scripts.js';

const CHUNK = 1000;
/** enqueueMany's smallest slice: below it a call's fixed cost outweighs the overlap. */
const SLICE_MIN = 250;

const MANY_ITEM_KEYS = new Set(['data', 'opts']);
const MANY_OPTIONS = new Set(['durability']);
const RETRY_ALL_OPTIONS = new Set(['state', 'name', 'error', 'batch', 'onProgress']);
const SETTINGS_KEYS = new Set(['rateLimit', 'retention', 'eventsMaxLen', 'idempotencyMs', 'concurrency']);
const ENDED_SETS = new Set(['completed', 'dead']);

/** configure's retention, every level of it checked for unknown keys. */
function retentionSettings(value: NonNullable<QueueSettings['retention']>): QueueSettings['retention'] {
  const r = knownKeys(optionsObject(value, 'retention'), ENDED_SETS, 'retention set');
  for (const set of ENDED_SETS) {
    const one = r[set as 'completed' | 'dead'];
    if (one !== undefined)
      knownKeys(optionsObject(one, `retention.${set}`), RETAIN_KEYS, `retention.${set} option`);
  }
  return r;
}

/** An admission reply entry: 1 added, 0 duplicate, or the kept id (a string) when deduplicated. */
function admitted<S extends string>(
  id: string,
  reply: unknown,
  added: S,
): { id: string; status: S | 'duplicate' | 'deduplicated' } {
  if (typeof reply === 'string') return { id: reply, status: 'deduplicated' };
  return reply === 1 ? { id, status: added } : { id, status: 'duplicate' };
}

export class Queue<D = unknown, R = unknown> {
  /** The queue as the wire sees it; the runtime rooms (consumer, events, lanes...) take this. */
  readonly wire: QueueWire;
  /** Lanes (groups): per-lane concurrency, rate limits and pause. */
  readonly lanes: Lanes;
  /** Fixed cadences swept by a pump: register, unregister, list, pump. */
  readonly repeat: Repeat;
  /** Job schedulers (every / cron pattern / immediately): upsert, get, list, count, remove. */
  readonly schedulers: JobSchedulers;
  private readonly started = new Set<Consumer<D, R>>();
  private batch: {
    job: Admission;
    durability: Replication | undefined;
    resolve: (r: { id: string; status: EnqueueStatus }) => void;
    reject: (e: unknown) => void;
  }[] = [];

  private readonly siblings = new Map<string, QueueWire>();

  constructor(connector: Connector, name: string, opts: QueueOptions = {}) {
    this.wire = new QueueWire(connector, name, queueLimits(opts));
    this.lanes = new Lanes(this.wire);
    this.repeat = new Repeat(this.wire);
    this.schedulers = new JobSchedulers(this.wire);
  }

  get name(): string {
    return this.wire.name;
  }

  get keys(): Keyspace {
    return this.wire.keys;
  }

  get connector(): Connector {
    return this.wire.connector;
  }

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

  /** A call's `durability` option, the connection's default when absent. */
  durabilityFor(value: unknown, where: string): Replication | undefined {
    return this.wire.durabilityFor(value, where);
  }

  // ── admission ───────────────────────────────────────────────────────────────

  /** Validates and encodes one job for the admission scripts (enqueue, schedule, flow_add). */
  admission(data: D, options?: EnqueueOptions): Admission {
    return encodeJob(data, options, this.wire.limits);
  }

  /**
   * Adds a job that can run now. Calls made in the same tick travel as one script call.
   * Resolves `duplicate` when a job with that id exists already (nothing is overwritten), and
   * `deduplicated` with the kept job's id when `dedupe` kept another job.
   */
  async enqueue(data: D, opts?: EnqueueOptions): Promise<{ id: string; status: EnqueueStatus }> {
    this.connector.assertOpen();
    const { job, durability } = this.admitOptions(data, opts);
    return new Promise<{ id: string; status: EnqueueStatus }>((resolve, reject) => {
      if (this.batch.push({ job, durability, resolve, reject }) === 1) process.nextTick(() => this.flush());
    });
  }

  /** One job's admission and the durability its call asks for (an option of the call, not the job). */
  private admitOptions(data: D, opts: EnqueueOptions | undefined) {
    const { durability, ...rest } = optionsObject(opts, 'enqueue options');
    return { job: this.admission(data, rest), durability: this.durabilityFor(durability, 'enqueue') };
  }

  private flush(): void {
    const batch = this.batch;
    this.batch = [];
    // A large tick's worth goes as two calls: Redis runs one while the replies of the other
    // let callers add the next jobs (one call would leave one side idle each round trip).
    // Calls that ask for replicas travel apart from those that do not (one WAIT per batch).
    const durable = batch.filter((b) => b.durability);
    if (durable.length > 0 && durable.length < batch.length) {
      this.batch = batch.filter((b) => !b.durability);
      this.flush();
      this.batch = durable;
      this.flush();
      return;
    }
    const size = batch.length >= 64 ? Math.min(CHUNK, Math.ceil(batch.length / 2)) : CHUNK;
    for (let i = 0; i < batch.length; i += size) {
      const part = batch.slice(i, i + size);
      this.admit(
        part.map((b) => b.job),
        strictest(part.map((b) => b.durability)),
      ).then(
        (statuses) => {
          for (const [j, b] of part.entries()) b.resolve(statuses[j]!);
        },
        (err) => {
          for (const b of part) b.reject(err);
        },
      );
    }
  }

  private async admit(
    jobs: Admission[],
    durability?: Replication,
  ): Promise<{ id: string; status: EnqueueStatus }[]> {
    const argv: string[] = [this.keys.prefix];
    // Plain jobs travel as 9-field tuples; a call with any job of its own retention, tags or
    // lifo announces the 13-field form with '#13', and with a timeout the 14-field form ('#14').
    const wide = jobs.some(extended);
    const timed = wide && jobs.some((j) => j.timeout !== '');
    if (wide) argv.push(timed ? '#14' : '#13');
    for (const j of jobs) {
      argv.push(j.id, j.payload, j.priority, j.group, j.name, j.max, j.backoff, j.dedupeKey, j.dedupeSpec);
      if (wide) argv.push(j.retainCompleted, j.retainDead, j.tags, j.lifo);
      if (timed) argv.push(j.timeout);
    }
    const reply = (await this.run('enqueue', argv, undefined, durability)) as (number | string)[];
    return reply.map((r, i) => admitted(jobs[i]!.id, r, 'enqueued'));
  }

  /**
   * Adds many jobs in a few script calls (slices of 250 to 1,000, two in flight), not one per job.
   * Resolves in input order.
   */
  async enqueueMany(
    items: readonly { data: D; opts?: EnqueueOptions }[],
    options?: { durability?: Durability | false },
  ): Promise<{ id: string; status: EnqueueStatus }[]> {
    this.connector.assertOpen();
    const { durability: asked } = knownKeys(
      optionsObject(options, 'enqueueMany options'),
      MANY_OPTIONS,
      'enqueueMany option',
    );
    const durability = this.durabilityFor(asked, 'enqueueMany');
    if (!Array.isArray(items)) {
      throw new EchoMQError('EMQINPUT', 'enqueueMany takes an array of { data, opts? }');
    }
    // Refuse bad input before the wire.
    const jobs = items.map((it) => {
      if (typeof it !== 'object' || it === null) {
        throw new EchoMQError('EMQINPUT', 'enqueueMany takes an array of { data, opts? }');
      }
      // A job option beside data ({ data, id }) would otherwise be dropped without a word.
      knownKeys(it, MANY_ITEM_KEYS, 'enqueueMany item field', ' (job options go under opts)');
      return this.admission(it.data, it.opts);
    });
    const out: { id: string; status: EnqueueStatus }[] = new Array(jobs.length);
    // Every job was validated and encoded above, before anything is sent (nothing half-written).
    // They go in slices with two calls in flight, so Redis runs one slice while this process
    // serialises the next and reads the last's reply: a single call of 1,000 would leave Redis
    // idle while it is written and Node idle while it runs.
    const slice = Math.min(CHUNK, Math.max(SLICE_MIN, Math.ceil(jobs.length / 4)));
    let next = 0;
    const lane = async () => {
      while (next < jobs.length) {
        const start = next;
        next += slice;
        const part = jobs.slice(start, start + slice);
        const statuses = await this.admit(part, durability);
        for (const j of part.keys()) out[start + j] = statuses[j]!;
      }
    };
    await Promise.all([lane(), lane()]);
    return out;
  }

  /** Adds a job that becomes claimable at `runAtMs` (epoch ms, judged on the Redis server's clock). */
  async enqueueAt(
    data: D,
    runAtMs: number,
    opts?: EnqueueOptions,
  ): Promise<{ id: string; status: ScheduleStatus }> {
    return this.schedule(data, 'at', wholeNumber(runAtMs, 'runAtMs', 0), opts);
  }

  /** Adds a job that becomes claimable `delayMs` from now, measured on the Redis server's clock. */
  async enqueueIn(
    data: D,
    delayMs: number,
    opts?: EnqueueOptions,
  ): Promise<{ id: string; status: ScheduleStatus }> {
    return this.schedule(data, 'in', wholeNumber(delayMs, 'delayMs', 0), opts);
  }

  private async schedule(
    data: D,
    mode: 'at' | 'in',
    value: number,
    opts?: EnqueueOptions,
  ): Promise<{ id: string; status: ScheduleStatus }> {
    this.connector.assertOpen();
    const { job: j, durability } = this.admitOptions(data, opts);
    if (j.lifo !== '') {
      throw new EchoMQError(
        'EMQINPUT',
        'lifo applies to enqueue: a scheduled job is released by its priority',
      );
    }
    const argv = [j.id, j.payload, mode, value, j.priority, j.group, j.name, j.max, j.backoff];
    argv.push(j.dedupeKey, j.dedupeSpec);
    if (extended(j)) argv.push(j.retainCompleted, j.retainDead, j.tags);
    if (j.timeout !== '') argv.push(j.timeout);
    const reply = await this.run('schedule', argv, j.id, durability);
    return admitted(j.id, reply, 'scheduled');
  }

  // ── lookups ─────────────────────────────────────────────────────────────────

  /** The job's row as a view, or null when no job has that id. */
  async get(id: string): Promise<JobView<D, R> | null> {
    this.connector.assertOpen();
    assertJobId(id);
    return row<D, R>(this.wire, id);
  }

  /** The flow under job `id`: every job of it with its queue and state (null: no such job). */
  async flow(id: string): Promise<FlowTree | null> {
    this.connector.assertOpen();
    assertJobId(id);
    return readFlow(this.connector.client, this.name, id);
  }

  /**
   * One page of a flow parent's children, in admission order: those it still waits for and those
   * it has counted (with a completed child's result, an ignored failure's reason). Pass the
   * reply's `cursor` for the next page; 0 means this was the last.
   */
  async dependencies(id: string, opts?: { cursor?: number; count?: number }): Promise<DependencyPage> {
    this.connector.assertOpen();
    assertJobId(id);
    return readDependencies(this.connector.client, this.name, id, opts);
  }

  /**
   * Delivers the flow hand-offs waiting in this queue (children of it whose parents are in other
   * queues ended) to the parents' queues; consumers do this on their beat. Resolves with how
   * many were delivered. Safe to run concurrently: each child is counted once.
   */
  async deliverNotices(): Promise<number> {
    this.connector.assertOpen();
    return deliverNotices(this.wire, (name) => this.sibling(name));
  }

  /** Another queue of this connection by name, for the calls a hand-off makes on it. */
  private sibling(name: string): QueueWire {
    if (name === this.name) return this.wire;
    let w = this.siblings.get(name);
    if (!w) {
      w = new QueueWire(this.connector, name, this.wire.limits);
      this.siblings.set(name, w);
    }
    return w;
  }

  /** How many jobs are in each state (pending counts flat pending and every lane). */
  async counts(): Promise<Record<JobState, number>> {
    this.connector.assertOpen();
    return counts(this.wire);
  }

  // ── changing a job that has not started (src/control.ts) ────────────────────

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
    return (await this.run('cancel', [this.keys.prefix, id], id)) as 'cancelled' | 'requested';
  }

  /** Deletes a job that is not running. True when it existed. */
  async remove(id: string): Promise<boolean> {
    assertJobId(id);
    return (await this.run('remove', [this.keys.prefix, id], id)) === 1;
  }

  /**
   * Returns a dead, cancelled or completed job (a re-run) to pending (its lane when it has a
   * group) with its attempts reset to 0; its error is kept as `lastError`, its result dropped.
   * EMQNOJOB when there is no such job, EMQSTATE when it has not ended, EMQDATA when its row holds
   * a malformed number (bad data: the job could not run; correct the field first).
   */
  async retry(id: string): Promise<void> {
    assertJobId(id);
    const [status] = (await this.run('retry', [this.keys.prefix, id])) as string[];
    if (status === 'EMQNOJOB') throw new EchoMQError('EMQNOJOB', `no job ${id} in queue ${this.name}`);
    if (status === 'EMQSTATE') {
      const state = await this.connector.client.hget(this.keys.job(id), 'state');
      throw new EchoMQError('EMQSTATE', `job ${id} is ${state}: only a job that ended can be retried`);
    }
    if (status === 'EMQDATA') {
      throw new EchoMQError(
        'EMQDATA',
        `job ${id} has a prio, token or max that is not a whole number: correct or remove the field (see its error), then retry it`,
      );
    }
  }

  /**
   * Retries every job that ended `state` ('dead' by default, 'cancelled' or 'completed') before
   * the call, oldest first, `batch` ids per script call (default 500: 100,000 jobs take about 200
   * calls). `name` keeps only jobs of that name, `error` only jobs whose error message contains
   * that text (or matches that RegExp). Jobs that end again while it runs are not taken twice.
   * Resolves with how many were retried.
   */
  async retryAll(
    opts: {
      state?: 'dead' | 'cancelled' | 'completed';
      name?: string;
      error?: string | RegExp;
      batch?: number;
      /** Called after every batch: jobs retried so far, of `total` found at the start. */
      onProgress?: (progress: { retried: number; total: number }) => void;
    } = {},
  ): Promise<number> {
    this.connector.assertOpen();
    knownKeys(optionsObject(opts, 'retryAll options'), RETRY_ALL_OPTIONS, 'retryAll option');
    const state = opts.state ?? 'dead';
    if (state !== 'dead' && state !== 'cancelled' && state !== 'completed') {
      throw new EchoMQError(
        'EMQINPUT',
        `retryAll state must be 'dead', 'cancelled' or 'completed', got ${showValue(state)}`,
      );
    }
    if (opts.name !== undefined && typeof opts.name !== 'string') {
      throw new EchoMQError('EMQINPUT', `retryAll name must be a string, got ${showValue(opts.name)}`);
    }
    const error = opts.error;
    if (error !== undefined && typeof error !== 'string' && !(error instanceof RegExp)) {
      throw new EchoMQError(
        'EMQINPUT',
        `retryAll error must be a string or a RegExp, got ${showValue(error)}`,
      );
    }
    const filtered = opts.name !== undefined || error !== undefined;
    const matches = (name: string | null, message: string | null) =>
      (opts.name === undefined || name === opts.name) &&
      (error === undefined ||
        (message !== null && (typeof error === 'string' ? message.includes(error) : error.test(message))));
    const batch = wholeNumber(opts.batch ?? 500, 'batch', 1, 10_000);
    const c = this.connector.client;
    const set = this.keys.key(state);
    // The newest end at the start bounds the run: a job that ends again later scores above it.
    const newest = await c.zrange(set, -1, -1, 'WITHSCORES');
    if (newest.length === 0) return 0;
    const cutoff = newest[1]!;
    const total = await c.zcount(set, '-inf', cutoff);
    let retried = 0;
    let skip = 0; // members left in the set (another state, or filtered out); page past them
    for (;;) {
      let ids = await c.zrangebyscore(set, '-inf', cutoff, 'LIMIT', skip, batch);
      if (ids.length === 0) break;
      if (filtered) {
        // The filter reads name and error beside the ids; retry still checks each state itself.
        const pipeline = c.pipeline();
        for (const id of ids) pipeline.hmget(this.keys.job(id), 'name', 'error');
        const rows = ((await pipeline.exec()) ?? []).map(([err, row]) => {
          if (err) throw err;
          return row as (string | null)[];
        });
        const kept = ids.filter((_, i) => matches(rows[i]![0]!, rows[i]![1]!));
        skip += ids.length - kept.length;
        ids = kept;
        if (ids.length === 0) continue;
      }
      const statuses = (await this.run('retry', [this.keys.prefix, ...ids])) as string[];
      for (const s of statuses) {
        if (s === 'OK') retried += 1;
        else if (s === 'EMQSTATE' || s === 'EMQDATA') skip += 1;
      }
      opts.onProgress?.({ retried, total });
    }
    return retried;
  }

  // ── flow control ────────────────────────────────────────────────────────────

  /** Stops claiming across all consumers (enqueue still works; running jobs finish). */
  async pause(): Promise<boolean> {
    return (await this.run('pause', [this.keys.prefix])) === 1;
  }

  /** Lets consumers claim again, and wakes the parked ones. */
  async resume(): Promise<boolean> {
    return (await this.run('resume', [this.keys.prefix])) === 1;
  }

  async isPaused(): Promise<boolean> {
    this.connector.assertOpen();
    return (await this.connector.client.hget(this.keys.key('meta'), 'paused')) === '1';
  }

  /** Changes queue-wide settings (rate limit, retention, events cap, concurrency); omitted ones stay. */
  async configure(options: QueueSettings): Promise<void> {
    const settings = knownKeys(optionsObject(options, 'queue settings'), SETTINGS_KEYS, 'queue setting');
    const argv: string[] = [];
    const set = (field: string, value: number | undefined, what: string, min: number) => {
      if (value !== undefined) argv.push(field, String(wholeNumber(value, what, min)));
    };
    if (settings.rateLimit !== undefined) {
      const spec = rateSpec(settings.rateLimit, 'queue');
      if (spec === '-') argv.push('rate_max', '-', 'rate_ms', '-');
      else argv.push('rate_max', spec.split(':')[0]!, 'rate_ms', spec.split(':')[1]!);
    }
    const r = settings.retention === undefined ? undefined : retentionSettings(settings.retention);
    set('keep_completed', r?.completed?.count, 'retention.completed.count', 0);
    set('keep_completed_ms', r?.completed?.ageMs, 'retention.completed.ageMs', -1);
    set('keep_dead', r?.dead?.count, 'retention.dead.count', 0);
    set('keep_dead_ms', r?.dead?.ageMs, 'retention.dead.ageMs', -1);
    set('events_max', settings.eventsMaxLen, 'eventsMaxLen', 1);
    set('keep_ids_ms', settings.idempotencyMs, 'idempotencyMs', 0);
    if (settings.concurrency === null) argv.push('concurrency', '-');
    else if (settings.concurrency !== undefined)
      argv.push(
        'concurrency',
        String(atLeast(settings.concurrency, 'concurrency', 1, 'null removes the cap')),
      );
    if (argv.length > 0) await this.run('configure', argv);
  }

  /**
   * Deletes ended jobs of one state (rows and ids), oldest first: those that ended at least
   * `olderThanMs` ago (server clock; default 0 = all), at most `limit` (default 1000) per call.
   * Resolves with how many were deleted; emits `cleaned` with the state and count.
   */
  async clean(opts: CleanOptions): Promise<number> {
    const state = opts?.state;
    if (state !== 'completed' && state !== 'dead' && state !== 'cancelled') {
      throw new EchoMQError(
        'EMQINPUT',
        `clean state must be 'completed', 'dead' or 'cancelled', got ${showValue(state)}`,
      );
    }
    return (await this.run('clean', [
      this.keys.prefix,
      state,
      wholeNumber(opts.olderThanMs ?? 0, 'olderThanMs', 0),
      wholeNumber(opts.limit ?? 1000, 'limit', 1, 100_000),
    ])) as number;
  }

  /**
   * Deletes every waiting job (pending and every lane; with `scheduled: true` the scheduled ones
   * too) in batches, and resolves with how many. Running and ended jobs stay.
   */
  drain(opts?: DrainOptions): Promise<number> {
    return drain(this.wire, opts);
  }

  /**
   * Deletes every key of the queue in batches. Refused (EMQSTATE) while jobs are active, unless
   * `force`. The next call on this queue starts it afresh (hello stamps the version again).
   */
  async obliterate(opts?: ObliterateOptions): Promise<number> {
    const deleted = await obliterate(this.wire, opts);
    this.wire.forgetHello();
    return deleted;
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
      consumer = new Consumer<D, R>(this, run.handler, run.options);
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
    const consumer = consumeBatch(this, handler, opts);
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
    return claimJobs(this, n, opts);
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

  // ── sweeps ──────────────────────────────────────────────────────────────────

  /**
   * `promote(id)`: the scheduled job `id` runs now (EMQSTATE when it is not scheduled).
   * `promote(batch?)`: the sweep, the same as promoteDue(batch).
   */
  promote(id: string): Promise<void>;
  promote(batch?: number): Promise<number>;
  promote(target: string | number = 100): Promise<unknown> {
    if (typeof target === 'string') return promoteJob(this.wire, target);
    return this.promoteDue(target);
  }

  /** Releases due scheduled jobs (server clock); returns how many due members were selected. */
  async promoteDue(batch = 100): Promise<number> {
    return (await this.run('promote', [this.keys.prefix, wholeNumber(batch, 'batch', 1)])) as number;
  }

  /**
   * Like promote, and also tells the server's now and the next due instant (-1: none).
   * `elapsedMs`: how long the caller lived since its own previous promote (a monotonic clock);
   * the server clock running further ahead is a forward step, and the schedule moves by it.
   */
  async promoteNext(
    batch = 100,
    elapsedMs?: number,
  ): Promise<{ count: number; now: number; nextDue: number; handoffs: number }> {
    const argv: (string | number)[] = [this.keys.prefix, wholeNumber(batch, 'batch', 1), 'next'];
    if (elapsedMs !== undefined) argv.push(wholeNumber(Math.ceil(elapsedMs), 'elapsedMs', 0));
    const [count, now, nextDue, handoffs] = (await this.run('promote', argv)) as number[];
    return { count: count!, now: now!, nextDue: nextDue!, handoffs: handoffs ?? 0 };
  }

  /**
   * Returns jobs whose lease expired to pending; resolves with their ids. `expectedMs`: the
   * longest gap the caller expects between recovery passes (default 1000): a longer one is a
   * server pause or clock step, and leases still live before it are not recovered for it.
   */
  async reap(batch = 100, expectedMs?: number): Promise<string[]> {
    const argv: (string | number)[] = [this.keys.prefix, wholeNumber(batch, 'batch', 1)];
    if (expectedMs !== undefined) argv.push(wholeNumber(expectedMs, 'expectedMs', 0));
    return (await this.run('reap', argv)) as string[];
  }

  /** The count-thresholded stalled check: recover expired leases, dead-letter repeat stallers. */
  async sweepStalled(
    options: { maxStalled?: number; batch?: number; expectedMs?: number } = {},
  ): Promise<{ recovered: string[]; dead: string[] }> {
    const opts = optionsObject(options, 'sweepStalled options');
    const argv: (string | number)[] = [
      this.keys.prefix,
      wholeNumber(opts.maxStalled ?? 1, 'maxStalled', 0),
      wholeNumber(opts.batch ?? 100, 'batch', 1),
    ];
    if (opts.expectedMs !== undefined) argv.push(wholeNumber(opts.expectedMs, 'expectedMs', 0));
    const [recovered, dead] = (await this.run('sweep_stalled', argv)) as string[][];
    return { recovered: recovered!, dead: dead! };
  }
}

/** The most replicas any of a batch's calls asks for, and the longest wait; none when none asks. */
function strictest(asked: (Replication | undefined)[]): Replication | undefined {
  const some = asked.filter((a): a is Replication => a !== undefined);
  if (some.length === 0) return undefined;
  return {
    replicas: Math.max(...some.map((a) => a.replicas)),
    timeoutMs: Math.max(...some.map((a) => a.timeoutMs)),
  };
}
