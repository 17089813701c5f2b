// calculateNextMillis is pure: every case passes an explicit reference time (no sleeps, no Date.now).
import { Cron } from 'croner';
import { describe, expect, it } from 'vitest';
import { EchoMQError } from '../../src/core/errors.js';
import {
  calculateNextMillis,
  type RepeatOptions,
  validateRepeatOptions,
} from '../../src/recurring/next-run.js';

const T = (iso: string): number => {
  const ms = Date.parse(iso);
  if (Number.isNaN(ms)) throw new Error(`bad test time ${iso}`);
  return ms;
};
const iso = (ms: number | null): string | null => (ms === null ? null : new Date(ms).toISOString());

/** The next `n` runs after `from`, each computed from the previous one (as the scheduler does). */
function runs(opts: RepeatOptions, from: string, n: number): Array<string | null> {
  const out: Array<string | null> = [];
  let ref: number | null = T(from);
  for (let i = 0; i < n && ref !== null; i++) {
    ref = calculateNextMillis(opts, ref, i + 1);
    out.push(iso(ref));
  }
  return out;
}

function failure(fn: () => unknown): EchoMQError {
  try {
    fn();
  } catch (err) {
    expect(err).toBeInstanceOf(EchoMQError);
    return err as EchoMQError;
  }
  throw new Error('expected an EchoMQError');
}

describe('every', () => {
  it('schedules the next run `every` ms after the reference time (seed: every 60000)', () => {
    expect(calculateNextMillis({ every: 60_000 }, 1_000_000)).toBe(1_060_000);
    expect(calculateNextMillis({ every: 1 }, 0)).toBe(1);
  });

  it('runs first at startDate while it is later than the reference time', () => {
    const start = T('2026-05-01T00:00:00Z');
    expect(calculateNextMillis({ every: 1000, startDate: start }, start - 10_000)).toBe(start);
    expect(calculateNextMillis({ every: 1000, startDate: new Date(start) }, start - 1)).toBe(start);
    expect(calculateNextMillis({ every: 1000, startDate: '2026-05-01T02:00:00+02:00' }, 0)).toBe(start);
    expect(calculateNextMillis({ every: 1000, startDate: start }, start)).toBe(start + 1000);
    expect(calculateNextMillis({ every: 1000, startDate: start }, start + 5)).toBe(start + 1005);
  });

  it('returns null past endDate (endDate itself is allowed)', () => {
    expect(calculateNextMillis({ every: 1000, endDate: 5000 }, 4000)).toBe(5000);
    expect(calculateNextMillis({ every: 1000, endDate: 5000 }, 4001)).toBeNull();
    expect(calculateNextMillis({ every: 1000, endDate: '1970-01-01T00:00:05Z' }, 4001)).toBeNull();
  });

  it('returns null once `count` runs reach the limit', () => {
    expect(calculateNextMillis({ every: 1000, limit: 3 }, 0, 2)).toBe(1000);
    expect(calculateNextMillis({ every: 1000, limit: 3 }, 0, 3)).toBeNull();
    expect(calculateNextMillis({ every: 1000, limit: 3 }, 0, 99)).toBeNull();
  });
});

describe('immediately', () => {
  it('alone: runs at the reference time once (count 0 or omitted), then never', () => {
    expect(calculateNextMillis({ immediately: true }, 1234)).toBe(1234);
    expect(calculateNextMillis({ immediately: true }, 1234, 0)).toBe(1234);
    expect(calculateNextMillis({ immediately: true }, 1234, 1)).toBeNull();
  });

  it('with every: the first run is the reference time, later runs follow the interval', () => {
    expect(calculateNextMillis({ every: 500, immediately: true }, 1000, 0)).toBe(1000);
    expect(calculateNextMillis({ every: 500, immediately: true }, 1000, 1)).toBe(1500);
  });

  it('with a pattern: the first run is the reference time, later runs follow the cron', () => {
    const opts = { pattern: '0 9 * * *', immediately: true };
    const ref = T('2026-04-10T12:00:00Z');
    expect(calculateNextMillis(opts, ref, 0)).toBe(ref);
    expect(iso(calculateNextMillis(opts, ref, 1))).toBe('2026-04-11T09:00:00.000Z');
  });

  it('waits for a later startDate and respects endDate and limit', () => {
    expect(calculateNextMillis({ immediately: true, startDate: 9000 }, 1000)).toBe(9000);
    expect(calculateNextMillis({ immediately: true, endDate: 999 }, 1000)).toBeNull();
    expect(calculateNextMillis({ every: 10, immediately: true, limit: 1 }, 1000, 1)).toBeNull();
  });

  it('false is the same as leaving it out', () => {
    expect(calculateNextMillis({ every: 500, immediately: false }, 1000, 0)).toBe(1500);
  });
});

