// Repeat: fixed cadences (the seeds' @register). A registration is a member of `P repeat` scored
// by its upcoming slot plus a `P repeat:<name>` record (period, payload template, missed-run
// policy), not a loop that holds state. The slot's occurrence exists already, a delayed job in the
// schedule: register makes the first, and promote, releasing one at its instant, makes the next in
// the same call (protocol/lib/recurrence.lua), all on the server clock. The pump
// (protocol/scripts/pump.lua) is the backstop for a slot nothing released. An occurrence's id is
// derived from (name, instant), so callers racing on one occurrence make it once. The consumer's
// beat runs the pump; `pump()` is here for tools and tests.
import { encodeJson, parseMaybe } from '../core/codec.js';
import { EchoMQError, optionsObject, showValue } from '../core/errors.js';
import type { Connector } from '../wire/connector.js';
import type { Keyspace } from '../wire/keyspace.js';
import type { ScriptName } from '../wire/scripts.js';

/** What Repeat and JobSchedulers need of a queue (Queue provides it). */
export interface RecurrenceHost {
  readonly keys: Keyspace;
  readonly connector: Connector;
  readonly maxPayloadBytes: number;
  run(name: ScriptName, argv: readonly (string | number)[], jobId?: string): Promise<unknown>;
}

/**
 * What the pump does when no pump ran for several periods, so several slots of one name are due:
 * 'once' mints one occurrence (for the first missed slot) and moves on to the first slot after
 * now; 'all' mints every missed slot, oldest first, at most the pump's batch per call.
 */
export type CatchUp = 'once' | 'all';

export interface RegisterOptions {
  /**
   * The first occurrence's instant, epoch ms judged on the Redis server's clock. Default: server
   * now + everyMs. A past instant is due at once (missed slots then follow `catchUp`).
   */
  firstRunMs?: number;
  /** The missed-run policy, stored on the record. Default 'once' (no burst). */
  catchUp?: CatchUp;
  /** Attempts each occurrence may make, retries included. Default 1: the next occurrence is the retry. */
  attempts?: number;
}

export interface RepeatView<T = unknown> {
  name: string;
  everyMs: number;
  /** The payload every occurrence is minted with. */
  template: T;
  /** The next occurrence's instant (server-clock epoch ms); slots are firstRun + k * everyMs. */
  nextRunAt: number;
  catchUp: CatchUp;
  attempts?: number;
  /** Occurrences minted so far. */
  runs: number;
  /** The instant of the last occurrence a pump handled. */
  lastRunAt?: number;
  createdAt: number;
}

/** A pump call's outcome: ids released (`minted`, the seeds' word), the server's now, and the next due instant (-1: none). */
export interface PumpResult {
  minted: string[];
  now: number;
  nextDue: number;
}

const MAX_NAME = 200;
// Braces would confuse the hash tag of the keys built from the name; whitespace and control
// characters would make keys and job ids unreadable (and are refused in job ids).
const BAD_NAME = /[{}\s\p{Cc}]/u;

/** Refuses a repeat name or scheduler id that cannot be part of a key and a job id. */
export function assertRecurrenceName(
  kind: 'repeat name' | 'scheduler id',
  name: unknown,
): asserts name is string {
  if (typeof name !== 'string' || name.length === 0 || name.length > MAX_NAME || BAD_NAME.test(name)) {
    throw new EchoMQError(
      'EMQINPUT',
      `${kind} must be 1-${MAX_NAME} characters without braces, spaces or control characters, got ` +
        `${typeof name === 'string' ? JSON.stringify(name) : typeof name}; e.g. 'nightly-report'`,
    );
  }
}

/** Crockford base32, as in minted job ids (src/ids.ts): its digits sort in ASCII order. */
const B32 = '0123456789ABCDEFGHJKMNPQRSTVWXYZ';

/**
 * The id of a recurring occurrence, as the scripts mint it: `JOB`, the instant as 10 Crockford
 * base32 characters (the time part of a minted id, so occurrences sort among minted jobs by the
 * instant they stand for), then `:r:<repeat name>` or `:s:<scheduler id>`.
 * E.g. occurrenceId('r', 'nightly', 1767225600000) is 'JOB01KDVDNA00:r:nightly'.
 */
export function occurrenceId(kind: 'r' | 's', name: string, at: number): string {
  let time = '';
  let rest = at;
  for (let i = 0; i < 10; i++) {
    time = B32[rest % 32] + time;
    rest = Math.floor(rest / 32);
  }
  return `JOB${time}:${kind}:${name}`;
}

