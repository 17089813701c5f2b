// The key taxonomy: every key of a queue lives under `emq:{<queue>}:`. The braces are the
// Redis Cluster hash tag, so one queue's keys share a slot (scripts may touch them all) and
// many queues spread over a cluster's shards.
import { EchoMQError } from '../core/errors.js';

/** The protocol version stamped into `emq:{<queue>}:meta` (field `version`). */
export const PROTOCOL_VERSION = '1';

/** Key names a script's contract may list; `job` is the row of the job the call is about. */
export type KeyName =
  | 'job'
  | 'schedule'
  | 'pending'
  | 'active'
  | 'completed'
  | 'dead'
  | 'cancelled'
  | 'events'
  | 'wake'
  | 'meta'
  | 'ring'
  | (string & {});

const MAX_NAME = 200;
// Braces would break the hash tag; whitespace and control characters make keys unreadable.
const BAD_NAME = /[{}\s\p{Cc}]/u;

/** Refuses a queue or group name that would break the key layout. */
export function assertName(kind: 'queue' | 'group', name: unknown): asserts name is string {
  if (typeof name !== 'string' || name.length === 0 || name.length > MAX_NAME || BAD_NAME.test(name)) {
    throw new EchoMQError(
      'EMQINPUT',
      `${kind} name must be 1-${MAX_NAME} characters without braces, spaces or control characters, got ${typeof name === 'string' ? JSON.stringify(name) : typeof name}`,
    );
  }
}

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

  job(id: string): string {
    return `${this.prefix}job:${id}`;
  }

  lane(group: string): string {
    return `${this.prefix}g:${group}:pending`;
  }
}
