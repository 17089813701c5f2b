// The verbs about a queue as a whole rather than one job: flow control (pause, resume), its
// settings, deleting in bulk (clean, drain, obliterate) and the sweeps a consumer's beat also
// runs (promote, reap, the stalled check). Queue extends this class, so they are Queue's methods;
// the job verbs (admit, look up, change, end, process) are in queue.ts. Each is one room
// function or one protocol script over the queue's wire.

import { knownKeys, wholeNumber } from '../core/check.js';
import { EchoMQError, optionsObject } from '../core/errors.js';
import type { CleanOptions, MigrateOptions, MigrateResult, QueueSettings } from '../core/types.js';
import { promoteJob } from '../jobs/control.js';
import { configure } from '../upkeep/settings.js';
import { clean, type DrainOptions, drain, type ObliterateOptions, obliterate } from '../upkeep/sweep.js';
import { PROTOCOL_VERSIONS } from '../wire/keyspace.js';
import type { QueueWire } from '../wire/queue-wire.js';
import * as reads from '../wire/reads.js';
import * as verbs from '../wire/verbs/index.js';

const MIGRATE_OPTIONS: ReadonlySet<string> = new Set(['to', 'windowMs']);

export class QueueUpkeep {
  constructor(
    /** @internal The queue as the wire sees it; the runtime rooms (consumer, events, lanes...) take this. */
    readonly wire: QueueWire,
  ) {}

  // ── flow control and settings ───────────────────────────────────────────────

  /** Stops claiming across all consumers (enqueue still works; running jobs finish). */
  async pause(): Promise<boolean> {
    return verbs.pause(this.wire);
  }

  /** Lets consumers claim again, and wakes the parked ones. */
  async resume(): Promise<boolean> {
    return verbs.resume(this.wire);
  }

  async isPaused(): Promise<boolean> {
    this.wire.connector.assertOpen();
    return reads.isPaused(this.wire);
  }

  /** Changes queue-wide settings (rate limit, retention, events cap, concurrency); omitted ones stay. */
  async configure(options: QueueSettings): Promise<void> {
    return configure(this.wire, options);
  }

  // ── the protocol version ────────────────────────────────────────────────────

  /** The protocol version the queue's keys are written in (meta `version`; SPEC 22). */
  async protocolVersion(): Promise<number> {
    this.wire.connector.assertOpen();
    await this.wire.greet();
    return Number((await reads.metaField(this.wire, 'version')) ?? 1);
  }

  /**
   * Steps the queue's protocol version up to `to` (default: the highest this runtime speaks), one
   * version at a time, while its fleet runs (docs/reference/upgrading.md). Each step is taken only
   * when every consumer that beat within `windowMs` (default 60000) or three of its own beats
   * speaks the next version: else EMQFLEET names the first that does not, and nothing changes.
   * Resolves with the version before and after, and the alive consumers checked by the last step.
   */
  async migrate(options: MigrateOptions = {}): Promise<MigrateResult> {
    const opts = knownKeys(optionsObject(options, 'migrate options'), MIGRATE_OPTIONS, 'migrate option');
    const highest = PROTOCOL_VERSIONS.at(-1)!;
    const to = wholeNumber(opts.to ?? highest, 'to', 1, highest);
    const windowMs = wholeNumber(opts.windowMs ?? 60_000, 'windowMs', 0);
    const from = await this.protocolVersion();
    if (to < from) {
      throw new EchoMQError(
        'EMQINPUT',
        `queue ${this.wire.name} is at protocol ${from}: a step down to ${to} is not made in place (jobs written under ${from} may rely on its rules); roll back to a release that speaks ${from}`,
      );
    }
    let version = from;
    let consumers = 0;
    while (version < to) {
      const step = await verbs.migrate(this.wire, version, windowMs);
      version = step.version;
      consumers = step.alive;
    }
    this.wire.setVersion(version);
    return { from, version, consumers };
  }

  // ── deleting jobs in bulk ───────────────────────────────────────────────────

  /**
   * Deletes ended jobs of one state (rows and ids), oldest first: those that ended at least
   * `olderThanMs` ago (server clock; default 0 = all), at most `limit` (default 1000) per call.
   * Resolves with how many were deleted; emits `cleaned` with the state and count.
   */
  async clean(opts: CleanOptions): Promise<number> {
    return clean(this.wire, opts);
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
    return verbs.promote(this.wire, wholeNumber(batch, 'batch', 1));
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
    const n = wholeNumber(batch, 'batch', 1);
    const elapsed = elapsedMs === undefined ? undefined : wholeNumber(Math.ceil(elapsedMs), 'elapsedMs', 0);
    return verbs.promoteNext(this.wire, n, elapsed);
  }

  /**
   * Returns jobs whose lease expired to pending; resolves with their ids. `expectedMs`: the
   * longest gap the caller expects between recovery passes (default 1000): a longer one is a
   * server pause or clock step, and leases still live before it are not recovered for it.
   */
  async reap(batch = 100, expectedMs?: number): Promise<string[]> {
    const n = wholeNumber(batch, 'batch', 1);
    return verbs.reap(
      this.wire,
      n,
      expectedMs === undefined ? undefined : wholeNumber(expectedMs, 'expectedMs', 0),
    );
  }

  /** The count-thresholded stalled check: recover expired leases, dead-letter repeat stallers. */
  async sweepStalled(
    options: { maxStalled?: number; batch?: number; expectedMs?: number } = {},
  ): Promise<{ recovered: string[]; dead: string[] }> {
    const opts = optionsObject(options, 'sweepStalled options');
    const maxStalled = wholeNumber(opts.maxStalled ?? 1, 'maxStalled', 0);
    const batch = wholeNumber(opts.batch ?? 100, 'batch', 1);
    const expected =
      opts.expectedMs === undefined ? undefined : wholeNumber(opts.expectedMs, 'expectedMs', 0);
    return verbs.sweepStalled(this.wire, maxStalled, batch, expected);
  }
}
