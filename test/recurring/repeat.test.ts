// Repeat against a real redis-server: register (the seeds' @register) and its record, the pump
// minting one branded job per due occurrence on the server clock, pumps racing on two
// connections, the missed-run policy ('once' by default, 'all' bounded by the batch), unregister,
// list, and a consumer whose beat runs the pump. Periods are tens of milliseconds; no test sleeps
// for seconds, and past instants stand in for periods no pump ran.
import type { Redis } from 'ioredis';
import { describe, expect } from 'vitest';
import type { ErrorCode } from '../../src/core/errors.js';
import { occurrenceId } from '../../src/core/ids.js';
import { EchoMQ } from '../../src/queue/echomq.js';
import type { Queue } from '../../src/queue/queue.js';
import { queueTest, uniqueQueue, useRedisServer } from '../support/harness.js';
import {
  deferred,
  occupiedConsumer,
  poll,
  refusal,
  scoreOf,
  serverNow as serverClock,
  streamFields,
  within,
} from '../support/observe.js';

const env = useRedisServer();

// ── helpers ─────────────────────────────────────────────────────────────────────

/** Every occurrence row of the cadence `n`, by id. */
async function occurrenceRowsOf(
  raw: Redis,
  key: (suffix: string) => string,
  n: string,
): Promise<Map<string, Record<string, string>>> {
  const keys = await raw.keys(key(`job:JOB*:r:${n}`));
  const out = new Map<string, Record<string, string>>();
  for (const k of keys) out.set(k.slice(key('job:').length), await raw.hgetall(k));
  return out;
}

async function refused(call: () => unknown): Promise<ErrorCode> {
  return (await refusal(call)).code;
}

/** Each test's own queue, the consumers and connections it opens (closed after it), and reads of its keys. */
const it = queueTest(env, 'repeat').extend<{
  serverNow: () => Promise<number>;
  score: (set: string, member: string) => Promise<number | null>;
  events: () => Promise<Record<string, string>[]>;
  occurrenceRows: (n: string) => Promise<Map<string, Record<string, string>>>;
}>({
  serverNow: async ({ raw }, use) => use(() => serverClock(raw)),
  score: async ({ raw, key }, use) => use((set, member) => scoreOf(raw, key(set), member)),
  events: async ({ raw, key }, use) => use(() => streamFields(raw, key('events'))),
  occurrenceRows: async ({ raw, key }, use) => use((n) => occurrenceRowsOf(raw, key, n)),
});

// ── register ────────────────────────────────────────────────────────────────────

