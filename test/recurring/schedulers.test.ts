// JobSchedulers against a real redis-server: upsert (create, keep on an unchanged re-upsert,
// replace on new options), get, list, count, remove and removeByKey; exactly one upcoming
// occurrence per scheduler with a deterministic id; the hand-off (advance) under racing callers
// and racing consumers; limit and endDate ending a scheduler; bad patterns and zones storing
// nothing; and consumers with a 60 s beat running schedulers made under them (parked or busy)
// at every slot, each once. Periods are tens to hundreds of ms.
import type { Redis } from 'ioredis';
import { describe, expect } from 'vitest';
import type { ErrorCode } from '../../src/core/errors.js';
import { occurrenceId } from '../../src/core/ids.js';
import { EchoMQ } from '../../src/queue/echomq.js';
import type { Queue } from '../../src/queue/queue.js';
import { calculateNextMillis } from '../../src/recurring/next-run.js';
import { nextOccurrence } from '../../src/recurring/schedulers.js';
import { queueTest, uniqueQueue, useRedisServer } from '../support/harness.js';
import {
  deferred,
  occupiedConsumer,
  poll,
  refusal,
  serverNow as serverClock,
  within,
} from '../support/observe.js';

const env = useRedisServer();

// ── helpers ─────────────────────────────────────────────────────────────────────

/** Every occurrence row of scheduler `id`, by job id. */
async function occurrenceRowsOf(
  raw: Redis,
  key: (suffix: string) => string,
  id: string,
): Promise<Map<string, Record<string, string>>> {
  const out = new Map<string, Record<string, string>>();
  for (const k of await raw.keys(key(`job:JOB*:s:${id}`)))
    out.set(k.slice(key('job:').length), await raw.hgetall(k));
  return out;
}

/** Each test's own queue, the consumers and connections it opens (closed after it), and reads of its keys. */
const it = queueTest(env, 'sched').extend<{
  serverNow: () => Promise<number>;
  /** Ids in the schedule set that are occurrences of scheduler `id`. */
  scheduled: (id: string) => Promise<string[]>;
  occurrenceRows: (id: string) => Promise<Map<string, Record<string, string>>>;
}>({
  serverNow: async ({ raw }, use) => use(() => serverClock(raw)),
  scheduled: async ({ raw, key }, use) =>
    use(async (id) => (await raw.zrange(key('schedule'), 0, -1)).filter((m) => m.endsWith(`:s:${id}`))),
  occurrenceRows: async ({ raw, key }, use) => use((id) => occurrenceRowsOf(raw, key, id)),
});

const refused = refusal;

async function code(call: () => unknown): Promise<ErrorCode> {
  return (await refused(call)).code;
}

/** Drives one scheduler by hand (promote, then the hand-off) until `done` holds. */
async function drive(queue: Queue, done: () => Promise<boolean>, what: string): Promise<void> {
  await poll(
    async () => {
      await queue.promote();
      await queue.schedulers.advance();
      return done();
    },
    (v) => v,
    what,
  );
}

// ── upsert ──────────────────────────────────────────────────────────────────────

