import { describe, expect } from 'vitest';
import type { Consumer } from '../../src/consumer/consumer.js';
import { helperFixtures, type QueueTestContext, queueTest, useRedisServer } from '../support/harness.js';
import {
  busiestWindow,
  completions,
  deferred,
  poll,
  refusal,
  serverNow,
  streamEvents,
  within,
} from '../support/observe.js';

const env = useRedisServer();

// ── helpers ─────────────────────────────────────────────────────────────────────
/** The file's helpers over one test's queue. */
function helpers({ q, P }: Pick<QueueTestContext, 'q' | 'P'>) {
  /** Claims and completes one job by hand (as a consumer would), returning its id. */
  async function runOne(result = ''): Promise<string> {
    const [flat] = (await q.run('claim', [P, 1, 30_000])) as [(string | number)[]];
    const [statuses] = (await q.run('complete', [P, 30_000, 0, flat[0]!, flat[1]!, result])) as [string[]];
    expect(statuses).toEqual(['OK']);
    return String(flat[0]);
  }

  /** Claims one job and fails it for good (dead), returning its id. */
  async function killOne(): Promise<string> {
    const [flat] = (await q.run('claim', [P, 1, 30_000])) as [(string | number)[]];
    expect(await q.run('fail', [P, flat[0]!, flat[1]!, 'boom', '', -1], String(flat[0]))).toBe('dead');
    return String(flat[0]);
  }
  return { runOne, killOne };
}
type Helpers = ReturnType<typeof helpers>;

const it = queueTest(env, 'flow')
  .extend<{ h: Helpers }>({ h: async ({ q, P }, use) => use(helpers({ q, P })) })
  .extend<Helpers>(helperFixtures<Helpers>(['runOne', 'killOne']));

// ── priorities ──────────────────────────────────────────────────────────────────

describe('priorities', () => {
  it('2 consumers start jobs without a priority first, then lower priorities first, mint order within equal', async ({
    raw,
    q,
    pool,
    queueName: name,
  }) => {
    await q.pause();
    const plan = [5, 0, 1, 5, 0, 3, 1, 0, 2, 5];
    const ids: { id: string; priority: number }[] = [];
    for (const [i, priority] of plan.entries()) {
      ids.push({ id: (await q.enqueue(i, { priority })).id, priority });
    }
    const cs: Consumer[] = [];
    for (let i = 0; i < 2; i++) cs.push((await pool.start(name, () => {}, { concurrency: 1 })) as Consumer);
    const done = completions(cs, plan.length);
    await q.resume();
    await within(done, 5000, 'every job');
    // The events stream orders claims exactly as the server ran them.
    const order = (await streamEvents(raw, q, 'active')).map((e) => e.id);
    const expected = [...ids].sort((a, b) => a.priority - b.priority).map((j) => j.id); // stable: mint order
    expect(order).toEqual(expected);
  });

  it('orders a lane by priority too', async ({ q, pool, queueName: name }) => {
    await q.lanes.pause('g');
    const a = await q.enqueue('a', { group: 'g', priority: 2 });
    const b = await q.enqueue('b', { group: 'g' });
    const c = await q.enqueue('c', { group: 'g', priority: 1 });
    const consumer = (await pool.start(name, () => {}, { concurrency: 1 })) as Consumer;
    const done = completions([consumer], 3);
    await q.lanes.resume('g');
    expect(await within(done, 5000, 'the lane')).toEqual([b.id, c.id, a.id]);
  });
});

// ── the queue's rate limit ──────────────────────────────────────────────────────

