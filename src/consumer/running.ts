// A claimed job while its handler runs: the Job and JobContext the handler sees, and the
// flags the consumer's parts read to decide what happens to its outcome. It holds no consumer:
// every ctx call that reaches Redis goes through a JobControl (the consumer's leases).

import { Backoff, type BackoffPolicy } from '../core/backoff.js';
import { EchoMQError, showValue } from '../core/errors.js';
import type { Job, JobContext } from '../core/types.js';
import type * as verbs from '../wire/verbs/index.js';
import { RateLimitError, SnoozeError } from './putback.js';

/** Throw (or wrap) this to dead-letter a job at once, whatever attempts it has left. */
export class UnrecoverableError extends Error {
  override readonly name = 'UnrecoverableError';
}

/** Why a job's signal was aborted. */
export type Abort = 'cancelled' | 'lost' | 'closing' | 'timeout';

/** What a running job's ctx asks of the consumer that holds it. */
export interface JobControl<D> {
  checkpoint(job: Running<D>): Promise<void>;
  progress(job: Running<D>, value: number | object): Promise<void>;
  log(job: Running<D>, line: string): void;
  update(job: Running<D>, data: unknown): Promise<void>;
  childrenResults(job: Running<D>): Promise<Record<string, unknown>>;
  childrenFailures(job: Running<D>): Promise<Record<string, string>>;
}

/**
 * A claimed job as its claim handed it over, decoded (SPEC 19 claim): what the consumer's running
 * job and a hand-claimed job (queue.claim) both are.
 */
export class ClaimedFields<D> {
  readonly id: string;
  /** The lease token this claim holds (SPEC 8): opaque decimal text. */
  readonly token: string;
  readonly attempts: number;
  readonly maxAttempts: number;
  readonly name: string | undefined;

  constructor(
    c: verbs.ClaimedJob,
    readonly data: D,
    /** The job's own retry policy, if it has one. */
    readonly backoff: BackoffPolicy | undefined,
  ) {
    this.id = c.id;
    this.token = c.token;
    this.attempts = c.attempts;
    this.maxAttempts = c.max;
    this.name = c.name || undefined;
  }
}

export class Running<D> extends ClaimedFields<D> implements Job<D>, JobContext {
  private controller: AbortController | undefined;
  aborted: Abort | undefined;
  /** Set when the job left this consumer (handed back, or lost): its outcome is not sent. */
  released = false;
  /** Its lease expired and this same consumer claimed the job again: the old handler still runs. */
  orphaned = false;
  /** The handler ended and its outcome (complete or fail) is queued or in flight: that reply decides. */
  acking = false;
  readonly startedAt = performance.now();
  /** Log lines not sent yet (ctx.log), oldest first. */
  logLines: string[] | undefined;
  /** Its execution timeout, when it has one (its own timeoutMs, else the consumer's), and when it runs out. */
  timeoutMs: number | undefined;
  deadlineAt: number | undefined;

  constructor(
    private readonly control: JobControl<D>,
    c: verbs.ClaimedJob,
    data: D,
    backoff: BackoffPolicy | undefined,
  ) {
    super(c, data, backoff);
  }

  // The controller is made on first use: most handlers never look at the signal.
  get signal(): AbortSignal {
    if (!this.controller) {
      this.controller = new AbortController();
      if (this.aborted) this.controller.abort(this.reason());
    }
    return this.controller.signal;
  }

  abort(why: Abort): void {
    if (this.aborted) return;
    this.aborted = why;
    this.controller?.abort(this.reason());
  }

  reason(): EchoMQError {
    if (this.aborted === 'cancelled') return new EchoMQError('EMQCANCELLED', `job ${this.id} was cancelled`);
    if (this.aborted === 'timeout') {
      return new EchoMQError(
        'EMQTIMEOUT',
        `job ${this.id} ran past its timeout of ${this.timeoutMs} ms; the attempt failed (reason timeout)`,
      );
    }
    if (this.aborted === 'lost') {
      return new EchoMQError(
        'EMQLEASE',
        `job ${this.id} lost its lease (it was recovered by another consumer)`,
      );
    }
    return new EchoMQError(
      'EMQCLOSED',
      `the consumer closed before job ${this.id} finished; it was handed back`,
    );
  }

  checkpoint(): Promise<void> {
    return this.control.checkpoint(this);
  }

  progress(value: number | object): Promise<void> {
    return this.control.progress(this, value);
  }

  log(line: string): void {
    this.control.log(this, line);
  }

  update(data: unknown): Promise<void> {
    return this.control.update(this, data);
  }

  snooze(delayMs: number): never {
    throw new SnoozeError(delayMs);
  }

  rateLimit(retryAfterMs: number): never {
    throw new RateLimitError(retryAfterMs);
  }

  childrenFailures(): Promise<Record<string, string>> {
    return this.control.childrenFailures(this);
  }

  childrenResults(): Promise<Record<string, unknown>> {
    return this.control.childrenResults(this);
  }
}

/** A job of a claim's reply, ready to run; `bad`: its stored data cannot run (SPEC 5.1). */
export interface Claimed<D> {
  job: Running<D>;
  bad: UnrecoverableError | undefined;
}

/**
 * The claim's jobs decoded and made into `make`'s kind of job (no object in between); `bad`: the
 * error that dead-letters one that can never run as stored.
 */
export function decodeClaims<D, J>(
  jobs: readonly verbs.ClaimedJob[],
  make: (c: verbs.ClaimedJob, data: D, backoff: BackoffPolicy | undefined) => J,
): { job: J; bad: UnrecoverableError | undefined }[] {
  return jobs.map((c) => {
    const decoded = new DecodedClaim(c);
    return { job: make(c, decoded.data as D, decoded.backoff), bad: decoded.bad };
  });
}

/**
 * A claimed job's payload and backoff as the handler and the failure path use them (SPEC 5.1):
 * a payload that is not JSON, or a backoff that is not a policy, is bad data — `bad` is the
 * error that dead-letters the job (it can never run as stored). One class rather than object
 * literals of three shapes: the consumer decodes one per job, and one shape keeps that cheap.
 */
export class DecodedClaim {
  data: unknown = undefined;
  backoff: BackoffPolicy | undefined = undefined;
  bad: UnrecoverableError | undefined = undefined;

  constructor(c: verbs.ClaimedJob) {
    try {
      this.data = JSON.parse(String(c.payload));
    } catch (err) {
      this.bad = badData(c.id, 'payload', err);
      return;
    }
    const backoff: unknown = c.backoff;
    if (typeof backoff !== 'string' || backoff === '') return;
    try {
      this.backoff = Backoff.validate(JSON.parse(backoff));
    } catch (err) {
      this.bad = badData(c.id, 'backoff', err);
    }
  }
}

export function badData(id: string, field: 'payload' | 'backoff', cause: unknown): UnrecoverableError {
  const why = cause instanceof Error ? cause.message : showValue(cause);
  const fix =
    field === 'payload' ? 'enqueue its data as JSON' : 'fix the field (or remove it) and retry the job';
  return new UnrecoverableError(
    `EMQDATA job ${id} has a ${field} this consumer cannot use (${why}); it was dead-lettered: ${fix}`,
    { cause },
  );
}
