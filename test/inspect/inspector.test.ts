// The read-only Inspector against a real redis-server: a queue with jobs in every state, lanes
// (one paused), consumers and per-minute stats, read back through each method, with paging
// across flat pending and lanes, and proof that reading writes nothing.
import type { Redis } from 'ioredis';
import { describe, expect } from 'vitest';
import { EchoMQError } from '../../src/core/errors.js';
import type { EnqueueOptions } from '../../src/core/types.js';
import { Inspector } from '../../src/inspect/inspector.js';
import type { Queue } from '../../src/queue/queue.js';
import { type QueueFixture, queueTest, uniqueQueue, useRedisServer } from '../support/harness.js';

const env = useRedisServer();

// ── helpers ─────────────────────────────────────────────────────────────────────

async function serverTime(raw: Redis): Promise<number> {
  const [s, us] = await raw.time();
  return Number(s) * 1000 + Math.floor(Number(us) / 1000);
}

interface Claimed {
  id: string;
  token: number;
}

async function claim(q: Queue, n: number): Promise<Claimed[]> {
  const [flat] = (await q.run('claim', [q.keys.prefix, n, 60_000])) as [(string | number)[], string];
  const out: Claimed[] = [];
  for (let i = 0; i < flat.length; i += 7) out.push({ id: String(flat[i]), token: Number(flat[i + 1]) });
  return out;
}

async function add(q: Queue, id: string, opts: EnqueueOptions = {}): Promise<string> {
  await q.enqueue({ id }, { id, ...opts });
  return id;
}

/**
 * A queue with jobs in every state. Terminal sets are re-scored 1 ms apart so "newest first" is
 * observable (finishes within one ms would tie).
 */
async function populate({ q, raw, key }: QueueFixture): Promise<void> {
  for (const id of ['JOBc1', 'JOBc2', 'JOBc3']) await add(q, id);
  for (const [i, job] of (await claim(q, 3)).entries()) {
    await q.run('complete', [q.keys.prefix, 60_000, 0, job.id, job.token, JSON.stringify({ n: i })]);
  }
  for (const id of ['JOBd1', 'JOBd2']) await add(q, id, { attempts: 1 });
  for (const job of await claim(q, 2)) {
    await q.run('fail', [q.keys.prefix, job.id, job.token, `boom ${job.id}`, 'at handler', -1], job.id);
  }
  await add(q, 'JOBx1');
  await q.cancel('JOBx1');
  await add(q, 'JOBa1');
  await claim(q, 1); // JOBa1 is active
  await q.enqueueIn({}, 7_200_000, { id: 'JOBs2' });
  await q.enqueueIn({}, 3_600_000, { id: 'JOBs1' });
  await add(q, 'JOBp1');
  await add(q, 'JOBp2', { priority: 5 });
  await add(q, 'JOBp3');
  await add(q, 'JOBla1', { group: 'alpha' });
  await add(q, 'JOBla2', { group: 'alpha' });
  await add(q, 'JOBlb1', { group: 'beta' });
  await q.lanes.pause('beta');
  const now = await serverTime(raw);
  await raw.zadd(key('completed'), now - 3, 'JOBc1', now - 2, 'JOBc2', now - 1, 'JOBc3');
  await raw.zadd(key('dead'), now - 2, 'JOBd1', now - 1, 'JOBd2');
}

/** Each test's own queue, an Inspector on its connection, and the helpers bound to them. */
const it = queueTest(env, 'inspect').extend<{
  inspector: Inspector;
  populate: () => Promise<void>;
  serverNow: () => Promise<number>;
}>({
  inspector: async ({ mq }, use) => use(new Inspector(mq)),
  populate: async ({ mq, raw, queueName: name, q, P, key }, use) =>
    use(() => populate({ mq, raw, name, q, P, key })),
  serverNow: async ({ raw }, use) => use(() => serverTime(raw)),
});