describe('upsert', () => {
  it('creates the record and exactly one delayed occurrence with a deterministic id and runat', async ({
    raw,
    q,
    key,
    serverNow,
    scheduled,
  }) => {
    const before = await serverNow();
    const r = await q.schedulers.upsert(
      'digest',
      { every: 60_000 },
      { name: 'send-digest', data: { to: 'all' }, opts: { priority: 3, attempts: 2 } },
    );
    const after = await serverNow();
    expect(r.status).toBe('created');
    expect(r.nextRunAt).toBeGreaterThanOrEqual(before + 60_000);
    expect(r.nextRunAt).toBeLessThanOrEqual(after + 60_000);
    expect(r.jobId).toBe(occurrenceId('s', 'digest', r.nextRunAt!));
    expect(await scheduled('digest')).toEqual([r.jobId]);
    expect(Number(await raw.zscore(key('schedule'), r.jobId!))).toBe(r.nextRunAt);
    expect(await q.get(r.jobId!)).toMatchObject({
      state: 'scheduled',
      name: 'send-digest',
      data: { to: 'all' },
      priority: 3,
      maxAttempts: 2,
      runAt: r.nextRunAt,
    });
    expect(Number(await raw.zscore(key('schedulers'), 'digest'))).toBe(r.nextRunAt);
    const events = await raw.xrange(key('events'), '-', '+');
    expect(events.map(([, f]) => f.slice(0, 4))).toContainEqual(['event', 'delayed', 'id', r.jobId]);
  });

  it('get, list and count describe the scheduler', async ({ q }) => {
    const r = await q.schedulers.upsert(
      's1',
      { pattern: '0 9 * * *', tz: 'Europe/Berlin' },
      { data: { a: 1 } },
    );
    const view = await q.schedulers.get('s1');
    expect(view).toMatchObject({
      id: 's1',
      key: 's1',
      name: 's1', // the job name defaults to the scheduler id
      repeat: { pattern: '0 9 * * *', tz: 'Europe/Berlin' },
      template: { data: { a: 1 }, opts: {} },
      nextRunAt: r.nextRunAt,
      jobId: r.jobId,
      iterationCount: 1,
    });
    expect(view!.ended).toBeUndefined();
    expect(await q.schedulers.get('nope')).toBeNull();
    expect(await q.schedulers.count()).toBe(1);
  });

  it('re-upserting the same options keeps the occurrence (no duplicate, no postponement) and refreshes the template', async ({
    q,
    scheduled,
  }) => {
    const first = await q.schedulers.upsert('keep', { every: 60_000 }, { data: { v: 1 } });
    await new Promise((r) => setTimeout(r, 5));
    const again = await q.schedulers.upsert('keep', { every: 60_000 }, { name: 'renamed', data: { v: 2 } });
    expect(again).toEqual({ status: 'updated', nextRunAt: first.nextRunAt, jobId: first.jobId });
    expect(await scheduled('keep')).toEqual([first.jobId]);
    expect(await q.get(first.jobId!)).toMatchObject({
      data: { v: 2 },
      name: 'renamed',
      runAt: first.nextRunAt,
    });
    expect((await q.schedulers.get('keep'))!.iterationCount).toBe(1);
  });

  it('Date and ISO dates are stored as epoch ms, so equal definitions compare equal', async ({ q }) => {
    const end = Date.parse('2099-01-01T00:00:00Z');
    const a = await q.schedulers.upsert('dates', { every: 60_000, endDate: new Date(end) });
    const b = await q.schedulers.upsert('dates', { every: 60_000, endDate: '2099-01-01T00:00:00Z' });
    expect(b.status).toBe('updated');
    expect(b.jobId).toBe(a.jobId);
    expect((await q.schedulers.get('dates'))!.repeat).toEqual({ every: 60_000, endDate: end });
  });

  it('new options replace the waiting occurrence: it is removed and the new one scheduled', async ({
    raw,
    q,
    key,
    serverNow,
    scheduled,
  }) => {
    const old = await q.schedulers.upsert('swap', { every: 60_000 });
    const now = await serverNow();
    const r = await q.schedulers.upsert('swap', { pattern: '0 0 1 1 *' });
    expect(r.status).toBe('replaced');
    const expected = calculateNextMillis({ pattern: '0 0 1 1 *' }, now)!;
    expect(r.nextRunAt).toBe(expected);
    expect(r.jobId).toBe(occurrenceId('s', 'swap', expected));
    expect(await raw.exists(key(`job:${old.jobId}`))).toBe(0);
    expect(await scheduled('swap')).toEqual([r.jobId]);
    const view = await q.schedulers.get('swap');
    expect(view).toMatchObject({ repeat: { pattern: '0 0 1 1 *' }, iterationCount: 1, jobId: r.jobId });
    const events = await raw.xrange(key('events'), '-', '+');
    expect(events.map(([, f]) => f.join(' '))).toContain(`event removed id ${old.jobId} prev scheduled`);
  });

  it('new options leave an occurrence that already started alone: it runs, the next follows the new options', async ({
    q,
    scheduled,
  }) => {
    const old = await q.schedulers.upsert('started', { immediately: true, every: 60_000 });
    await poll(
      () => q.promote(),
      (n) => n > 0,
      'the immediate occurrence promoted',
    );
    const r = await q.schedulers.upsert('started', { every: 120_000 });
    expect(r.status).toBe('replaced');
    expect(r.jobId).not.toBe(old.jobId);
    expect((await q.get(old.jobId!))?.state).toBe('pending');
    expect(await scheduled('started')).toEqual([r.jobId]);
    expect((await q.schedulers.get('started'))!.iterationCount).toBe(2);
  });

  it('immediately: the first occurrence is due at once', async ({ q, serverNow }) => {
    const now = await serverNow();
    const r = await q.schedulers.upsert('now', { every: 60_000, immediately: true });
    expect(r.nextRunAt).toBeGreaterThanOrEqual(now);
    expect(r.nextRunAt).toBeLessThanOrEqual(await serverNow());
    expect(await q.promote()).toBe(1);
    expect((await q.get(r.jobId!))?.state).toBe('pending');
  });

  it('a bad pattern or time zone is EMQCRON and stores nothing', async ({ raw, q, key }) => {
    const bad = await refused(() => q.schedulers.upsert('cron', { pattern: '61 * * * *' }));
    expect(bad.code).toBe('EMQCRON');
    expect(bad.message).toContain('61 * * * *');
    expect(await code(() => q.schedulers.upsert('cron', { pattern: '0 9 * * *', tz: 'Mars/Olympus' }))).toBe(
      'EMQCRON',
    );
    expect(await code(() => q.schedulers.upsert('cron', { pattern: '0 0 30 2 *' }))).toBe('EMQCRON');
    expect(await q.schedulers.count()).toBe(0);
    expect(await raw.keys(key('*'))).toEqual([]);
  });

  it('other bad input is EMQINPUT, and a bad upsert leaves the stored scheduler as it was', async ({
    q,
    scheduled,
  }) => {
    const good = await q.schedulers.upsert('ok', { every: 60_000 }, { data: 1 });
    expect(await code(() => q.schedulers.upsert('ok', { every: 0 }))).toBe('EMQINPUT');
    expect(await code(() => q.schedulers.upsert('ok', { every: 10, pattern: '* * * * *' }))).toBe('EMQINPUT');
    expect(await code(() => q.schedulers.upsert('ok', { every: 10, cron: 'x' } as object))).toBe('EMQINPUT');
    expect(await code(() => q.schedulers.upsert('ok', { pattern: '@daily', tz: 'Nope/Nope' }))).toBe(
      'EMQCRON',
    );
    expect(await code(() => q.schedulers.upsert('ok', { every: 10 }, { opts: { priority: -1 } }))).toBe(
      'EMQINPUT',
    );
    expect(
      await code(() => q.schedulers.upsert('ok', { every: 10 }, { opts: { lifo: true } as object })),
    ).toBe('EMQINPUT');
    expect(await code(() => q.schedulers.upsert('ok', { every: 10 }, { extra: 1 } as object))).toBe(
      'EMQINPUT',
    );
    expect(await code(() => q.schedulers.upsert('bad id', { every: 10 }))).toBe('EMQINPUT');
    expect(await q.schedulers.get('ok')).toMatchObject({ repeat: { every: 60_000 }, jobId: good.jobId });
    expect(await scheduled('ok')).toEqual([good.jobId]);
    expect(await q.schedulers.count()).toBe(1);
  });

  it('a compare-and-set refuses a caller that read a stale record (the script says stale)', async ({
    q,
    scheduled,
  }) => {
    const r = await q.schedulers.upsert('cas', { every: 60_000 });
    const p = q.keys.prefix;
    const reply = await q.run('addJobScheduler', [
      p,
      'cas',
      '{"every":1}',
      'cas',
      '{}',
      '0',
      '',
      '',
      '',
      1,
      '',
      0,
      '',
    ]);
    expect(reply).toEqual(['stale', '', '']);
    expect(await scheduled('cas')).toEqual([r.jobId]);
  });
});

