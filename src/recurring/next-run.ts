// The JobScheduler's next-run computation, kept pure: (repeat options, reference time, runs made)
// -> the epoch ms of the next run, or null when the schedule is over. No clock is read here; the
// scheduler passes the server's time in, so tests need no sleeps and every runtime agrees.
//
// Cron patterns are parsed and matched by croner, but only on wall-clock fields (croner runs at a
// fixed UTC offset of 0 over "local time written as if it were UTC"). Mapping a local wall-clock
// time to an instant is done here, because croner's own time-zone mode got both DST edges wrong
// for this contract (croner 10.0.1, checked in test/recurring/next-run.test.ts):
// - spring forward: croner moves a missing time by the size of the gap ('30 2 * * *' in
//   America/New_York on 2026-03-08 ran at 03:30 EDT); we run it at the end of the gap (03:00 EDT).
// - fall back: croner runs a repeated time once, but asked from inside the repeated hour it
//   returns the first occurrence, which is before the reference time; we never do.

import { Cron } from 'croner';
import { EchoMQError } from '../core/errors.js';

/** How a scheduler repeats. Set exactly one of `every` or `pattern`, or `immediately` alone. */
export interface RepeatOptions {
  /** Interval in ms (a whole number >= 1). The next run is the reference time + `every`. */
  every?: number;
  /**
   * A cron expression: 5 fields (minute hour day-of-month month day-of-week, minute resolution)
   * or 6 fields (seconds first). Nicknames such as '@daily' are accepted.
   */
  pattern?: string;
  /** IANA time zone the pattern is read in, e.g. 'Europe/Berlin'. Only with `pattern`; default 'UTC'. */
  tz?: string;
  /** Run once at the reference time before the regular cadence (only while no run was made yet). */
  immediately?: boolean;
  /** No run before this instant (epoch ms, Date, or an ISO 8601 string with Z or an offset). */
  startDate?: number | Date | string;
  /** No run after this instant (inclusive; same forms as `startDate`). */
  endDate?: number | Date | string;
  /** At most this many runs in total (a whole number >= 1); default unlimited. */
  limit?: number;
}

interface Compiled {
  every: number | undefined;
  cron: Cron | undefined;
  tz: string;
  immediately: boolean;
  start: number | undefined;
  end: number | undefined;
  limit: number | undefined;
}

const DAY_MS = 86_400_000;
const PATTERN_EXAMPLE = "e.g. '0 9 * * *' (09:00 daily) or '*/10 * * * * *' (every 10 s, seconds first)";
const SHAPE_EXAMPLE =
  "e.g. { every: 60000 }, { pattern: '0 9 * * *', tz: 'Europe/Berlin' } or { immediately: true }";

function show(value: unknown): string {
  if (typeof value === 'string') return JSON.stringify(value);
  if (value instanceof Date)
    return `Date(${Number.isNaN(value.getTime()) ? 'Invalid' : value.toISOString()})`;
  return String(value);
}

function inputError(message: string): EchoMQError {
  return new EchoMQError('EMQINPUT', message);
}

// ---- validation ---------------------------------------------------------------------------

/** ISO strings without a zone designator are read in the process's zone, so they are refused. */
const ISO_WITH_ZONE = /^\d{4}-\d{2}-\d{2}(?:$|T\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?:Z|[+-]\d{2}:?\d{2})$)/i;

function toEpochMs(value: unknown, field: string): number {
  let ms = Number.NaN;
  if (typeof value === 'number') ms = Number.isSafeInteger(value) && value >= 0 ? value : Number.NaN;
  else if (value instanceof Date) ms = value.getTime();
  else if (typeof value === 'string' && ISO_WITH_ZONE.test(value)) ms = Date.parse(value);
  if (!Number.isFinite(ms) || ms < 0) {
    throw inputError(
      `${field} must be epoch ms (a whole number >= 0), a valid Date or an ISO 8601 string with Z or an ` +
        `offset, got ${show(value)}; e.g. 1767225600000 or '2026-01-01T00:00:00Z'`,
    );
  }
  return ms;
}