describe('queue rate limit', () => {
  it('starts at most max jobs in any perMs window across 2 consumers, with no burst at the window edges', async ({
    q,
    pool,
    queueName: name,
  }) => {
    await q.configure({ rateLimit: { max: 10, perMs: 250 } });
    const cs: Consumer[] = [];
    for (let i = 0; i < 2; i++) {
      cs.push((await pool.start(name, () => {}, { concurrency: 20, beatMs: 10_000 })) as Consumer);
    }
    const done = completions(cs, 40);
    const t0 = performance.now();
    const jobs = await q.enqueueMany(Array.from({ length: 40 }, (_, i) => ({ data: i })));
    await within(done, 8000, '40 rate-limited jobs');
    const ms = performance.now() - t0;
    const starts = await Promise.all(jobs.map(async (j) => (await q.get(j.id))!.startedAt!));
    expect(busiestWindow(starts, 250)).toBe(10);
    // Four windows of 250 ms: the consumers resume as each reopens, not a beat (10 s) later.
    expect(ms).toBeGreaterThanOrEqual(700);
    expect(ms).toBeLessThan(1800);
  });

  it('configure({ rateLimit: null }) lifts the limit and wakes the parked consumers', async ({
    q,
    pool,
    queueName: name,
  }) => {
    await q.configure({ rateLimit: { max: 1, perMs: 60_000 } });
    const c = (await pool.start(name, () => {}, { concurrency: 5 })) as Consumer;
    const first = completions([c], 1);
    await q.enqueueMany(Array.from({ length: 4 }, (_, i) => ({ data: i })));
    await within(first, 3000, 'the one job the window allows');
    expect((await q.counts()).pending).toBe(3);
    const rest = completions([c], 3);
    await q.configure({ rateLimit: null });
    await within(rest, 3000, 'the rest once the limit is lifted');
  });
});

// ── pause and resume ────────────────────────────────────────────────────────────

describe('pause and resume', () => {
  it('pauses 2 consumers: running jobs finish, enqueue still works, nothing starts until resume', async ({
    raw,
    q,
    pool,
    queueName: name,
  }) => {
    const gate = deferred();
    let started = 0;
    const cs: Consumer[] = [];
    for (let i = 0; i < 2; i++) {
      cs.push(
        (await pool.start(
          name,
          async () => {
            started += 1;
            await gate.promise;
          },
          { concurrency: 2 },
        )) as Consumer,
      );
    }
    const running = await q.enqueueMany(Array.from({ length: 4 }, (_, i) => ({ data: i })));
    await poll(
      async () => started,
      (n) => n === 4,
      'all 4 slots busy',
    );
    expect(await q.pause()).toBe(true);
    expect(await q.pause()).toBe(false);
    expect(await q.isPaused()).toBe(true);
    const later = await q.enqueue('while paused');
    expect(later.status).toBe('enqueued');
    gate.resolve();
    await within(Promise.all(cs.map((c) => c.idle())), 3000, 'the running jobs to finish');
    for (const j of running) expect((await q.get(j.id))!.state).toBe('completed');
    expect(started).toBe(4);
    expect((await q.get(later.id))!.state).toBe('pending');

    const resumed = completions(cs, 1);
    expect(await q.resume()).toBe(true);
    expect(await q.resume()).toBe(false);
    expect(await within(resumed, 3000, 'the job enqueued while paused')).toEqual([later.id]);
    expect(await q.isPaused()).toBe(false);
    expect(
      (await streamEvents(raw, q)).filter((e) => e.event === 'paused' || e.event === 'resumed'),
    ).toMatchObject([
      { event: 'paused', id: '' },
      { event: 'resumed', id: '' },
    ]);
  });
});

// ── deduplication ───────────────────────────────────────────────────────────────