// ── list, count, remove ─────────────────────────────────────────────────────────

describe('list, count, remove, removeByKey', () => {
  it('list orders by upcoming run and takes a rank range; count counts them', async ({ mq, q }) => {
    await q.schedulers.upsert('c', { every: 300_000 });
    await q.schedulers.upsert('a', { every: 100_000 });
    await q.schedulers.upsert('b', { every: 200_000 });
    expect((await q.schedulers.list()).map((s) => s.id)).toEqual(['a', 'b', 'c']);
    expect((await q.schedulers.list({ start: 1, end: 1 })).map((s) => s.id)).toEqual(['b']);
    expect((await q.schedulers.list({ start: 1 })).map((s) => s.id)).toEqual(['b', 'c']);
    expect(await q.schedulers.count()).toBe(3);
    expect(await mq.queue(uniqueQueue('none')).schedulers.list()).toEqual([]);
  });

  it('remove deletes the scheduler and its waiting occurrence; a second remove is false', async ({
    raw,
    q,
    key,
    scheduled,
  }) => {
    const r = await q.schedulers.upsert('rm', { every: 60_000 });
    expect(await q.schedulers.remove('rm')).toBe(true);
    expect(await raw.exists(key('scheduler:rm'), key(`job:${r.jobId}`))).toBe(0);
    expect(await scheduled('rm')).toEqual([]);
    expect(await q.schedulers.count()).toBe(0);
    expect(await q.schedulers.get('rm')).toBeNull();
    expect(await q.schedulers.remove('rm')).toBe(false);
  });

  it('removeByKey removes by the key list() shows', async ({ q }) => {
    await q.schedulers.upsert('by-key', { every: 60_000 });
    const [listed] = await q.schedulers.list();
    expect(await q.schedulers.removeByKey(listed!.key)).toBe(true);
    expect(await q.schedulers.count()).toBe(0);
    expect(await q.schedulers.removeByKey(listed!.key)).toBe(false);
  });

  it('remove leaves an occurrence that was already released to run', async ({ q, occurrenceRows }) => {
    const r = await q.schedulers.upsert('released', { every: 60_000, immediately: true });
    await poll(
      () => q.promote(),
      (n) => n > 0,
      'promoted',
    );
    expect(await q.schedulers.remove('released')).toBe(true);
    expect((await q.get(r.jobId!))?.state).toBe('pending');
    await q.schedulers.advance();
    expect((await occurrenceRows('released')).size).toBe(1);
  });
});