const ids = (jobs: { id: string }[]) => jobs.map((j) => j.id);

// ── queues ──────────────────────────────────────────────────────────────────────

describe('queues', () => {
  it('lists every registered queue by name with counts per state, paused and lane count', async ({
    mq,
    queueName: name,
    inspector,
    populate,
  }) => {
    await populate();
    const other = mq.queue(uniqueQueue('inspect'));
    await other.enqueue({});
    await other.pause();

    const all = await inspector.queues();
    const mine = all.find((s) => s.name === name);
    expect(mine).toEqual({
      name,
      counts: {
        scheduled: 2,
        pending: 6,
        active: 1,
        completed: 3,
        dead: 2,
        cancelled: 1,
        waiting_children: 0,
      },
      paused: false,
      lanes: 2,
      oldestWaitingMs: expect.any(Number),
      kept: { completed: 1000, dead: 10_000 }, // the retention defaults (SPEC 6)
    });
    expect(all.find((s) => s.name === other.name)).toMatchObject({ paused: true, lanes: 0 });
    expect(all.map((s) => s.name)).toEqual([...all.map((s) => s.name)].sort());
  });

  it('skips a member of emq:queues that is not a valid queue name', async ({
    raw,
    q,
    queueName: name,
    inspector,
  }) => {
    await q.enqueue({});
    await raw.sadd('emq:queues', 'not a queue {name}');
    try {
      const names = (await inspector.queues()).map((s) => s.name);
      expect(names).toContain(name);
      expect(names).not.toContain('not a queue {name}');
    } finally {
      await raw.srem('emq:queues', 'not a queue {name}');
    }
  });

  it('knows whether a queue is registered', async ({ q, queueName: name, inspector }) => {
    expect(await inspector.has(name)).toBe(false);
    await q.enqueue({});
    expect(await inspector.has(name)).toBe(true);
  });
});

// ── stats ───────────────────────────────────────────────────────────────────────

describe('stats', () => {
  it('reports counts, lanes with their settings and pause, and the consumers seen', async ({
    q,
    queueName: name,
    inspector,
    populate,
  }) => {
    await populate();
    await q.lanes.configure('alpha', { concurrency: 2, rateLimit: { max: 10, perMs: 1000 } });
    await q.run('heartbeat', [
      q.keys.prefix,
      'host-a:1:x',
      JSON.stringify({ host: 'host-a', pid: 1, concurrency: 4, running: 2 }),
    ]);

    const st = await inspector.stats(name);
    expect(st.name).toBe(name);
    expect(st.paused).toBe(false);
    expect(st.counts.pending).toBe(6);
    expect(st.lanes).toEqual([
      {
        group: 'alpha',
        pending: 2,
        running: 0,
        paused: false,
        concurrency: 2,
        rateLimit: { max: 10, perMs: 1000 },
      },
      { group: 'beta', pending: 1, running: 0, paused: true, concurrency: 0, rateLimit: null },
    ]);
    expect(st.consumers).toEqual([
      {
        id: 'host-a:1:x',
        lastSeen: expect.any(Number),
        silentMs: expect.any(Number),
        beatMs: 1000,
        alive: true,
        host: 'host-a',
        pid: 1,
        concurrency: 4,
        running: 2,
        protocols: [1], // its runtime did not say: version 1 only
      },
    ]);
    // What waits: 6 pending, the one next in line in each lane and flat, none active past its lease.
    expect(st.oldestWaitingMs).toBeGreaterThanOrEqual(0);
    expect(Object.keys(st.lanesOldestWaitingMs).sort()).toEqual(['alpha', 'beta']);
    expect(st.expiredLeases).toBe(0);
  });

  it('gives 60 per-minute rates, oldest first, summed into the last hour with the failure rate', async ({
    raw,
    key,
    queueName: name,
    inspector,
    populate,
    serverNow,
  }) => {
    await populate(); // 3 completions and 2 failures, counted by the scripts this minute
    const minute = Math.floor((await serverNow()) / 60_000);
    await raw.hset(key(`stats:${minute - 10}`), 'completed', '7', 'failed', '1');
    await raw.hset(key(`stats:${minute - 60}`), 'completed', '100'); // an hour ago: out of the window

    const { rates } = await inspector.stats(name);
    expect(rates.perMinute).toHaveLength(60);
    const minutes = rates.perMinute.map((m) => m.minute);
    expect(minutes).toEqual([...minutes].sort((a, b) => a - b));
    expect(minutes[59]! - minutes[0]!).toBe(59 * 60_000);
    expect(rates.perMinute.find((m) => m.minute === (minute - 10) * 60_000)).toEqual({
      minute: (minute - 10) * 60_000,
      completed: 7,
      failed: 1,
    });
    expect(rates.completedLastHour).toBe(10);
    expect(rates.failedLastHour).toBe(3);
    expect(rates.failureRate).toBeCloseTo(3 / 13);
  });

  it('reports a failure rate of 0 when nothing ran', async ({ q, queueName: name, inspector }) => {
    await q.enqueue({});
    const { rates } = await inspector.stats(name);
    expect(rates).toMatchObject({ completedLastHour: 0, failedLastHour: 0, failureRate: 0 });
  });
});