const cronCache = new Map<string, Cron>();
const CRON_CACHE_MAX = 512;

function compilePattern(pattern: unknown): Cron {
  if (typeof pattern !== 'string' || pattern.trim() === '') {
    throw new EchoMQError(
      'EMQCRON',
      `pattern must be a non-empty cron string, got ${show(pattern)}; ${PATTERN_EXAMPLE}`,
    );
  }
  const cached = cronCache.get(pattern);
  if (cached) return cached;
  let cron: Cron;
  try {
    // utcOffset 0: croner only matches wall-clock fields; time zones are handled below.
    cron = new Cron(pattern, { utcOffset: 0, mode: '5-or-6-parts' });
  } catch (err) {
    const why = err instanceof Error ? err.message : String(err);
    throw new EchoMQError(
      'EMQCRON',
      `pattern ${show(pattern)} is not a valid cron expression (${why}); ${PATTERN_EXAMPLE}`,
      {
        cause: err,
      },
    );
  }
  if (firstRun(cron) === null) {
    throw new EchoMQError('EMQCRON', `pattern ${show(pattern)} never matches a date; ${PATTERN_EXAMPLE}`);
  }
  if (cronCache.size >= CRON_CACHE_MAX) cronCache.clear();
  cronCache.set(pattern, cron);
  return cron;
}

/**
 * The pattern's first run after the epoch, or null when it has none. Croner 10.0.1 searches an
 * impossible day rule (`LW * +6`: the last weekday on a Saturday) by recursing until the stack
 * overflows; that RangeError means the same as its null.
 */
function firstRun(cron: Cron): Date | null {
  try {
    return cron.nextRun(new Date(0));
  } catch (err) {
    if (err instanceof RangeError) return null;
    throw err;
  }
}

const formatters = new Map<string, Intl.DateTimeFormat>();

/** A formatter per zone, keyed by the caller's spelling; throws EMQCRON for an unknown zone. */
function formatterFor(tz: unknown): Intl.DateTimeFormat {
  if (typeof tz === 'string') {
    const cached = formatters.get(tz);
    if (cached) return cached;
  }
  let fmt: Intl.DateTimeFormat | undefined;
  if (typeof tz === 'string' && tz !== '') {
    try {
      fmt = new Intl.DateTimeFormat('en-US', {
        timeZone: tz,
        hourCycle: 'h23',
        year: 'numeric',
        month: 'numeric',
        day: 'numeric',
        hour: 'numeric',
        minute: 'numeric',
        second: 'numeric',
      });
    } catch {
      fmt = undefined;
    }
  }
  if (!fmt) {
    throw new EchoMQError(
      'EMQCRON',
      `tz must be an IANA time zone name, got ${show(tz)}; e.g. 'UTC', 'America/New_York' or 'Europe/Berlin'`,
    );
  }
  formatters.set(tz as string, fmt);
  return fmt;
}

function compile(opts: RepeatOptions): Compiled {
  if (typeof opts !== 'object' || opts === null) {
    throw inputError(`repeat options must be an object, got ${show(opts)}; ${SHAPE_EXAMPLE}`);
  }
  const { every, pattern, tz, immediately, startDate, endDate, limit } = opts;
  if (every !== undefined && pattern !== undefined) {
    throw inputError(`set exactly one of every or pattern, got both; ${SHAPE_EXAMPLE}`);
  }
  if (immediately !== undefined && typeof immediately !== 'boolean') {
    throw inputError(
      `immediately must be true or false, got ${show(immediately)}; e.g. { every: 60000, immediately: true }`,
    );
  }
  if (every === undefined && pattern === undefined && immediately !== true) {
    throw inputError(`set one of every or pattern (or immediately: true for a single run); ${SHAPE_EXAMPLE}`);
  }
  if (every !== undefined && (typeof every !== 'number' || !Number.isSafeInteger(every) || every < 1)) {
    throw inputError(
      `every must be a whole number of ms >= 1, got ${show(every)}; e.g. { every: 60000 } (one minute)`,
    );
  }
  if (tz !== undefined && pattern === undefined) {
    throw inputError(
      `tz applies only to a cron pattern, got tz ${show(tz)} without one; e.g. { pattern: '0 9 * * *', tz: 'Europe/Berlin' }`,
    );
  }
  const cron = pattern === undefined ? undefined : compilePattern(pattern);
  const zone = tz === undefined ? 'UTC' : tz;
  if (cron) formatterFor(zone);
  if (limit !== undefined && (typeof limit !== 'number' || !Number.isSafeInteger(limit) || limit < 1)) {
    throw inputError(
      `limit must be a whole number >= 1, got ${show(limit)}; e.g. { every: 60000, limit: 10 }`,
    );
  }
  const start = startDate === undefined ? undefined : toEpochMs(startDate, 'startDate');
  const end = endDate === undefined ? undefined : toEpochMs(endDate, 'endDate');
  if (start !== undefined && end !== undefined && end < start) {
    throw inputError(
      `endDate must not be before startDate, got startDate ${new Date(start).toISOString()} and endDate ` +
        `${new Date(end).toISOString()}`,
    );
  }
  return { every, cron, tz: zone, immediately: immediately === true, start, end, limit };
}

