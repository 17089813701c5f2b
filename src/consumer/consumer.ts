// The consumer: runs a handler over a queue's jobs under leases. Its beat, in order:
//   1. control  — stop when closing; a paused queue simply claims nothing
//   2. ttl      — close itself once ttlMs has elapsed
//   3. recover  — reap expired leases (or the count-thresholded stalled sweep), once a beat
//   4. promote  — release due scheduled jobs; learn the next due instant for a timer
//   5. drain    — claim up to the free slots in one call
//   6. park     — block on the wake stream until work or a schedule change arrives, the next due
//                 instant, or the beat (also while every slot is busy)
// Finished jobs are acknowledged in batches (every completion of one tick in one `complete`
// call) and the same call claims the next jobs, so a busy consumer needs about one round trip
// per batch of jobs and never a timer per job. Leases of all running jobs are extended by one
// `extend_lock` call per period. A wire error on any leg skips the rest of the beat and backs
// off exponentially (degraded); a healthy beat resets it.
//
// The parts, one file each: options.ts (ConsumeOptions checked into settings), running.ts (a
// claimed job as its handler sees it), leases.ts (the held jobs, extension, ctx calls), slots.ts
// (the slot accounting, the claim that fills them, starting what it brought, timeouts), acks.ts
// (outcomes: batched completions, failures, refill), legs.ts (recover, promote, recurrence),
// park.ts (waiting on a timer or the wake stream). This file keeps the beat, pausing, closing
// and the public surface.

import { randomBytes } from 'node:crypto';
import { EventEmitter } from 'node:events';
import { hostname } from 'node:os';
import { EchoMQError } from '../core/errors.js';
import type { ConsumerEvents, Handler } from '../core/types.js';
import type { QueueWire } from '../wire/queue-wire.js';
import { Acks } from './acks.js';
import { Leases } from './leases.js';
import { Legs } from './legs.js';
import { type ConsumeOptions, consumeSettings, type ShownSettings, shownSettings } from './options.js';
import { Parking } from './park.js';
import type { Running } from './running.js';
import { Slots } from './slots.js';

export type { ConsumerEvents } from '../core/types.js';
export type { ConsumeOptions, Recovery } from './options.js';
export { UnrecoverableError } from './running.js';

const DEGRADED_CAP_MS = 5000;

/**
 * Its settings (concurrency, leaseMs, extendMs, beatMs, recovery, durability, maxStalled,
 * promoteBatch, ttlMs, maxLogLines) are read-only properties of the consumer, declared once in
 * options.ts (ShownSettings) and assigned in the constructor. D and R are the class's own: a
 * merged declaration repeats them.
 */
// biome-ignore lint/correctness/noUnusedVariables: a merged declaration takes the class's type parameters.
export interface Consumer<D = unknown, R = unknown> extends ShownSettings {}

// biome-ignore lint/suspicious/noUnsafeDeclarationMerging: the constructor assigns every ShownSettings field (shownSettings).
export class Consumer<D = unknown, R = unknown> extends EventEmitter<ConsumerEvents> {
  /** This consumer's id in heartbeats (host:pid:random). */
  readonly id = `${hostname()}:${process.pid}:${randomBytes(4).toString('hex')}`;
  private readonly leases: Leases<D>;
  private readonly acks: Acks<D>;
  private readonly parking: Parking;
  private readonly legs: Legs;
  private readonly slots: Slots<D>;

  /** Ends this consumer's registration on its connection (which closes it before itself). */
  private detach: (() => void) | undefined;
  private closing = false;
  private closed: Promise<void> | undefined;
  private readonly startedAt = performance.now();
  private degradedStreak = 0;
  private loopDone: Promise<void> | undefined;
  private readonly idleWaiters: (() => void)[] = [];
  /** recheck() calls so far, and how many had been made when the last full beat began. */
  private rechecks = 0;
  private beatRechecks = 0;
  private unwatchClock: (() => void) | undefined;
  private readonly settledWaiters: (() => void)[] = [];
  /** consumer.pause(): this consumer claims nothing until resume() (the queue is not paused). */
  private pausedHere = false;

