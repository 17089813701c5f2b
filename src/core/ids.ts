// Job ids: branded (`JOB` prefix, which the scripts enforce with EMQKIND) and time-sortable.
// Pending is a sorted set where equal scores order by member, so ids minted by one process must
// sort in mint order: a ULID-style layout (time, then randomness) made monotonic within a
// millisecond and across a clock that steps backwards.

import { randomBytes } from 'node:crypto';
import { EchoMQError, showValue } from './errors.js';

/** Crockford base32: no I, L, O or U, and its digits sort in ASCII order. */
const ALPHABET = '0123456789ABCDEFGHJKMNPQRSTVWXYZ';
const PREFIX = 'JOB';
const TIME_CHARS = 10;
const RANDOM_CHARS = 10;
/** 10 base32 characters hold 50 bits; ULID keeps time to 48 bits (good until the year 10889). */
const MAX_TIME = 2 ** 48 - 1;
const MIN_ID_LENGTH = 4;
const MAX_ID_LENGTH = 512;
const WHITESPACE_OR_CONTROL = /[\s\p{Cc}]/u;

/** Length of a minted id: `JOB` + 10 time characters + 10 random characters. */
export const MINTED_JOB_ID_LENGTH = PREFIX.length + TIME_CHARS + RANDOM_CHARS;

function encodeTime(ms: number): string {
  let out = '';
  let rest = ms;
  for (let i = 0; i < TIME_CHARS; i++) {
    out = ALPHABET[rest % 32] + out;
    rest = Math.floor(rest / 32);
  }
  return out;
}

/**
 * The mint instant (epoch ms) a minted id holds in its time part, or undefined for an id of
 * another shape. enqueue leaves `created` off the row of a job whose minted id holds it already
 * (SPEC section 3), so this is that row's creation instant.
 */
export function mintedAt(id: string): number | undefined {
  if (id.length !== MINTED_JOB_ID_LENGTH || !id.startsWith(PREFIX)) return undefined;
  let at = 0;
  for (let i = PREFIX.length; i < id.length; i++) {
    const digit = ALPHABET.indexOf(id[i]!);
    if (digit < 0) return undefined;
    if (i < PREFIX.length + TIME_CHARS) at = at * 32 + digit;
  }
  return at;
}

/**
 * The id of a recurring occurrence, as the scripts mint it: `JOB`, the instant as 10 Crockford
 * base32 characters (the time part of a minted id, so occurrences sort among minted jobs by the
 * instant they stand for), then `:r:<repeat name>` or `:s:<scheduler id>`.
 * E.g. occurrenceId('r', 'nightly', 1767225600000) is 'JOB01KDVDNA00:r:nightly'.
 */
export function occurrenceId(kind: 'r' | 's', name: string, at: number): string {
  return `${PREFIX}${encodeTime(at)}:${kind}:${name}`;
}

/**
 * Returns a minter of JOB ids with an injected clock and entropy source (tests pass a frozen or
 * backwards clock; production uses `Date.now` and `crypto.randomBytes`).
 *
 * Within one minter, ids are strictly increasing as strings: a new millisecond draws fresh
 * randomness; the same millisecond, or a clock behind the last one seen, keeps the last time and
 * adds one to the random part. If that part is exhausted the time part moves on by 1 ms.
 *
 * @param now current time in epoch ms (a whole number in [0, 2^48)).
 * @param random returns `n` random bytes (at least 10 are read).
 * @throws EchoMQError `EMQINPUT` (when minting) if `now` or `random` return something unusable.
 */
