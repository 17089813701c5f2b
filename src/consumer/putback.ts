// A handler putting its running job back without spending an attempt: SnoozeError (run it again
// after a delay: a step job between its steps) and RateLimitError (back-pressure downstream: the
// job returns to the queue and claiming is held, for every consumer, on the server clock: the
// whole queue's for a flat job, its lane's only for a grouped one). The scripts (snooze.lua,
// rate_limit.lua) are fenced by the lease token like a completion; the delay is checked here, at
// the throw, so a bad one is an EchoMQError in the handler (a failed attempt saying why).
import { atLeast } from '../core/check.js';
import { EchoMQError, showValue } from '../core/errors.js';
import type { QueueWire } from '../wire/queue-wire.js';
import * as verbs from '../wire/verbs/index.js';

function delayOf(ms: number, what: string): number {
  return atLeast(ms, what, 1, 'whole ms');
}

/** Thrown (or `ctx.snooze(ms)`) from a handler: run this job again in `delayMs` (server clock). */
export class SnoozeError extends Error {
  override readonly name = 'SnoozeError';
  readonly delayMs: number;
  constructor(delayMs: number) {
    const ms = delayOf(delayMs, 'snooze delayMs');
    super(`snoozed for ${ms} ms`);
    this.delayMs = ms;
  }
}

/**
 * Thrown (or `ctx.rateLimit(ms)`) from a handler that met back-pressure (an HTTP 429): the job
 * goes back to the queue with its attempt given back, and no consumer claims from the queue (or,
 * for a grouped job, from its lane) for `retryAfterMs`.
 */
export class RateLimitError extends Error {
  override readonly name = 'RateLimitError';
  readonly retryAfterMs: number;
  constructor(retryAfterMs: number) {
    const ms = delayOf(retryAfterMs, 'RateLimitError retryAfterMs');
    super(`rate limited for ${ms} ms`);
    this.retryAfterMs = ms;
  }
}

/**
 * The ms an HTTP `Retry-After` value asks for: delta-seconds (`'120'`) or an HTTP-date (`'Wed, 21
 * Oct 2026 07:28:00 GMT'`, against `now`), at least 1; `fallbackMs` when the header is absent or
 * unreadable. `throw new RateLimitError(retryAfterMs(res.headers.get('retry-after')))`.
 */
export function retryAfterMs(header: string | null | undefined, fallbackMs = 1000, now = Date.now()): number {
  const fallback = delayOf(fallbackMs, 'retryAfterMs fallbackMs');
  if (header !== null && header !== undefined && typeof header !== 'string') {
    throw new EchoMQError(
      'EMQINPUT',
      `retryAfterMs takes a Retry-After header's value (a string, or null when absent), got ${showValue(header)}`,
    );
  }
  const value = header?.trim() ?? '';
  if (/^\d+$/.test(value)) return Math.max(1, Number(value) * 1000);
  const at = value === '' ? Number.NaN : Date.parse(value);
  return Number.isFinite(at) ? Math.max(1, Math.ceil(at - now)) : fallback;
}

/** A handler's request to put its job back: the script and its delay. */
export interface PutBack {
  verb: 'snooze' | 'rate_limit';
  ms: number;
}

/** What the handler threw, when it asks to put its job back. */
export function putBackOf(error: unknown): PutBack | undefined {
  if (error instanceof SnoozeError) return { verb: 'snooze', ms: error.delayMs };
  if (error instanceof RateLimitError) return { verb: 'rate_limit', ms: error.retryAfterMs };
  return undefined;
}

/**
 * Runs snooze or rate_limit for a held job: the instant (server ms) it runs again or the hold
 * ends; -1 when its row was malformed and it was dead-lettered instead. EMQLEASE / EMQNOJOB (the
 * lease was lost) propagate as EchoMQError, for the caller to treat as a lost job.
 */
export function putBack(
  wire: QueueWire,
  job: { id: string; token: string },
  asked: PutBack,
): Promise<number> {
  const verb = asked.verb === 'snooze' ? verbs.snooze : verbs.rateLimit;
  return verb(wire, job.id, job.token, asked.ms);
}
