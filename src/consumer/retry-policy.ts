// When a failed attempt runs again: the declarative backoff (the job's own policy, else the
// consumer's; shared by every runtime) or a function of the consumer's, for errors only code
// can tell apart (retry a 503 in a second, dead-letter a 400 at once). Either way the fail
// script is handed one number: the delay in ms, or -1 (never retry).

import { Backoff, type BackoffPolicy } from '../core/backoff.js';
import { EchoMQError, showValue } from '../core/errors.js';
import type { Job } from '../core/types.js';
import { badData, UnrecoverableError } from './running.js';

/**
 * A retry policy as code: the delay in ms before the next attempt, `'dead'` to dead-letter the
 * job now, or `undefined` to leave it to the declarative backoff. Called only while the job
 * has attempts left (the last attempt's failure dead-letters it whatever this says).
 */
export type RetryPolicy = (attempts: number, error: Error, job: Job) => number | 'dead' | undefined;

export interface RetryPolicies {
  /** The consumer's policy for every job (see RetryPolicy). Default: none (declarative backoff). */
  retry?: RetryPolicy;
  /** Per job name, a policy that takes the place of `retry` for the jobs of that name. */
  retryByName?: Record<string, RetryPolicy>;
}

/** Refuses a policy that is not a function, with what to pass instead. */
export function checkRetryPolicies(opts: RetryPolicies): void {
  if (opts.retry !== undefined && typeof opts.retry !== 'function') {
    throw new EchoMQError(
      'EMQINPUT',
      `retry must be a function (attempts, error, job) => delayMs | 'dead' | undefined, got ${showValue(opts.retry)}`,
    );
  }
  const byName = opts.retryByName;
  if (byName === undefined) return;
  if (typeof byName !== 'object' || byName === null || Array.isArray(byName)) {
    throw new EchoMQError('EMQINPUT', 'retryByName must be an object of job name -> retry policy function');
  }
  for (const [name, fn] of Object.entries(byName)) {
    if (typeof fn !== 'function') {
      throw new EchoMQError(
        'EMQINPUT',
        `retryByName.${name} must be a retry policy function, got ${showValue(fn)}`,
      );
    }
  }
}

/** What the fail script is handed: `delay` (ms, or -1: never retry) and the error it stores. */
export interface RetryDecision {
  delay: number;
  error: Error;
}

/**
 * The fail script's delay for a failed attempt of `job`. An UnrecoverableError (or a cancel:
 * `unrecoverable`) never retries; on the last attempt the script dead-letters by the count
 * itself, so any delay will do. A policy that throws, or answers anything but a whole number
 * of ms >= 0, 'dead' or undefined, dead-letters the job with an error saying so.
 */
export function retryDecision(
  job: Job & { readonly backoff: BackoffPolicy | undefined },
  error: Error,
  unrecoverable: boolean,
  fallback: BackoffPolicy,
  policies: RetryPolicies,
): RetryDecision {
  if (unrecoverable) return { delay: -1, error };
  if (job.attempts >= job.maxAttempts) return { delay: 0, error };
  const policy = (job.name !== undefined ? policies.retryByName?.[job.name] : undefined) ?? policies.retry;
  if (policy) {
    let answer: unknown;
    try {
      answer = policy(job.attempts, error, job);
    } catch (err) {
      return {
        delay: -1,
        error: badPolicy(job, error, `threw ${err instanceof Error ? err.message : showValue(err)}`),
      };
    }
    if (answer === 'dead') return { delay: -1, error };
    if (typeof answer === 'number' && Number.isSafeInteger(answer) && answer >= 0)
      return { delay: answer, error };
    if (answer !== undefined) {
      const shown = typeof answer === 'string' ? `'${answer}'` : showValue(answer);
      return { delay: -1, error: badPolicy(job, error, `returned ${shown}`) };
    }
  }
  try {
    return { delay: Backoff.delayMs(job.backoff ?? fallback, job.attempts), error };
  } catch (err) {
    return { delay: -1, error: badData(job.id, 'backoff', err) }; // a policy that cannot say when never will
  }
}

function badPolicy(job: Job, error: Error, what: string): UnrecoverableError {
  return new UnrecoverableError(
    `EMQINPUT the retry policy for job ${job.id} ${what} (it must return a whole number of ms >= 0, 'dead' or undefined); ` +
      `the job was dead-lettered. Its error: ${error.message}`,
    { cause: error },
  );
}
