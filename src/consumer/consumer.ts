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
// claimed job as its handler sees it), leases.ts (the held jobs, extension, ctx calls), acks.ts
// (outcomes: batched completions, failures, refill), park.ts (waiting on a timer or the wake
// stream). This file keeps the beat, the slot accounting and the public surface.

import { randomBytes } from 'node:crypto';
import { EventEmitter } from 'node:events';
import { hostname } from 'node:os';
import { EchoMQError } from '../core/errors.js';
import type { ConsumerEvents, Handler } from '../core/types.js';
import type { Replication } from '../wire/durability.js';
import type { QueueWire } from '../wire/queue-wire.js';
import * as verbs from '../wire/verbs/index.js';
import { Acks, type Slots } from './acks.js';
import { Deadlines } from './deadlines.js';
import { Leases } from './leases.js';
import { Legs } from './legs.js';
import { type ConsumeOptions, consumeSettings, type Recovery } from './options.js';
import { Parking } from './park.js';
import { type Running, runningJobs } from './running.js';

export type { ConsumerEvents } from '../core/types.js';
export type { ConsumeOptions, Recovery } from './options.js';
export { UnrecoverableError } from './running.js';

const DEGRADED_CAP_MS = 5000;

export class Consumer<D = unknown, R = unknown> extends EventEmitter<ConsumerEvents> {
  /** This consumer's id in heartbeats (host:pid:random). */
  readonly id = `${hostname()}:${process.pid}:${randomBytes(4).toString('hex')}`;
  readonly concurrency: number;
  readonly leaseMs: number;
  readonly extendMs: number;
  readonly beatMs: number;
  readonly recovery: Recovery;
  /** The replicas every completion waits for (consume's or connect's `durability`), if any. */
  readonly durability: Replication | undefined;
  readonly maxStalled: number;
  readonly promoteBatch: number;
  readonly ttlMs: number | undefined;
  readonly maxLogLines: number;
  private readonly leases: Leases<D>;
  private readonly acks: Acks<D>;
  private readonly parking: Parking;
  private readonly legs: Legs;

  /** Ends this consumer's registration on its connection (which closes it before itself). */
  private detach: (() => void) | undefined;
  /** Slots promised to claims in flight, so two calls never over-claim. */
  private reserved = 0;
  /** The last claim came back short: nothing claimable until a wake, a due timer or the beat. */
  private short = false;
  private closing = false;
  private closed: Promise<void> | undefined;
  private readonly startedAt = performance.now();
  private degradedStreak = 0;
  private limitedUntil = Number.POSITIVE_INFINITY; // when a rate limit lets more be claimed
  private loopDone: Promise<void> | undefined;
  private readonly idleWaiters: (() => void)[] = [];
  /** recheck() calls so far, and how many had been made when the last full beat began. */
  private rechecks = 0;
  private beatRechecks = 0;
  private unwatchClock: (() => void) | undefined;
  private readonly settledWaiters: (() => void)[] = [];
  /** consumer.pause(): this consumer claims nothing until resume() (the queue is not paused). */
  private pausedHere = false;
  /** The default execution timeout (timeoutMs) for jobs without their own, if any. */
  private readonly timeoutMs: number | undefined;
  /** Deadlines of the held jobs that have a timeout: one timer for all of them. */
  private readonly deadlines = new Deadlines<Running<D>>((job) => this.timedOut(job));

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
    this.timeoutMs = s.timeoutMs;
    ({ concurrency: this.concurrency, leaseMs: this.leaseMs, extendMs: this.extendMs } = s);
    ({ beatMs: this.beatMs, recovery: this.recovery, durability: this.durability } = s);
    ({ maxStalled: this.maxStalled, promoteBatch: this.promoteBatch, ttlMs: this.ttlMs } = s);
    this.maxLogLines = s.maxLogLines;
    this.leases = new Leases<D>(queue, s, this, (job) => {
      if (job?.deadlineAt !== undefined) this.deadlines.remove(job);
      this.settle();
    });
    const slots: Slots = {
      claiming: () => !this.closing && !this.pausedHere,
      short: () => this.short,
      free: () => this.free,
      reserve: (n) => {
        this.reserved += n;
      },
      startClaimed: (claimed) => this.startClaimed(claimed),
      learnHead: (now, nextDue) => this.learnHead(now, nextDue),
      watchForWork: () => this.watchForWork(),
      settle: () => this.settle(),
      drain: () => this.drain(),
    };
    this.acks = new Acks<D>(queue, s, this.leases, slots, this, this.id);
    this.parking = new Parking(queue, this, () => this.closing);
    this.legs = new Legs(
      queue,
      s,
      this.id,
      () => this.leases.size,
      () => {
        this.short = false;
      },
    );
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

  private get free(): number {
    return this.concurrency - this.leases.size - this.leases.orphans - this.reserved;
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
        const claimed = this.legs.promoting ? this.drain(true) : undefined;
        await Promise.all([promoted, claimed]); // both awaited: neither rejection goes unhandled
        await this.legs.recurring();
        await this.drain();
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
    this.short = false;
    if (this.limitedUntil !== Number.POSITIVE_INFINITY) this.limitedUntil = performance.now();
    this.parking.wakeNow();
  }