// ── the hand-off ────────────────────────────────────────────────────────────────

describe('the hand-off', () => {
  it('promote makes the next occurrence of an every scheduler in the call that releases the current one', async ({
    q,
    scheduled,
  }) => {
    const r = await q.schedulers.upsert('h', { every: 30 });
    expect((await q.schedulers.advance()).made).toEqual([]);
    const { now } = await poll(
      () => q.promoteNext(),
      (p) => p.count > 0,
      'the first occurrence promoted',
    );
    // Before the released occurrence has run (nobody claims here), the next one waits.
    const next = nextOccurrence({ every: 30 }, r.nextRunAt!, 1, now)!;
    expect((await q.get(r.jobId!))?.state).toBe('pending');
    expect(await scheduled('h')).toEqual([occurrenceId('s', 'h', next)]);
    expect(await q.schedulers.get('h')).toMatchObject({
      jobId: occurrenceId('s', 'h', next),
      nextRunAt: next,
      iterationCount: 2,
    });
    expect((await q.schedulers.advance()).made).toEqual([]); // nothing left for a runtime to do
  });

  it('promotes racing on two connections release an occurrence once and make its next one once', async ({
    q,
    queueName: name,
    others,
    serverNow,
    scheduled,
  }) => {
    const other = await EchoMQ.connect({ url: env.server.url });
    others.push(other);
    const q2 = other.queue(name);
    const r = await q.schedulers.upsert('race', { every: 60_000, immediately: true });
    await poll(serverNow, (now) => now >= r.nextRunAt!, 'the first occurrence due');
    const counts = await Promise.all([q.promote(), q2.promote(), q.promote(), q2.promote()]);
    expect(counts.reduce((a, b) => a + b, 0)).toBe(1);
    expect(await scheduled('race')).toEqual([occurrenceId('s', 'race', r.nextRunAt! + 60_000)]);
    expect((await q.schedulers.get('race'))!.iterationCount).toBe(2);
  });

  it('a cron scheduler without a lookahead is handed off by the runtime: callers racing on one released occurrence advance it once', async ({
    raw,
    q,
    key,
    queueName: name,
    others,
    scheduled,
  }) => {
    const other = await EchoMQ.connect({ url: env.server.url });
    others.push(other);
    const q2 = other.queue(name);
    await q.schedulers.upsert('cron', { pattern: '0 9 * * *', immediately: true });
    await raw.hdel(key('scheduler:cron'), 'ahead'); // as a runtime that lists none writes it
    await poll(
      () => q.promote(),
      (n) => n > 0,
      'promoted',
    );
    expect(await scheduled('cron')).toEqual([]); // promote does not compute cron, only uses a lookahead
    const results = await Promise.all([
      q.schedulers.advance(),
      q2.schedulers.advance(),
      q.schedulers.advance(),
    ]);
    expect(results.flatMap((x) => x.made)).toHaveLength(1);
    expect(await scheduled('cron')).toHaveLength(1);
    expect((await q.schedulers.get('cron'))!.iterationCount).toBe(2);
  });

  it('the script refuses to advance from an occurrence that still waits, or one already advanced', async ({
    q,
    scheduled,
  }) => {
    const r = await q.schedulers.upsert('guard', { every: 60_000 });
    const p = q.keys.prefix;
    expect(await q.run('updateJobScheduler', [p, 'guard', r.jobId!, r.nextRunAt! + 60_000, ''])).toEqual([
      'waiting',
      '',
      r.jobId,
    ]);
    expect(await q.run('updateJobScheduler', [p, 'guard', 'JOBother', r.nextRunAt! + 60_000, ''])).toEqual([
      'stale',
      '',
      '',
    ]);
    expect(await q.run('updateJobScheduler', [p, 'nope', r.jobId!, 1, ''])).toEqual(['gone', '', '']);
    expect(await scheduled('guard')).toEqual([r.jobId]);
  });

  it('an occurrence retrying in backoff (scheduled again, attempts 1) neither holds up nor repeats the next one', async ({
    q,
    scheduled,
  }) => {
    const r = await q.schedulers.upsert(
      'retry',
      { every: 60_000, immediately: true },
      { opts: { attempts: 3 } },
    );
    await poll(
      () => q.promote(),
      (n) => n > 0,
      'promoted',
    );
    const next = occurrenceId('s', 'retry', r.nextRunAt! + 60_000);
    const [flat] = (await q.run('claim', [q.keys.prefix, 1, 30_000])) as [(string | number)[]];
    expect(flat[0]).toBe(r.jobId);
    expect(await q.run('fail', [q.keys.prefix, r.jobId!, flat[1]!, 'boom', '', 60_000], r.jobId!)).toBe(
      'retry',
    );
    expect((await q.get(r.jobId!))?.state).toBe('scheduled');
    expect((await q.schedulers.advance()).made).toEqual([]);
    expect((await scheduled('retry')).sort()).toEqual([r.jobId, next].sort());
  });

  it('a cron occurrence (without a lookahead) retrying in backoff counts as released for the runtime hand-off', async ({
    raw,
    q,
    key,
    scheduled,
  }) => {
    const r = await q.schedulers.upsert(
      'cronretry',
      { pattern: '0 9 * * *', immediately: true },
      { opts: { attempts: 3 } },
    );
    await raw.hdel(key('scheduler:cronretry'), 'ahead');
    await poll(
      () => q.promote(),
      (n) => n > 0,
      'promoted',
    );
    const [flat] = (await q.run('claim', [q.keys.prefix, 1, 30_000])) as [(string | number)[]];
    expect(await q.run('fail', [q.keys.prefix, r.jobId!, flat[1]!, 'boom', '', 60_000], r.jobId!)).toBe(
      'retry',
    );
    const a = await q.schedulers.advance();
    expect(a.made).toHaveLength(1);
    expect((await scheduled('cronretry')).sort()).toEqual([r.jobId, a.made[0]].sort());
  });

  it('leaves alone a scheduler whose stored options this runtime cannot compute (another dialect)', async ({
    raw,
    q,
    key,
  }) => {
    const r = await q.schedulers.upsert('foreign', { pattern: '0 9 * * *', immediately: true });
    await raw.hdel(key('scheduler:foreign'), 'ahead'); // another runtime's record: no lookahead of ours
    await poll(
      () => q.promote(),
      (n) => n > 0,
      'promoted',
    );
    await raw.hset(key('scheduler:foreign'), 'repeat', '{"pattern":"0 9 * * 8L#3"}');
    const a = await q.schedulers.advance();
    expect(a).toMatchObject({ made: [], ended: [], skipped: ['foreign'] });
    expect(await q.schedulers.get('foreign')).toMatchObject({ jobId: r.jobId, iterationCount: 1 });
    expect((await q.schedulers.get('foreign'))!.ended).toBeUndefined();
  });

  it('an occurrence cancelled or removed before it ran does not stop the scheduler', async ({
    q,
    scheduled,
  }) => {
    const r = await q.schedulers.upsert('skip', { every: 20 });
    await q.cancel(r.jobId!);
    await poll(
      async () => (await q.schedulers.advance()).made,
      (made) => made.length === 1,
      'the next occurrence',
    );
    expect(await scheduled('skip')).toHaveLength(1);
  });

  it('missed runs are not made up: a promote late by several periods (an outage) schedules the first slot after now', async ({
    raw,
    q,
    key,
    serverNow,
    scheduled,
  }) => {
    const r = await q.schedulers.upsert('late', { every: 20, immediately: true });
    await poll(serverNow, (now) => now > r.nextRunAt! + 5 * 20, 'five periods');
    const { count, now } = await q.promoteNext();
    expect(count).toBe(1);
    const [made] = await scheduled('late');
    const at = Number(await raw.zscore(key('schedule'), made!));
    expect((at - r.nextRunAt!) % 20).toBe(0);
    expect(at).toBeGreaterThan(now);
    expect(at - 20).toBeLessThanOrEqual(now);
    expect(await scheduled('late')).toEqual([made]);
  });

  it('nextOccurrence: the next slot; a passed one within a period still runs; else the first slot after now', () => {
    expect(nextOccurrence({ every: 10 }, 1000, 1, 1005)).toBe(1010);
    expect(nextOccurrence({ every: 10 }, 1000, 1, 1010)).toBe(1010);
    expect(nextOccurrence({ every: 10 }, 1000, 1, 1017)).toBe(1010); // late by 7 ms: runs at once
    expect(nextOccurrence({ every: 10 }, 1000, 1, 1020)).toBe(1030); // two slots passed: skip
    expect(nextOccurrence({ every: 10 }, 1000, 1, 1057)).toBe(1060);
    expect(nextOccurrence({ every: 10 }, 1000, 1, 1060)).toBe(1070);
    const t = Date.parse('2026-04-10T12:00:00Z');
    const hour = 3_600_000;
    expect(nextOccurrence({ pattern: '0 * * * *' }, t, 1, t + hour + 60_000)).toBe(t + hour);
    expect(nextOccurrence({ pattern: '0 * * * *' }, t, 1, t + 5 * hour + 1)).toBe(t + 6 * hour);
    expect(nextOccurrence({ every: 10, limit: 2 }, 1000, 2, 1000)).toBeNull();
    expect(nextOccurrence({ every: 10, limit: 2 }, 1000, 1, 1057)).toBe(1010); // the last run, late
    expect(nextOccurrence({ every: 10, endDate: 1050 }, 1000, 1, 1057)).toBeNull();
  });
});