describe('dedupe', () => {
  it('throttle keeps the first job until it ends, answering deduplicated with its id', async ({
    raw,
    q,
    P,
    runOne,
  }) => {
    const first = await q.enqueue({ n: 1 }, { dedupe: { key: 'user-7', mode: 'throttle' } });
    expect(first.status).toBe('enqueued');
    const second = await q.enqueue({ n: 2 }, { dedupe: { key: 'user-7', mode: 'throttle' } });
    expect(second).toEqual({ id: first.id, status: 'deduplicated' });
    expect(await q.enqueueIn({ n: 3 }, 1000, { dedupe: { key: 'user-7', mode: 'throttle' } })).toEqual({
      id: first.id,
      status: 'deduplicated',
    });
    expect((await q.get(first.id))!.data).toEqual({ n: 1 });
    expect(await raw.get(`${P}dedupe:user-7`)).toBe(first.id);
    expect(await raw.pttl(`${P}dedupe:user-7`)).toBe(-1);
    expect(await streamEvents(raw, q, 'deduplicated')).toMatchObject([
      { id: first.id, key: 'user-7' },
      { id: first.id, key: 'user-7' },
    ]);
    expect((await q.counts()).pending).toBe(1);
    // The same id is still a duplicate, not a deduplication.
    expect(await q.enqueue({}, { id: first.id, dedupe: { key: 'user-7', mode: 'throttle' } })).toEqual({
      id: first.id,
      status: 'duplicate',
    });

    expect(await runOne()).toBe(first.id); // the kept job ends: the lock is released
    expect(await raw.exists(`${P}dedupe:user-7`)).toBe(0);
    const third = await q.enqueue({ n: 4 }, { dedupe: { key: 'user-7', mode: 'throttle' } });
    expect(third.status).toBe('enqueued');
    expect(third.id).not.toBe(first.id);
  });

  it('dedupes within one batch of enqueue calls, and the other keys are not affected', async ({ q }) => {
    const results = await Promise.all([
      q.enqueue(1, { dedupe: { key: 'a', mode: 'throttle' } }),
      q.enqueue(2, { dedupe: { key: 'a', mode: 'throttle' } }),
      q.enqueue(3, { dedupe: { key: 'b', mode: 'throttle' } }),
      q.enqueue(4),
    ]);
    expect(results.map((r) => r.status)).toEqual(['enqueued', 'deduplicated', 'enqueued', 'enqueued']);
    expect(results[1]!.id).toBe(results[0]!.id);
    const many = await q.enqueueMany([
      { data: 5, opts: { dedupe: { key: 'a', mode: 'throttle' } } },
      { data: 6, opts: { dedupe: { key: 'c', mode: 'throttle' } } },
    ]);
    expect(many).toEqual([
      { id: results[0]!.id, status: 'deduplicated' },
      { id: many[1]!.id, status: 'enqueued' },
    ]);
  });

  it('with ttlMs the lock is a window: it outlives the kept job and expires on its own', async ({
    raw,
    q,
    P,
    runOne,
  }) => {
    const first = await q.enqueue(1, { dedupe: { key: 'k', mode: 'throttle', ttlMs: 300 } });
    expect(await raw.pttl(`${P}dedupe:k`)).toBeGreaterThan(200);
    expect(await runOne()).toBe(first.id);
    expect(await raw.get(`${P}dedupe:k`)).toBe(first.id); // not released at the end
    expect(await q.enqueue(2, { dedupe: { key: 'k', mode: 'throttle', ttlMs: 300 } })).toEqual({
      id: first.id,
      status: 'deduplicated',
    });
    await poll(
      () => raw.exists(`${P}dedupe:k`),
      (n) => n === 0,
      'the window to close',
      2000,
    );
    expect((await q.enqueue(3, { dedupe: { key: 'k', mode: 'throttle', ttlMs: 300 } })).status).toBe(
      'enqueued',
    );
  });

  it('debounce replaces the scheduled job data and pushes its run time; the handler sees the last data once', async ({
    raw,
    q,
    P,
    pool,
    queueName: name,
  }) => {
    const d = { key: 'search', mode: 'debounce' } as const;
    const first = await q.enqueueIn({ text: 'h' }, 300, { dedupe: d });
    expect(first.status).toBe('scheduled');
    const runAt1 = (await q.get(first.id))!.runAt!;
    expect(await q.enqueueIn({ text: 'he' }, 400, { dedupe: d })).toEqual({
      id: first.id,
      status: 'deduplicated',
    });
    expect(await q.enqueueIn({ text: 'hello' }, 500, { dedupe: d })).toEqual({
      id: first.id,
      status: 'deduplicated',
    });
    const row = (await q.get(first.id))!;
    expect(row).toMatchObject({ state: 'scheduled', data: { text: 'hello' } });
    expect(row.runAt!).toBeGreaterThan(runAt1 + 150);
    expect(Number(await raw.zscore(`${P}schedule`, first.id))).toBe(row.runAt);
    expect((await q.counts()).scheduled).toBe(1);

    const seen: unknown[] = [];
    const c = (await pool.start(name, (job) => {
      seen.push(job.data);
    })) as Consumer;
    const done = completions([c], 1);
    const t0 = await serverNow(raw);
    expect(await within(done, 3000, 'the debounced job')).toEqual([first.id]);
    expect(seen).toEqual([{ text: 'hello' }]);
    expect((await q.get(first.id))!.startedAt!).toBeGreaterThanOrEqual(Math.min(row.runAt!, t0));
    expect(await raw.exists(`${P}dedupe:search`)).toBe(0);
    expect((await streamEvents(raw, q, 'deduplicated')).length).toBe(2);
  });

  it('a debounce of a job that already started adds a new job and moves the lock to it', async ({
    raw,
    q,
    P,
    pool,
    queueName: name,
  }) => {
    const d = { key: 'sync', mode: 'debounce' } as const;
    const gate = deferred();
    const started = deferred<string>();
    const c = (await pool.start(name, async (job) => {
      started.resolve(job.id);
      await gate.promise;
    })) as Consumer;
    const first = await q.enqueue('v1', { dedupe: d });
    await within(started.promise, 3000, 'the first job to start');
    const second = await q.enqueueIn('v2', 60_000, { dedupe: d });
    expect(second.status).toBe('scheduled');
    expect(second.id).not.toBe(first.id);
    expect(await raw.get(`${P}dedupe:sync`)).toBe(second.id);
    gate.resolve();
    await within(c.idle(), 3000, 'the first job to end');
    // The first job ended: the lock is the second's, so it stays.
    expect(await raw.get(`${P}dedupe:sync`)).toBe(second.id);
    expect((await q.get(second.id))!.data).toBe('v2');
  });

  it('a debounce of a job waiting to be retried (it has started once) adds a new job', async ({
    raw,
    q,
    P,
  }) => {
    const d = { key: 'retrying', mode: 'debounce' } as const;
    const first = await q.enqueue('v1', { dedupe: d });
    const [flat] = (await q.run('claim', [P, 1, 30_000])) as [(string | number)[]];
    expect(await q.run('fail', [P, first.id, flat[1]!, 'boom', '', 60_000], first.id)).toBe('retry');
    expect((await q.get(first.id))!.state).toBe('scheduled');
    const second = await q.enqueueIn('v2', 1000, { dedupe: d });
    expect(second.status).toBe('scheduled');
    expect(second.id).not.toBe(first.id);
    expect((await q.get(first.id))!.data).toBe('v1');
    expect(await raw.get(`${P}dedupe:retrying`)).toBe(second.id);
  });

  it('a debounce without a delay replaces a pending job data in place, or releases a scheduled one now', async ({
    raw,
    q,
    P,
  }) => {
    const d = { key: 'x', mode: 'debounce' } as const;
    const pending = await q.enqueue('p1', { dedupe: d });
    expect(await q.enqueue('p2', { dedupe: d })).toEqual({ id: pending.id, status: 'deduplicated' });
    expect((await q.get(pending.id))!).toMatchObject({ state: 'pending', data: 'p2' });
    expect(await raw.zrange(`${P}pending`, 0, -1)).toEqual([pending.id]);

    const e = { key: 'y', mode: 'debounce' } as const;
    const later = await q.enqueueIn('s1', 60_000, { dedupe: e });
    expect(await q.enqueue('s2', { dedupe: e })).toEqual({ id: later.id, status: 'deduplicated' });
    const row = (await q.get(later.id))!;
    expect(row).toMatchObject({ state: 'pending', data: 's2' });
    expect(row.runAt).toBeUndefined();
    expect(await raw.zcard(`${P}schedule`)).toBe(0);
    expect((await streamEvents(raw, q, 'waiting')).map((x) => x.id)).toEqual([later.id]);
  });

  it('releases the lock when the kept job ends dead, is cancelled or is removed', async ({
    raw,
    q,
    P,
    killOne,
  }) => {
    const d = (key: string) => ({ dedupe: { key, mode: 'throttle' as const } });
    await q.enqueue('dead', d('dead'));
    await killOne();
    expect(await raw.exists(`${P}dedupe:dead`)).toBe(0);
    const cancelled = await q.enqueue('cancel', d('cancel'));
    await q.cancel(cancelled.id);
    const removed = await q.enqueueIn('remove', 60_000, d('remove'));
    await q.remove(removed.id);
    expect(await raw.keys(`${P}dedupe:*`)).toEqual([]);
    for (const k of ['dead', 'cancel', 'remove']) expect((await q.enqueue(k, d(k))).status).toBe('enqueued');
  });

  it('does not release a lock that another job holds now', async ({ raw, q, P, runOne }) => {
    const first = await q.enqueue(1, { dedupe: { key: 'k', mode: 'throttle' } });
    await raw.set(`${P}dedupe:k`, 'JOBsomeoneelse');
    expect(await runOne()).toBe(first.id);
    expect(await raw.get(`${P}dedupe:k`)).toBe('JOBsomeoneelse');
  });

  it('a lock without ttl whose job is gone is stale, and a new job takes it over', async ({ raw, q, P }) => {
    const first = await q.enqueue(1, { dedupe: { key: 'k', mode: 'throttle' } });
    await raw.del(`${P}job:${first.id}`); // as if the row were lost
    const next = await q.enqueue(2, { dedupe: { key: 'k', mode: 'throttle' } });
    expect(next.status).toBe('enqueued');
    expect(await raw.get(`${P}dedupe:k`)).toBe(next.id);
  });

  it('refuses malformed dedupe options before the wire', async ({ raw, q, P }) => {
    const bad = [
      { key: '', mode: 'throttle' },
      { key: 'k', mode: 'sometimes' },
      { key: 'k', mode: 'throttle', ttlMs: 0 },
      { key: 'k', mode: 'throttle', ttl: 5 },
    ];
    for (const dedupe of bad) {
      expect((await refusal(() => q.enqueue(1, { dedupe } as never))).code).toBe('EMQINPUT');
    }
    expect(await raw.exists(`${P}pending`)).toBe(0);
  });
});

