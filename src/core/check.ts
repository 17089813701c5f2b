// Checks of caller input shared by the verbs: a whole number in range, refused with EMQINPUT
// before anything reaches the wire.
import { EchoMQError, showValue } from './errors.js';

/** The largest priority a job may have (lower runs first; 0 = none). */
export const PRIORITY_MAX = 2 ** 21;

/** `value` when it is a whole number from `min` to `max`; else EMQINPUT naming `what`. */
export function wholeNumber(
  value: unknown,
  what: string,
  min: number,
  max = Number.MAX_SAFE_INTEGER,
): number {
  if (typeof value !== 'number' || !Number.isInteger(value) || value < min || value > max) {
    throw new EchoMQError(
      'EMQINPUT',
      `${what} must be a whole number from ${min} to ${max}, got ${showValue(value)}`,
    );
  }
  return value;
}

/**
 * Refuses a field of `value` that is not in `known`: `unknown <what> "<field>"; known: …`, then
 * `hint` (what to do instead). Returns `value`, so a misplaced field (`{ data, id }` for
 * `{ data, opts: { id } }`) is refused where it is read, never ignored.
 */
export function knownKeys<T extends object>(
  value: T,
  known: ReadonlySet<string>,
  what: string,
  hint = '',
): T {
  for (const key of Object.keys(value)) {
    if (!known.has(key)) {
      throw new EchoMQError('EMQINPUT', `unknown ${what} "${key}"; known: ${[...known].join(', ')}${hint}`);
    }
  }
  return value;
}
