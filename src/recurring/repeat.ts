// Repeat: fixed cadences (the seeds' @register). A registration is a member of `P repeat` scored
// by its upcoming slot plus a `P repeat:<name>` record (period, payload template, missed-run
// policy), not a loop that holds state. The slot's occurrence exists already, a delayed job in the
// schedule: register makes the first, and promote, releasing one at its instant, makes the next in
// the same call (protocol/lib/recurrence.lua), all on the server clock. The pump
// (protocol/scripts/pump.lua) is the backstop for a slot nothing released. An occurrence's id is
// derived from (name, instant), so callers racing on one occurrence make it once. The consumer's
// beat runs the pump; `pump()` is here for tools and tests.
import { assertName, knownKeys, wholeNumber } from '../core/check.js';
import { encodeJson, parseMaybe } from '../core/codec.js';
import { EchoMQError, optionsObject, showValue } from '../core/errors.js';
import type { QueueWire } from '../wire/queue-wire.js';
import * as reads from '../wire/reads.js';
import * as verbs from '../wire/verbs/index.js';

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

/** A pump call's outcome (the pump verb's reply, named where Repeat's users look for it). */
export type PumpResult = verbs.PumpResult;

const REGISTER_OPTIONS = new Set(['firstRunMs', 'catchUp', 'attempts']);

export class Repeat {
  constructor(private readonly queue: QueueWire) {}

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
    assertName('repeat name', name);
    wholeNumber(everyMs, 'everyMs', 1);
    knownKeys(opts, REGISTER_OPTIONS, 'register option');
    const first = opts.firstRunMs === undefined ? 'next' : wholeNumber(opts.firstRunMs, 'firstRunMs', 0);
    const catchUp = opts.catchUp ?? 'once';
    if (catchUp !== 'once' && catchUp !== 'all') {
      throw new EchoMQError('EMQINPUT', `catchUp must be 'once' or 'all', got ${showValue(opts.catchUp)}`);
    }
    const max = opts.attempts === undefined ? '' : wholeNumber(opts.attempts, 'attempts', 1, 1_000_000);
    const payload = encodeJson(template, 'repeat template', this.queue.limits.maxPayloadBytes);
    return verbs.register(this.queue, name, everyMs, payload, first, catchUp, max);
  }

  /** Removes a cadence; occurrences minted already stay ordinary jobs. True when it existed. */
  async unregister(name: string): Promise<boolean> {
    assertName('repeat name', name);
    return verbs.unregister(this.queue, name);
  }

  /** Every registered cadence, soonest next run first. */
  async list(): Promise<RepeatView[]> {
    this.queue.connector.assertOpen();
    const out: RepeatView[] = [];
    for (const { id: name, score, fields: row } of await reads.repeatRecords(this.queue)) {
      if (row.every_ms === undefined) continue; // unregistered between the two reads
      const view: RepeatView = {
        name,
        everyMs: Number(row.every_ms),
        template: parseMaybe(row.template),
        nextRunAt: Number(score),
        catchUp: row.catch_up === 'all' ? 'all' : 'once',
        runs: Number(row.runs ?? 0),
        createdAt: Number(row.created ?? 0),
      };
      if (row.max !== undefined) view.attempts = Number(row.max);
      if (row.last !== undefined) view.lastRunAt = Number(row.last);
      out.push(view);
    }
    return out;
  }

  /** Releases every due occurrence (at most `batch`); resolves with the ids released. */
  async pump(batch = 100): Promise<string[]> {
    return (await this.pumpNext(batch)).minted;
  }

  /** Like pump, and also tells the server's now and the next due instant (-1: none registered). */
  async pumpNext(batch = 100): Promise<PumpResult> {
    return verbs.pump(this.queue, wholeNumber(batch, 'batch', 1));
  }
}
