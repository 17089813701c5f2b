// Job ids: minted ids sort in mint order within a process, whatever the clock does.
import { describe, expect, it } from 'vitest';
import { EchoMQError } from '../../src/core/errors.js';
import { assertJobId, createIdMinter, isJobId, MINTED_JOB_ID_LENGTH, mintJobId } from '../../src/core/ids.js';

const SHAPE = /^JOB[0-9A-HJKMNP-TV-Z]{20}$/;

function bytes(fill: number): (n: number) => Uint8Array {
  return (n) => new Uint8Array(n).fill(fill);
}

function expectStrictlyIncreasing(ids: string[]): void {
  for (let i = 1; i < ids.length; i++) {
    if (!(ids[i - 1]! < ids[i]!)) throw new Error(`ids[${i - 1}] ${ids[i - 1]} !< ids[${i}] ${ids[i]}`);
  }
}

describe('mintJobId', () => {
  it('mints 23-character JOB ids in Crockford base32', () => {
    const id = mintJobId();
    expect(id).toHaveLength(23);
    expect(MINTED_JOB_ID_LENGTH).toBe(23);
    expect(id).toMatch(SHAPE);
    expect(isJobId(id)).toBe(true);
  });

  it('mints 10,000 unique, strictly increasing ids in a tight loop', () => {
    const ids: string[] = [];
    for (let i = 0; i < 10_000; i++) ids.push(mintJobId());
    expect(new Set(ids).size).toBe(10_000);
    expectStrictlyIncreasing(ids);
  });
});

describe('createIdMinter', () => {
  it('encodes the clock in the 10 characters after JOB', () => {
    const mint = createIdMinter(() => 0, bytes(0));
    expect(mint()).toBe(`JOB${'0'.repeat(20)}`);
    // 1_767_225_600_000 ms = 2026-01-01T00:00:00Z; 2^48 - 1 is the largest time ULID allows.
    expect(createIdMinter(() => 1_767_225_600_000, bytes(0))().slice(3, 13)).toBe('01KDVDNA00');
    expect(createIdMinter(() => 2 ** 48 - 1, bytes(0))().slice(3, 13)).toBe('7ZZZZZZZZZ');
  });

  it('orders ids by time first, so a later millisecond sorts after any randomness', () => {
    const high = createIdMinter(() => 1000, bytes(255))();
    const low = createIdMinter(() => 1001, bytes(0))();
    expect(high < low).toBe(true);
  });

  it('increments the random part by one within a frozen millisecond', () => {
    const mint = createIdMinter(() => 42, bytes(0));
    const ids = Array.from({ length: 40 }, () => mint());
    expect(ids[0]!.slice(13)).toBe('0000000000');
    expect(ids[1]!.slice(13)).toBe('0000000001');
    expect(ids[32]!.slice(13)).toBe('0000000010');
    expect(new Set(ids.map((id) => id.slice(0, 13))).size).toBe(1);
    expectStrictlyIncreasing(ids);
  });

  it('keeps increasing when the clock goes backwards', () => {
    const times = [5000, 5000, 4000, 3000, 4999, 5000, 5001, 1, 5002];
    let i = 0;
    let seed = 0;
    const mint = createIdMinter(
      () => times[i++]!,
      (n) => new Uint8Array(n).fill(seed++ * 37),
    );
    const ids = times.map(() => mint());
    expectStrictlyIncreasing(ids);
    // Behind the last time seen, the id keeps that time rather than going back.
    expect(ids.slice(0, 6).every((id) => id.slice(3, 13) === ids[0]!.slice(3, 13))).toBe(true);
  });

  it('moves to the next millisecond when the random part is exhausted', () => {
    const mint = createIdMinter(() => 7, bytes(255));
    const a = mint();
    const b = mint();
    expect(a.slice(13)).toBe('ZZZZZZZZZZ');
    expect(b.slice(3, 13)).toBe(createIdMinter(() => 8, bytes(0))().slice(3, 13));
    expect(a < b).toBe(true);
  });

  it('stays unique and increasing for 10,000 ids on a frozen clock with random entropy', () => {
    const mint = createIdMinter(
      () => 1_767_225_600_000,
      (n) => crypto.getRandomValues(new Uint8Array(n)),
    );
    const ids = Array.from({ length: 10_000 }, () => mint());
    expect(new Set(ids).size).toBe(10_000);
    expectStrictlyIncreasing(ids);
  });

  it('refuses an unusable clock or entropy source with EMQINPUT', () => {
    for (const t of [-1, 1.5, Number.NaN, 2 ** 48]) {
      expect(() => createIdMinter(() => t, bytes(0))()).toThrow(EchoMQError);
    }
    expect(() =>
      createIdMinter(
        () => 1,
        () => new Uint8Array(3),
      )(),
    ).toThrow(/at least 10 bytes/);
  });
});

describe('isJobId', () => {
  it.each([['JOB1'], ['JOB-order-42'], ['JOBÄÖÜ'], [`JOB${'x'.repeat(509)}`]])('accepts %s', (id) => {
    expect(isJobId(id)).toBe(true);
    expect(() => assertJobId(id)).not.toThrow();
  });

  it.each([
    ['JOB', 'too short'],
    ['job123', 'lower-case prefix'],
    ['XJOB1', 'prefix not at the start'],
    ['', 'empty'],
    ['JOB 1', 'space'],
    ['JOB\t1', 'tab'],
    ['JOB1\n', 'newline'],
    ['JOB\u00001', 'NUL'],
    ['JOB\u00a01', 'no-break space'],
    [`JOB${'x'.repeat(510)}`, 'over 512 characters'],
  ])('rejects %j (%s)', (id) => {
    expect(isJobId(id)).toBe(false);
  });

  it.each([[undefined], [null], [42], [{ id: 'JOB1' }], [['JOB1']]])('rejects the non-string %j', (id) => {
    expect(isJobId(id)).toBe(false);
  });
});

describe('assertJobId', () => {
  function kindError(id: unknown): EchoMQError {
    try {
      assertJobId(id);
    } catch (err) {
      expect(err).toBeInstanceOf(EchoMQError);
      expect((err as EchoMQError).code).toBe('EMQKIND');
      return err as EchoMQError;
    }
    throw new Error('expected an EMQKIND error');
  }

  it('names the id and how to fix a missing JOB prefix', () => {
    expect(kindError('order-42').message).toBe(
      'EMQKIND: job id must be JOB-namespaced, got "order-42"; pass an id starting with JOB or omit it to mint one',
    );
  });

  it('explains a non-string id', () => {
    expect(kindError(42).message).toContain('job id must be JOB-namespaced, got number 42');
  });

  it('explains whitespace and length failures of a JOB id', () => {
    expect(kindError('JOB 1').message).toContain('no whitespace or control characters, got "JOB 1"');
    const long = kindError(`JOB${'x'.repeat(600)}`).message;
    expect(long).toContain('4 to 512 characters');
    expect(long).toContain('(603 characters)');
    expect(long.length).toBeLessThan(300);
  });

  it('narrows the type for the caller', () => {
    const id: unknown = mintJobId();
    assertJobId(id);
    expect(id.startsWith('JOB')).toBe(true);
  });
});