export function createIdMinter(now: () => number, random: (n: number) => Uint8Array): () => string {
  let lastTime = -1;
  let prefixTime = -1;
  let prefix = '';
  const digits = new Uint8Array(RANDOM_CHARS);

  const freshRandom = (): void => {
    const bytes = random(RANDOM_CHARS);
    if (!(bytes instanceof Uint8Array) || bytes.length < RANDOM_CHARS) {
      throw new EchoMQError('EMQINPUT', `id random source must return at least ${RANDOM_CHARS} bytes`);
    }
    // 256 is a multiple of 32, so keeping the low 5 bits of each byte stays uniform.
    for (let i = 0; i < RANDOM_CHARS; i++) digits[i] = bytes[i]! & 31;
  };

  /** Adds one to the random part; false when it was already the largest value. */
  const increment = (): boolean => {
    for (let i = RANDOM_CHARS - 1; i >= 0; i--) {
      if (digits[i]! < 31) {
        digits[i]!++;
        return true;
      }
      digits[i] = 0;
    }
    return false;
  };

  return () => {
    const t = now();
    if (!Number.isSafeInteger(t) || t < 0 || t > MAX_TIME) {
      throw new EchoMQError('EMQINPUT', `id clock must return whole epoch ms in [0, 2^48), got ${String(t)}`);
    }
    if (t > lastTime) {
      lastTime = t;
      freshRandom();
    } else if (!increment()) {
      if (lastTime >= MAX_TIME) throw new EchoMQError('EMQINPUT', 'id clock has reached 2^48 ms');
      lastTime++;
      freshRandom();
    }
    // The time part is the same for every id of one millisecond: encoded once per ms.
    if (lastTime !== prefixTime) {
      prefixTime = lastTime;
      prefix = PREFIX + encodeTime(lastTime);
    }
    let out = prefix;
    for (let i = 0; i < RANDOM_CHARS; i++) out += ALPHABET[digits[i]!];
    return out;
  };
}

/**
 * `n` bytes of crypto randomness, cut from a pool drawn 4 KiB at a time: one call into OpenSSL
 * per ~400 ids instead of one per id (the pool's bytes are used once, never handed out twice).
 */
function pooledRandomBytes(): (n: number) => Uint8Array {
  const POOL = 4096;
  let pool = randomBytes(0);
  let used = 0;
  return (n) => {
    if (used + n > pool.length) {
      pool = randomBytes(Math.max(POOL, n));
      used = 0;
    }
    used += n;
    return pool.subarray(used - n, used);
  };
}

/**
 * Mints a new job id: `JOB` + 10 Crockford base32 characters of `Date.now()` ms + 10 of
 * crypto randomness (23 characters). Ids from this process sort in mint order.
 */
export const mintJobId: () => string = createIdMinter(Date.now, pooledRandomBytes());

/**
 * True for an acceptable job id: a string starting with `JOB`, 4 to 512 characters, with no
 * whitespace or control characters. Caller-supplied ids need not be minted ones.
 */
export function isJobId(id: unknown): id is string {
  return (
    typeof id === 'string' &&
    id.startsWith(PREFIX) &&
    id.length >= MIN_ID_LENGTH &&
    id.length <= MAX_ID_LENGTH &&
    !WHITESPACE_OR_CONTROL.test(id)
  );
}

function show(id: unknown): string {
  if (typeof id !== 'string') return `${typeof id} ${showValue(id)}`;
  return JSON.stringify(id.length > 64 ? `${id.slice(0, 64)}…` : id);
}

/**
 * Throws EchoMQError `EMQKIND` unless `id` passes {@link isJobId}; the message says what was
 * wrong and what is accepted.
 */
export function assertJobId(id: unknown): asserts id is string {
  if (isJobId(id)) return;
  const hint = 'pass an id starting with JOB or omit it to mint one';
  if (typeof id !== 'string' || !id.startsWith(PREFIX)) {
    throw new EchoMQError('EMQKIND', `job id must be JOB-namespaced, got ${show(id)}; ${hint}`);
  }
  throw new EchoMQError(
    'EMQKIND',
    `job id must be ${MIN_ID_LENGTH} to ${MAX_ID_LENGTH} characters with no whitespace or control ` +
      `characters, got ${show(id)} (${id.length} characters); ${hint}`,
  );
}