describe('register (the seeds’ @register)', () => {
  it('writes the record (period, template) and scores the name by its first run', async ({
    raw,
    q,
    key,
    serverNow,
    score,
  }) => {
    const first = (await serverNow()) + 60_000;
    expect(await q.repeat.register('report', 1000, { kind: 'daily' }, { firstRunMs: first })).toBe(
      'registered',
    );
    expect(await score('repeat', 'report')).toBe(first);
    const rec = await raw.hgetall(key('repeat:report'));
    expect(rec).toMatchObject({ every_ms: '1000', template: '{"kind":"daily"}', runs: '0' });
    expect(rec.catch_up).toBeUndefined();
    expect(rec.max).toBeUndefined();
  });

  it('is idempotent on the name: a second register is "exists" and changes nothing', async ({
    raw,
    q,
    key,
    serverNow,
    score,
  }) => {
    const first = (await serverNow()) + 60_000;
    await q.repeat.register('report', 1000, { v: 1 }, { firstRunMs: first });
    expect(await q.repeat.register('report', 5, { v: 2 }, { firstRunMs: 1, catchUp: 'all' })).toBe('exists');
    expect(await score('repeat', 'report')).toBe(first);
    expect(await raw.hmget(key('repeat:report'), 'every_ms', 'template', 'catch_up')).toEqual([
      '1000',
      '{"v":1}',
      null,
    ]);
  });

  it('defaults the first run to server now + every', async ({ q, serverNow, score }) => {
    const before = await serverNow();
    await q.repeat.register('tick', 60_000, null);
    const after = await serverNow();
    const at = (await score('repeat', 'tick'))!;
    expect(at).toBeGreaterThanOrEqual(before + 60_000);
    expect(at).toBeLessThanOrEqual(after + 60_000);
  });

  it('stores catchUp all and attempts on the record', async ({ raw, q, key }) => {
    await q.repeat.register('tick', 1000, 1, { catchUp: 'all', attempts: 4 });
    expect(await raw.hmget(key('repeat:tick'), 'catch_up', 'max')).toEqual(['all', '4']);
  });

  it('refuses bad input before the wire, storing nothing', async ({ raw, q, key }) => {
    expect(await refused(() => q.repeat.register('has space', 1000, 1))).toBe('EMQINPUT');
    expect(await refused(() => q.repeat.register('a{b}', 1000, 1))).toBe('EMQINPUT');
    expect(await refused(() => q.repeat.register('', 1000, 1))).toBe('EMQINPUT');
    expect(await refused(() => q.repeat.register('x', 0, 1))).toBe('EMQINPUT');
    expect(await refused(() => q.repeat.register('x', 1.5, 1))).toBe('EMQINPUT');
    expect(await refused(() => q.repeat.register('x', 10, 1, { firstRunMs: -1 }))).toBe('EMQINPUT');
    expect(await refused(() => q.repeat.register('x', 10, 1, { catchUp: 'some' as 'all' }))).toBe('EMQINPUT');
    expect(await refused(() => q.repeat.register('x', 10, 1, { every: 5 } as object))).toBe('EMQINPUT');
    expect(await refused(() => q.repeat.register('x', 10, undefined))).toBe('EMQINPUT');
    expect(await raw.keys(key('*'))).toEqual([]);
  });

  it('the script refuses a bad period or first run with EMQINPUT (for other runtimes)', async ({
    raw,
    q,
    key,
  }) => {
    const p = q.keys.prefix;
    expect(await refused(() => q.run('register', ['x', '0', '1', 'next', p]))).toBe('EMQINPUT');
    expect(await refused(() => q.run('register', ['x', '10', '1', 'soon', p]))).toBe('EMQINPUT');
    expect(await refused(() => q.run('register', ['x', '10', '1', 'next', p, 'twice']))).toBe('EMQINPUT');
    expect(await raw.exists(key('repeat:x'), key('repeat'))).toBe(0);
  });
});

// ── the pump ────────────────────────────────────────────────────────────────────