describe('pattern (UTC by default)', () => {
  it("resolves '0 9 * * *' to 09:00 on the next day the cron allows (seed example)", () => {
    expect(iso(calculateNextMillis({ pattern: '0 9 * * *' }, T('2026-04-10T12:00:00Z')))).toBe(
      '2026-04-11T09:00:00.000Z',
    );
    expect(iso(calculateNextMillis({ pattern: '0 9 * * *' }, T('2026-04-10T08:59:59.999Z')))).toBe(
      '2026-04-10T09:00:00.000Z',
    );
  });

  it('is strictly after the reference time, even when the reference time matches', () => {
    expect(iso(calculateNextMillis({ pattern: '0 9 * * *' }, T('2026-04-10T09:00:00Z')))).toBe(
      '2026-04-11T09:00:00.000Z',
    );
  });

  it('reads 5 fields at minute resolution', () => {
    expect(runs({ pattern: '*/5 * * * *' }, '2026-04-10T10:02:30.500Z', 3)).toEqual([
      '2026-04-10T10:05:00.000Z',
      '2026-04-10T10:10:00.000Z',
      '2026-04-10T10:15:00.000Z',
    ]);
  });

  it('reads 6 fields with seconds first', () => {
    expect(runs({ pattern: '*/15 * * * * *' }, '2026-04-10T10:00:07.250Z', 3)).toEqual([
      '2026-04-10T10:00:15.000Z',
      '2026-04-10T10:00:30.000Z',
      '2026-04-10T10:00:45.000Z',
    ]);
    expect(iso(calculateNextMillis({ pattern: '30 0 12 * * MON' }, T('2026-04-10T00:00:00Z')))).toBe(
      '2026-04-13T12:00:30.000Z',
    );
  });

  it('accepts nicknames and month/day names', () => {
    expect(iso(calculateNextMillis({ pattern: '@hourly' }, T('2026-04-10T10:20:00Z')))).toBe(
      '2026-04-10T11:00:00.000Z',
    );
    expect(iso(calculateNextMillis({ pattern: '0 0 1 JAN *' }, T('2026-04-10T10:20:00Z')))).toBe(
      '2027-01-01T00:00:00.000Z',
    );
  });

  it('gives the same answer as an explicit UTC zone, whatever the process time zone is', () => {
    const ref = T('2026-07-01T03:00:00Z');
    const before = process.env.TZ;
    try {
      process.env.TZ = 'Pacific/Auckland';
      const auckland = calculateNextMillis({ pattern: '0 9 * * *' }, ref);
      process.env.TZ = 'America/Los_Angeles';
      const la = calculateNextMillis({ pattern: '0 9 * * *' }, ref);
      expect(iso(auckland)).toBe('2026-07-01T09:00:00.000Z');
      expect(la).toBe(auckland);
      expect(calculateNextMillis({ pattern: '0 9 * * *', tz: 'UTC' }, ref)).toBe(auckland);
      expect(calculateNextMillis({ pattern: '0 9 * * *', tz: 'Etc/UTC' }, ref)).toBe(auckland);
    } finally {
      if (before === undefined) delete process.env.TZ;
      else process.env.TZ = before;
    }
  });

  it('is never before startDate, and startDate itself may be a run', () => {
    const opts = { pattern: '0 9 * * *', startDate: '2026-06-01T09:00:00Z' };
    expect(iso(calculateNextMillis(opts, T('2026-04-10T12:00:00Z')))).toBe('2026-06-01T09:00:00.000Z');
    const later = { pattern: '0 9 * * *', startDate: '2026-06-01T09:00:01Z' };
    expect(iso(calculateNextMillis(later, T('2026-04-10T12:00:00Z')))).toBe('2026-06-02T09:00:00.000Z');
    expect(iso(calculateNextMillis(opts, T('2026-06-05T12:00:00Z')))).toBe('2026-06-06T09:00:00.000Z');
  });

  it('returns null past endDate or at the limit', () => {
    const opts = { pattern: '0 9 * * *', endDate: '2026-04-11T09:00:00Z', limit: 5 };
    expect(iso(calculateNextMillis(opts, T('2026-04-10T12:00:00Z'), 4))).toBe('2026-04-11T09:00:00.000Z');
    expect(calculateNextMillis(opts, T('2026-04-10T12:00:00Z'), 5)).toBeNull();
    expect(calculateNextMillis(opts, T('2026-04-11T09:00:00Z'), 1)).toBeNull();
  });

  it('reads the pattern in a fixed-offset zone', () => {
    expect(runs({ pattern: '0 9 * * 1', tz: 'Asia/Kolkata' }, '2026-03-08T06:15:00Z', 2)).toEqual([
      '2026-03-09T03:30:00.000Z',
      '2026-03-16T03:30:00.000Z',
    ]);
  });
});

