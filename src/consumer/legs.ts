// The beat's timed legs (steps 3 and 4 of the consumer's header, and recurrence) and when each
// is next due. Recover reaps expired leases (or sweeps stalled ones) and sends the heartbeat
// that lists the consumer in tools; promote releases due scheduled jobs and reports the
// schedule's earliest run-at; the recurrence leg runs the Repeat pump and this runtime's share of
// the schedulers' hand-off. Each leg runs once a beat, at an instant a reply reported, or at once
// when a wake (or recheck) said its input changed; dueAt is the earliest of those instants.
// Where the native module's timers move time (hello's 'emq.timers', SPEC 26.1), the server
// releases due jobs and recovers expired leases itself, and its releases wake parked consumers
// through the wake stream: the promote and recovery legs then run every BACKSTOP_BEATS beats
// only (a backstop, and the moment hello is asked again, so a failover to a server without the
// timers is seen within one), and the heartbeat keeps its beat. The server recovers by meta's
// recovery, so the first pass that sees the timers makes it this consumer's or says why not
// (recovery-agreement.ts).

import { hostname } from 'node:os';
import type { EchoMQError } from '../core/errors.js';
import { deliverNotices } from '../flows/handoff.js';
import { JobSchedulers } from '../recurring/schedulers.js';
import { PROTOCOL_VERSIONS } from '../wire/keyspace.js';
import type { QueueWire } from '../wire/queue-wire.js';
import * as verbs from '../wire/verbs/index.js';
import type { ConsumeSettings } from './options.js';
import type { Wake } from './park.js';
import { agreeRecovery } from './recovery-agreement.js';

/** With the server's timers: the beats between two of this consumer's promote or recovery passes. */
export const BACKSTOP_BEATS = 10;

export class Legs {
  private lastRecoverAt = Number.NEGATIVE_INFINITY;
  /** The last recovery pass (reap or sweep) this consumer sent, local performance.now(). */
  private lastRecoveryPassAt = Number.NEGATIVE_INFINITY;
  /** Local performance.now() of the schedule's earliest run-at, from promote's or a claim's reply. */
  private headAt = Number.POSITIVE_INFINITY;
  private lastPromoteAt = Number.NEGATIVE_INFINITY;
  /** This beat's promote call is on the wire (a claim may follow it in the same round trip). */
  promoting = false;
  /** recheck() asked for a promote (with the server's timers, where wakes do not). */
  private forced = true;
  /** A wake said the schedule's earliest run-at changed: promote to learn the new one. */
  private moved = true;
  /** A wake said a recurring definition changed ('w r'): run the recurrence leg now. */
  private recurrenceMoved = true;
  private lastRecurringAt = Number.NEGATIVE_INFINITY;
  private recurringDueAt = Number.POSITIVE_INFINITY; // local performance.now()
  /** The schedulers' hand-off (advance) this consumer runs in its recurrence leg. */
  private readonly schedulers: JobSchedulers;
  /** Meta's recovery was made this consumer's, or the difference reported, since the timers were seen. */
  private recoveryAgreed = false;

  constructor(
    private readonly queue: QueueWire,
    private readonly settings: ConsumeSettings,
    /** The consumer's id in heartbeats. */
    private readonly id: string,
    /** Jobs running now (for the heartbeat). */
    private readonly running: () => number,
    /** A leg released or minted jobs: the queue is no longer short. */
    private readonly onReleased: () => void,
    /** Something the user should fix and the consumer carries on past (its 'error' event). */
    private readonly warn: (err: EchoMQError) => void,
  ) {
    this.schedulers = new JobSchedulers(queue);
  }

  /**
   * A memory engine's clock moves forward on purpose (mq.clock, echomq/testing): that is time
   * that passed, so this consumer reports no gap that would make it a step (SPEC 2.1).
   */
  private get movedOnPurpose(): boolean {
    return this.queue.connector.memory !== undefined;
  }

  /** The server's timers release due jobs and recover leases (hello listed 'emq.timers'). */
  get serverMovesTime(): boolean {
    return this.queue.greeting?.features.includes('emq.timers') ?? false;
  }

  /** The earliest local instant a timed leg is due at (the schedule's head: the server's, with its timers). */
  get dueAt(): number {
    return this.serverMovesTime ? this.recurringDueAt : Math.min(this.headAt, this.recurringDueAt);
  }

  /** What the wake stream said while the beat waited. */
  woke(wake: Wake): void {
    if (wake.schedule) this.moved = true;
    if (wake.recurrence) this.recurrenceMoved = true;
  }

  /** Local performance.now() the next recovery is due at (a beat after the last). */
  get recoverAt(): number {
    return this.lastRecoverAt + this.settings.beatMs;
  }

  /** recheck(): every leg runs on the next beat. */
  recheck(): void {
    this.lastRecoverAt = Number.NEGATIVE_INFINITY;
    this.lastRecoveryPassAt = Number.NEGATIVE_INFINITY;
    this.forced = true;
    this.moved = true;
    this.recurrenceMoved = true;
  }

