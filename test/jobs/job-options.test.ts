// A job's own options on a real server: removeOnComplete / removeOnFail (its own retention,
// applied by the call that ends it), tags (stored, shown, filtered in Inspector.jobs) and lifo
// (claimed before the jobs of its priority that wait already).
import { describe, expect } from 'vitest';
import { Inspector } from '../../src/inspect/inspector.js';
import type { Queue } from '../../src/queue/queue.js';
import { queueTest, useRedisServer } from '../support/harness.js';

const env = useRedisServer();

/** Each test's own queue, with claim(n) and complete(jobs) calling the scripts on it. */
const it = queueTest(env, 'jobopts').extend<{
  claim: (n: number) => Promise<{ id: string; token: string }[]>;
  complete: (jobs: { id: string; token: string }[]) => Promise<void>;
}>({
  claim: async ({ q }, use) => use((n) => claim(q, n)),
  complete: async ({ q }, use) => use((jobs) => complete(q, jobs)),
});

async function claim(q: Queue, n: number): Promise<{ id: string; token: string }[]> {
  const P = q.keys.prefix;
  const [flat] = (await q.run('claim', [P, n, 60_000])) as [(string | number)[]];
  const out = [];
  for (let i = 0; i < flat.length; i += 7) out.push({ id: String(flat[i]), token: String(flat[i + 1]) });
  return out;
}

async function complete(q: Queue, jobs: { id: string; token: string }[]): Promise<void> {
  await q.run('complete', [q.keys.prefix, 60_000, 0, ...jobs.flatMap((j) => [j.id, j.token, ''])]);
}

describe('removeOnComplete and removeOnFail', () => {
  it('true deletes the job (row, log) in the call that completes it; the queue keeps the others', async ({
    raw,
    q,
    P,
    claim,
    complete,
  }) => {
    const gone = await q.enqueue({ n: 1 }, { removeOnComplete: true });
    const kept = await q.enqueue({ n: 2 });
    await complete(await claim(2));
    expect(await q.get(gone.id)).toBeNull();
    expect(await raw.zrange(`${P}completed`, 0, -1)).toEqual([kept.id]);
    expect(await raw.exists(`${P}job:${gone.id}:logs`)).toBe(0);
  });

  it('a count keeps that many completed jobs when this one completes; ageMs bounds their age', async ({
    raw,
    q,
    P,
    claim,
    complete,
  }) => {
    const first = await q.enqueueMany(Array.from({ length: 5 }, (_, i) => ({ data: i })));
    await complete(await claim(5));
    const last = await q.enqueue({ n: 'last' }, { removeOnComplete: 2 });
    await complete(await claim(1));
    const left = await raw.zrange(`${P}completed`, 0, -1);
    expect(left).toEqual([first[4]!.id, last.id]);
    const aged = await q.enqueue({}, { removeOnComplete: { ageMs: 1 } });
    await new Promise((r) => setTimeout(r, 5));
    await complete(await claim(1));
    // Age 1 ms: every completed job that finished before this call goes, this one stays.
    expect(await raw.zrange(`${P}completed`, 0, -1)).toEqual([aged.id]);
  });

  it('removeOnFail applies when the job is dead, not on a retry', async ({ raw, q, P, claim }) => {
    const { id } = await q.enqueue({}, { attempts: 2, removeOnFail: true });
    let [j] = await claim(1);
    await q.run('fail', [P, id, j!.token, 'boom', '', 0], id);
    expect((await q.get(id))?.state).toBe('pending');
    [j] = await claim(1);
    await q.run('fail', [P, id, j!.token, 'boom', '', 0], id);
    expect(await q.get(id)).toBeNull();
    expect(await raw.zcard(`${P}dead`)).toBe(0);
  });

  it('works through a consumer, scheduled jobs included', async ({ raw, q, P }) => {
    const later = await q.enqueueIn({}, 0, { removeOnComplete: true });
    const consumer = q.consume(() => 'ok');
    try {
      await expect.poll(() => q.get(later.id), { timeout: 10_000 }).toBeNull();
    } finally {
      await consumer.close();
    }
    expect(await raw.zcard(`${P}completed`)).toBe(0);
  });

  it('refuses bad values before the wire', async ({ q }) => {
    for (const bad of [-1, 1.5, 'yes', { count: -1 }, { age: 5 }, {}, [], null]) {
      await expect(q.enqueue({}, { removeOnComplete: bad as never })).rejects.toMatchObject({
        code: 'EMQINPUT',
      });
      await expect(q.enqueue({}, { removeOnFail: bad as never })).rejects.toMatchObject({ code: 'EMQINPUT' });
    }
    expect(await q.counts()).toMatchObject({ pending: 0 });
  });
});

describe('tags', () => {
  it('are kept on the job, shown in its view and filter Inspector.jobs', async ({ mq, q }) => {
    const a = await q.enqueue({}, { tags: ['billing', 'eu'] });
    await q.enqueue({}, { tags: ['eu'] });
    const c = await q.enqueueIn({}, 60_000, { tags: ['billing'] });
    expect((await q.get(a.id))?.tags).toEqual(['billing', 'eu']);
    const inspector = new Inspector(mq);
    const billing = await inspector.jobs(q.name, 'pending', { tag: 'billing' });
    expect(billing).toMatchObject({ total: 1, partial: false });
    expect(billing.jobs.map((j) => j.id)).toEqual([a.id]);
    expect((await inspector.jobs(q.name, 'pending', { tag: 'eu', offset: 1 })).jobs).toHaveLength(1);
    expect((await inspector.jobs(q.name, 'scheduled', { tag: 'billing' })).jobs.map((j) => j.id)).toEqual([
      c.id,
    ]);
    expect((await inspector.jobs(q.name, 'pending', { tag: 'none' })).total).toBe(0);
  });

  it('refuses too many, empty, long or spaced tags', async ({ q }) => {
    for (const bad of [Array(11).fill('t'), [''], ['x'.repeat(65)], ['a b'], ['a,b'], 'eu', [5]]) {
      await expect(q.enqueue({}, { tags: bad as never })).rejects.toMatchObject({ code: 'EMQINPUT' });
    }
  });
});

describe('lifo', () => {
  it('a LIFO job is claimed before the jobs of its priority that wait, after higher priorities', async ({
    q,
    claim,
  }) => {
    const old = await q.enqueue('old', { priority: 2 });
    const urgent = await q.enqueue('urgent', { priority: 1 });
    const l1 = await q.enqueue('l1', { priority: 2, lifo: true });
    const l2 = await q.enqueue('l2', { priority: 2, lifo: true });
    const lane = await q.enqueue('lane', { group: 'g', lifo: true });
    const order = (await claim(10)).map((j) => j.id);
    expect(order.filter((id) => id !== lane.id)).toEqual([urgent.id, l2.id, l1.id, old.id]);
    expect(order).toContain(lane.id);
    await expect(q.enqueueIn({}, 10, { lifo: true })).rejects.toMatchObject({ code: 'EMQINPUT' });
    await expect(q.enqueue({}, { lifo: 'yes' as never })).rejects.toMatchObject({ code: 'EMQINPUT' });
  });
});
