// Manual consumption: queue.claim(n) takes jobs under leases without a consumer, for work
// finished by a callback, by another system or in another process. Each ClaimedJob carries its
// lease token, and complete / fail / extend / snooze are fenced by it exactly as a consumer's own calls
// are: once the lease was taken over (it expired and the job was recovered, or the job was
// finished or failed already) a late call changes nothing and throws EMQLEASE. Nothing extends
// these leases by itself: call extend() before leaseMs runs out, or recovery returns the job.

import type { BackoffPolicy } from '../core/backoff.js';
import { atLeast, knownKeys } from '../core/check.js';
import { encodeJson } from '../core/codec.js';
import { EchoMQError, optionsObject, thrownError } from '../core/errors.js';
import type { Job } from '../core/types.js';
import type { QueueWire } from '../wire/queue-wire.js';
import * as verbs from '../wire/verbs/index.js';
import { clip } from './acks.js';
import { DEFAULT_BACKOFF } from './options.js';
import { retryDecision } from './retry-policy.js';
import { ClaimedFields, decodeClaims, UnrecoverableError } from './running.js';

export interface ClaimOptions {
  /** Lease length in ms of each job claimed (extend() pushes it). Default 30000. */
  leaseMs?: number;
}

const CLAIM_OPTIONS: ReadonlySet<string> = new Set(['leaseMs']);
const MAX_ERROR_BYTES = 2048;
const MAX_STACK_BYTES = 8192;

/** A job claimed by hand: its lease token fences every call below. */
export class ClaimedJob<D = unknown, R = unknown> extends ClaimedFields<D> implements Job<D> {
  constructor(
    private readonly queue: QueueWire,
    c: verbs.ClaimedJob,
    data: D,
    backoff: BackoffPolicy | undefined,
    /** The lease length every extend() without an argument renews. */
    readonly leaseMs: number,
  ) {
    super(c, data, backoff);
  }

  /** Completes the job with `result`; EMQLEASE when the lease is no longer this claim's. */
  async complete(result?: R): Promise<void> {
    const encoded =
      result === undefined ? '' : encodeJson(result, 'job result', this.queue.limits.maxPayloadBytes);
    const { statuses } = await verbs.complete(this.queue, this.leaseMs, 0, [
      { id: this.id, token: this.token, result: encoded },
    ]);
    if (statuses[0] !== 'OK') throw this.stale('complete');
  }

  /**
   * Fails this attempt: retried after the job's backoff while attempts remain, else dead (an
   * UnrecoverableError dead-letters at once). Resolves with what happened to the job.
   */
  async fail(error: unknown): Promise<'retry' | 'dead' | 'cancelled'> {
    const thrown = thrownError(error, MAX_ERROR_BYTES);
    const unrecoverable = thrown instanceof UnrecoverableError;
    const { delay, error: err } = retryDecision(this, thrown, unrecoverable, DEFAULT_BACKOFF, {});
    try {
      return await verbs.fail(
        this.queue,
        this.id,
        this.token,
        clip(err.message || String(err), MAX_ERROR_BYTES),
        clip(err.stack ?? '', MAX_STACK_BYTES),
        delay,
      );
    } catch (e) {
      if (e instanceof EchoMQError && e.code === 'EMQLEASE') throw this.stale('fail');
      throw e;
    }
  }

  /**
   * Pushes the lease deadline to `ms` from now (default leaseMs). Resolves 'cancel' when a
   * cancel was requested meanwhile (finish or fail the job soon), else 'ok'.
   */
  async extend(ms: number = this.leaseMs): Promise<'ok' | 'cancel'> {
    const lease = atLeast(ms, 'extend ms', 1);
    const [status] = await verbs.extendLock(this.queue, lease, [{ id: this.id, token: this.token }]);
    if (status === 'lost') throw this.stale('extend');
    return status === 'cancel' ? 'cancel' : 'ok';
  }

  /**
   * Puts the job back to run again `ms` from now on the server clock without spending an
   * attempt (a step of a longer job, SPEC's snooze). Resolves with the run-at (epoch ms), or -1
   * when the row held bad data and the job was dead-lettered instead.
   */
  async snooze(ms: number): Promise<number> {
    const delay = atLeast(ms, 'snooze ms', 1);
    try {
      return await verbs.snooze(this.queue, this.id, this.token, delay);
    } catch (e) {
      if (e instanceof EchoMQError && e.code === 'EMQLEASE') throw this.stale('snooze');
      throw e;
    }
  }

  private stale(verb: string): EchoMQError {
    return new EchoMQError(
      'EMQLEASE',
      `job ${this.id}: ${verb}() came too late, the lease token ${this.token} is no longer the job's ` +
        '(its lease expired and it was recovered, or it was completed or failed already): nothing was changed',
    );
  }
}

/** queue.claim(): up to n jobs under leases of leaseMs; a job with bad stored data is dead-lettered, not returned. */
export async function claimJobs<D, R>(
  queue: QueueWire,
  n: number,
  options?: ClaimOptions,
): Promise<ClaimedJob<D, R>[]> {
  const count = atLeast(n, 'claim n', 1);
  const opts = knownKeys(optionsObject(options, 'claim options'), CLAIM_OPTIONS, 'claim option');
  const leaseMs = atLeast(opts.leaseMs ?? 30_000, 'leaseMs', 1);
  const { jobs } = await verbs.claim(queue, count, leaseMs);
  const out: ClaimedJob<D, R>[] = [];
  const made = decodeClaims(
    jobs,
    (c, data: D, backoff) => new ClaimedJob<D, R>(queue, c, data, backoff, leaseMs),
  );
  for (const { job: claimed, bad } of made) {
    if (bad)
      await claimed.fail(bad); // it can never run as stored (SPEC 5.1)
    else out.push(claimed);
  }
  return out;
}