// ── jobs ────────────────────────────────────────────────────────────────────────

describe('jobs', () => {
  it('lists terminal states newest first with their rows', async ({
    queueName: name,
    inspector,
    populate,
  }) => {
    await populate();
    const completed = await inspector.jobs(name, 'completed');
    expect(completed.total).toBe(3);
    expect(ids(completed.jobs)).toEqual(['JOBc3', 'JOBc2', 'JOBc1']);
    expect(completed.jobs[0]).toMatchObject({ state: 'completed', result: { n: 2 }, attempts: 1 });

    const dead = await inspector.jobs(name, 'dead');
    expect(ids(dead.jobs)).toEqual(['JOBd2', 'JOBd1']);
    expect(dead.jobs[0]?.error).toEqual({ message: 'boom JOBd2', stack: 'at handler' });

    expect(ids((await inspector.jobs(name, 'cancelled')).jobs)).toEqual(['JOBx1']);
  });

  it('lists scheduled by run-at, active by lease and pending in claim order: flat, then each lane', async ({
    queueName: name,
    inspector,
    populate,
  }) => {
    await populate();
    expect(ids((await inspector.jobs(name, 'scheduled')).jobs)).toEqual(['JOBs1', 'JOBs2']);
    expect(ids((await inspector.jobs(name, 'active')).jobs)).toEqual(['JOBa1']);
    const pending = await inspector.jobs(name, 'pending');
    expect(pending.total).toBe(6);
    expect(ids(pending.jobs)).toEqual(['JOBp1', 'JOBp3', 'JOBp2', 'JOBla1', 'JOBla2', 'JOBlb1']);
  });

  it('pages with offset and limit across flat pending and the lanes', async ({
    queueName: name,
    inspector,
    populate,
  }) => {
    await populate();
    const page = await inspector.jobs(name, 'pending', { offset: 2, limit: 3 });
    expect(page.total).toBe(6);
    expect(ids(page.jobs)).toEqual(['JOBp2', 'JOBla1', 'JOBla2']);
    expect(ids((await inspector.jobs(name, 'pending', { offset: 5, limit: 10 })).jobs)).toEqual(['JOBlb1']);
    expect(await inspector.jobs(name, 'pending', { offset: 6 })).toEqual({ total: 6, jobs: [] });
    expect(ids((await inspector.jobs(name, 'completed', { offset: 1, limit: 1 })).jobs)).toEqual(['JOBc2']);
  });

  it('lists one lane with group', async ({ queueName: name, inspector, populate }) => {
    await populate();
    const alpha = await inspector.jobs(name, 'pending', { group: 'alpha' });
    expect(alpha).toMatchObject({ total: 2 });
    expect(ids(alpha.jobs)).toEqual(['JOBla1', 'JOBla2']);
    expect(await inspector.jobs(name, 'pending', { group: 'nobody' })).toEqual({ total: 0, jobs: [] });
  });

  it('refuses a group for states other than pending, and a limit outside 1-1000', async ({
    queueName: name,
    inspector,
    populate,
  }) => {
    await populate();
    await expect(inspector.jobs(name, 'dead', { group: 'alpha' })).rejects.toMatchObject({
      code: 'EMQINPUT',
    });
    await expect(inspector.jobs(name, 'dead', { limit: 0 })).rejects.toBeInstanceOf(EchoMQError);
    await expect(inspector.jobs(name, 'dead', { limit: 1001 })).rejects.toMatchObject({ code: 'EMQINPUT' });
    await expect(inspector.jobs(name, 'dead', { offset: -1 })).rejects.toMatchObject({ code: 'EMQINPUT' });
  });

  it('leaves out an id whose row is gone while still counting it in total', async ({
    raw,
    key,
    queueName: name,
    inspector,
    populate,
  }) => {
    await populate();
    await raw.del(key('job:JOBp1'));
    const page = await inspector.jobs(name, 'pending', { limit: 2 });
    expect(page.total).toBe(6);
    expect(ids(page.jobs)).toEqual(['JOBp3']);
  });
});