export function wholeNumber(
  value: unknown,
  what: string,
  min: number,
  max = Number.MAX_SAFE_INTEGER,
): number {
  if (typeof value !== 'number' || !Number.isInteger(value) || value < min || value > max) {
    throw new EchoMQError(
      'EMQINPUT',
      `${what} must be a whole number from ${min} to ${max}, got ${showValue(value)}`,
    );
  }
  return value;
}

const REGISTER_OPTIONS = new Set(['firstRunMs', 'catchUp', 'attempts']);

export class Repeat {
  constructor(private readonly queue: RecurrenceHost) {}

  /**
   * Registers a cadence: every `everyMs` from the first run, a job with `template` as its data and
   * `name` as its name; this call schedules the first occurrence. Idempotent on the name: 'exists' when it is
   * registered already (nothing changes, even if the period or template differ; unregister first).
   */
  async register(
    name: string,
    everyMs: number,
    template: unknown,
    options?: RegisterOptions,
  ): Promise<'registered' | 'exists'> {
    this.queue.connector.assertOpen();
    const opts = optionsObject(options, 'register options');
    assertRecurrenceName('repeat name', name);
    wholeNumber(everyMs, 'everyMs', 1);
    for (const key of Object.keys(opts)) {
      if (!REGISTER_OPTIONS.has(key)) {
        throw new EchoMQError(
          'EMQINPUT',
          `unknown register option "${key}"; known: ${[...REGISTER_OPTIONS].join(', ')}`,
        );
      }
    }
    const first = opts.firstRunMs === undefined ? 'next' : wholeNumber(opts.firstRunMs, 'firstRunMs', 0);
    const catchUp = opts.catchUp ?? 'once';
    if (catchUp !== 'once' && catchUp !== 'all') {
      throw new EchoMQError('EMQINPUT', `catchUp must be 'once' or 'all', got ${showValue(opts.catchUp)}`);
    }
    const max = opts.attempts === undefined ? '' : wholeNumber(opts.attempts, 'attempts', 1, 1_000_000);
    const payload = encodeJson(template, 'repeat template', this.queue.maxPayloadBytes);
    const reply = await this.queue.run('register', [
      name,
      everyMs,
      payload,
      first,
      this.queue.keys.prefix,
      catchUp,
      max,
    ]);
    return reply === 1 ? 'registered' : 'exists';
  }

  /** Removes a cadence; occurrences minted already stay ordinary jobs. True when it existed. */
  async unregister(name: string): Promise<boolean> {
    assertRecurrenceName('repeat name', name);
    return (await this.queue.run('unregister', [this.queue.keys.prefix, name])) === 1;
  }

  /** Every registered cadence, soonest next run first. */
  async list(): Promise<RepeatView[]> {
    this.queue.connector.assertOpen();
    const c = this.queue.connector.client;
    const flat = await c.zrange(this.queue.keys.key('repeat'), 0, -1, 'WITHSCORES');
    if (flat.length === 0) return [];
    const pipeline = c.pipeline();
    for (let i = 0; i < flat.length; i += 2) pipeline.hgetall(`${this.queue.keys.prefix}repeat:${flat[i]}`);
    const rows = ((await pipeline.exec()) ?? []).map(([err, row]) => {
      if (err) throw err;
      return row as Record<string, string>;
    });
    const out: RepeatView[] = [];
    rows.forEach((row, j) => {
      if (row.every_ms === undefined) return; // unregistered between the two reads
      const view: RepeatView = {
        name: flat[j * 2]!,
        everyMs: Number(row.every_ms),
        template: parseMaybe(row.template),
        nextRunAt: Number(flat[j * 2 + 1]),
        catchUp: row.catch_up === 'all' ? 'all' : 'once',
        runs: Number(row.runs ?? 0),
        createdAt: Number(row.created ?? 0),
      };
      if (row.max !== undefined) view.attempts = Number(row.max);
      if (row.last !== undefined) view.lastRunAt = Number(row.last);
      out.push(view);
    });
    return out;
  }

  /** Releases every due occurrence (at most `batch`); resolves with the ids released. */
  async pump(batch = 100): Promise<string[]> {
    return (await this.pumpNext(batch)).minted;
  }

  /** Like pump, and also tells the server's now and the next due instant (-1: none registered). */
  async pumpNext(batch = 100): Promise<PumpResult> {
    const [minted, now, nextDue] = (await this.queue.run('pump', [
      this.queue.keys.prefix,
      wholeNumber(batch, 'batch', 1),
    ])) as [string[], number, number];
    return { minted, now, nextDue };
  }
}
