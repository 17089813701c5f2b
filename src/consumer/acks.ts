// How a finished job's outcome reaches Redis. Completions are batched: every handler that
// finishes in one tick is acknowledged by one `complete` call, which also claims the next jobs
// for the slots it frees (so a busy consumer needs about one round trip per batch, and never a
// timer per job). A failure is one `fail` call, sent again until it lands. A slot freed outside
// an ack (a failure) is refilled on the next tick, together with the acks of that tick.

import type { EventEmitter } from 'node:events';
import { encodeJson } from '../core/codec.js';
import { EchoMQError, thrownError } from '../core/errors.js';
import type { ConsumerEvents, Handler } from '../core/types.js';
import type { QueueWire } from '../wire/queue-wire.js';
import * as verbs from '../wire/verbs/index.js';
import type { Leases } from './leases.js';
import type { ConsumeSettings } from './options.js';
import { type PutBack, putBack, putBackOf } from './putback.js';
import { retryDecision } from './retry-policy.js';
import { type Running, UnrecoverableError } from './running.js';
import type { Slots } from './slots.js';

/**
 * A handler that finished: the job, and its completion as complete sends it (id, token, the
 * encoded result) with the result as returned. The entry itself goes to verbs.complete: no
 * second object per job on the way to the wire.
 */
interface Ack<D> extends verbs.Ack {
  job: Running<D>;
  value: unknown;
}

export class Acks<D> {
  /** Handlers finished but not yet acknowledged. */
  private pending: Ack<D>[] = [];
  /** A flush (or a refill claim) is due on the next tick. */
  private scheduled = false;
  /** The one timer that sends failed acknowledgements again (never one per failed call). */
  private retry: NodeJS.Timeout | undefined;
  /** The tick's flush and the report of a call's unexpected failure, made once, not per batch. */
  private readonly flushNow = (): void => this.flush();
  private readonly reportError = (err: unknown): void => {
    this.events.emit('error', err);
  };

  constructor(
    private readonly queue: QueueWire,
    private readonly settings: ConsumeSettings,
    private readonly leases: Leases<D>,
    private readonly slots: Slots<D>,
    private readonly events: EventEmitter<ConsumerEvents>,
    /** Recorded on the rows its completions claim (SPEC 19.6), as the beat's own claims do. */
    private readonly consumerId: string,
  ) {}

  /** Acknowledgements queued or in a retry. */
  get size(): number {
    return this.pending.length;
  }

  has(job: Running<D>): boolean {
    return this.pending.some((a) => a.job === job);
  }

  /**
   * Runs the handler and sends its outcome; an orphan's slot is freed when its handler returns.
   */
  async run<R>(job: Running<D>, handler: Handler<D, R>): Promise<void> {
    try {
      let result: R;
      try {
        result = await handler(job, job);
      } catch (err) {
        if (job.aborted === 'timeout') return; // failed at its deadline already (timedOut)
        await this.fail(job, thrownError(err, this.settings.maxErrorBytes));
        return;
      }
      // A run past its timeout was failed then: what it returns now is not sent (its token is
      // no longer the job's, so the script would refuse it anyway).
      if (job.aborted === 'timeout') return;
      if (job.released) return this.leases.release(job);
      let encoded: string;
      try {
        encoded =
          result === undefined ? '' : encodeJson(result, 'job result', this.queue.limits.maxPayloadBytes);
      } catch (err) {
        await this.fail(job, err as Error);
        return;
      }
      this.complete(job, encoded, result);
    } finally {
      if (job.orphaned) this.leases.endOrphan(job);
    }
  }

  /** Queues the job's completion for this tick's batch. */
  private complete(job: Running<D>, encoded: string, result: unknown): void {
    job.acking = true;
    this.pending.push({ id: job.id, token: job.token, result: encoded, job, value: result });
    if (!this.scheduled) {
      this.scheduled = true;
      process.nextTick(this.flushNow);
    }
  }

  /**
   * Acknowledges every handler that finished this tick, in `complete` calls that also claim
   * the next jobs. The batch goes as two halves when it is large, so Redis works on one while
   * this process starts the jobs the other brought back (one big call leaves one side idle).
   */
  private flush(): void {
    this.scheduled = false;
    const acks = this.pending;
    this.pending = [];
    if (acks.length === 0) return;
    const half = this.settings.ackChunk ?? ackChunkFor(this.settings.concurrency);
    const claiming = this.slots.claiming;
    // Each call claims as many jobs as it acknowledges (those slots free up as it runs); the
    // first also claims the slots that are free already. Computed before any call reserves.
    let spare = claiming ? Math.max(0, this.slots.free) : 0;
    for (let i = 0; i < acks.length; i += half) {
      const part = acks.length <= half ? acks : acks.slice(i, i + half);
      this.send(part, claiming ? part.length + spare : 0).catch(this.reportError);
      spare = 0;
    }
  }