// ── retention and clean ─────────────────────────────────────────────────────────

describe('retention', () => {
  it('keeps the newest 1,000 completed jobs by default (in batches: up to 100 more between trims), deleting the rows of older ones', async ({
    raw,
    q,
    P,
    pool,
    queueName: name,
  }) => {
    const c = (await pool.start(name, () => {}, { concurrency: 50 })) as Consumer;
    const done = completions([c], 1200);
    const jobs = await q.enqueueMany(Array.from({ length: 1200 }, (_, i) => ({ data: i })));
    await within(done, 10_000, '1,200 completions');
    await within(c.idle(), 3000, 'idle');
    const count = (await q.counts()).completed;
    expect(count).toBeGreaterThanOrEqual(1000);
    expect(count).toBeLessThanOrEqual(1100);
    const kept = new Set(await raw.zrange(`${P}completed`, 0, -1));
    const gone = jobs.filter((j) => !kept.has(j.id));
    expect(gone).toHaveLength(1200 - count);
    for (const j of gone) expect(await q.get(j.id)).toBeNull();
  });

  it('by default drops completed jobs older than a day and dead ones older than 7 days', async ({
    raw,
    q,
    P,
    runOne,
    killOne,
  }) => {
    const now = await serverNow(raw);
    const old = async (set: string, id: string, ageMs: number) => {
      await raw.hset(
        `${P}job:${id}`,
        'state',
        set,
        'payload',
        '1',
        'created',
        now - ageMs,
        'finished',
        now - ageMs,
      );
      await raw.zadd(`${P}${set}`, now - ageMs, id);
    };
    await old('completed', 'JOBold', 86_400_000 + 5000);
    await old('completed', 'JOByoung', 86_400_000 - 60_000);
    await old('dead', 'JOBolddead', 7 * 86_400_000 + 5000);
    await old('dead', 'JOByoungdead', 7 * 86_400_000 - 60_000);
    await q.enqueue('ok');
    await runOne();
    await q.enqueue('bad');
    await killOne();
    expect(await raw.zrange(`${P}completed`, 0, 0)).toEqual(['JOByoung']);
    expect(await raw.exists(`${P}job:JOBold`)).toBe(0);
    expect(await raw.zrange(`${P}dead`, 0, 0)).toEqual(['JOByoungdead']);
    expect(await raw.exists(`${P}job:JOBolddead`)).toBe(0);
  });

  it('configure({ retention }) sets the counts and ages kept', async ({ raw, q, P, runOne, killOne }) => {
    await q.configure({ retention: { completed: { count: 3 }, dead: { count: 1 } } });
    for (let i = 0; i < 5; i++) await q.enqueue(i);
    const done: string[] = [];
    for (let i = 0; i < 5; i++) done.push(await runOne());
    expect(await raw.zrange(`${P}completed`, 0, -1)).toEqual(done.slice(2));
    for (let i = 0; i < 2; i++) await q.enqueue(i);
    await killOne();
    const last = await killOne();
    expect(await raw.zrange(`${P}dead`, 0, -1)).toEqual([last]);

    await q.configure({ retention: { completed: { count: 100, ageMs: 0 } } });
    await q.enqueue('new');
    await runOne();
    expect(await raw.zcard(`${P}completed`)).toBeLessThanOrEqual(1); // older than 0 ms: trimmed
    expect(await raw.hgetall(`${P}meta`)).toMatchObject({
      keep_completed: '100',
      keep_completed_ms: '0',
      keep_dead: '1',
    });
    await expect(q.configure({ retention: { dead: { ageMs: -2 } } })).rejects.toThrow(/EMQINPUT/);
  });
});