describe('DST: a wall-clock time that does not exist runs once, at the end of the gap', () => {
  it("America/New_York 2026-03-08: '30 2 * * *' runs at 03:00 EDT (07:00Z), once", () => {
    expect(runs({ pattern: '30 2 * * *', tz: 'America/New_York' }, '2026-03-07T12:00:00Z', 3)).toEqual([
      '2026-03-08T07:00:00.000Z',
      '2026-03-09T06:30:00.000Z',
      '2026-03-10T06:30:00.000Z',
    ]);
    expect(
      iso(calculateNextMillis({ pattern: '30 2 * * *', tz: 'America/New_York' }, T('2026-03-08T06:59:59Z'))),
    ).toBe('2026-03-08T07:00:00.000Z');
  });

  it('America/New_York: the 6-field form and the gap start behave the same', () => {
    const from = '2026-03-08T00:00:00Z';
    expect(runs({ pattern: '0 30 2 * * *', tz: 'America/New_York' }, from, 1)).toEqual([
      '2026-03-08T07:00:00.000Z',
    ]);
    expect(runs({ pattern: '0 2 * * *', tz: 'America/New_York' }, from, 1)).toEqual([
      '2026-03-08T07:00:00.000Z',
    ]);
  });

  it('America/New_York: a frequent pattern runs once at the end of the gap, not twice', () => {
    expect(runs({ pattern: '*/30 * * * *', tz: 'America/New_York' }, '2026-03-08T06:15:00Z', 4)).toEqual([
      '2026-03-08T06:30:00.000Z', // 01:30 EST
      '2026-03-08T07:00:00.000Z', // 03:00 EDT (02:00 and 02:30 do not exist)
      '2026-03-08T07:30:00.000Z',
      '2026-03-08T08:00:00.000Z',
    ]);
  });

  it("Europe/Berlin 2026-03-29: '30 2 * * *' runs at 03:00 CEST (01:00Z), once", () => {
    expect(runs({ pattern: '30 2 * * *', tz: 'Europe/Berlin' }, '2026-03-28T12:00:00Z', 3)).toEqual([
      '2026-03-29T01:00:00.000Z',
      '2026-03-30T00:30:00.000Z',
      '2026-03-31T00:30:00.000Z',
    ]);
  });
});

