// Retry backoff as a pure function of (policy, attempts) -> milliseconds. The delay is computed
// above the wire and handed to the scripts as a plain number, so the retry cadence is testable
// without a clock and identical in every runtime that reads the same policy JSON.

import { EchoMQError } from './errors.js';

/**
 * How long to wait before the next attempt. All durations are whole milliseconds.
 * - `fixed`: the same `ms` on every attempt (`ms >= 0`).
 * - `exponential`: `base * 2^(attempts - 1)`, clamped at `cap` (`base >= 1`, `cap >= 1`).
 * - `jitter`: a uniform whole number in `[0, bound]`, where `bound` is the `inner` policy's delay.
 */
export type BackoffPolicy =
  | { kind: 'fixed'; ms: number }
  | { kind: 'exponential'; base: number; cap: number }
  | { kind: 'jitter'; inner: BackoffPolicy };

/** Jitter may wrap jitter, but a policy nested deeper than this is garbage (or a cycle). */
const MAX_DEPTH = 8;

const EXAMPLES =
  "{ kind: 'fixed', ms: 5000 }, { kind: 'exponential', base: 100, cap: 10000 } " +
  "or { kind: 'jitter', inner: { kind: 'exponential', base: 100, cap: 10000 } }";

function show(value: unknown): string {
  if (typeof value === 'string') return JSON.stringify(value);
  if (typeof value === 'number' || typeof value === 'boolean' || value == null) return String(value);
  try {
    return JSON.stringify(value) ?? typeof value;
  } catch {
    return typeof value;
  }
}

function invalid(message: string): EchoMQError {
  return new EchoMQError('EMQINPUT', message);
}

function wholeMs(value: unknown, min: number, what: string): number {
  if (typeof value !== 'number' || !Number.isSafeInteger(value) || value < min) {
    throw invalid(`backoff ${what} must be a whole number of ms >= ${min}, got ${show(value)}`);
  }
  return value;
}

function validateAt(policy: unknown, depth: number): BackoffPolicy {
  if (depth > MAX_DEPTH) {
    throw invalid(`backoff policy is nested more than ${MAX_DEPTH} jitter levels deep; use e.g. ${EXAMPLES}`);
  }
  if (typeof policy !== 'object' || policy === null) {
    throw invalid(`backoff policy must be an object, got ${show(policy)}; use e.g. ${EXAMPLES}`);
  }
  const p = policy as Record<string, unknown>;
  switch (p.kind) {
    case 'fixed':
      return { kind: 'fixed', ms: wholeMs(p.ms, 0, 'fixed ms') };
    case 'exponential':
      return {
        kind: 'exponential',
        base: wholeMs(p.base, 1, 'exponential base'),
        cap: wholeMs(p.cap, 1, 'exponential cap'),
      };
    case 'jitter':
      return { kind: 'jitter', inner: validateAt(p.inner, depth + 1) };
    default:
      throw invalid(
        `backoff policy kind must be 'fixed', 'exponential' or 'jitter', got ${show(p.kind)}; use e.g. ${EXAMPLES}`,
      );
  }
}

/**
 * Checks a policy (for example one parsed from JSON) and returns a clean copy holding only the
 * known fields. Throws EchoMQError `EMQINPUT` naming the bad field and what is accepted.
 */
export function validate(policy: unknown): BackoffPolicy {
  return validateAt(policy, 0);
}

function compute(policy: BackoffPolicy, attempts: number, random: () => number): number {
  switch (policy.kind) {
    case 'fixed':
      return policy.ms;
    case 'exponential': {
      // base and cap are safe integers, so base * 2^shift is exact for shift <= 52 (multiplying
      // by a power of two only moves the exponent) and already above any cap past that. The
      // early return keeps a huge attempt count from reaching Infinity.
      const shift = attempts - 1;
      if (shift >= 53) return policy.cap;
      return Math.min(policy.base * 2 ** shift, policy.cap);
    }
    case 'jitter': {
      const bound = compute(policy.inner, attempts, random);
      if (bound <= 0) return 0;
      const r = random();
      if (typeof r !== 'number' || !(r >= 0 && r < 1)) {
        throw invalid(`backoff jitter random() must return a number in [0, 1), got ${show(r)}`);
      }
      return Math.floor(r * (bound + 1));
    }
  }
}

/**
 * The delay in ms before retry number `attempts` (1 = the first retry after the first failure).
 *
 * @param policy the backoff policy; validated on every call.
 * @param attempts a whole number >= 1.
 * @param random source of uniform numbers in [0, 1) for `jitter`; defaults to `Math.random`.
 *   Pass a seeded or fixed function to make jitter deterministic.
 * @returns a whole number of ms >= 0.
 * @throws EchoMQError `EMQINPUT` for an invalid policy, attempts or random value.
 */
export function delayMs(policy: BackoffPolicy, attempts: number, random: () => number = Math.random): number {
  const checked = validate(policy);
  if (typeof attempts !== 'number' || !Number.isSafeInteger(attempts) || attempts < 1) {
    throw invalid(`backoff attempts must be a whole number >= 1 (1 = first retry), got ${show(attempts)}`);
  }
  return compute(checked, attempts, random);
}

/** The backoff surface as one namespace: `Backoff.delayMs(policy, attempts)`, `Backoff.validate(policy)`. */
export const Backoff = { delayMs, validate } as const;