// ── job ─────────────────────────────────────────────────────────────────────────

describe('job', () => {
  it('returns the row with its history from the events stream, oldest first', async ({
    queueName: name,
    inspector,
    populate,
  }) => {
    await populate();
    const job = await inspector.job(name, 'JOBd1');
    expect(job).toMatchObject({ id: 'JOBd1', state: 'dead', error: { message: 'boom JOBd1' } });
    expect(job?.history.map((e) => e.event)).toEqual(['added', 'active', 'failed', 'retries_exhausted']);
    expect(job?.history.every((e) => e.id === 'JOBd1')).toBe(true);
    expect(job?.history[2]?.fields).toMatchObject({ reason: 'unrecoverable' });
    expect(job?.historyTruncated).toBe(false);
  });

  it('finds history behind thousands of other events, reading the stream in chunks', async ({
    q,
    queueName: name,
    inspector,
  }) => {
    await add(q, 'JOBold');
    await q.enqueueMany(Array.from({ length: 2500 }, (_, i) => ({ data: i })));
    await q.cancel('JOBold');
    const job = await inspector.job(name, 'JOBold');
    expect(job?.history.map((e) => e.event)).toEqual(['added', 'failed']);
  });

  it('is null for an unknown id and for an id that is not JOB-namespaced', async ({
    q,
    queueName: name,
    inspector,
  }) => {
    await q.enqueue({});
    expect(await inspector.job(name, 'JOBnope')).toBeNull();
    expect(await inspector.job(name, 'nope')).toBeNull();
  });
});

// ── schedulers ──────────────────────────────────────────────────────────────────

describe('schedulers', () => {
  it('lists fixed cadences and job schedulers with their next runs', async ({
    q,
    queueName: name,
    inspector,
    serverNow,
  }) => {
    const now = await serverNow();
    await q.repeat.register('tick', 60_000, { t: 1 }, { firstRunMs: now + 60_000 });
    await q.schedulers.upsert('nightly', { pattern: '0 3 * * *', tz: 'UTC' }, { name: 'report' });
    await q.schedulers.upsert('often', { every: 5000 });

    const r = await inspector.schedulers(name);
    expect(r.repeats).toEqual([{ name: 'tick', nextRunAt: now + 60_000, everyMs: 60_000, runs: 0 }]);
    expect(r.schedulers.map((s) => s.id)).toEqual(['often', 'nightly']); // soonest first
    expect(r.schedulers[1]).toMatchObject({ id: 'nightly', pattern: '0 3 * * *', tz: 'UTC', name: 'report' });
    expect(r.schedulers[1]?.nextRunAt).toBeGreaterThan(now);
    expect(r.schedulers[0]).toMatchObject({ id: 'often', every: 5000 });
  });

  it('is empty for a queue without any', async ({ queueName: name, inspector }) => {
    expect(await inspector.schedulers(name)).toEqual({ repeats: [], schedulers: [] });
  });
});

