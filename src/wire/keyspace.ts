// The key taxonomy: every key of a queue lives under `emq:{<queue>}:`. The braces are the
// Redis Cluster hash tag, so one queue's keys share a slot (scripts may touch them all) and
// many queues spread over a cluster's shards.
import { assertName } from '../core/check.js';
import type { JobState } from '../core/types.js';

/**
 * The protocol version stamped into a new queue's `emq:{<queue>}:meta` (field `version`) unless
 * connect's `protocolVersion` says otherwise: 2, because the previous release already speaks
 * 1 and 2, so it can share every queue this one creates (SPEC 22.4). A fleet that still holds a
 * release speaking 1 only passes `protocolVersion: 1` until it has rolled.
 */
export const PROTOCOL_VERSION = '2';

/** The protocol versions this runtime speaks (hello's lowest and highest; SPEC 22.4). */
export const PROTOCOL_VERSIONS: readonly number[] = [1, 2];

/** The registry of queue names (a set outside every queue's hash tag), so tools list queues without SCAN. */
export const QUEUES_KEY = 'emq:queues';

/** The key names a script's `-- KEYS:` line may use (SPEC 4, "KEYS and derived keys"). */
export const SCRIPT_KEYS = [
  'job',
  'schedule',
  'pending',
  'active',
  'completed',
  'dead',
  'cancelled',
  'events',
  'wake',
  'meta',
  'ring',
  'repeat',
  'schedulers',
  'consumers',
  'notices',
] as const;
export type ScriptKey = (typeof SCRIPT_KEYS)[number];

/**
 * Every fixed key of a queue (SPEC 4), `job` being the row of the job a call is about. Keys
 * that depend on data (a lane, a row, a record, a minute) have a method of their own below.
 */
export type KeyName =
  | ScriptKey
  | 'waiting_children'
  | 'lanes'
  | 'lanes:running'
  | 'lanes:concurrency'
  | 'lanes:paused'
  | 'lanes:rate'
  | 'lanes:limited'
  | 'limiter'
  | 'consumers:info'
  | 'ids:ended';

export class Keyspace {
  /** `emq:{<queue>}:`, the root every key of this queue starts with. */
  readonly prefix: string;

  constructor(readonly queue: string) {
    assertName('queue', queue);
    this.prefix = `emq:{${queue}}:`;
  }

  key(name: KeyName, jobId?: string): string {
    if (name === 'job') {
      if (jobId === undefined) throw new Error('the job key needs a job id');
      return this.job(jobId);
    }
    return this.prefix + name;
  }

  /** The sorted set of a state's jobs (`scheduled` jobs wait in `schedule`; lanes hold more pending). */
  stateSet(state: JobState): string {
    return this.prefix + (state === 'scheduled' ? 'schedule' : state);
  }

  job(id: string): string {
    return `${this.prefix}job:${id}`;
  }

  lane(group: string): string {
    return `${this.prefix}g:${group}:pending`;
  }

  /** The job's log lines (ctx.log), deleted with its row. */
  logs(id: string): string {
    return `${this.job(id)}:logs`;
  }

  /** A flow parent's children's results (child id -> encoded result). */
  results(id: string): string {
    return `${this.job(id)}:results`;
  }

  /** A flow parent's children that failed under onChildFailure 'ignore' (child id -> error). */
  failures(id: string): string {
    return `${this.job(id)}:failures`;
  }

  /** A flow parent's children, in admission order (a child in another queue as '<its prefix><its id>'). */
  deps(id: string): string {
    return `${this.job(id)}:deps`;
  }

  /** The children a flow parent has counted (completed, or ended otherwise). */
  processed(id: string): string {
    return `${this.job(id)}:processed`;
  }

  /** The id of the job kept for a dedupe key (SPEC 13). */
  dedupe(key: string): string {
    return `${this.prefix}dedupe:${key}`;
  }

  /** One epoch minute's completed and failed counts (`floor(now / 60000)`). */
  stats(minute: number): string {
    return `${this.prefix}stats:${minute}`;
  }

  /** A job's producer trace context (telemetry/tracing.ts). */
  trace(id: string): string {
    return `${this.prefix}trace:${id}`;
  }

  /** A repeat registration's record (period, template, missed-run policy). */
  repeat(name: string): string {
    return `${this.prefix}repeat:${name}`;
  }

  /** A job scheduler's record (repeat options, template, current occurrence). */
  scheduler(id: string): string {
    return `${this.prefix}scheduler:${id}`;
  }
}

/** A job named by its queue's prefix and its id ('emq:{<queue>}:<id>', a flow's ref across queues). */
export function remoteParent(ref: string): { queue: string; id: string } | undefined {
  const at = ref.indexOf('}:');
  if (!ref.startsWith('emq:{') || at === -1) return undefined;
  return { queue: ref.slice(5, at), id: ref.slice(at + 2) };
}
