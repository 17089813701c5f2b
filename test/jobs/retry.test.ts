// The retry verb (protocol/scripts/retry.lua) against a real redis-server: a dead or cancelled
// job goes back to pending (or its lane) with a fresh set of attempts and its error kept as
// lastError; retryAll moves a whole terminal set in bounded batches, reporting progress.
import type { Redis } from 'ioredis';
import { describe, expect } from 'vitest';
import type { EnqueueOptions } from '../../src/core/types.js';
import type { Queue } from '../../src/queue/queue.js';
import { queueTest, useRedisServer } from '../support/harness.js';

const env = useRedisServer();
const it = queueTest(env, 'retry');

async function claim(q: Queue, n: number): Promise<{ id: string; token: number; attempts: number }[]> {
  const [flat] = (await q.run('claim', [q.keys.prefix, n, 60_000])) as [(string | number)[], string];
  const out = [];
  for (let i = 0; i < flat.length; i += 7) {
    out.push({ id: String(flat[i]), token: Number(flat[i + 1]), attempts: Number(flat[i + 2]) });
  }
  return out;
}

/** Enqueues `n` jobs allowed one attempt each and fails them all: they end dead. */
async function deadJobs(q: Queue, n: number, opts: EnqueueOptions = {}): Promise<string[]> {
  const made = await q.enqueueMany(
    Array.from({ length: n }, (_, i) => ({ data: i, opts: { attempts: 1, ...opts } })),
  );
  const jobs = await claim(q, n);
  expect(jobs).toHaveLength(n);
  await Promise.all(
    jobs.map((j) => q.run('fail', [q.keys.prefix, j.id, j.token, `boom ${j.id}`, 'at line 1', 0], j.id)),
  );
  return made.map((m) => m.id);
}

async function events(raw: Redis, q: Queue): Promise<Record<string, string>[]> {
  return (await raw.xrange(`${q.keys.prefix}events`, '-', '+')).map(([, flat]) => {
    const e: Record<string, string> = {};
    for (let i = 0; i < flat.length; i += 2) e[flat[i]!] = flat[i + 1]!;
    return e;
  });
}

describe('retry', () => {
  it('returns a dead job to pending with attempts 0, its error kept as lastError, and a waiting event', async ({
    raw,
    q,
    key,
  }) => {
    const [id] = await deadJobs(q, 1);
    await q.retry(id!);

    const job = await q.get(id!);
    expect(job).toMatchObject({
      state: 'pending',
      attempts: 0,
      lastError: { message: `boom ${id}`, stack: 'at line 1' },
    });
    expect(job?.error).toBeUndefined();
    expect(job?.finishedAt).toBeUndefined();
    expect(await raw.zscore(key('dead'), id!)).toBeNull();
    expect(await raw.zscore(key('pending'), id!)).toBe('0');
    expect((await events(raw, q)).at(-1)).toEqual({ event: 'waiting', id: id! });
    const [again] = await claim(q, 1);
    expect(again).toMatchObject({ id, attempts: 1 });
  });

  it('returns a cancelled grouped job to its lane', async ({ raw, q, key }) => {
    const { id } = await q.enqueue({}, { group: 'g1', priority: 3 });
    await q.cancel(id);
    await q.retry(id);
    expect((await q.get(id))?.state).toBe('pending');
    expect(await raw.zscore(key('g:g1:pending'), id)).toBe('3');
    expect(await raw.zrange(key('ring'), 0, -1)).toEqual(['g1']);
  });

  it('refuses a job in another state with EMQSTATE and an unknown one with EMQNOJOB', async ({ q }) => {
    const { id } = await q.enqueue({});
    await expect(q.retry(id)).rejects.toMatchObject({
      code: 'EMQSTATE',
      message: expect.stringContaining('pending'),
    });
    await expect(q.retry('JOBnope')).rejects.toMatchObject({ code: 'EMQNOJOB' });
    await expect(q.retry('nope')).rejects.toMatchObject({ code: 'EMQKIND' });
    expect((await q.get(id))?.state).toBe('pending');
  });
});

describe('retryAll', () => {
  it('retries 1,200 dead jobs in script calls of 500 ids, reporting progress after each', async ({
    mq,
    q,
  }) => {
    const ids = await deadJobs(q, 1200);
    const calls: string[] = [];
    mq.connector.observe((script) => calls.push(script));
    const progress: { retried: number; total: number }[] = [];

    const retried = await q.retryAll({ onProgress: (p) => progress.push(p) });

    expect(retried).toBe(1200);
    expect(calls.filter((s) => s === 'retry')).toHaveLength(3);
    expect(progress).toEqual([
      { retried: 500, total: 1200 },
      { retried: 1000, total: 1200 },
      { retried: 1200, total: 1200 },
    ]);
    const counts = await q.counts();
    expect(counts).toMatchObject({ dead: 0, pending: 1200 });
    expect((await q.get(ids[0]!))?.attempts).toBe(0);
    // A guard against a hang, not a speed check: on the memory engine each of the 1,200 fails
    // is a script run in JS (about 9 ms apiece at load 25), 35-42 s in all there, 4 s on redis.
  }, 120_000);

  it('retries cancelled jobs with state cancelled and leaves dead ones', async ({ q }) => {
    await deadJobs(q, 2);
    const { id } = await q.enqueue({});
    await q.cancel(id);
    expect(await q.retryAll({ state: 'cancelled', batch: 1 })).toBe(1);
    expect(await q.counts()).toMatchObject({ dead: 2, cancelled: 0, pending: 1 });
  });

  it('ends on a member whose row is in another state, paging past it, and drops a ghost', async ({
    raw,
    q,
    key,
  }) => {
    const ids = await deadJobs(q, 3);
    await raw.hset(key(`job:${ids[0]}`), 'state', 'pending'); // an inconsistent member stays put
    await raw.zadd(key('dead'), 1, 'JOBghost'); // a member without a row leaves the set
    expect(await q.retryAll({ batch: 1 })).toBe(2);
    expect(await raw.zrange(key('dead'), 0, -1)).toEqual([ids[0]]);
  });

  it('resolves 0 for an empty set and refuses other states', async ({ q }) => {
    expect(await q.retryAll()).toBe(0);
    await expect(q.retryAll({ state: 'active' as never })).rejects.toMatchObject({ code: 'EMQINPUT' });
  });
});