describe('DST: a wall-clock time that happens twice runs once, at its first occurrence', () => {
  it("America/New_York 2026-11-01: '30 1 * * *' runs at 05:30Z only, then 2026-11-02 01:30 EST", () => {
    expect(runs({ pattern: '30 1 * * *', tz: 'America/New_York' }, '2026-10-31T12:00:00Z', 3)).toEqual([
      '2026-11-01T05:30:00.000Z', // 01:30 EDT
      '2026-11-02T06:30:00.000Z', // 01:30 EST the next day; 06:30Z on 11-01 is skipped
      '2026-11-03T06:30:00.000Z',
    ]);
  });

  it('America/New_York: from inside the repeated hour, the next run is tomorrow, never in the past', () => {
    for (const from of ['2026-11-01T06:00:00Z', '2026-11-01T06:29:59Z', '2026-11-01T06:30:00Z']) {
      expect(iso(calculateNextMillis({ pattern: '30 1 * * *', tz: 'America/New_York' }, T(from)))).toBe(
        '2026-11-02T06:30:00.000Z',
      );
    }
  });

  it('America/New_York: a frequent pattern does not repeat the hour that happens twice', () => {
    expect(runs({ pattern: '*/30 * * * *', tz: 'America/New_York' }, '2026-11-01T04:45:00Z', 4)).toEqual([
      '2026-11-01T05:00:00.000Z', // 01:00 EDT
      '2026-11-01T05:30:00.000Z', // 01:30 EDT
      '2026-11-01T07:00:00.000Z', // 02:00 EST (01:00 and 01:30 EST already ran)
      '2026-11-01T07:30:00.000Z',
    ]);
    expect(runs({ pattern: '* * * * * *', tz: 'America/New_York' }, '2026-11-01T05:59:58Z', 2)).toEqual([
      '2026-11-01T05:59:59.000Z',
      '2026-11-01T07:00:00.000Z',
    ]);
  });

  it("Europe/Berlin 2026-10-25: '30 2 * * *' runs at 02:30 CEST (00:30Z) only", () => {
    expect(runs({ pattern: '30 2 * * *', tz: 'Europe/Berlin' }, '2026-10-24T12:00:00Z', 3)).toEqual([
      '2026-10-25T00:30:00.000Z',
      '2026-10-26T01:30:00.000Z',
      '2026-10-27T01:30:00.000Z',
    ]);
    expect(
      iso(calculateNextMillis({ pattern: '30 2 * * *', tz: 'Europe/Berlin' }, T('2026-10-25T01:15:00Z'))),
    ).toBe('2026-10-26T01:30:00.000Z');
  });

  it.each([
    ['America/New_York', '30 1 * * *'],
    ['America/New_York', '30 2 * * *'],
    ['Europe/Berlin', '30 2 * * *'],
    ['Europe/Berlin', '0 3 * * *'],
  ])('%s %s runs exactly once on every local day of 2026', (tz, pattern) => {
    const day = new Intl.DateTimeFormat('en-CA', {
      timeZone: tz,
      year: 'numeric',
      month: '2-digit',
      day: '2-digit',
    });
    const seen = new Set<string>();
    let ref = T('2025-12-31T12:00:00Z');
    for (;;) {
      const next = calculateNextMillis({ pattern, tz }, ref);
      expect(next).not.toBeNull();
      expect(next!).toBeGreaterThan(ref);
      const local = day.format(next!);
      if (!local.startsWith('2026')) break;
      expect(seen.has(local)).toBe(false);
      seen.add(local);
      ref = next!;
    }
    expect(seen.size).toBe(365);
  });
});

describe("croner's own time-zone mode (why next-run.ts maps wall clocks itself)", () => {
  // If a croner upgrade changes these, revisit the header comment of src/next-run.ts.
  const next = (pattern: string, tz: string, from: string) =>
    new Cron(pattern, { timezone: tz }).nextRun(new Date(T(from)))?.toISOString();

  it('spring forward: croner shifts the missing 02:30 by the gap, to 03:30 EDT (07:30Z)', () => {
    expect(next('30 2 * * *', 'America/New_York', '2026-03-07T12:00:00Z')).toBe('2026-03-08T07:30:00.000Z');
    expect(next('30 2 * * *', 'Europe/Berlin', '2026-03-28T12:00:00Z')).toBe('2026-03-29T01:30:00.000Z');
  });

  it('fall back: croner runs the first occurrence, but from inside the repeated hour returns a past instant', () => {
    expect(next('30 1 * * *', 'America/New_York', '2026-10-31T12:00:00Z')).toBe('2026-11-01T05:30:00.000Z');
    expect(next('30 1 * * *', 'America/New_York', '2026-11-01T05:30:00Z')).toBe('2026-11-02T06:30:00.000Z');
    expect(next('30 1 * * *', 'America/New_York', '2026-11-01T06:00:00Z')).toBe('2026-11-01T05:30:00.000Z');
  });
});