/**
 * Checks repeat options without computing anything. Throws EchoMQError `EMQCRON` for a pattern
 * croner cannot parse (or that never matches) and for an unknown time zone, and `EMQINPUT` for
 * everything else (both or neither of every/pattern, every < 1, tz without pattern, bad limit,
 * bad or inverted startDate/endDate); each message names the field and shows a valid value.
 */
export function validateRepeatOptions(opts: RepeatOptions): void {
  compile(opts);
}

// ---- time zones ---------------------------------------------------------------------------
// A "wall clock" below is a zone's local date and time written as epoch ms as if it were UTC.

/** The zone's offset from UTC in ms at instant `t` (resolved to the whole second). */
function offsetAt(fmt: Intl.DateTimeFormat, t: number): number {
  const second = Math.floor(t / 1000) * 1000;
  const f = { year: 0, month: 0, day: 0, hour: 0, minute: 0, second: 0 };
  for (const part of fmt.formatToParts(second)) {
    if (part.type in f) f[part.type as keyof typeof f] = Number(part.value);
  }
  const wall = Date.UTC(f.year, f.month - 1, f.day, f.hour === 24 ? 0 : f.hour, f.minute, f.second);
  return wall - second;
}

function wallClockAt(fmt: Intl.DateTimeFormat, t: number): number {
  return t + offsetAt(fmt, t);
}

/**
 * The instant a wall-clock time means: its only occurrence; the first of two when the clocks go
 * back; and when it does not exist (the clocks went forward over it), the first instant after the
 * gap, so a run scheduled inside the gap happens once, as soon as it can.
 */
function instantOf(fmt: Intl.DateTimeFormat, wall: number): number {
  const before = offsetAt(fmt, wall - DAY_MS);
  const after = offsetAt(fmt, wall + DAY_MS);
  let first: number | undefined;
  for (const offset of before === after ? [before] : [before, after]) {
    const t = wall - offset;
    if (wallClockAt(fmt, t) === wall && (first === undefined || t < first)) first = t;
  }
  if (first !== undefined) return first;
  // In the gap: bisect for the first instant whose wall clock is past `wall`.
  let lo = wall - Math.max(before, after);
  let hi = wall - Math.min(before, after);
  if (hi <= lo) return hi; // no DST-style transition nearby; cannot happen with real zone data
  while (hi - lo > 1) {
    const mid = Math.floor((lo + hi) / 2);
    if (wallClockAt(fmt, mid) > wall) hi = mid;
    else lo = mid;
  }
  return hi;
}

/**
 * The latest wall-clock time shown at or before instant `t`. It is the wall clock at `t`, except
 * in the second pass of a repeated hour, where the clock already read higher just before it was
 * set back: those times have fired and must not fire again.
 */