describe('clean', () => {
  it('deletes ended jobs of one state older than olderThanMs, oldest first, at most limit, and emits cleaned', async ({
    raw,
    q,
    P,
    runOne,
  }) => {
    for (let i = 0; i < 5; i++) await q.enqueue(i);
    const done: string[] = [];
    for (let i = 0; i < 5; i++) done.push(await runOne());
    expect(await q.clean({ state: 'completed', olderThanMs: 60_000 })).toBe(0);
    expect(await q.clean({ state: 'completed', limit: 2 })).toBe(2);
    for (const id of done.slice(0, 2)) expect(await q.get(id)).toBeNull();
    expect(await raw.zrange(`${P}completed`, 0, -1)).toEqual(done.slice(2));
    expect(await q.clean({ state: 'completed' })).toBe(3);
    expect(await raw.exists(`${P}completed`)).toBe(0);
    expect((await streamEvents(raw, q, 'cleaned')).map((e) => [e.state, e.count])).toEqual([
      ['completed', '0'],
      ['completed', '2'],
      ['completed', '3'],
    ]);
  });

  it('cleans dead and cancelled jobs, and leaves the other states alone', async ({ q, killOne }) => {
    await q.enqueue('dead');
    const dead = await killOne();
    const cancelled = await q.enqueue('cancel');
    await q.cancel(cancelled.id);
    const pending = await q.enqueue('pending');
    expect(await q.clean({ state: 'dead' })).toBe(1);
    expect(await q.clean({ state: 'cancelled' })).toBe(1);
    expect(await q.get(dead)).toBeNull();
    expect(await q.get(cancelled.id)).toBeNull();
    expect((await q.get(pending.id))!.state).toBe('pending');
  });

  it('drops a member whose row moved on without deleting the live row', async ({ raw, q, P }) => {
    const j = await q.enqueue('live');
    await raw.zadd(`${P}dead`, 1, j.id); // a stale member
    expect(await q.clean({ state: 'dead' })).toBe(0);
    expect(await raw.zcard(`${P}dead`)).toBe(0);
    expect((await q.get(j.id))!.state).toBe('pending');
  });

  it('refuses an unknown state or bounds', async ({ q }) => {
    expect((await refusal(() => q.clean({ state: 'pending' as never }))).code).toBe('EMQINPUT');
    expect((await refusal(() => q.clean({ state: 'dead', limit: 0 }))).code).toBe('EMQINPUT');
    expect((await refusal(() => q.clean({ state: 'dead', olderThanMs: -1 }))).code).toBe('EMQINPUT');
  });
});