describe('validation', () => {
  const cronCases: Array<[string, RepeatOptions, string]> = [
    ['a minute out of range', { pattern: '61 * * * *' }, 'Invalid value for minute'],
    ['too few fields', { pattern: '* * *' }, '* * *'],
    ['seven fields', { pattern: '0 0 0 1 1 * 2030' }, '5 or 6 parts'],
    ['letters', { pattern: 'a b c d e' }, 'illegal characters'],
    ['an empty pattern', { pattern: '' }, 'non-empty cron string'],
    ['a pattern that never matches', { pattern: '0 0 30 2 *' }, 'never matches'],
    ['an unknown tz', { pattern: '0 9 * * *', tz: 'Mars/Olympus_Mons' }, 'IANA time zone'],
    ['an empty tz', { pattern: '0 9 * * *', tz: '' }, 'IANA time zone'],
  ];

  it.each(cronCases)('refuses %s with EMQCRON and an example', (_name, opts, mentions) => {
    const err = failure(() => validateRepeatOptions(opts));
    expect(err.code).toBe('EMQCRON');
    expect(err.message).toContain(mentions);
    expect(err.message).toMatch(/e\.g\. '/);
    expect(failure(() => calculateNextMillis(opts, 0)).code).toBe('EMQCRON');
  });

  const inputCases: Array<[string, unknown, string]> = [
    ['both every and pattern', { every: 1000, pattern: '* * * * *' }, 'exactly one of every or pattern'],
    ['neither every nor pattern', {}, 'set one of every or pattern'],
    ['a negative every', { every: -5 }, 'every must be a whole number of ms >= 1, got -5'],
    ['a zero every', { every: 0 }, 'every must be'],
    ['a fractional every', { every: 1.5 }, 'every must be'],
    ['a string every', { every: '1000' }, 'every must be'],
    ['tz without a pattern', { every: 1000, tz: 'Europe/Berlin' }, 'tz applies only to a cron pattern'],
    ['a non-boolean immediately', { every: 1000, immediately: 'yes' }, 'immediately must be true or false'],
    ['a zero limit', { every: 1000, limit: 0 }, 'limit must be a whole number >= 1'],
    ['an unparseable startDate', { every: 1000, startDate: 'tomorrow' }, 'startDate must be'],
    ['a startDate without a zone', { every: 1000, startDate: '2026-01-01T00:00:00' }, 'with Z or an offset'],
    ['an invalid Date', { every: 1000, endDate: new Date(Number.NaN) }, 'endDate must be'],
    [
      'endDate before startDate',
      { every: 1000, startDate: 5000, endDate: 4000 },
      'endDate must not be before',
    ],
    ['not an object', null, 'repeat options must be an object'],
  ];

  it.each(inputCases)('refuses %s with EMQINPUT', (_name, opts, mentions) => {
    const err = failure(() => validateRepeatOptions(opts as RepeatOptions));
    expect(err.code).toBe('EMQINPUT');
    expect(err.message).toContain(mentions);
    expect(failure(() => calculateNextMillis(opts as RepeatOptions, 0)).code).toBe('EMQINPUT');
  });

  it('refuses a bad referenceTime or count with EMQINPUT', () => {
    for (const ref of [Number.NaN, -1, 1.5, Number.POSITIVE_INFINITY]) {
      expect(failure(() => calculateNextMillis({ every: 1000 }, ref)).message).toContain('referenceTime');
    }
    expect(failure(() => calculateNextMillis({ every: 1000 }, 0, -1)).message).toContain('count');
  });

  it('accepts every valid shape', () => {
    const ok: RepeatOptions[] = [
      { every: 60_000 },
      { immediately: true },
      { every: 1, immediately: true, limit: 1 },
      { pattern: '0 9 * * *' },
      {
        pattern: '*/10 * * * * *',
        tz: 'Europe/Berlin',
        startDate: '2026-01-01',
        endDate: new Date(T('2027-01-01T00:00:00Z')),
      },
      { pattern: '@daily', tz: 'America/New_York', immediately: true },
      { pattern: '0 12 ? * MON' },
    ];
    for (const opts of ok) expect(() => validateRepeatOptions(opts)).not.toThrow();
  });
});