  constructor(
    /** The queue this consumer serves (its name is what tools show). */
    readonly queue: QueueWire,
    private readonly handler: Handler<D, R>,
    options?: ConsumeOptions,
    /** Set by consumeBatch: completions per complete call (one call per batch). */
    internal?: { ackChunk: number },
  ) {
    super();
    if (typeof handler !== 'function') {
      throw new EchoMQError(
        'EMQINPUT',
        `consume() takes a handler function (job, ctx) => result, got ${handler === null ? 'null' : typeof handler}`,
      );
    }
    const checked = consumeSettings(options, (value, where) => queue.durabilityFor(value, where));
    const s = internal ? { ...checked, ackChunk: internal.ackChunk } : checked;
    Object.assign(this, shownSettings(s));
    this.leases = new Leases<D>(queue, s, this, (job) => {
      this.slots.released(job);
      this.settle();
    });
    this.parking = new Parking(queue, this, () => this.closing);
    this.legs = new Legs(
      queue,
      s,
      this.id,
      () => this.leases.size,
      () => this.slots.open(),
      (err) => this.emit('error', err),
    );
    this.slots = new Slots<D>(queue, s, this.id, this.leases, this.parking, this.legs, this, {
      claiming: () => !this.closing && !this.pausedHere,
      run: (job) => this.acks.run(job, this.handler),
      fail: (job, cause) => this.acks.fail(job, cause),
      settle: () => this.settle(),
    });
    this.acks = new Acks<D>(queue, s, this.leases, this.slots, this, this.id);
    // An 'error' with no listener would crash the process; a consumer reports and carries on.
    this.on('error', () => {});
  }

  /** Starts the beat. Called by queue.consume(). */
  start(): this {
    this.detach = this.queue.connector.attach(this);
    this.parking.open();
    // A test moving a memory engine's clock makes anything due: act on it as on a due instant.
    this.unwatchClock = this.queue.connector.memory?.clock.watch(() => this.recheck());
    this.loopDone = this.loop();
    return this;
  }

  /** Jobs running now. */
  get running(): number {
    return this.leases.size;
  }

  // ── the beat ────────────────────────────────────────────────────────────────

  private async loop(): Promise<void> {
    while (!this.closing) {
      const rechecks = this.rechecks;
      if (this.ttlMs !== undefined && performance.now() - this.startedAt >= this.ttlMs) {
        this.close().catch((err: unknown) => this.emit('error', err));
        break;
      }
      try {
        await this.legs.recover();
        // When a promote is due, the claim goes out with it (pipelined, one round trip): the
        // server runs it right after promote, so released jobs start without another trip.
        const promoted = this.legs.promote();
        const claimed = this.legs.promoting ? this.slots.drain(true) : undefined;
        await Promise.all([promoted, claimed]); // both awaited: neither rejection goes unhandled
        await this.legs.recurring();
        await this.slots.drain();
        if (this.degradedStreak > 0) {
          this.degradedStreak = 0;
          this.emit('recovered');
        }
        this.beatRechecks = rechecks;
      } catch (err) {
        if (this.closing) break;
        if (this.queue.connector.isClosed) {
          void this.close(); // its connection was closed under it: nothing can run any more
          break;
        }
        this.degradedStreak += 1;
        const wait = Math.min(50 * 2 ** this.degradedStreak, DEGRADED_CAP_MS);
        this.emit('degraded', err, wait);
        await this.parking.sleep(wait);
        continue;
      }
      this.settle();
      await this.park();
    }
  }

  /**
   * Runs every leg of the beat now, as if each of its instants had come: recovery (expired
   * leases), promote, recurrence and a claim. A moved memory-engine clock calls it, and so do
   * the testing helpers (echomq/testing), which then await idle(): that waits for a beat begun
   * after this call.
   */
  recheck(): void {
    if (this.closing) return;
    this.rechecks += 1;
    this.legs.recheck();
    this.slots.recheck();
    this.parking.wakeNow();
  }

  /** Waits for whichever comes first: new work (wake stream), the next due job, the beat, close. */
  private async park(): Promise<void> {
    if (this.closing) return;
    // A claim that was not short while slots are free stopped early (it dropped its bound of
    // ghosts, or slots freed meanwhile): claim again at once rather than wait for a beat.
    const { short, free } = this.slots;
    if (!short && free > 0 && !this.pausedHere) return;
    if (this.beatRechecks !== this.rechecks) return; // a recheck came during the beat: beat again
    const untilTtl = this.ttlMs === undefined ? Number.POSITIVE_INFINITY : this.startedAt + this.ttlMs;
    const untilDue = Math.min(this.slots.dueAt, untilTtl) - performance.now();
    const wait = Math.max(0, Math.min(this.legs.recoverAt - performance.now(), untilDue, this.beatMs));
    if (wait <= 0) return;
    // Paused here, new work is no reason to wake: it sleeps until resume() or the beat.
    const woke = await this.parking.park(wait, untilDue, short && free > 0 && !this.pausedHere);
    if (!woke) return;
    this.slots.open();
    this.legs.woke(woke);
  }

