// The checks every public call makes on what it is given, written once so that every option
// is refused in the same words: whole numbers in a range, unknown option names, and the names
// that become part of a key (queue, group, repeat name, scheduler id).
import { EchoMQError, showValue } from './errors.js';

/** The largest priority a job may have (lower runs first; 0 = none). */
export const PRIORITY_MAX = 2 ** 21;

/** True for a whole number from `min` to `max`. */
export function isWhole(value: unknown, min: number, max = Number.MAX_SAFE_INTEGER): value is number {
  return typeof value === 'number' && Number.isInteger(value) && value >= min && value <= max;
}

/** `value` when it is a whole number from `min` to `max`; EMQINPUT saying the range otherwise. */
export function wholeNumber(
  value: unknown,
  what: string,
  min: number,
  max = Number.MAX_SAFE_INTEGER,
): number {
  if (!isWhole(value, min, max)) {
    throw new EchoMQError(
      'EMQINPUT',
      `${what} must be a whole number from ${min} to ${max}, got ${showValue(value)}`,
    );
  }
  return value;
}

/**
 * `value` when it is a whole number of at least `min` (no upper bound worth naming); EMQINPUT
 * otherwise. `note` explains a special value, e.g. '0 = unlimited'.
 */
export function atLeast(value: unknown, what: string, min: number, note?: string): number {
  if (!isWhole(value, min)) {
    const explained = note === undefined ? '' : ` (${note})`;
    throw new EchoMQError(
      'EMQINPUT',
      `${what} must be a whole number >= ${min}${explained}, got ${showValue(value)}`,
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

/** The names that become part of keys (and, for recurrence, of job ids). */
export type NameKind = 'queue' | 'group' | 'repeat name' | 'scheduler id';

const MAX_NAME = 200;
// Braces would break the hash tag of the keys built from the name; whitespace and control
// characters would make keys and job ids unreadable (and are refused in job ids).
const BAD_NAME = /[{}\s\p{Cc}]/u;
const LABEL: Record<NameKind, string> = {
  queue: 'queue name',
  group: 'group name',
  'repeat name': 'repeat name',
  'scheduler id': 'scheduler id',
};
const EXAMPLE: Record<NameKind, string> = {
  queue: '',
  group: '',
  'repeat name': "; e.g. 'nightly-report'",
  'scheduler id': "; e.g. 'nightly-report'",
};

/** Refuses a name that would break the key layout: 1-200 characters, no braces, spaces or controls. */
export function assertName(kind: NameKind, name: unknown): asserts name is string {
  if (typeof name !== 'string' || name.length === 0 || name.length > MAX_NAME || BAD_NAME.test(name)) {
    const got = typeof name === 'string' ? JSON.stringify(name) : typeof name;
    throw new EchoMQError(
      'EMQINPUT',
      `${LABEL[kind]} must be 1-${MAX_NAME} characters without braces, spaces or control characters, ` +
        `got ${got}${EXAMPLE[kind]}`,
    );
  }
}