describe('pump', () => {
  it('releases one pending job per due occurrence: template as data, the name, runAt = the slot', async ({
    raw,
    q,
    key,
    serverNow,
    score,
    events,
  }) => {
    const first = (await serverNow()) - 5;
    await q.repeat.register('report', 60_000, { kind: 'daily' }, { firstRunMs: first, attempts: 2 });
    const minted = await q.repeat.pump();
    const id = occurrenceId('r', 'report', first);
    expect(minted).toEqual([id]);
    expect(id.startsWith('JOB')).toBe(true);
    const job = await q.get(id);
    expect(job).toMatchObject({
      state: 'pending',
      name: 'report',
      data: { kind: 'daily' },
      runAt: first,
      attempts: 0,
      maxAttempts: 2,
    });
    expect(await score('pending', id)).toBe(0);
    expect(await score('repeat', 'report')).toBe(first + 60_000);
    expect(await raw.hmget(key('repeat:report'), 'runs', 'last')).toEqual(['1', String(first)]);
    // register scheduled the occurrence (delayed); the pump released it (waiting) and scheduled the next.
    const next = occurrenceId('r', 'report', first + 60_000);
    expect((await events()).filter((e) => e.event === 'delayed' || e.event === 'waiting')).toEqual([
      { event: 'delayed', id, name: 'report', at: String(first) },
      { event: 'waiting', id },
      { event: 'delayed', id: next, name: 'report', at: String(first + 60_000) },
    ]);
    expect(await raw.zrange(key('schedule'), 0, -1)).toEqual([next]);
    // Nothing else is due: the next pump releases nothing.
    expect(await q.repeat.pump()).toEqual([]);
  });

  it('tells the server now and the next due instant (-1 when nothing is registered)', async ({
    q,
    serverNow,
  }) => {
    expect((await q.repeat.pumpNext()).nextDue).toBe(-1);
    const first = (await serverNow()) + 60_000;
    await q.repeat.register('later', 1000, 1, { firstRunMs: first });
    const r = await q.repeat.pumpNext();
    expect(r.minted).toEqual([]);
    expect(r.nextDue).toBe(first);
    expect(Math.abs(r.now - (await serverNow()))).toBeLessThan(1000);
  });

  it('derives ids the TypeScript occurrenceId computes, down to instant 0', async ({ q }) => {
    await q.repeat.register('zero', 1000, 1, { firstRunMs: 0 });
    expect(await q.repeat.pump()).toEqual(['JOB0000000000:r:zero']);
    expect(occurrenceId('r', 'zero', 0)).toBe('JOB0000000000:r:zero');
    expect(occurrenceId('s', 'x', 2 ** 48 - 1)).toBe('JOB7ZZZZZZZZZ:s:x'); // 48 bits in 50
  });

  it('orders occurrences among minted jobs in pending by the instant they stand for', async ({
    raw,
    q,
    key,
    serverNow,
  }) => {
    const t = await serverNow();
    const { id: minted } = await q.enqueue({ plain: true });
    await q.repeat.register('early', 60_000, 1, { firstRunMs: t - 60_000 });
    const [occurrence] = await q.repeat.pump();
    expect(await raw.zrange(key('pending'), 0, -1)).toEqual([occurrence, minted]);
  });

  it('mints an occurrence once: a row that exists is left alone (re-registering the same slot)', async ({
    raw,
    q,
    key,
    serverNow,
    score,
  }) => {
    const first = (await serverNow()) - 5;
    await q.repeat.register('again', 60_000, { v: 1 }, { firstRunMs: first });
    const [id] = await q.repeat.pump();
    expect(await q.repeat.unregister('again')).toBe(true);
    await q.repeat.register('again', 60_000, { v: 2 }, { firstRunMs: first });
    expect(await q.repeat.pump()).toEqual([]);
    expect((await q.get(id!))?.data).toEqual({ v: 1 });
    expect(await score('repeat', 'again')).toBe(first + 60_000);
    expect(await raw.zcard(key('pending'))).toBe(1);
  });

  it('two pumps on two connections racing over many periods mint every occurrence once', async ({
    q,
    queueName: name,
    others,
    serverNow,
    occurrenceRows,
  }) => {
    const other = await EchoMQ.connect({ url: env.server.url });
    others.push(other);
    const q2 = other.queue(name);
    const first = (await serverNow()) + 5;
    await q.repeat.register('race', 10, { r: 1 }, { firstRunMs: first });
    // Both race until ten occurrences are minted between them: a count, not a time window, so a
    // slow machine makes the race longer, never emptier.
    const minted: string[] = [];
    const pumpLoop = async (queue: Queue): Promise<string[]> => {
      const ids: string[] = [];
      while (minted.length < 10) {
        const got = await queue.repeat.pump();
        ids.push(...got);
        minted.push(...got);
      }
      return ids;
    };
    const [a, b] = await Promise.all([pumpLoop(q), pumpLoop(q2)]);
    const all = [...a, ...b];
    expect(all.length).toBeGreaterThanOrEqual(10);
    expect(new Set(all).size).toBe(all.length);
    const rows = await occurrenceRows('race');
    // Every row is an occurrence released once, or the one upcoming occurrence still scheduled.
    const upcoming = [...rows].filter(([, r]) => r.state === 'scheduled').map(([id]) => id);
    expect(upcoming).toHaveLength(1);
    expect([...rows.keys()].filter((id) => id !== upcoming[0]).sort()).toEqual([...all].sort());
    const instants = [...rows.values()].map((r) => Number(r.runat)).sort((x, y) => x - y);
    expect(new Set(instants).size).toBe(instants.length);
    for (const at of instants) expect((at - first) % 10).toBe(0);
    for (const [id, r] of rows) expect(id).toBe(occurrenceId('r', 'race', Number(r.runat)));
  });

  it('pumps called in the same tick on two connections mint a due occurrence once', async ({
    raw,
    q,
    key,
    queueName: name,
    others,
    serverNow,
  }) => {
    const other = await EchoMQ.connect({ url: env.server.url });
    others.push(other);
    await q.repeat.register('tie', 60_000, 1, { firstRunMs: (await serverNow()) - 1 });
    const replies = await Promise.all([q.repeat.pump(), other.queue(name).repeat.pump(), q.repeat.pump()]);
    expect(replies.flat()).toHaveLength(1);
    expect(await raw.zcard(key('pending'))).toBe(1);
  });

  it('drops a registry member whose record is gone (a ghost)', async ({ raw, q, key, score }) => {
    await raw.zadd(key('repeat'), 1, 'ghost');
    expect(await q.repeat.pump()).toEqual([]);
    expect(await score('repeat', 'ghost')).toBeNull();
    expect(await raw.zcard(key('pending'))).toBe(0);
  });
});