  // ── pausing this consumer ───────────────────────────────────────────────────

  /**
   * Stops this consumer claiming (the queue is not paused: other consumers go on). Running
   * jobs finish and are acknowledged; resolves once none is left. resume() claims again.
   */
  pause(): Promise<void> {
    this.pausedHere = true;
    return new Promise((resolve) => {
      this.settledWaiters.push(resolve);
      this.settle();
    });
  }

  /** Claims again after pause(), at once. */
  resume(): void {
    if (!this.pausedHere) return;
    this.pausedHere = false;
    this.slots.open();
    this.parking.wakeNow();
  }

  /** True between pause() and resume(). */
  get paused(): boolean {
    return this.pausedHere;
  }

  /** @internal ctx.checkpoint() of a held job (the job's JobControl; kept for callers of old). */
  checkpoint(job: Running<D>): Promise<void> {
    return this.leases.checkpoint(job);
  }

  /** @internal ctx.log() of a held job. */
  log(job: Running<D>, line: string): void {
    this.leases.log(job, line);
  }

  /** @internal ctx.progress() of a held job. */
  progress(job: Running<D>, value: number | object): Promise<void> {
    return this.leases.progress(job, value);
  }

  // ── observing and closing ───────────────────────────────────────────────────

  private settle(): void {
    if (this.leases.size === 0 && this.acks.size === 0 && this.slots.reserved === 0) {
      // This runs for every job that leaves (at concurrency 1 every one empties the consumer):
      // no array is spliced off when nobody waits.
      if (this.settledWaiters.length > 0) for (const w of this.settledWaiters.splice(0)) w();
      if (this.idleWaiters.length === 0) return;
      // Work held back by a rate window is not idleness: the consumer claims it when it reopens.
      const rechecked = this.beatRechecks === this.rechecks;
      if ((this.slots.short && !this.slots.limited && rechecked) || this.closing || this.pausedHere)
        for (const w of this.idleWaiters.splice(0)) w();
    }
  }

  /**
   * Resolves when nothing is running and the last claim found nothing claimable, and no rate
   * limit holds jobs back (a paused queue or lane counts as idle); after recheck(), once a beat
   * begun after it has run.
   */
  idle(): Promise<void> {
    return new Promise((resolve) => {
      this.idleWaiters.push(resolve);
      this.settle();
    });
  }

  /**
   * Stops claiming, waits up to `timeoutMs` (default 10 s) for running handlers, then hands
   * every unfinished job back to pending at once (no attempt spent, no lease to wait out) and
   * aborts its signal. Resolves when the consumer's own connection is closed.
   */
  close(opts: { timeoutMs?: number } = {}): Promise<void> {
    this.closed ??= this.shutdown(opts.timeoutMs ?? 10_000);
    return this.closed;
  }

  private async shutdown(timeoutMs: number): Promise<void> {
    this.closing = true;
    this.unwatchClock?.();
    this.parking.close();
    await this.loopDone;
    if (this.leases.size > 0 || this.acks.size > 0 || this.slots.reserved > 0) {
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([
        new Promise<void>((resolve) => {
          this.settledWaiters.push(resolve);
          this.settle();
        }),
        new Promise<void>((resolve) => {
          timer = setTimeout(resolve, timeoutMs);
        }),
      ]);
      clearTimeout(timer);
    }
    const unfinished = this.leases.unfinished((j) => this.acks.has(j));
    if (unfinished.length > 0 && !this.queue.connector.isClosed) await this.leases.handBack(unfinished);
    this.leases.stopExtending();
    this.slots.stop();
    await this.leave();
    this.detach?.();
    for (const w of this.idleWaiters.splice(0)) w();
    this.emit('closed');
  }

  /** The last heartbeat: tools stop listing this consumer at once (not after it goes stale). */
  private async leave(): Promise<void> {
    if (this.queue.connector.isClosed) return;
    try {
      await this.legs.leave();
    } catch (err) {
      this.emit('error', err); // it is shown as dead once its beats are stale
    }
  }
}