  /** Claims up to the free slots; `afterPromote`: even when short (promote may release work). */
  private async drain(afterPromote = false): Promise<void> {
    if (this.closing || this.pausedHere) return;
    if (!afterPromote && this.short && performance.now() < this.limitedUntil) return;
    const n = this.free;
    if (n <= 0) return;
    this.reserved += n;
    let claimed: verbs.Claimed;
    try {
      claimed = await verbs.claim(this.queue, n, this.leaseMs, this.id);
    } finally {
      this.reserved -= n;
    }
    this.startClaimed(claimed);
  }

  /** Waits for whichever comes first: new work (wake stream), the next due job, the beat, close. */
  private async park(): Promise<void> {
    if (this.closing) return;
    // A claim that was not short while slots are free stopped early (it dropped its bound of
    // ghosts, or slots freed meanwhile): claim again at once rather than wait for a beat.
    if (!this.short && this.free > 0 && !this.pausedHere) return;
    if (this.beatRechecks !== this.rechecks) return; // a recheck came during the beat: beat again
    const untilTtl = this.ttlMs === undefined ? Number.POSITIVE_INFINITY : this.startedAt + this.ttlMs;
    const untilDue = Math.min(this.dueAt(), untilTtl) - performance.now();
    const wait = Math.max(0, Math.min(this.legs.recoverAt - performance.now(), untilDue, this.beatMs));
    if (wait <= 0) return;
    // Paused here, new work is no reason to wake: it sleeps until resume() or the beat.
    const woke = await this.parking.park(wait, untilDue, this.short && this.free > 0 && !this.pausedHere);
    if (!woke) return;
    this.short = false;
    this.legs.woke(woke);
  }

  /** The earliest local instant the loop must act at: the schedule's head, recurrence, a rate window. */
  private dueAt(): number {
    return Math.min(this.legs.dueAt, this.limitedUntil);
  }

  /**
   * Takes in the schedule's earliest run-at as a reply saw it. When the loop waits past it, it
   * is woken, or its blocking read is ended, at that instant: a busy consumer promotes on time too.
   */
  private learnHead(now: number, nextDue: number): void {
    this.legs.learnHead(now, nextDue);
    this.parking.wakeBy(this.dueAt());
  }

  /**
   * The queue was short and the loop sleeps because every slot was busy: now that a slot is
   * free, move the loop to a blocking read on the wake stream so new work is seen at once.
   */
  private watchForWork(): void {
    if (this.parking.state === 'sleep' && this.short && this.free > 0) this.parking.wake();
  }

  // ── running jobs ────────────────────────────────────────────────────────────

  /**
   * Starts the handlers of claimed jobs, and takes in what the claim saw: the wake id to park
   * after, a rate limit's wait, and the schedule's head. The head was read in the same atomic
   * call as the wake id, so a 'w s' written before that id (while this consumer was busy, or
   * before it parked) is not lost: its instant is the head.
   */
  private startClaimed({ jobs, wakeId, waitMs, now, nextDue }: verbs.Claimed): void {
    // A short reply overtaken by a wake the beat has read already is not short: that wake's
    // work may be waiting, and only a claim sent now can see it (no other wake will come).
    const overtaken = wakeId !== '' && !this.parking.shortHolds(wakeId);
    this.short = wakeId !== '' && !overtaken;
    // A rate limit holds work back: park until its window reopens (a timer, not a poll).
    this.limitedUntil = waitMs >= 0 ? performance.now() + waitMs : Number.POSITIVE_INFINITY;
    this.learnHead(now, nextDue);
    for (const [i, { job, bad }] of runningJobs(this.leases, jobs).entries()) {
      this.leases.hold(job);
      const timeoutMs = jobs[i]!.timeoutMs ?? this.timeoutMs; // its own (SPEC 19.5), else consume's
      if (timeoutMs !== undefined) {
        job.timeoutMs = timeoutMs;
        this.deadlines.add(job, timeoutMs);
      }
      // Bad data never stops the consumer: that job fails (dead-lettered) without a handler
      // run, and the others of the claim start as usual (SPEC section 5.1).
      const run = bad ? this.acks.fail(job, bad) : this.acks.run(job, this.handler);
      run.catch((err: unknown) => this.emit('error', err));
    }
    if (overtaken && this.free > 0) this.drain().catch((err: unknown) => this.emit('error', err));
  }

  /**
   * The job ran past its timeout (SPEC 8.1): abort its signal and fail the attempt now with
   * reason timeout. Its handler may run on; whatever it returns later is not sent (and its
   * token would be refused). A job whose outcome is on its way already is left to that.
   */
  private timedOut(job: Running<D>): void {
    if (job.released || job.acking) return;
    job.abort('timeout');
    this.acks.fail(job, job.reason()).catch((err: unknown) => this.emit('error', err));
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
    this.short = false;
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
    if (this.leases.size === 0 && this.acks.size === 0 && this.reserved === 0) {
      for (const w of this.settledWaiters.splice(0)) w();
      // Work held back by a rate window is not idleness: the consumer claims it when it reopens.
      const waiting = this.limitedUntil !== Number.POSITIVE_INFINITY;
      const rechecked = this.beatRechecks === this.rechecks;
      if ((this.short && !waiting && rechecked) || this.closing || this.pausedHere)
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
    if (this.leases.size > 0 || this.acks.size > 0 || this.reserved > 0) {
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
    this.deadlines.stop();
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
