// A cron scheduler's lookahead against a real redis-server: upsert stores the next AHEAD cron
// instants on the record; promote alone (a runtime that never hands off) makes each next
// occurrence from them, so no cron slot waits for a runtime; a lookahead running low is listed
// for a top-up and the recurrence leg (advance) tops it up; a record without one gets it at its
// first hand-off. Seconds patterns make the live cases take a few seconds; nothing is timed.
import { describe, expect, it } from 'vitest';
import { EchoMQ } from '../../src/queue/echomq.js';
import { calculateNextMillis } from '../../src/recurring/next-run.js';
import { AHEAD, type StoredRepeat } from '../../src/recurring/schedulers.js';
import { queueKey, uniqueQueue, useRedisServer } from '../support/harness.js';
import { poll } from '../support/observe.js';

const env = useRedisServer();

/** A fresh queue on the file's server, its raw client and its key names; close() after. */
async function open() {
  const mq = await EchoMQ.connect({ url: env.server.url });
  const raw = env.server.client();
  const name = uniqueQueue('ahead');
  const q = mq.queue(name);
  const key = (suffix: string) => queueKey(name, suffix);
  const record = async (id: string) => raw.hgetall(key(`scheduler:${id}`));
  const close = async () => {
    await mq.close();
    await raw.quit();
  };
  return { mq, raw, q, key, record, close };
}

/** The cron instants after `from` with `made` runs made, as croner computes them. */
function chain(r: StoredRepeat, from: number, made: number, n: number): number[] {
  const out: number[] = [];
  for (let prev = from, count = made; out.length < n; count++) {
    const next = calculateNextMillis(r, prev, count);
    if (next === null) break;
    out.push(next);
    prev = next;
  }
  return out;
}

const instants = (text: string | undefined) => (text ? text.split(' ').map(Number) : []);
/** The instant an occurrence id stands for (its 10 base32 time characters). */
function slotOf(id: string): number {
  const B32 = '0123456789ABCDEFGHJKMNPQRSTVWXYZ';
  let at = 0;
  for (const ch of id.slice(3, 13)) at = at * 32 + B32.indexOf(ch);
  return at;
}

describe('a cron scheduler keeps its next instants on its record', () => {
  it(`upsert stores the ${AHEAD} cron instants after the first occurrence as its lookahead`, async () => {
    const t = await open();
    try {
      const repeat = { pattern: '0 9 * * *', tz: 'UTC' };
      const { nextRunAt } = await t.q.schedulers.upsert('daily', repeat);
      const rec = await t.record('daily');
      expect(instants(rec.ahead)).toEqual(chain(repeat, nextRunAt!, 1, AHEAD));
      // An every cadence has none: promote computes its next instants itself.
      await t.q.schedulers.upsert('tick', { every: 60_000 });
      expect((await t.record('tick')).ahead).toBeUndefined();
    } finally {
      await t.close();
    }
  });

  it('a limit shortens the lookahead to the runs that are left', async () => {
    const t = await open();
    try {
      await t.q.schedulers.upsert('thrice', { pattern: '0 9 * * *', tz: 'UTC', limit: 3 });
      expect(instants((await t.record('thrice')).ahead)).toHaveLength(2);
    } finally {
      await t.close();
    }
  });
});

describe('promote alone makes every cron slot from the lookahead', () => {
  it('a runtime that only promotes (no recurrence leg, no hand-off) gets three consecutive slots, each once', async () => {
    const t = await open();
    try {
      // Every 2 s: a promote loop stalled by less than a period still makes the passed slot.
      await t.q.schedulers.upsert('sec', { pattern: '*/2 * * * * *' });
      const released = new Set<string>();
      // The only call made: the promote sweep, as a runtime without cron would run it.
      await poll(
        async () => {
          await t.q.promoteDue(100);
          for (const id of await t.raw.zrange(t.key('pending'), 0, -1)) released.add(id);
          return released.size;
        },
        (n) => n >= 3,
        'three cron occurrences released by promote alone',
        25_000,
      );
      const slots = [...released].map(slotOf).sort((a, b) => a - b);
      for (let i = 1; i < slots.length; i++) expect(slots[i]! - slots[i - 1]!).toBe(2000);
      // The next occurrence already waits, made by the promote that released the last one.
      const rec = await t.record('sec');
      expect(released.has(rec.job!)).toBe(false);
      expect(await t.raw.zscore(t.key('schedule'), rec.job!)).not.toBeNull();
      expect(Number(rec.count)).toBe(released.size + 1);
    } finally {
      await t.close();
    }
  });
});

describe('the recurrence leg tops a lookahead up', () => {
  it('a lookahead listed as running low is topped up to its full length, continuing its instants', async () => {
    const t = await open();
    try {
      const repeat = { pattern: '0 9 * * *', tz: 'UTC' };
      const { nextRunAt } = await t.q.schedulers.upsert('daily', repeat);
      const full = chain(repeat, nextRunAt!, 1, AHEAD);
      // As promote leaves it after using up all but two of its instants.
      await t.raw.hset(t.key('scheduler:daily'), 'ahead', full.slice(0, 2).join(' '));
      await t.raw.zadd(t.key('schedulers:topup'), full[1]!, 'daily');
      await t.q.schedulers.advance();
      expect(instants((await t.record('daily')).ahead)).toEqual(full);
      expect(await t.raw.zcard(t.key('schedulers:topup'))).toBe(0);
      // A second leg has nothing to top up, and changes nothing.
      await t.q.schedulers.advance();
      expect(instants((await t.record('daily')).ahead)).toEqual(full);
    } finally {
      await t.close();
    }
  });

  it('a record without a lookahead (written before it existed) gets one at its first hand-off', async () => {
    const t = await open();
    try {
      const repeat = { pattern: '* * * * * *' };
      await t.q.schedulers.upsert('sec', repeat);
      await t.raw.hdel(t.key('scheduler:sec'), 'ahead');
      const first = (await t.record('sec')).job!;
      await poll(
        async () => {
          await t.q.promoteDue(100);
          return t.raw.zscore(t.key('pending'), first);
        },
        (score) => score !== null,
        'the first occurrence released',
        20_000,
      );
      // promote could not follow it (no lookahead): the record still points at the released one.
      expect((await t.record('sec')).job).toBe(first);
      const { made } = await t.q.schedulers.advance();
      expect(made).toHaveLength(1);
      const rec = await t.record('sec');
      expect(instants(rec.ahead)).toEqual(chain(repeat, slotOf(rec.job!), 2, AHEAD));
    } finally {
      await t.close();
    }
  });
});