// ── consumers ───────────────────────────────────────────────────────────────────

describe('consumers', () => {
  it('lists consumers seen in the last 10 minutes, most recent first, with their info', async ({
    raw,
    q,
    key,
    queueName: name,
    inspector,
    serverNow,
  }) => {
    const beat = (id: string, info: object) => q.run('heartbeat', [q.keys.prefix, id, JSON.stringify(info)]);
    await beat('c-1', { host: 'h1', pid: 11, concurrency: 4, running: 1 });
    await beat('c-2', { host: 'h2', pid: 22, concurrency: 8, running: 0, protocols: [1, 2] });
    const now = await serverNow();
    await raw.zadd(key('consumers'), now - 5000, 'c-1', now - 11 * 60_000, 'c-old');
    await raw.hset(key('consumers:info'), 'c-old', JSON.stringify({ host: 'h0', pid: 1 }));

    const seen = await inspector.consumers(name);
    expect(seen.map((c) => c.id)).toEqual(['c-2', 'c-1']);
    // Silent for 5 s, more than 3 beats of the default 1000 ms: shown dead.
    expect(seen[1]).toEqual({
      id: 'c-1',
      lastSeen: now - 5000,
      silentMs: expect.any(Number),
      beatMs: 1000,
      alive: false,
      host: 'h1',
      pid: 11,
      concurrency: 4,
      running: 1,
      protocols: [1],
    });
    expect(seen[0]!.protocols).toEqual([1, 2]);
  });

  it('shows a consumer whose info is not JSON with its id and time only', async ({
    raw,
    key,
    queueName: name,
    inspector,
    serverNow,
  }) => {
    await raw.zadd(key('consumers'), await serverNow(), 'weird');
    await raw.hset(key('consumers:info'), 'weird', 'not json');
    expect(await inspector.consumers(name)).toEqual([
      {
        id: 'weird',
        lastSeen: expect.any(Number),
        silentMs: expect.any(Number),
        beatMs: 1000,
        alive: true,
        host: '',
        pid: 0,
        concurrency: 0,
        running: 0,
        protocols: [1],
      },
    ]);
  });
});

// ── read-only ───────────────────────────────────────────────────────────────────

describe('read-only', () => {
  it('writes nothing: every method leaves every key of an unregistered queue absent', async ({
    raw,
    inspector,
  }) => {
    const ghost = uniqueQueue('ghost');
    const before = await raw.dbsize();
    await inspector.queues();
    await inspector.stats(ghost);
    await inspector.jobs(ghost, 'pending');
    await inspector.jobs(ghost, 'dead');
    await inspector.job(ghost, 'JOB1');
    await inspector.schedulers(ghost);
    await inspector.consumers(ghost);
    await inspector.countEnded(ghost, 'completed');
    expect(await raw.dbsize()).toBe(before);
    expect(await raw.sismember('emq:queues', ghost)).toBe(0);
  });

  it('counts ended jobs older than an age, as clean would take them', async ({
    queueName: name,
    inspector,
    populate,
  }) => {
    await populate();
    expect(await inspector.countEnded(name, 'completed')).toBe(3);
    expect(await inspector.countEnded(name, 'dead', 3_600_000)).toBe(0);
    await expect(inspector.countEnded(name, 'pending' as never)).rejects.toMatchObject({ code: 'EMQINPUT' });
  });
});