// ── missed runs ─────────────────────────────────────────────────────────────────

describe('missed runs (no pump ran for several periods)', () => {
  it('by default fires once, for the first missed slot, and moves to the next future slot (no burst)', async ({
    raw,
    q,
    key,
    serverNow,
    score,
  }) => {
    const every = 20;
    const first = (await serverNow()) - 10 * every - 5; // eleven slots are due
    await q.repeat.register('late', every, { n: 1 }, { firstRunMs: first });
    const { minted, now } = await q.repeat.pumpNext();
    expect(minted).toEqual([occurrenceId('r', 'late', first)]);
    const next = (await score('repeat', 'late'))!;
    expect((next - first) % every).toBe(0);
    expect(next).toBeGreaterThan(now);
    expect(next - every).toBeLessThanOrEqual(now);
    expect(await raw.hget(key('repeat:late'), 'runs')).toBe('1');
    expect(await raw.zcard(key('pending'))).toBe(1);
  });

  it("with catchUp 'all' mints every missed slot, oldest first, at most the batch per call", async ({
    raw,
    q,
    key,
    serverNow,
    score,
  }) => {
    const every = 20;
    const first = (await serverNow()) - 10 * every - 5;
    await q.repeat.register('all', every, 1, { firstRunMs: first, catchUp: 'all' });
    const one = await q.repeat.pumpNext(4);
    expect(one.minted).toEqual([0, 1, 2, 3].map((k) => occurrenceId('r', 'all', first + k * every)));
    expect(await score('repeat', 'all')).toBe(first + 4 * every);
    expect(one.nextDue).toBe(first + 4 * every); // still due: the caller goes again
    const two = await q.repeat.pumpNext(100);
    const slots = Math.floor((two.now - first) / every) + 1; // every slot <= now
    expect(two.minted).toEqual(
      Array.from({ length: slots - 4 }, (_, k) => occurrenceId('r', 'all', first + (k + 4) * every)),
    );
    expect(await score('repeat', 'all')).toBe(first + slots * every);
    expect(await raw.zcard(key('pending'))).toBe(slots);
    expect(await raw.hget(key('repeat:all'), 'runs')).toBe(String(slots));
  });

  it('the batch bounds minting across names too', async ({ q, serverNow }) => {
    const t = (await serverNow()) - 100;
    for (const n of ['a', 'b', 'c']) await q.repeat.register(n, 60_000, 1, { firstRunMs: t });
    expect(await q.repeat.pump(2)).toHaveLength(2);
    expect(await q.repeat.pump(2)).toHaveLength(1);
  });
});

// ── unregister and list ─────────────────────────────────────────────────────────