function wallClockHighWater(fmt: Intl.DateTimeFormat, t: number): number {
  const wall = wallClockAt(fmt, t);
  const first = instantOf(fmt, wall);
  if (first >= t) return wall;
  const offsetFirst = offsetAt(fmt, first);
  if (offsetAt(fmt, t) === offsetFirst) return wall;
  let lo = first; // still the old offset
  let hi = t; // already the new one
  while (hi - lo > 1) {
    const mid = Math.floor((lo + hi) / 2);
    if (offsetAt(fmt, mid) === offsetFirst) lo = mid;
    else hi = mid;
  }
  return Math.max(wall, wallClockAt(fmt, lo));
}

/** The first instant strictly after `after` that `cron` allows in zone `tz`, or null if none. */
function nextCronInstant(cron: Cron, tz: string, after: number): number | null {
  const fmt = formatterFor(tz);
  if (fmt.resolvedOptions().timeZone === 'UTC') return cron.nextRun(new Date(after))?.getTime() ?? null;
  let wall = wallClockHighWater(fmt, after);
  // Every wall clock above the high-water mark maps past `after`; the loop is a safety net.
  for (let guard = 0; guard < 1000; guard++) {
    const next = cron.nextRun(new Date(wall));
    if (next === null) return null;
    wall = next.getTime();
    const t = instantOf(fmt, wall);
    if (t > after) return t;
  }
  return null;
}

// ---- the computation ----------------------------------------------------------------------

/**
 * The epoch ms of the next run, or null when there is none.
 *
 * - `{ every }`: `referenceTime + every`; while `startDate` is later than `referenceTime`, the
 *   next run is `startDate` itself.
 * - `{ pattern, tz }`: the first instant strictly after `referenceTime` (and not before
 *   `startDate`) that the pattern allows, read in `tz` (default 'UTC'). DST: a local time that
 *   does not exist runs once at the first valid instant after the gap ('30 2 * * *' in
 *   America/New_York on 2026-03-08 runs at 03:00 EDT); a local time that happens twice runs
 *   once, at its first occurrence. A pattern firing several times an hour therefore runs nothing
 *   in the repeated hour.
 * - `immediately`: while `count` is 0 (no run made yet) the next run is `referenceTime` (or
 *   `startDate` if later); after that it is the `every`/`pattern` cadence, or null when
 *   `immediately` was given alone (a single run).
 * - Null when `count >= limit`, or when the next run would be after `endDate`.
 *
 * @param opts repeat options; validated as by {@link validateRepeatOptions}.
 * @param referenceTime epoch ms to compute from (the previous run, or now); a whole number >= 0.
 * @param count runs already made for this scheduler; default 0.
 * @throws EchoMQError `EMQINPUT` / `EMQCRON` as {@link validateRepeatOptions}, or `EMQINPUT`
 *   for a bad `referenceTime` or `count`.
 */
export function calculateNextMillis(opts: RepeatOptions, referenceTime: number, count = 0): number | null {
  const c = compile(opts);
  if (typeof referenceTime !== 'number' || !Number.isSafeInteger(referenceTime) || referenceTime < 0) {
    throw inputError(`referenceTime must be epoch ms (a whole number >= 0), got ${show(referenceTime)}`);
  }
  if (typeof count !== 'number' || !Number.isSafeInteger(count) || count < 0) {
    throw inputError(`count (runs already made) must be a whole number >= 0, got ${show(count)}`);
  }
  if (c.limit !== undefined && count >= c.limit) return null;

  let next: number | null;
  if (c.immediately && count === 0) {
    next = c.start !== undefined && c.start > referenceTime ? c.start : referenceTime;
  } else if (c.every !== undefined) {
    next = c.start !== undefined && c.start > referenceTime ? c.start : referenceTime + c.every;
  } else if (c.cron !== undefined) {
    // t > start - 1 is t >= start for whole ms: startDate itself may be a run.
    const after = c.start !== undefined ? Math.max(referenceTime, c.start - 1) : referenceTime;
    next = nextCronInstant(c.cron, c.tz, after);
  } else {
    next = null; // immediately alone, and it has run
  }
  if (next === null || (c.end !== undefined && next > c.end)) return null;
  return next;
}
