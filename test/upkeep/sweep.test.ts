// Emptying a queue (src/upkeep/sweep.ts) on a real server: drain deletes the waiting jobs in batches
// (pending, lanes, and scheduled ones when asked), obliterate every key of the queue, refusing
// while jobs are active unless forced, and both report progress per batch.
import { describe, expect } from 'vitest';
import type { Queue } from '../../src/queue/queue.js';
import { PROTOCOL_VERSION } from '../../src/wire/keyspace.js';
import { queueTest, useRedisServer } from '../support/harness.js';

const env = useRedisServer();
const it = queueTest(env, 'sweep');

async function claim(q: Queue, n: number): Promise<string[]> {
  const [flat] = (await q.run('claim', [q.keys.prefix, n, 60_000])) as [(string | number)[]];
  return flat.filter((_, i) => i % 7 === 0).map(String);
}

describe('drain', () => {
  it('deletes every waiting job in batches, leaving running, scheduled and ended ones', async ({ q }) => {
    await q.enqueue({ run: true });
    const [running] = await claim(q, 1);
    await q.enqueueMany(Array.from({ length: 250 }, (_, i) => ({ data: i, opts: { group: `g${i % 3}` } })));
    await q.enqueueMany(Array.from({ length: 250 }, (_, i) => ({ data: i })));
    const later = await q.enqueueIn({}, 60_000);
    const progress: number[] = [];
    expect(await q.drain({ batch: 100, onProgress: (p) => progress.push(p.deleted) })).toBe(500);
    expect(progress).toEqual([100, 200, 300, 400, 500]);
    expect(await q.counts()).toMatchObject({ pending: 0, active: 1, scheduled: 1 });
    expect((await q.get(running!))?.state).toBe('active');
    expect(await q.drain({ scheduled: true })).toBe(1);
    expect(await q.get(later.id)).toBeNull();
    // The lanes left on the ring are dropped by the next claim; new work runs as before.
    const { id } = await q.enqueue({}, { group: 'g1' });
    expect(await claim(q, 5)).toEqual([id]);
  });

  it('refuses bad options before anything is deleted', async ({ q }) => {
    await q.enqueue({});
    await expect(q.drain({ batch: 0 })).rejects.toMatchObject({ code: 'EMQINPUT' });
    await expect(q.drain({ scheduled: 'yes' as never })).rejects.toMatchObject({ code: 'EMQINPUT' });
    await expect(q.drain({ delayed: true } as never)).rejects.toMatchObject({ code: 'EMQINPUT' });
    await expect(q.drain({ onProgress: 5 as never })).rejects.toMatchObject({ code: 'EMQINPUT' });
    expect((await q.counts()).pending).toBe(1);
  });
});

describe('obliterate', () => {
  it('deletes every key of the queue in batches and no key of another queue', async ({ mq, raw, q, P }) => {
    const other = mq.queue(`${q.name}-other`);
    await other.enqueue({ keep: true });
    await q.enqueueMany(Array.from({ length: 300 }, (_, i) => ({ data: i, opts: { group: `g${i % 2}` } })));
    await q.enqueueIn({}, 60_000, { dedupe: { key: 'k', mode: 'throttle', ttlMs: 60_000 } });
    await q.schedulers.upsert('tick', { every: 60_000 }, { data: {} });
    await q.lanes.configure('g0', { concurrency: 1 });
    const progress: { deleted: number; total: number }[] = [];
    const deleted = await q.obliterate({ batch: 50, onProgress: (p) => progress.push(p) });
    expect(await raw.keys(`${P}*`)).toEqual([]);
    expect(deleted).toBeGreaterThan(300);
    expect(progress.length).toBeGreaterThan(1);
    expect(progress.at(-1)).toEqual({ deleted, total: Math.max(302, deleted) });
    expect(await raw.sismember('emq:queues', q.name)).toBe(0);
    expect((await other.counts()).pending).toBe(1);
    // The queue starts afresh: hello stamps its version again.
    await q.enqueue({ again: true });
    expect(await raw.hget(`${P}meta`, 'version')).toBe(PROTOCOL_VERSION);
  });

  it('refuses while jobs are active (nothing changes), and goes on with force', async ({ raw, q, P }) => {
    await q.enqueue({});
    await q.enqueue({});
    await claim(q, 1);
    const before = (await raw.keys(`${P}*`)).sort();
    await expect(q.obliterate()).rejects.toMatchObject({ code: 'EMQSTATE' });
    expect((await raw.keys(`${P}*`)).sort()).toEqual(before);
    expect(await q.isPaused()).toBe(false);
    await q.obliterate({ force: true });
    expect(await raw.keys(`${P}*`)).toEqual([]);
    await expect(q.obliterate({ force: 'yes' } as never)).rejects.toMatchObject({ code: 'EMQINPUT' });
  });

  it('a consumer running on an obliterated queue keeps going and runs new work', async ({ q }) => {
    const seen: unknown[] = [];
    const consumer = q.consume((job) => {
      seen.push(job.data);
    });
    try {
      const first = await q.enqueue('first');
      await q.waitFor(first.id, { timeoutMs: 10_000 });
      await consumer.idle();
      await q.obliterate();
      const { id } = await q.enqueue('after');
      await q.waitFor(id, { timeoutMs: 10_000 });
    } finally {
      await consumer.close();
    }
    expect(seen).toEqual(['first', 'after']);
  });
});
