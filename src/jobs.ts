// The job verbs of one queue: admit (enqueue, enqueueAt, enqueueIn, enqueueMany), look up
// (get, counts), end (cancel, remove) and the sweeps (promote, reap, sweepStalled). Each verb
// is one protocol script; the consumer and the event reader build on this module.
import { Backoff, type BackoffPolicy } from './backoff.js';
import { encodeJson, parseMaybe } from './codec.js';
import type { Connector } from './connector.js';
import { type ConsumeOptions, Consumer, type Handler } from './consumer.js';
import { EchoMQError } from './errors.js';
import { type EventsOptions, QueueEvents, waitFor } from './events.js';
import { assertJobId, mintJobId } from './ids.js';
import { assertName, Keyspace, PROTOCOL_VERSION } from './keyspace.js';
import { Lanes, type RateLimit, rateSpec } from './lanes.js';
import { Repeat } from './repeat.js';
import { JobSchedulers } from './scheduler.js';
import { type Script, type ScriptName, script } from './scripts.js';

/** The states a job row can be in; the same words in Lua, TypeScript, the CLI and dashboard. */
export type JobState = 'scheduled' | 'pending' | 'active' | 'completed' | 'dead' | 'cancelled';
export const JOB_STATES: readonly JobState[] = [
  'scheduled',
  'pending',
  'active',
  'completed',
  'dead',
  'cancelled',
];

export interface EnqueueOptions {
  /** Your own id (must start with `JOB`); enqueue is idempotent on it. Default: a minted id. */
  id?: string;
  /** A label for the job kind, shown in events and tools. */
  name?: string;
  /** Lower runs first; jobs without a priority (0) run before any prioritised job. Default 0. */
  priority?: number;
  /** The lane (group) the job waits in; lanes are served round-robin. */
  group?: string;
  /** How many times the job may start, retries included. Default: the queue's (3). */
  attempts?: number;
  /** The retry delay curve; default: the consumer's policy. */
  backoff?: BackoffPolicy;
}

export interface QueueOptions {
  /** Attempts for jobs enqueued without `attempts`. Default 3. */
  defaultAttempts?: number;
  /** The largest encoded payload accepted, in bytes. Default 512 KiB. */
  maxPayloadBytes?: number;
}

/** Queue-wide settings, kept in the queue's meta hash (shared by every runtime on the queue). */
export interface QueueSettings {
  /** At most `max` claims in any `perMs` window across all consumers; null removes it. */
  rateLimit?: RateLimit | null;
  /** Retention of ended jobs: how many to keep and for how long (ms; -1 = no age limit). */
  retention?: {
    completed?: { count?: number; ageMs?: number };
    dead?: { count?: number; ageMs?: number };
  };
  /** Approximate cap of the events stream. Default 10,000 entries. */
  eventsMaxLen?: number;
}

export type EnqueueStatus = 'enqueued' | 'duplicate';
export type ScheduleStatus = 'scheduled' | 'duplicate';

export interface JobView<D = unknown, R = unknown> {
  id: string;
  name?: string;
  state: JobState;
  data: D;
  attempts: number;
  maxAttempts: number;
  result?: R;
  error?: { message: string; stack?: string };
  progress?: unknown;
  group?: string;
  priority?: number;
  backoff?: BackoffPolicy;
  stalled: number;
  cancelRequested: boolean;
  /** Server-clock ms: when it was admitted, when it should run, started and ended. */
  createdAt: number;
  runAt?: number;
  startedAt?: number;
  finishedAt?: number;
}

const PRIORITY_MAX = 2 ** 21;
const CHUNK = 1000;

function wholeNumber(value: unknown, what: string, min: number, max = Number.MAX_SAFE_INTEGER): number {
  if (typeof value !== 'number' || !Number.isInteger(value) || value < min || value > max) {
    throw new EchoMQError(
      'EMQINPUT',
      `${what} must be a whole number from ${min} to ${max}, got ${String(value)}`,
    );
  }
  return value;
}

const KNOWN_OPTIONS = new Set(['id', 'name', 'priority', 'group', 'attempts', 'backoff']);