describe('unregister and list', () => {
  it('unregister removes the record and the member; minted occurrences stay ordinary jobs', async ({
    raw,
    q,
    key,
    serverNow,
    score,
  }) => {
    await q.repeat.register('gone', 60_000, 1, { firstRunMs: (await serverNow()) - 1 });
    const [id] = await q.repeat.pump();
    expect(await q.repeat.unregister('gone')).toBe(true);
    expect(await raw.exists(key('repeat:gone'))).toBe(0);
    expect(await score('repeat', 'gone')).toBeNull();
    expect((await q.get(id!))?.state).toBe('pending');
    expect(await q.repeat.unregister('gone')).toBe(false);
    expect(await q.repeat.pump()).toEqual([]);
  });

  it('list shows every cadence, soonest next run first', async ({ mq, q, serverNow }) => {
    const t = await serverNow();
    await q.repeat.register('later', 2000, { b: 2 }, { firstRunMs: t + 50_000, catchUp: 'all' });
    await q.repeat.register('sooner', 1000, { a: 1 }, { firstRunMs: t - 1, attempts: 3 });
    await q.repeat.pump();
    const list = await q.repeat.list();
    expect(list.map((r) => r.name)).toEqual(['sooner', 'later']);
    const sooner = list.find((r) => r.name === 'sooner')!;
    const later = list.find((r) => r.name === 'later')!;
    expect(sooner).toMatchObject({
      everyMs: 1000,
      template: { a: 1 },
      nextRunAt: t - 1 + 1000,
      catchUp: 'once',
      attempts: 3,
      runs: 1,
      lastRunAt: t - 1,
    });
    expect(later).toMatchObject({
      everyMs: 2000,
      template: { b: 2 },
      nextRunAt: t + 50_000,
      catchUp: 'all',
      runs: 0,
    });
    expect(later.lastRunAt).toBeUndefined();
    expect(await mq.queue(uniqueQueue('empty')).repeat.list()).toEqual([]);
  });
});

// ── the consumer's beat ─────────────────────────────────────────────────────────

