// Backoff is pure: every case passes its own attempts and random source, so nothing here sleeps.
import { describe, expect, it } from 'vitest';
import { mulberry32 } from '../../chaos/faults.js';
import { Backoff, type BackoffPolicy, delayMs } from '../../src/core/backoff.js';
import { EchoMQError } from '../../src/core/errors.js';

const exp: BackoffPolicy = { kind: 'exponential', base: 100, cap: 10_000 };

/** A small seeded generator (mulberry32) so the property loop is repeatable. */
const seeded = mulberry32;

function inputError(fn: () => unknown): EchoMQError {
  try {
    fn();
  } catch (err) {
    expect(err).toBeInstanceOf(EchoMQError);
    expect((err as EchoMQError).code).toBe('EMQINPUT');
    return err as EchoMQError;
  }
  throw new Error('expected an EMQINPUT error');
}

describe('exponential', () => {
  it('matches the seed examples: attempts 1 -> 100, 3 -> 400, 20 -> 10000 (cap)', () => {
    expect(Backoff.delayMs(exp, 1)).toBe(100);
    expect(Backoff.delayMs(exp, 3)).toBe(400);
    expect(Backoff.delayMs(exp, 20)).toBe(10_000);
  });

  it('doubles per attempt until the cap holds it', () => {
    expect([1, 2, 3, 4, 5, 6, 7, 8].map((n) => delayMs(exp, n))).toEqual([
      100, 200, 400, 800, 1600, 3200, 6400, 10_000,
    ]);
  });

  it('returns the cap, not Infinity or NaN, for huge attempt counts', () => {
    expect(delayMs(exp, 54)).toBe(10_000);
    expect(delayMs(exp, 2000)).toBe(10_000);
    expect(delayMs(exp, Number.MAX_SAFE_INTEGER)).toBe(10_000);
  });

  it('is exact integer math up to the largest safe cap', () => {
    const big: BackoffPolicy = { kind: 'exponential', base: 3, cap: Number.MAX_SAFE_INTEGER };
    expect(delayMs(big, 51)).toBe(3 * 2 ** 50);
    expect(Number.isSafeInteger(delayMs(big, 51))).toBe(true);
    expect(delayMs(big, 52)).toBe(3 * 2 ** 51);
    expect(delayMs(big, 53)).toBe(Number.MAX_SAFE_INTEGER);
    expect(delayMs({ kind: 'exponential', base: 1, cap: Number.MAX_SAFE_INTEGER }, 53)).toBe(2 ** 52);
  });

  it('returns the cap on every attempt when the cap is below the base', () => {
    expect(delayMs({ kind: 'exponential', base: 500, cap: 50 }, 1)).toBe(50);
  });
});

describe('fixed', () => {
  it('returns the same ms on every attempt, including 0', () => {
    expect([1, 2, 50, 2000].map((n) => delayMs({ kind: 'fixed', ms: 5000 }, n))).toEqual([
      5000, 5000, 5000, 5000,
    ]);
    expect(delayMs({ kind: 'fixed', ms: 0 }, 3)).toBe(0);
  });
});

