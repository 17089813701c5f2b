// The consumer's slots: how many more handlers may start (concurrency less the jobs held, the
// orphans still running and the claims in flight), what the last claim said of the queue (short:
// nothing claimable until a wake, a due timer or the beat; a rate window's end), the claim that
// fills them, and the start of what a claim brought back (each job held, its execution timeout
// armed, its handler run). The beat (consumer.ts) claims through drain(); the acks (acks.ts)
// claim in their complete calls and hand the reply to startClaimed().

import type { EventEmitter } from 'node:events';
import type { ConsumerEvents } from '../core/types.js';
import type { QueueWire } from '../wire/queue-wire.js';
import * as verbs from '../wire/verbs/index.js';
import { Deadlines } from './deadlines.js';
import type { Leases } from './leases.js';
import type { Legs } from './legs.js';
import type { ConsumeSettings } from './options.js';
import type { Parking } from './park.js';
import { DecodedClaim, Running } from './running.js';

/** What the slots ask of the consumer that owns them. */
export interface SlotOwner<D> {
  /** The consumer claims more (it is neither closing nor paused by consumer.pause()). */
  claiming(): boolean;
  /** Runs a held job's handler and sends its outcome. */
  run(job: Running<D>): Promise<void>;
  /** Fails a held job now (bad data, a timeout): a retry after its backoff, or dead-lettered. */
  fail(job: Running<D>, cause: Error): Promise<void>;
  /** Checks whether the consumer is now idle or settled. */
  settle(): void;
}

export class Slots<D> {
  /** Slots promised to claims in flight, so two calls never over-claim. */
  private inFlight = 0;
  /** The last claim came back short: nothing claimable until a wake, a due timer or the beat. */
  private shortNow = false;
  /** When a rate limit lets more be claimed (local performance.now()). */
  private limitedUntil = Number.POSITIVE_INFINITY;
  /** Deadlines of the held jobs that have a timeout: one timer for all of them. */
  private readonly deadlines = new Deadlines<Running<D>>((job) => this.timedOut(job));
  /** Reports a started job's unexpected rejection: one function for all of them, not one per job. */
  private readonly reportError = (err: unknown): void => {
    this.events.emit('error', err);
  };

  constructor(
    private readonly queue: QueueWire,
    private readonly settings: ConsumeSettings,
    /** Recorded on the rows its claims take (SPEC 19.6). */
    private readonly consumerId: string,
    private readonly leases: Leases<D>,
    private readonly parking: Parking,
    private readonly legs: Legs,
    private readonly events: EventEmitter<ConsumerEvents>,
    private readonly owner: SlotOwner<D>,
  ) {}

  /** The consumer claims more (it is neither closing nor paused by consumer.pause()). */
  get claiming(): boolean {
    return this.owner.claiming();
  }

  /** Slots free now (may be negative while claims are in flight). */
  get free(): number {
    return this.settings.concurrency - this.leases.size - this.leases.orphans - this.inFlight;
  }

  /** Slots promised to claims in flight. */
  get reserved(): number {
    return this.inFlight;
  }

  /** The last claim came back short (nothing claimable until a wake). */
  get short(): boolean {
    return this.shortNow;
  }

  /** A rate limit holds work back until its window reopens (that is not idleness). */
  get limited(): boolean {
    return this.limitedUntil !== Number.POSITIVE_INFINITY;
  }

  /** Counts n slots as promised to a claim in flight; a negative n gives them back. */
  reserve(n: number): void {
    this.inFlight += n;
  }

  /** Work may be claimable again (a wake, a release, resume()): the next drain claims. */
  open(): void {
    this.shortNow = false;
  }

  /** recheck(): claim on the next beat, and a rate window counts as reopened now. */
  recheck(): void {
    this.shortNow = false;
    if (this.limited) this.limitedUntil = performance.now();
  }

  /** The earliest local instant the loop must act at: the schedule's head, recurrence, a rate window. */
  get dueAt(): number {
    return Math.min(this.legs.dueAt, this.limitedUntil);
  }