/** The 7-tuple the enqueue script takes per job (schedule takes the same fields). */
interface Admission {
  id: string;
  payload: string;
  priority: string;
  group: string;
  name: string;
  max: string;
  backoff: string;
}

export class Queue<D = unknown, R = unknown> {
  readonly keys: Keyspace;
  /** Lanes (groups): per-lane concurrency, rate limits and pause. */
  readonly lanes: Lanes;
  /** Fixed cadences swept by a pump: register, unregister, list, pump. */
  readonly repeat = new Repeat(this);
  /** Job schedulers (every / cron pattern / immediately): upsert, get, list, count, remove. */
  readonly schedulers = new JobSchedulers(this);
  private readonly defaultAttempts: number;
  readonly maxPayloadBytes: number;
  private hello: Promise<unknown> | undefined;
  private batch: { job: Admission; resolve: (s: EnqueueStatus) => void; reject: (e: unknown) => void }[] = [];

  constructor(
    readonly connector: Connector,
    readonly name: string,
    opts: QueueOptions = {},
  ) {
    this.keys = new Keyspace(name);
    this.lanes = new Lanes(this as unknown as Queue<never, never>);
    this.defaultAttempts = wholeNumber(opts.defaultAttempts ?? 3, 'defaultAttempts', 1);
    this.maxPayloadBytes = wholeNumber(opts.maxPayloadBytes ?? 512 * 1024, 'maxPayloadBytes', 1);
  }

  /** Runs a protocol script with KEYS built from its contract; `jobId` fills the `job` key. */
  async run(name: ScriptName, argv: readonly (string | number)[], jobId?: string): Promise<unknown> {
    this.connector.assertOpen();
    if (!this.hello) {
      const hello = script('hello');
      // The registry of queue names lets tools list queues without scanning the keyspace.
      void this.connector.client.sadd('emq:queues', this.name).catch(() => {});
      this.hello = this.connector.run(hello, [this.keys.key('meta')], [PROTOCOL_VERSION]).catch((err) => {
        this.hello = undefined;
        throw err;
      });
    }
    await this.hello;
    const s: Script = script(name);
    return this.connector.run(
      s,
      s.keys.map((k) => this.keys.key(k, jobId)),
      argv,
    );
  }

  // ── admission ───────────────────────────────────────────────────────────────

  private admission(data: D, opts: EnqueueOptions = {}): Admission {
    for (const key of Object.keys(opts)) {
      if (!KNOWN_OPTIONS.has(key)) {
        throw new EchoMQError(
          'EMQINPUT',
          `unknown enqueue option "${key}"; known: ${[...KNOWN_OPTIONS].join(', ')}`,
        );
      }
    }
    const id = opts.id ?? mintJobId();
    assertJobId(id);
    if (opts.group !== undefined) assertName('group', opts.group);
    if (opts.name !== undefined && (typeof opts.name !== 'string' || opts.name.length > 200)) {
      throw new EchoMQError('EMQINPUT', 'name must be a string of at most 200 characters');
    }
    return {
      id,
      payload: encodeJson(data, 'job data', this.maxPayloadBytes),
      priority: String(wholeNumber(opts.priority ?? 0, 'priority', 0, PRIORITY_MAX)),
      group: opts.group ?? '',
      name: opts.name ?? '',
      max: String(wholeNumber(opts.attempts ?? this.defaultAttempts, 'attempts', 1, 1_000_000)),
      backoff: opts.backoff === undefined ? '' : JSON.stringify(Backoff.validate(opts.backoff)),
    };
  }

  /**
   * Adds a job that can run now. Calls made in the same tick travel as one script call.
   * Resolves `duplicate` when a job with that id exists already (nothing is overwritten).
   */
  async enqueue(data: D, opts?: EnqueueOptions): Promise<{ id: string; status: EnqueueStatus }> {
    this.connector.assertOpen();
    const job = this.admission(data, opts);
    const status = await new Promise<EnqueueStatus>((resolve, reject) => {
      if (this.batch.push({ job, resolve, reject }) === 1) process.nextTick(() => this.flush());
    });
    return { id: job.id, status };
  }