describe('jitter', () => {
  const jit: BackoffPolicy = { kind: 'jitter', inner: exp };

  it('draws 0 when random() is 0 and the inner bound when random() is just below 1', () => {
    expect(delayMs(jit, 3, () => 0)).toBe(0);
    expect(delayMs(jit, 3, () => 0.999999)).toBe(400);
    expect(delayMs(jit, 20, () => 0.999999)).toBe(10_000);
  });

  it('draws the middle of the range for random() = 0.5', () => {
    expect(delayMs(jit, 1, () => 0.5)).toBe(50);
  });

  it('returns 0 without drawing when the inner bound is 0', () => {
    let drawn = false;
    const random = () => {
      drawn = true;
      return 0.5;
    };
    expect(delayMs({ kind: 'jitter', inner: { kind: 'fixed', ms: 0 } }, 1, random)).toBe(0);
    expect(drawn).toBe(false);
  });

  it('refuses a random source outside [0, 1)', () => {
    expect(inputError(() => delayMs(jit, 1, () => 1)).message).toContain('[0, 1)');
    inputError(() => delayMs(jit, 1, () => -0.1));
    inputError(() => delayMs(jit, 1, () => Number.NaN));
  });

  it('always stays a whole number within [0, inner bound] (property loop, seeded)', () => {
    const random = seeded(0xec40);
    const inners: BackoffPolicy[] = [
      exp,
      { kind: 'fixed', ms: 1 },
      { kind: 'fixed', ms: 7 },
      { kind: 'exponential', base: 1, cap: 1 },
      { kind: 'exponential', base: 250, cap: 60_000 },
      { kind: 'jitter', inner: { kind: 'fixed', ms: 1000 } },
    ];
    const seen = new Set<number>();
    for (let i = 0; i < 5000; i++) {
      const inner = inners[i % inners.length]!;
      const attempts = 1 + Math.floor(random() * 40);
      const bound = delayMs(inner, attempts, () => 0.999999);
      const d = delayMs({ kind: 'jitter', inner }, attempts, random);
      expect(Number.isInteger(d)).toBe(true);
      expect(d).toBeGreaterThanOrEqual(0);
      expect(d).toBeLessThanOrEqual(bound);
      if (inner === inners[2]) seen.add(d);
    }
    // Both ends of a small range are reachable: the draw is over [0, bound], inclusive.
    expect([...seen].sort((a, b) => a - b)).toEqual([0, 1, 2, 3, 4, 5, 6, 7]);
  });
});

describe('validation', () => {
  const bad: Array<[string, unknown, string]> = [
    ['negative fixed ms', { kind: 'fixed', ms: -1 }, 'fixed ms'],
    ['fractional fixed ms', { kind: 'fixed', ms: 1.5 }, 'fixed ms'],
    ['missing fixed ms', { kind: 'fixed' }, 'fixed ms'],
    ['string fixed ms', { kind: 'fixed', ms: '100' }, 'fixed ms'],
    ['base below 1', { kind: 'exponential', base: 0, cap: 100 }, 'exponential base'],
    ['cap below 1', { kind: 'exponential', base: 10, cap: 0 }, 'exponential cap'],
    ['infinite cap', { kind: 'exponential', base: 10, cap: Number.POSITIVE_INFINITY }, 'exponential cap'],
    ['unknown kind', { kind: 'linear', ms: 5 }, "'fixed', 'exponential' or 'jitter'"],
    ['no kind', { ms: 5 }, "'fixed', 'exponential' or 'jitter'"],
    ['null', null, 'must be an object'],
    ['a number', 100, 'must be an object'],
    ['jitter without inner', { kind: 'jitter' }, 'must be an object'],
    ['jitter around garbage', { kind: 'jitter', inner: { kind: 'fixed', ms: -5 } }, 'fixed ms'],
    ['nested garbage', { kind: 'jitter', inner: { kind: 'jitter', inner: { kind: 'nope' } } }, '"nope"'],
  ];

  it.each(bad)('refuses %s with EMQINPUT saying what is accepted', (_name, policy, mentions) => {
    const err = inputError(() => Backoff.validate(policy));
    expect(err.message).toContain(mentions);
    expect(err.message.startsWith('EMQINPUT: ')).toBe(true);
    inputError(() => delayMs(policy as BackoffPolicy, 1));
  });

  it('refuses a cyclic jitter policy instead of overflowing the stack', () => {
    const cyclic: { kind: 'jitter'; inner: unknown } = { kind: 'jitter', inner: undefined };
    cyclic.inner = cyclic;
    expect(inputError(() => Backoff.validate(cyclic)).message).toContain('nested');
  });

  it.each([0, -1, 1.5, Number.NaN, Number.POSITIVE_INFINITY, '3'])('refuses attempts = %s', (attempts) => {
    const err = inputError(() => delayMs(exp, attempts as number));
    expect(err.message).toContain('attempts must be a whole number >= 1');
  });

  it('returns a clean copy of a valid policy, dropping unknown fields', () => {
    const parsed = JSON.parse(
      '{"kind":"jitter","inner":{"kind":"exponential","base":100,"cap":10000,"x":1}}',
    );
    expect(Backoff.validate(parsed)).toEqual({ kind: 'jitter', inner: exp });
    expect(Backoff.validate(parsed)).not.toBe(parsed);
  });
});