// ── drained and progress ────────────────────────────────────────────────────────

describe('drained', () => {
  it('is emitted once, when 2 consumers take the last claimable job', async ({
    raw,
    q,
    pool,
    queueName: name,
  }) => {
    await q.enqueueMany(Array.from({ length: 30 }, (_, i) => ({ data: i })));
    const cs: Consumer[] = [];
    for (let i = 0; i < 2; i++) cs.push((await pool.start(name, () => {}, { concurrency: 4 })) as Consumer);
    // Counted on the server: the first consumer may finish jobs before the second is started.
    await poll(
      async () => (await q.counts()).completed,
      (n) => n === 30,
      '30 completions',
    );
    const all = await streamEvents(raw, q);
    const drained = all.filter((e) => e.event === 'drained');
    expect(drained).toHaveLength(1);
    const lastActive = all.map((e) => e.event).lastIndexOf('active');
    expect(all.indexOf(drained[0]!)).toBeGreaterThan(lastActive);
  });
});

describe('progress', () => {
  it('ctx.progress stores progress on the row and emits progress events in order', async ({
    q,
    pool,
    queueName: name,
  }) => {
    const events = q.events();
    await events.ready;
    const seen: string[] = [];
    events.subscribe((e) => seen.push(e.fields.progress!), 'progress');
    const step = deferred();
    const c = (await pool.start(name, async (_job, ctx) => {
      await ctx.progress(10);
      await ctx.progress({ step: 2, of: 3 });
      await step.promise;
      await ctx.progress(100);
    })) as Consumer;
    const { id } = await q.enqueue('work');
    await poll(
      async () => (await q.get(id))!.progress,
      (p) => p !== undefined && p !== 10,
      'progress 2',
    );
    expect((await q.get(id))!.progress).toEqual({ step: 2, of: 3 });
    step.resolve();
    await within(c.idle(), 3000, 'idle');
    expect((await q.get(id))!.progress).toBe(100);
    await poll(
      async () => seen.length,
      (n) => n === 3,
      'the progress events',
    );
    expect(seen).toEqual(['10', '{"step":2,"of":3}', '100']);
    await events.close();
  });

  it('refuses progress from a worker whose lease was taken over', async ({ q, P }) => {
    await q.enqueue('x');
    const [flat] = (await q.run('claim', [P, 1, 30_000])) as [(string | number)[]];
    const err = await refusal(() => q.run('progress', [flat[0]!, Number(flat[1]) + 1, '5'], String(flat[0])));
    expect(err.code).toBe('EMQLEASE');
  });
});
