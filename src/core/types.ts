// The shared vocabulary: the types the floors above (the wire, the runtime rooms, the facade,
// the read model, the CLI and dashboard) all speak, kept in one leaf so that none of them has
// to import the room that happens to produce a value to name its type.
import type { BackoffPolicy } from './backoff.js';

/** The states a job row can be in; the same words in Lua, TypeScript, the CLI and dashboard. */
export type JobState =
  | 'scheduled'
  | 'pending'
  | 'active'
  | 'completed'
  | 'dead'
  | 'cancelled'
  | 'waiting_children';
export const JOB_STATES: readonly JobState[] = [
  'scheduled',
  'pending',
  'active',
  'completed',
  'dead',
  'cancelled',
  'waiting_children',
];

/** A job's own retention: true (delete at once), a count to keep, or { count, ageMs }. */
export type Retain = boolean | number | { count?: number; ageMs?: number };

export interface Durability {
  /** How many replicas must have the write before the call resolves (>= 1). */
  replicas: number;
  /** How long to wait for them, in ms (>= 1); then the call fails with EMQDURABILITY. Default 1000. */
  timeoutMs?: number;
}

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
  /** Deduplicate by a key of your own (apart from the id); see DedupeOptions. */
  dedupe?: DedupeOptions;
  /**
   * This job's own retention once completed, applied by the call that completes it: `true`
   * deletes it at once; a count trims `completed` to that many; `{ count, ageMs }` either bound.
   * The queue's retention still applies too. Default: the queue's alone.
   */
  removeOnComplete?: Retain;
  /** As removeOnComplete, once the job is dead (attempts used up, unrecoverable). */
  removeOnFail?: Retain;
  /** A few short labels (at most 10, each 1-64 characters without spaces or commas), for filtering. */
  tags?: readonly string[];
  /** Claimed before the jobs of its priority that wait already (last in, first out). enqueue only. */
  lifo?: boolean;
  /**
   * Execution timeout per attempt, in ms (>= 1): at the timeout the handler's signal aborts and
   * the attempt fails with reason `timeout` (retried per its policy); a result the handler
   * returns afterwards is refused by the lease token. Default: the consumer's `timeoutMs`.
   */
  timeoutMs?: number;
  /**
   * Resolve only once this many replicas have the job (WAIT), else fail with EMQDURABILITY;
   * false: not for this call. Default: connect's `durability`. Not for jobs inside flows.
   */
  durability?: Durability | false;
}

/**
 * Deduplication by `key`: while the key's lock holds, another job with the key is not added.
 * The lock holds for `ttlMs` from the kept job's admission, or, without `ttlMs`, until the kept
 * job ends (completed, dead, cancelled or removed).
 */
export interface DedupeOptions {
  /** The deduplication key (1-200 characters), kept as `dedupe:<key>` under the queue. */
  key: string;
  /** How long the lock holds, in ms; default: until the kept job ends. */
  ttlMs?: number;
  /**
   * 'throttle': the first job is kept and later ones are dropped. 'debounce': later ones
   * replace the kept job's data and move its run time to theirs (enqueueIn/enqueueAt), until
   * it starts; a job enqueued after the kept one started is added as a new job.
   */
  mode: 'throttle' | 'debounce';
}

export interface QueueOptions {
  /** Attempts for jobs enqueued without `attempts`. Default 3. */
  defaultAttempts?: number | undefined;
  /** The largest encoded payload accepted, in bytes. Default 512 KiB. */
  maxPayloadBytes?: number | undefined;
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
  /**
   * The idempotency window in ms: an ended job's id stays known this long after it ended, also
   * once retention or clean deleted its row, so enqueueing that id again is `duplicate`.
   * 0 keeps no ids. Default 86,400,000 (a day).
   */
  idempotencyMs?: number;
  /**
   * Queue-wide concurrency: at most this many jobs of the queue run at once across all
   * consumers, flat jobs and lanes together (enforced by the claim script; jobs claimed before
   * the cap was set are not counted). A whole number >= 1; null removes the cap.
   */
  concurrency?: number | null;
  /**
   * How the native module's lease timers recover this queue's expired leases (with the module
   * loaded, timers on): `reap` (the default, as a consumer's default `recovery`), `stalled`
   * (counted, dead-lettered past `maxStalled`) or `off`. Set it to what the queue's consumers
   * run; null goes back to the default. Without the module it changes nothing.
   */
  recovery?: 'reap' | 'stalled' | 'off' | null;
  /** With `recovery: 'stalled'`: recoveries allowed before a job is dead-lettered (>= 0; default 1); null: the default. */
  maxStalled?: number | null;
}

export interface CleanOptions {
  /** The ended state to delete jobs of. */
  state: 'completed' | 'dead' | 'cancelled';
  /** Only jobs that ended at least this many ms ago (server clock). Default 0: all of them. */
  olderThanMs?: number;
  /** At most this many per call (1-100,000). Default 1000. */
  limit?: number;
}

/** 'duplicate': the id exists (nothing written); 'deduplicated': the dedupe key's job was kept. */
export type EnqueueStatus = 'enqueued' | 'duplicate' | 'deduplicated';
export type ScheduleStatus = 'scheduled' | 'duplicate' | 'deduplicated';