  private async send(acks: Ack<D>[], n: number): Promise<void> {
    this.leases.flushLogs(); // on the wire just before the acknowledgement
    this.slots.reserve(n);
    let reply: Awaited<ReturnType<typeof verbs.complete>>;
    try {
      const { leaseMs, durability } = this.settings;
      reply = await verbs.complete(this.queue, leaseMs, n, acks, durability, this.consumerId);
    } catch (err) {
      this.slots.reserve(-n);
      if (this.queue.connector.isClosed) {
        // Nothing can be sent any more: the leases run out and recovery returns the jobs.
        for (const { job } of acks) this.leases.release(job);
        return;
      }
      // Not acknowledged: keep the jobs held (their leases keep being extended) and retry. One
      // timer for every part that failed: a retry sends every held acknowledgement again.
      this.events.emit('error', err);
      this.pending.unshift(...acks);
      this.retry ??= setTimeout(() => {
        this.retry = undefined;
        if (!this.scheduled) {
          this.scheduled = true;
          this.flush();
        }
      }, 100);
      return;
    }
    this.slots.reserve(-n);
    const { statuses, claimed } = reply;
    for (let i = 0; i < acks.length; i++) {
      const { job, value } = acks[i]!;
      this.leases.release(job);
      if (statuses[i] === 'OK') this.events.emit('completed', job, value);
      else this.leases.lose(job, false);
    }
    if (n > 0) this.slots.startClaimed(claimed);
    else this.slots.learnHead(claimed.now, claimed.nextDue);
    this.slots.watchForWork();
    this.slots.settle();
  }

  /** Stores the job's failure: a retry after its backoff, or dead-lettered (SPEC's fail). */
  async fail(job: Running<D>, cause: Error): Promise<void> {
    if (job.released) return this.leases.release(job);
    const asked = putBackOf(cause);
    if (asked && job.aborted === undefined) return this.putBack(job, asked);
    // From here the fail's reply decides: an extension that finds the lease gone because this
    // very fail was stored must not report the job lost.
    job.acking = true;
    const unrecoverable = cause instanceof UnrecoverableError || job.aborted === 'cancelled';
    // -1 tells the script "never retry" (reason unrecoverable); on the last attempt the
    // script dead-letters by the count itself (reason error), so any delay will do.
    const { delay, error } = retryDecision(job, cause, unrecoverable, this.settings.backoff, this.settings);
    const message = clip(error.message || String(error), this.settings.maxErrorBytes);
    const stack = clip(error.stack ?? '', this.settings.maxStackBytes);
    const reason = job.aborted === 'timeout' ? 'timeout' : undefined; // the failed event's reason (SPEC 8.1)
    for (;;) {
      this.leases.flushLogs();
      try {
        const outcome = await verbs.fail(this.queue, job.id, job.token, message, stack, delay, reason);
        this.leases.release(job);
        this.events.emit('failed', job, error, outcome);
        break;
      } catch (err) {
        if (err instanceof EchoMQError && (err.code === 'EMQLEASE' || err.code === 'EMQNOJOB')) {
          this.leases.release(job);
          this.leases.lose(job, false); // once, even when an extension found it lost first
          break;
        }
        if (this.queue.connector.isClosed) return this.leases.release(job);
        this.events.emit('error', err);
        await new Promise((r) => setTimeout(r, 100)); // keep the lease alive and try again
      }
    }
    this.refill();
  }

  /** The handler put its job back (snooze, rate limit): no attempt spent, fenced by the lease. */
  private async putBack(job: Running<D>, asked: PutBack): Promise<void> {
    job.acking = true;
    this.leases.flushLogs();
    try {
      const at = await putBack(this.queue, job, asked);
      this.leases.release(job);
      this.events.emit(asked.verb === 'snooze' ? 'snoozed' : 'rateLimited', job, at);
    } catch (err) {
      this.leases.release(job);
      if (err instanceof EchoMQError && (err.code === 'EMQLEASE' || err.code === 'EMQNOJOB')) {
        this.leases.lose(job, false);
      } else if (!this.queue.connector.isClosed) {
        this.events.emit('error', err); // its lease runs out and recovery returns the job
      }
    }
    this.refill();
  }

  /** A slot freed outside an ack (a failure): claim for it on the next tick, with the acks. */
  private refill(): void {
    if (!this.slots.claiming || this.slots.free <= 0) return;
    if (this.slots.short) {
      this.slots.watchForWork();
      return;
    }
    if (!this.scheduled) {
      this.scheduled = true;
      process.nextTick(() => void this.claimFree());
    }
  }

  private async claimFree(): Promise<void> {
    if (this.pending.length > 0) return this.flush();
    this.scheduled = false;
    try {
      await this.slots.drain();
    } catch (err) {
      this.events.emit('error', err); // the beat will claim again
    }
    this.slots.settle();
  }
}

/** `text` cut to at most `maxBytes` bytes of UTF-8, marked with an ellipsis when cut. */
export function clip(text: string, maxBytes: number): string {
  if (Buffer.byteLength(text) <= maxBytes) return text;
  return `${Buffer.from(text).subarray(0, maxBytes).toString('utf8')}…`;
}

/**
 * Completions per complete call for a consumer of `concurrency`: halves of the batch, so Redis
 * works on one while this process starts the jobs the other brought back, but never below
 * {@link MIN_ACK_CHUNK} (or the whole concurrency, when smaller). Each call carries ~16 commands
 * whatever its size, so halves of a small batch pay them twice for little overlap: four
 * consumers of 50 sent twice the calls per job of one of 100 (0.07 against 0.03 FCALL per job).
 */
export function ackChunkFor(concurrency: number): number {
  return Math.max(Math.ceil(concurrency / 2), Math.min(concurrency, MIN_ACK_CHUNK));
}

/** The smallest split part of a flush (see ackChunkFor). */
export const MIN_ACK_CHUNK = 50;