  private flush(): void {
    const batch = this.batch;
    this.batch = [];
    for (let i = 0; i < batch.length; i += CHUNK) {
      const part = batch.slice(i, i + CHUNK);
      this.admit(part.map((b) => b.job)).then(
        (statuses) => {
          for (const [j, b] of part.entries()) b.resolve(statuses[j] as EnqueueStatus);
        },
        (err) => {
          for (const b of part) b.reject(err);
        },
      );
    }
  }

  private async admit(jobs: Admission[]): Promise<EnqueueStatus[]> {
    const argv: string[] = [this.keys.prefix];
    for (const j of jobs) argv.push(j.id, j.payload, j.priority, j.group, j.name, j.max, j.backoff);
    const reply = (await this.run('enqueue', argv)) as number[];
    return reply.map((r) => (r === 1 ? 'enqueued' : 'duplicate'));
  }

  /**
   * Adds many jobs, one script call per chunk of 1,000 (two chunks in flight), not one per job.
   * Resolves in input order.
   */
  async enqueueMany(
    items: readonly { data: D; opts?: EnqueueOptions }[],
  ): Promise<{ id: string; status: EnqueueStatus }[]> {
    this.connector.assertOpen();
    const jobs = items.map((it) => this.admission(it.data, it.opts)); // refuse bad input before the wire
    const out: { id: string; status: EnqueueStatus }[] = new Array(jobs.length);
    let next = 0;
    const lane = async () => {
      while (next < jobs.length) {
        const start = next;
        next += CHUNK;
        const part = jobs.slice(start, start + CHUNK);
        const statuses = await this.admit(part);
        for (const [j, job] of part.entries()) out[start + j] = { id: job.id, status: statuses[j]! };
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
    const j = this.admission(data, opts);
    const reply = await this.run(
      'schedule',
      [j.id, j.payload, mode, value, j.priority, j.group, j.name, j.max, j.backoff],
      j.id,
    );
    return { id: j.id, status: reply === 1 ? 'scheduled' : 'duplicate' };
  }

  // ── lookups ─────────────────────────────────────────────────────────────────

  /** The job's row as a view, or null when no job has that id. */
  async get(id: string): Promise<JobView<D, R> | null> {
    this.connector.assertOpen();
    assertJobId(id);
    const row = (await this.connector.client.hgetall(this.keys.job(id))) as Record<string, string>;
    if (!row.state) return null;
    return jobView<D, R>(id, row);
  }

  /** How many jobs are in each state (pending counts flat pending and every lane). */
  async counts(): Promise<Record<JobState, number>> {
    this.connector.assertOpen();
    const c = this.connector.client;
    const k = this.keys;
    const groups = await c.smembers(k.key('lanes'));
    const pipeline = c.pipeline();
    for (const set of ['schedule', 'pending', 'active', 'completed', 'dead', 'cancelled'])
      pipeline.zcard(k.key(set));
    for (const g of groups) pipeline.zcard(k.lane(g));
    const replies = ((await pipeline.exec()) ?? []).map(([err, n]) => {
      if (err) throw err;
      return n as number;
    });
    const [scheduled, pending, active, completed, dead, cancelled, ...lanes] = replies as number[];
    return {
      scheduled: scheduled!,
      pending: pending! + lanes.reduce((a, b) => a + b, 0),
      active: active!,
      completed: completed!,
      dead: dead!,
      cancelled: cancelled!,
    };
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

  /** Changes queue-wide settings (rate limit, retention, events cap); omitted ones stay. */
  async configure(settings: QueueSettings): Promise<void> {
    const argv: string[] = [];
    const set = (field: string, value: number | undefined, what: string, min: number) => {
      if (value !== undefined) argv.push(field, String(wholeNumber(value, what, min)));
    };
    if (settings.rateLimit !== undefined) {
      const spec = rateSpec(settings.rateLimit, 'queue');
      if (spec === '-') argv.push('rate_max', '-', 'rate_ms', '-');
      else argv.push('rate_max', spec.split(':')[0]!, 'rate_ms', spec.split(':')[1]!);
    }
    const r = settings.retention;
    set('keep_completed', r?.completed?.count, 'retention.completed.count', 0);
    set('keep_completed_ms', r?.completed?.ageMs, 'retention.completed.ageMs', -1);
    set('keep_dead', r?.dead?.count, 'retention.dead.count', 0);
    set('keep_dead_ms', r?.dead?.ageMs, 'retention.dead.ageMs', -1);
    set('events_max', settings.eventsMaxLen, 'eventsMaxLen', 1);
    if (argv.length > 0) await this.run('configure', argv);
  }

  // ── processing and watching ─────────────────────────────────────────────────

  /** Starts a consumer running `handler` over this queue's jobs. See ConsumeOptions. */
  consume(handler: Handler<D, R>, opts?: ConsumeOptions): Consumer<D, R> {
    this.connector.assertOpen();
    return new Consumer<D, R>(this, handler, opts).start();
  }

  /** Follows the queue's events stream (from '$' by default; '0' replays). */
  events(opts?: EventsOptions): QueueEvents {
    this.connector.assertOpen();
    return new QueueEvents(this as Queue<unknown, unknown>, opts);
  }

  /** Resolves with the job's result when it completes; rejects when it ends dead or cancelled. */
  waitFor(id: string, opts: { timeoutMs?: number } = {}): Promise<R> {
    this.connector.assertOpen();
    assertJobId(id);
    return waitFor(this as Queue<unknown, R>, id, opts.timeoutMs);
  }

  // ── sweeps ──────────────────────────────────────────────────────────────────

  /** Releases due scheduled jobs (server clock); returns how many due members were selected. */
  async promote(batch = 100): Promise<number> {
    return (await this.run('promote', [this.keys.prefix, wholeNumber(batch, 'batch', 1)])) as number;
  }

  /** Like promote, and also tells the server's now and the next due instant (-1: none). */
  async promoteNext(batch = 100): Promise<{ count: number; now: number; nextDue: number }> {
    const [count, now, nextDue] = (await this.run('promote', [
      this.keys.prefix,
      wholeNumber(batch, 'batch', 1),
      'next',
    ])) as number[];
    return { count: count!, now: now!, nextDue: nextDue! };
  }

  /** Returns jobs whose lease expired to pending; resolves with their ids. */
  async reap(batch = 100): Promise<string[]> {
    return (await this.run('reap', [this.keys.prefix, wholeNumber(batch, 'batch', 1)])) as string[];
  }

  /** The count-thresholded stalled check: recover expired leases, dead-letter repeat stallers. */
  async sweepStalled(
    opts: { maxStalled?: number; batch?: number } = {},
  ): Promise<{ recovered: string[]; dead: string[] }> {
    const [recovered, dead] = (await this.run('sweep_stalled', [
      this.keys.prefix,
      wholeNumber(opts.maxStalled ?? 1, 'maxStalled', 0),
      wholeNumber(opts.batch ?? 100, 'batch', 1),
    ])) as string[][];
    return { recovered: recovered!, dead: dead! };
  }
}

function num(v: string | undefined): number | undefined {
  return v === undefined ? undefined : Number(v);
}

/** Decodes a job row (HGETALL) into its view. */
export function jobView<D, R>(id: string, row: Record<string, string>): JobView<D, R> {
  const view: JobView<D, R> = {
    id,
    state: row.state as JobState,
    data: parseMaybe(row.payload) as D,
    attempts: Number(row.attempts ?? 0),
    maxAttempts: Number(row.max ?? 1),
    stalled: Number(row.stalled ?? 0),
    cancelRequested: row.cancel === '1',
    createdAt: Number(row.created ?? 0),
  };
  if (row.name) view.name = row.name;
  if (row.group) view.group = row.group;
  if (row.prio) view.priority = Number(row.prio);
  if (row.backoff) view.backoff = JSON.parse(row.backoff) as BackoffPolicy;
  if (row.result !== undefined) view.result = parseMaybe(row.result) as R;
  if (row.error !== undefined)
    view.error = row.stack ? { message: row.error, stack: row.stack } : { message: row.error };
  if (row.progress !== undefined) view.progress = parseMaybe(row.progress);
  const runAt = num(row.runat);
  if (runAt !== undefined) view.runAt = runAt;
  const started = num(row.started);
  if (started !== undefined) view.startedAt = started;
  const finished = num(row.finished);
  if (finished !== undefined) view.finishedAt = finished;
  return view;
}