  /** Claims up to the free slots; `afterPromote`: even when short (promote may release work). */
  async drain(afterPromote = false): Promise<void> {
    if (!this.claiming) return;
    if (!afterPromote && this.shortNow && performance.now() < this.limitedUntil) return;
    const n = this.free;
    if (n <= 0) return;
    this.inFlight += n;
    let claimed: verbs.Claimed;
    try {
      claimed = await verbs.claim(this.queue, n, this.settings.leaseMs, this.consumerId);
    } finally {
      this.inFlight -= n;
    }
    this.startClaimed(claimed);
  }

  /**
   * Takes in the schedule's earliest run-at as a reply saw it. When the loop waits past it, it
   * is woken, or its blocking read is ended, at that instant: a busy consumer promotes on time too.
   */
  learnHead(now: number, nextDue: number): void {
    this.legs.learnHead(now, nextDue);
    this.parking.wakeBy(this.dueAt);
  }

  /**
   * The queue was short and the loop sleeps because every slot was busy: now that a slot is
   * free, move the loop to a blocking read on the wake stream so new work is seen at once.
   */
  watchForWork(): void {
    if (this.parking.state === 'sleep' && this.shortNow && this.free > 0) this.parking.wake();
  }

  /** Checks whether the consumer is now idle or settled. */
  settle(): void {
    this.owner.settle();
  }

  /**
   * Starts the handlers of claimed jobs, and takes in what the claim saw: the wake id to park
   * after, a rate limit's wait, and the schedule's head. The head was read in the same atomic
   * call as the wake id, so a 'w s' written before that id (while this consumer was busy, or
   * before it parked) is not lost: its instant is the head.
   */
  startClaimed({ jobs, wakeId, waitMs, now, nextDue }: verbs.Claimed): void {
    // A short reply overtaken by a wake the beat has read already is not short: that wake's
    // work may be waiting, and only a claim sent now can see it (no other wake will come).
    const overtaken = wakeId !== '' && !this.parking.shortHolds(wakeId);
    this.shortNow = wakeId !== '' && !overtaken;
    // A rate limit holds work back: park until its window reopens (a timer, not a poll).
    this.limitedUntil = waitMs >= 0 ? performance.now() + waitMs : Number.POSITIVE_INFINITY;
    this.learnHead(now, nextDue);
    // A plain loop, no array of pairs in between: this runs for every job the consumer takes.
    for (let i = 0; i < jobs.length; i++) {
      const c = jobs[i]!;
      const decoded = new DecodedClaim(c);
      const job = new Running<D>(this.leases, c, decoded.data as D, decoded.backoff);
      this.leases.hold(job);
      const timeoutMs = c.timeoutMs ?? this.settings.timeoutMs; // its own (SPEC 19.5), else consume's
      if (timeoutMs !== undefined) {
        job.timeoutMs = timeoutMs;
        this.deadlines.add(job, timeoutMs);
      }
      // Bad data never stops the consumer: that job fails (dead-lettered) without a handler
      // run, and the others of the claim start as usual (SPEC section 5.1).
      const run = decoded.bad ? this.owner.fail(job, decoded.bad) : this.owner.run(job);
      run.catch(this.reportError);
    }
    if (overtaken && this.free > 0) this.drain().catch((err: unknown) => this.events.emit('error', err));
  }

  /** The job left the consumer: its deadline, if it had one, no longer runs. */
  released(job: Running<D> | undefined): void {
    if (job?.deadlineAt !== undefined) this.deadlines.remove(job);
  }

  /** Closing: no deadline fires any more. */
  stop(): void {
    this.deadlines.stop();
  }

  /**
   * The job ran past its timeout (SPEC 8.1): abort its signal and fail the attempt now with
   * reason timeout. Its handler may run on; whatever it returns later is not sent (and its
   * token would be refused). A job whose outcome is on its way already is left to that.
   */
  private timedOut(job: Running<D>): void {
    if (job.released || job.acking) return;
    job.abort('timeout');
    this.owner.fail(job, job.reason()).catch((err: unknown) => this.events.emit('error', err));
  }
}