  /** Recovery per the `recovery` option, and the heartbeat that lists this consumer in tools. */
  async recover(): Promise<void> {
    const now = performance.now();
    const { beatMs, recovery, promoteBatch } = this.settings;
    if (now - this.lastRecoverAt < beatMs) return;
    // With the server's timers the pass is a backstop: once in BACKSTOP_BEATS beats, when hello
    // is also asked again (the timers may have stopped, or a failover found a server without).
    const backstop = this.serverMovesTime;
    if (backstop && !this.recoveryAgreed) {
      const differs = await agreeRecovery(this.queue, recovery, this.settings.maxStalled);
      this.recoveryAgreed = true;
      if (differs) this.warn(differs);
    } else if (!backstop) this.recoveryAgreed = false; // timers seen again later: agree again
    const gapMs = backstop ? beatMs * BACKSTOP_BEATS : beatMs;
    if (!backstop || now - this.lastRecoveryPassAt >= gapMs - beatMs / 2) {
      if (backstop) await this.queue.greetAgain();
      // The gap this consumer leaves between passes: a longer one is a jump (SPEC 2.1).
      const expectedMs = this.movedOnPurpose ? Number.MAX_SAFE_INTEGER : gapMs;
      if (recovery === 'reap') await verbs.reap(this.queue, promoteBatch, expectedMs);
      else if (recovery === 'stalled') {
        await verbs.sweepStalled(this.queue, this.settings.maxStalled, promoteBatch, expectedMs);
      }
      this.lastRecoveryPassAt = now;
    }
    const { notices } = await verbs.heartbeat(
      this.queue,
      this.id,
      JSON.stringify({
        host: hostname(),
        pid: process.pid,
        concurrency: this.settings.concurrency,
        running: this.running(),
        beatMs,
        // The versions it speaks: migrate steps a queue up only when every live consumer does.
        protocols: PROTOCOL_VERSIONS,
      }),
    );
    // Flow children of this queue whose parents are in other queues ended: hand them over.
    if (notices > 0) await deliverNotices(this.queue);
    this.lastRecoverAt = now;
  }

  /** The last heartbeat (close): tools stop listing this consumer at once, not once it is stale. */
  async leave(): Promise<void> {
    await verbs.heartbeat(this.queue, this.id, '');
  }

  /**
   * Takes in the schedule's earliest run-at as a reply saw it (`now` and `nextDue` are server
   * instants, so only their difference is used).
   */
  learnHead(now: number, nextDue: number): void {
    this.headAt = nextDue < 0 ? Number.POSITIVE_INFINITY : performance.now() + (nextDue - now);
  }

  /**
   * Promote when something may be due: the next due instant came, the schedule's head moved
   * (a wake marked 's'), or a beat passed. A wake for new pending work skips it, so waking
   * costs one call (the claim), not two.
   */
  async promote(): Promise<void> {
    const at = performance.now();
    const { beatMs, promoteBatch } = this.settings;
    this.promoting = false;
    if (this.serverMovesTime) {
      // The server releases due jobs at their instant and wakes this consumer: a backstop only.
      if (!this.forced && at - this.lastPromoteAt < beatMs * BACKSTOP_BEATS) return;
    } else if (!this.moved && at < this.headAt && at - this.lastPromoteAt < beatMs) return;
    this.moved = false;
    this.forced = false;
    // How long this consumer lived since its previous promote: the server clock running
    // further ahead than that was stepped, and the schedule moves by the step (SPEC 2.1).
    const elapsed =
      Number.isFinite(this.lastPromoteAt) && !this.movedOnPurpose ? at - this.lastPromoteAt : undefined;
    this.lastPromoteAt = at;
    this.promoting = true; // set before the first await: the beat reads it to pipeline a claim
    const { count, now, nextDue, handoffs } = await verbs.promoteNext(
      this.queue,
      promoteBatch,
      elapsed === undefined ? undefined : Math.ceil(elapsed),
    );
    // A cron occurrence was released: its next one is this runtime's to make, now (a 'w r' for
    // its scheduler may have gone unseen, so the leg's own timer cannot be trusted to know).
    if (handoffs > 0) this.recurrenceMoved = true;
    if (count >= promoteBatch)
      this.headAt = performance.now(); // more are due: go again
    else this.learnHead(now, nextDue); // the beat is not parked: nothing to wake
    if (count > 0) this.onReleased();
  }

  // Recurrence: the Repeat pump and the runtime's share of the schedulers' hand-off
  // (src/recurring). A Repeat cadence and an `every` scheduler need neither: promote makes the
  // next occurrence when it releases the current one, so their slots never wait for this leg. The
  // leg runs once a beat, when an instant it reported comes (a repeat's slot, a scheduler's
  // occurrence whose next run a runtime computes), and at once when a wake says a definition
  // changed ('w r': register, upsert): a definition made under a parked consumer is served at its
  // instant, not its beat.
  async recurring(): Promise<void> {
    const at = performance.now();
    const { beatMs, promoteBatch } = this.settings;
    if (!this.recurrenceMoved && at - this.lastRecurringAt < beatMs && at < this.recurringDueAt) return;
    this.recurrenceMoved = false;
    const [pump, handoff] = await Promise.all([
      verbs.pump(this.queue, promoteBatch),
      this.schedulers.advance(promoteBatch),
    ]);
    this.lastRecurringAt = at;
    const until = (due: number, now: number) => (due < 0 ? Number.POSITIVE_INFINITY : due - now);
    this.recurringDueAt =
      performance.now() + Math.min(until(pump.nextDue, pump.now), until(handoff.nextDue, handoff.now));
    if (pump.minted.length > 0) this.onReleased();
  }
}