// ── ending ──────────────────────────────────────────────────────────────────────

describe('limit and endDate end a scheduler (the record stays, marked ended)', () => {
  it('limit: exactly `limit` occurrences, then ended with no upcoming one', async ({
    raw,
    q,
    key,
    scheduled,
    occurrenceRows,
  }) => {
    await q.schedulers.upsert('three', { every: 20, limit: 3 });
    await drive(q, async () => (await q.schedulers.get('three'))?.ended !== undefined, 'the scheduler ended');
    const rows = await occurrenceRows('three');
    expect(rows.size).toBe(3);
    const view = (await q.schedulers.get('three'))!;
    expect(view).toMatchObject({ ended: 'limit', nextRunAt: null, iterationCount: 3 });
    expect(await scheduled('three')).toEqual([]);
    expect(await raw.zscore(key('schedulers'), 'three')).toBe('inf');
    // Ended schedulers sort last and still count; re-upserting the same options keeps it ended.
    await q.schedulers.upsert('live', { every: 60_000 });
    expect((await q.schedulers.list()).map((s) => s.id)).toEqual(['live', 'three']);
    expect(await q.schedulers.count()).toBe(2);
    expect(await q.schedulers.upsert('three', { every: 20, limit: 3 })).toEqual({
      status: 'ended',
      nextRunAt: null,
      jobId: null,
    });
    expect((await occurrenceRows('three')).size).toBe(3);
    // Raising the limit revives it: runs made still count.
    const more = await q.schedulers.upsert('three', { every: 20, limit: 4 });
    expect(more.status).toBe('replaced');
    expect((await q.schedulers.get('three'))!.iterationCount).toBe(4);
  });

  it('endDate: no occurrence after it; then ended', async ({ q, serverNow, occurrenceRows }) => {
    const now = await serverNow();
    const end = now + 70;
    await q.schedulers.upsert('until', { every: 20, endDate: end });
    await drive(q, async () => (await q.schedulers.get('until'))?.ended !== undefined, 'the scheduler ended');
    const instants = [...(await occurrenceRows('until')).values()].map((r) => Number(r.runat));
    expect(instants.length).toBeGreaterThan(0);
    for (const at of instants) expect(at).toBeLessThanOrEqual(end);
    expect((await q.schedulers.get('until'))!.ended).toBe('endDate');
  });

  it('immediately alone runs once, then ends (done)', async ({ q, occurrenceRows }) => {
    const r = await q.schedulers.upsert('once', { immediately: true });
    await drive(q, async () => (await q.schedulers.get('once'))?.ended !== undefined, 'the scheduler ended');
    expect([...(await occurrenceRows('once')).keys()]).toEqual([r.jobId]);
    expect(await q.schedulers.get('once')).toMatchObject({
      ended: 'done',
      nextRunAt: null,
      iterationCount: 1,
    });
  });

  it('an endDate already passed stores the scheduler ended, with no occurrence', async ({ raw, q, key }) => {
    const r = await q.schedulers.upsert('past', { every: 1000, endDate: 1000 });
    expect(r).toEqual({ status: 'ended', nextRunAt: null, jobId: null });
    expect(await q.schedulers.get('past')).toMatchObject({
      ended: 'endDate',
      nextRunAt: null,
      iterationCount: 0,
    });
    expect(await raw.zcard(key('schedule'))).toBe(0);
  });
});