describe("the consumer's beat pumps", () => {
  // A 60 s beat: only the register wake ('w r') and the pump's own due instants keep these on time.
  it('a cadence registered under a parked consumer runs at its first slot and every slot after, each once', async ({
    q,
    consumers,
    serverNow,
  }) => {
    const seen: string[] = [];
    const c = q.consume(
      async (job) => {
        expect(job.name).toBe('beat');
        expect(job.data).toEqual({ p: 1 });
        seen.push(job.id);
      },
      { beatMs: 60_000 },
    );
    consumers.push(c);
    await c.idle(); // up and parked: its first recurrence leg found nothing
    const every = 300;
    const first = (await serverNow()) + 200;
    await q.repeat.register('beat', every, { p: 1 }, { firstRunMs: first });
    await poll(
      () => seen.length,
      (n) => n >= 4,
      'four occurrences',
      20_000,
    );
    const slots = [0, 1, 2, 3].map((k) => first + k * every);
    expect(seen.slice(0, 4)).toEqual(slots.map((at) => occurrenceId('r', 'beat', at)));
    for (const id of seen) {
      const job = (await q.get(id))!;
      expect(job.startedAt!).toBeGreaterThanOrEqual(job.runAt!);
    }
  });

  it('a cadence registered under a busy consumer (its only slot taken) makes every slot, each once, in order', async ({
    q,
    consumers,
    serverNow,
  }) => {
    const { seen, release } = await occupiedConsumer(q, consumers);
    const every = 200;
    const first = (await serverNow()) + every;
    await q.repeat.register('busy', every, {}, { firstRunMs: first });
    const slots = [0, 1, 2, 3].map((k) => first + k * every);
    // Every slot passes while the only slot is busy: each must still be made, none skipped.
    await poll(
      async () => (await serverNow()) > slots[3]! + 50 && (await q.counts()).pending >= 4,
      (done) => done,
      'four occurrences made while busy',
      20_000,
    );
    release();
    await poll(
      () => seen.length,
      (n) => n >= 4,
      'four runs',
      20_000,
    );
    expect(seen.slice(0, 4)).toEqual(slots.map((at) => occurrenceId('r', 'busy', at)));
    expect(new Set(seen).size).toBe(seen.length);
  });

  it('a cadence whose first run is now, registered under a running parked consumer, runs before its beat', async ({
    q,
    consumers,
    serverNow,
  }) => {
    const c = q.consume(async () => {}, { beatMs: 60_000 });
    consumers.push(c);
    await c.idle(); // up and parked: its recurrence leg ran and found nothing
    const done = deferred<string>();
    c.on('completed', (job) => {
      if (job.id.endsWith(':r:now')) done.resolve(job.id);
    });
    const first = await serverNow();
    await q.repeat.register('now', 60_000, {}, { firstRunMs: first });
    const id = await within(done.promise, 20_000, 'the first occurrence'); // the beat is 60 s
    expect(id).toBe(occurrenceId('r', 'now', first));
    const job = (await q.get(id))!;
    expect(job.startedAt!).toBeGreaterThanOrEqual(job.runAt!);
  });

  it('racing consumers on two connections make each occurrence once, never early', async ({
    q,
    queueName: name,
    consumers,
    others,
    serverNow,
    occurrenceRows,
  }) => {
    const other = await EchoMQ.connect({ url: env.server.url });
    others.push(other);
    const runs: string[] = [];
    const handler = async (job: { id: string }) => {
      runs.push(job.id);
    };
    consumers.push(
      q.consume(handler, { beatMs: 60_000 }),
      other.queue(name).consume(handler, { beatMs: 60_000 }),
    );
    await Promise.all(consumers.map((c) => c.idle()));
    const every = 40;
    const first = (await serverNow()) + every;
    // catchUp 'all': however late a slow engine promotes, no slot may be skipped (the default
    // would treat a release two periods late as an outage).
    await q.repeat.register('shared', every, {}, { firstRunMs: first, catchUp: 'all' });
    await poll(
      () => runs.length,
      (n) => n >= 10,
      'ten runs',
      20_000,
    );
    await Promise.all(consumers.splice(0).map((c) => c.close()));
    expect(new Set(runs).size).toBe(runs.length);
    const rows = await occurrenceRows('shared');
    const instants = [...rows.values()].map((row) => Number(row.runat)).sort((a, b) => a - b);
    expect(instants[0]).toBe(first);
    // No slot skipped between the first and the last occurrence made.
    expect(instants).toEqual(instants.map((_, k) => first + k * every));
    for (const row of rows.values()) {
      if (row.started !== undefined) expect(Number(row.started)).toBeGreaterThanOrEqual(Number(row.runat));
    }
  });

  it('a pump late by less than a period skips no slot; one late by two or more (an outage) moves past now', async ({
    q,
    serverNow,
  }) => {
    const every = 60_000;
    const now = await serverNow();
    // Due 1.5 periods ago: the next slot (half a period ago) is still made, by the next call.
    await q.repeat.register('late', every, {}, { firstRunMs: now - 90_000 });
    const a = await q.repeat.pumpNext();
    expect(a.minted).toEqual([occurrenceId('r', 'late', now - 90_000)]);
    expect(a.nextDue).toBe(now - 30_000);
    const b = await q.repeat.pumpNext();
    expect(b.minted).toEqual([occurrenceId('r', 'late', now - 30_000)]);
    expect(b.nextDue).toBe(now + 30_000);
    // Due 2.5 periods ago: one run for the slot it was due at, then the first slot after now.
    await q.repeat.register('outage', every, {}, { firstRunMs: now - 150_000 });
    const c = await q.repeat.pumpNext();
    expect(c.minted).toEqual([occurrenceId('r', 'outage', now - 150_000)]);
    expect((await q.repeat.list()).find((r) => r.name === 'outage')!.nextRunAt).toBe(now + 30_000);
  });
});