export interface JobView<D = unknown, R = unknown> {
  id: string;
  name?: string;
  state: JobState;
  data: D;
  attempts: number;
  maxAttempts: number;
  result?: R;
  error?: { message: string; stack?: string };
  /** The error of the run before the job was retried (retry, retryAll). */
  lastError?: { message: string; stack?: string };
  progress?: unknown;
  /** The job's tags (EnqueueOptions.tags). */
  tags?: string[];
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
  /** The id of the consumer that made the latest claim, when that claim recorded one (Consumer.id). */
  consumer?: string;
}

// ── handlers ──

/** The job as a handler sees it. */
export interface Job<D = unknown> {
  readonly id: string;
  readonly name: string | undefined;
  readonly data: D;
  /** This attempt's number, from 1. */
  readonly attempts: number;
  readonly maxAttempts: number;
  /** performance.now() when this consumer started the job (metrics measure processing from it). */
  readonly startedAt?: number;
}

export interface JobContext {
  /** Aborted when the job is cancelled, its lease is lost, or the consumer closes before it ends. */
  readonly signal: AbortSignal;
  /** Extends the lease now; throws when the job was cancelled or the lease was lost. */
  checkpoint(): Promise<void>;
  /** Stores progress (a number or an object) on the row and emits `progress`. */
  progress(value: number | object): Promise<void>;
  /** A flow parent's completed children's results, child id -> result (null when none). */
  childrenResults(): Promise<Record<string, unknown>>;
  /**
   * A flow parent's children that ended without completing while it ignores failures
   * (onChildFailure 'ignore'): child id -> '<dead|cancelled|removed>: <error>'.
   */
  childrenFailures(): Promise<Record<string, string>>;
  /** Replaces this job's stored data (fenced by the lease; `job.data` stays what it was). */
  update(data: unknown): Promise<void>;
  /**
   * Puts this job back to run again in `delayMs` (server clock) without spending an attempt, and
   * ends the handler (it throws a SnoozeError): a step job between its steps, with `update` for
   * the state the next step reads. Refused, like a late completion, if the lease was lost.
   */
  snooze(delayMs: number): never;
  /**
   * Back-pressure (an HTTP 429): returns this job to the queue without spending an attempt and
   * holds claiming for `retryAfterMs` across all consumers (the queue's, or the job's lane's only
   * for a grouped job), on the server clock. Throws a RateLimitError, ending the handler.
   */
  rateLimit(retryAfterMs: number): never;
  /**
   * Appends a line to the job's log (queue.logs(id)). Buffered: the lines travel with the job's
   * acknowledgement or its next lease checkpoint, never one round trip per line.
   */
  log(line: string): void;
}

export type Handler<D, R> = (job: Job<D>, ctx: JobContext) => Promise<R> | R;

/** What a consumer emits (consumer.on(...)). */
export interface ConsumerEvents {
  completed: [job: Job, result: unknown];
  failed: [job: Job, error: Error, outcome: 'retry' | 'dead' | 'cancelled'];
  /** The lease was taken over (expired and recovered elsewhere): the result was not stored. */
  lost: [job: Job];
  /** The handler snoozed its job (SnoozeError, ctx.snooze): it runs again at `runAtMs` (server ms). */
  snoozed: [job: Job, runAtMs: number];
  /** The handler met back-pressure (RateLimitError): claiming is held until `untilMs` (server ms). */
  rateLimited: [job: Job, untilMs: number];
  error: [error: unknown];
  degraded: [error: unknown, retryInMs: number];
  recovered: [];
  closed: [];
}

// ── the protocol version ──

export interface MigrateOptions {
  /** The version to step up to; default the highest this runtime speaks (2). */
  to?: number | undefined;
  /**
   * A consumer counts as alive, and must speak the next version, when it beat within this many
   * ms (or within three of its own beats, if longer); default 60000.
   */
  windowMs?: number | undefined;
}

export interface MigrateResult {
  /** The version before. */
  from: number;
  /** The version now stored. */
  version: number;
  /** The alive consumers the last step checked (each speaks `version`); 0 when no step was made. */
  consumers: number;
}

// ── events ──

/** The lifecycle vocabulary (BullMQ's, and `updated`), as written by the protocol scripts. */
export type EventName =
  | 'added'
  | 'waiting'
  | 'active'
  | 'progress'
  | 'completed'
  | 'failed'
  | 'delayed'
  | 'stalled'
  | 'removed'
  | 'drained'
  | 'paused'
  | 'resumed'
  | 'duplicated'
  | 'deduplicated'
  | 'retries_exhausted'
  | 'waiting_children'
  | 'cleaned'
  | 'updated';

export interface QueueEvent {
  /** The event name. */
  event: EventName;
  /** The job id ('' for queue-wide events such as drained). */
  id: string;
  /** The stream entry id, usable as `from` to resume after it. */
  streamId: string;
  /** The entry's other fields (attempt, reason, at, name, progress …), as strings. */
  fields: Record<string, string>;
}

// ── lanes and rate limits ──

export interface RateLimit {
  /** At most this many claims … */
  max: number;
  /** … in any window of this many ms (a sliding window: no burst at window edges). */
  perMs: number;
}

export interface LaneInfo {
  group: string;
  pending: number;
  running: number;
  paused: boolean;
  concurrency: number;
  rateLimit: RateLimit | null;
}