// ── consumers ───────────────────────────────────────────────────────────────────

describe('consumers run schedulers', () => {
  // A 60 s beat: only the protocol's hand-off (promote) and the wakes can keep these on time.
  it('a scheduler upserted under a parked consumer runs every slot, each once, in order, never early', async ({
    q,
    consumers,
  }) => {
    const seen: string[] = [];
    const c = q.consume(
      async (job) => {
        expect(job.data).toEqual({ t: 1 });
        seen.push(job.id);
      },
      { beatMs: 60_000 },
    );
    consumers.push(c);
    await c.idle(); // up and parked
    const r = await q.schedulers.upsert('tick', { every: 300, limit: 5 }, { name: 'tick', data: { t: 1 } });
    await poll(
      () => seen.length,
      (n) => n >= 5,
      'five occurrences',
      20_000,
    );
    const slots = [0, 1, 2, 3, 4].map((k) => r.nextRunAt! + k * 300);
    expect(seen).toEqual(slots.map((at) => occurrenceId('s', 'tick', at)));
    for (const id of seen) {
      const job = (await q.get(id))!;
      expect(job.startedAt!).toBeGreaterThanOrEqual(job.runAt!);
    }
    expect((await q.schedulers.get('tick'))!.ended).toBe('limit');
  });

  it('a consumer busy with a long job still makes every slot: the runs wait for a slot, none is skipped', async ({
    q,
    consumers,
    serverNow,
  }) => {
    const { seen, release } = await occupiedConsumer(q, consumers);
    const r = await q.schedulers.upsert('busy', { every: 200, limit: 4 });
    const last = r.nextRunAt! + 3 * 200;
    // Every slot passes while the only slot is busy: each occurrence is released by promote,
    // which makes the next one in the same call.
    await poll(
      async () => (await serverNow()) > last && (await q.counts()).pending >= 4,
      (done) => done,
      'four occurrences released while busy',
      20_000,
    );
    release();
    await poll(
      () => seen.length,
      (n) => n >= 4,
      'four runs',
      20_000,
    );
    expect(seen).toEqual([0, 1, 2, 3].map((k) => occurrenceId('s', 'busy', r.nextRunAt! + k * 200)));
  });

  it('a delayed job enqueued right after an immediately scheduler starts on time, not at the beat', async ({
    q,
    consumers,
  }) => {
    const c = q.consume(async () => {}, { beatMs: 60_000 });
    consumers.push(c);
    await c.idle();
    const done = deferred<string>();
    await q.schedulers.upsert('imm', { every: 60_000, immediately: true });
    const d = await q.enqueueIn({}, 100);
    c.on('completed', (job) => {
      if (job.id === d.id) done.resolve(job.id);
    });
    await within(done.promise, 20_000, 'the delayed job');
    const job = (await q.get(d.id))!;
    expect(job.startedAt!).toBeGreaterThanOrEqual(job.runAt!);
    expect(job.startedAt! - job.runAt!).toBeLessThan(30_000); // not the 60 s beat
  });

  it('two consumers taking the scheduled occurrences at once never duplicate a run', async ({
    q,
    queueName: name,
    consumers,
    others,
    scheduled,
    occurrenceRows,
  }) => {
    const other = await EchoMQ.connect({ url: env.server.url });
    others.push(other);
    await q.schedulers.upsert('shared', { every: 30 });
    const runs: string[] = [];
    const handler = async (job: { id: string }) => {
      runs.push(job.id);
    };
    consumers.push(q.consume(handler), other.queue(name).consume(handler));
    await poll(
      () => runs.length,
      (n) => n >= 8,
      'eight runs',
    );
    await Promise.all(consumers.splice(0).map((c) => c.close()));
    expect(new Set(runs).size).toBe(runs.length);
    const rows = await occurrenceRows('shared');
    const instants = [...rows.values()].map((row) => Number(row.runat)).sort((a, b) => a - b);
    expect(new Set(instants).size).toBe(instants.length);
    for (const at of instants) expect((at - instants[0]!) % 30).toBe(0);
    // Once released occurrences are handed off, exactly one occurrence waits.
    await q.promote();
    await q.schedulers.advance();
    expect(await scheduled('shared')).toHaveLength(1);
  });
});

describe('runNow', () => {
  it('runs the upcoming occurrence now; the next follows at the instant it had (the grid kept, counted once)', async ({
    q,
    consumers,
    serverNow,
  }) => {
    const up = await q.schedulers.upsert('soon', { every: 2000 }, { name: 'tick' });
    const at = up.nextRunAt!;
    const ran: { id: string; now: number }[] = [];
    const c = q.consume(
      async (job) => {
        ran.push({ id: job.id, now: await serverNow() });
      },
      { beatMs: 100 },
    );
    consumers.push(c);
    expect(await q.schedulers.runNow('soon')).toBe(up.jobId);
    await poll(
      () => ran.length,
      (n) => n === 1,
      'the occurrence ran',
    );
    expect(ran[0]!.id).toBe(up.jobId);
    expect(ran[0]!.now, 'it ran ahead of its instant').toBeLessThan(at);
    // Until its instant has come, no occurrence waits: a second runNow says so.
    const again = await refused(() => q.schedulers.runNow('soon'));
    expect(again.code).toBe('EMQSTATE');
    expect(again.message).toContain('has no occurrence waiting');
    // At that instant the hand-off makes the one after it, on the grid; the run counted once.
    const next = await poll(
      async () => q.schedulers.get('soon'),
      (s) => s?.nextRunAt === at + 2000,
      'the next occurrence at the grid slot after the one run early',
      10_000,
    );
    expect(next!.iterationCount).toBe(2);
    expect(ran.length).toBe(1);
    expect(await code(() => q.schedulers.runNow('nope'))).toBe('EMQNOJOB');
  });

  it('an ended scheduler has nothing to run now (EMQSTATE, saying why)', async ({ q }) => {
    await q.schedulers.upsert('past', { every: 1000, endDate: Date.now() - 60_000 });
    const r = await refused(() => q.schedulers.runNow('past'));
    expect(r.code).toBe('EMQSTATE');
    expect(r.message).toContain('has ended (endDate)');
  });
});
