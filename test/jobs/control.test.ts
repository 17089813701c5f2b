// Changing a job that has not started (src/jobs/control.ts) against a real server: promote(id),
// reschedule, reprioritize and update, each fenced on the job's state (a refused call changes no
// key), correct inside lanes; and retry of a completed job, retryAll filtered by name or error.
import type { Redis } from 'ioredis';
import { describe, expect } from 'vitest';
import type { Queue } from '../../src/queue/queue.js';
import { helperFixtures, queueTest, useRedisServer } from '../support/harness.js';
import { keyState } from '../support/key-state.js';

const env = useRedisServer();

/** The file's helpers over one test's queue. */
function helpers({ q, raw, P }: { q: Queue; raw: Redis; P: string }) {
  /** Claims up to n jobs the way a consumer does; their ids and tokens in claim order. */
  async function claim(n: number): Promise<{ id: string; token: string }[]> {
    const [flat] = (await q.run('claim', [P, n, 60_000])) as [(string | number)[]];
    const out = [];
    for (let i = 0; i < flat.length; i += 7) out.push({ id: String(flat[i]), token: String(flat[i + 1]) });
    return out;
  }

  async function events(): Promise<Record<string, string>[]> {
    return (await raw.xrange(`${P}events`, '-', '+')).map(([, flat]) => {
      const e: Record<string, string> = {};
      for (let i = 0; i < flat.length; i += 2) e[flat[i]!] = flat[i + 1]!;
      return e;
    });
  }

  /** Every key of the queue (test/support/key-state.ts): a refused change must leave all of them as they were. */
  const dump = () => keyState(raw, P, { withTtl: true });

  async function refused(call: () => Promise<unknown>, code: string): Promise<void> {
    const before = await dump();
    await expect(call()).rejects.toMatchObject({ code });
    expect(await dump()).toEqual(before);
  }
  return { claim, events, dump, refused };
}
type Helpers = ReturnType<typeof helpers>;

const it = queueTest(env, 'control')
  .extend<{ h: Helpers }>({ h: async ({ q, raw, P }, use) => use(helpers({ q, raw, P })) })
  .extend<Helpers>(helperFixtures<Helpers>(['claim', 'events', 'dump', 'refused']));

describe('promote(id)', () => {
  it('runs a scheduled job now, ahead of its run-at, and emits waiting', async ({ q, claim, events }) => {
    const { id } = await q.enqueueIn({ n: 1 }, 3_600_000);
    expect(await claim(5)).toEqual([]);
    await q.promote(id);
    expect((await claim(5)).map((j) => j.id)).toEqual([id]);
    expect((await events()).filter((e) => e.id === id).map((e) => e.event)).toEqual([
      'delayed',
      'waiting',
      'active',
    ]);
  });

  it('puts a grouped job into its lane and serves it through the ring', async ({ raw, q, P, claim }) => {
    const { id } = await q.enqueueIn({}, 3_600_000, { group: 'tenant-a' });
    await q.promote(id);
    expect(await raw.zrange(q.keys.lane('tenant-a'), 0, -1)).toEqual([id]);
    expect(await raw.zrange(`${P}ring`, 0, -1)).toEqual(['tenant-a']);
    expect((await claim(5)).map((j) => j.id)).toEqual([id]);
  });

  it('refuses a job that is not scheduled with EMQSTATE and a missing one with EMQNOJOB', async ({
    q,
    claim,
    refused,
  }) => {
    const { id } = await q.enqueue({});
    await refused(() => q.promote(id), 'EMQSTATE');
    await claim(1);
    await refused(() => q.promote(id), 'EMQSTATE');
    await refused(() => q.promote('JOBmissing'), 'EMQNOJOB');
    await refused(() => q.promote('nope'), 'EMQKIND');
  });

  it('keeps the sweep: promote() and promote(batch) release due jobs, promoteDue too', async ({ q }) => {
    await q.enqueueIn({}, 0);
    await q.enqueueIn({}, 0);
    await new Promise((r) => setTimeout(r, 5));
    expect(await q.promote(1)).toBe(1);
    expect(await q.promoteDue()).toBe(1);
    expect(await q.promote()).toBe(0);
  });
});

describe('reschedule', () => {
  it('moves a scheduled job later on the server clock, or to an absolute instant', async ({
    raw,
    q,
    P,
    events,
  }) => {
    const { id } = await q.enqueueIn({}, 1000);
    const [s] = await raw.time();
    const at = await q.reschedule(id, { in: 3_600_000 });
    expect(at).toBeGreaterThanOrEqual(Number(s) * 1000 + 3_600_000 - 1000);
    expect(Number(await raw.zscore(`${P}schedule`, id))).toBe(at);
    expect((await q.get(id))?.runAt).toBe(at);
    expect(await q.reschedule(id, { at: 1_900_000_000_000 })).toBe(1_900_000_000_000);
    const delayed = (await events()).filter((e) => e.event === 'delayed').map((e) => e.at);
    expect(delayed.slice(1)).toEqual([String(at), '1900000000000']);
  });

  it('delays a pending job: it leaves pending (or its lane) and is not claimed until due', async ({
    q,
    claim,
  }) => {
    const flat = await q.enqueue({});
    const lane = await q.enqueue({}, { group: 'g' });
    await q.reschedule(flat.id, { in: 3_600_000 });
    await q.reschedule(lane.id, { in: 3_600_000 });
    expect((await q.get(lane.id))?.state).toBe('scheduled');
    expect(await claim(5)).toEqual([]);
    expect(await q.counts()).toMatchObject({ pending: 0, scheduled: 2 });
    // Brought forward again, each runs: the lane's group comes back to the ring with it.
    await q.reschedule(lane.id, { in: 0 });
    await q.reschedule(flat.id, { at: 0 });
    expect(await q.promote()).toBe(2);
    expect((await claim(5)).map((j) => j.id).sort()).toEqual([flat.id, lane.id].sort());
  });

  it('a rescheduled job that becomes the earliest wakes parked consumers with w s', async ({ raw, q, P }) => {
    await q.enqueueIn({}, 3_600_000);
    const { id } = await q.enqueueIn({}, 7_200_000);
    await raw.del(`${P}wake`);
    await q.reschedule(id, { in: 10 });
    const wake = await raw.xrange(`${P}wake`, '-', '+');
    expect(wake.map(([, f]) => f[1])).toEqual(['s']);
  });

  it('a consumer runs a job brought forward from an hour to now', async ({ q }) => {
    const { id } = await q.enqueueIn({ n: 7 }, 3_600_000);
    const seen: string[] = [];
    const consumer = q.consume((job) => {
      seen.push(job.id);
    });
    try {
      await new Promise((r) => setTimeout(r, 50));
      await q.reschedule(id, { in: 0 });
      await expect.poll(() => seen, { timeout: 10_000 }).toEqual([id]);
    } finally {
      await consumer.close();
    }
  });

  it('refuses bad input and a job that started with nothing changed', async ({ q, claim, refused }) => {
    const { id } = await q.enqueueIn({}, 1000);
    await refused(() => q.reschedule(id, { in: -1 }), 'EMQINPUT');
    await refused(() => q.reschedule(id, { in: 1.5 }), 'EMQINPUT');
    await refused(() => q.reschedule(id, { at: Number.NaN }), 'EMQINPUT');
    await refused(() => q.reschedule(id, {} as never), 'EMQINPUT');
    await refused(() => q.reschedule(id, { at: 1, in: 1 } as never), 'EMQINPUT');
    await refused(() => q.reschedule(id, 5 as never), 'EMQINPUT');
    await refused(() => q.reschedule('JOBmissing', { in: 1 }), 'EMQNOJOB');
    const running = await q.enqueue({});
    await claim(1);
    await refused(() => q.reschedule(running.id, { in: 1000 }), 'EMQSTATE');
  });
});

describe('reprioritize', () => {
  it('reorders pending jobs: the reprioritized one is claimed first', async ({ q, claim, events }) => {
    const a = await q.enqueue('a', { priority: 5 });
    const b = await q.enqueue('b', { priority: 5 });
    await q.reprioritize(b.id, 1);
    expect((await q.get(b.id))?.priority).toBe(1);
    expect((await claim(1)).map((j) => j.id)).toEqual([b.id]);
    await q.reprioritize(a.id, 0);
    expect((await q.get(a.id))?.priority).toBeUndefined();
    expect(await events()).toContainEqual(
      expect.objectContaining({ event: 'updated', id: b.id, what: 'priority', priority: '1' }),
    );
  });

  it('reorders a lane and keeps a scheduled job scheduled with its new priority', async ({ raw, q, P }) => {
    const a = await q.enqueue('a', { group: 'g', priority: 3 });
    const b = await q.enqueue('b', { group: 'g', priority: 3 });
    await q.reprioritize(b.id, 2);
    expect(await raw.zrange(q.keys.lane('g'), 0, -1)).toEqual([b.id, a.id]);
    const later = await q.enqueueIn('c', 0);
    await q.reprioritize(later.id, 9);
    expect((await q.get(later.id))?.state).toBe('scheduled');
    await new Promise((r) => setTimeout(r, 5));
    await q.promote();
    expect(Number(await raw.zscore(`${P}pending`, later.id))).toBe(9);
  });

  it('refuses bad priorities and a running job with nothing changed', async ({ q, claim, refused }) => {
    const { id } = await q.enqueue({});
    for (const bad of [-1, 1.5, Number.NaN, '2', 2 ** 22]) {
      await refused(() => q.reprioritize(id, bad as never), 'EMQINPUT');
    }
    await claim(1);
    await refused(() => q.reprioritize(id, 1), 'EMQSTATE');
  });
});

describe('update', () => {
  it('replaces the data of a scheduled, pending or waiting parent job; the handler sees the new data', async ({
    q,
    events,
  }) => {
    const { id } = await q.enqueue({ v: 1 });
    await q.update(id, { v: 2 });
    expect((await q.get(id))?.data).toEqual({ v: 2 });
    const later = await q.enqueueIn({ v: 1 }, 60_000);
    await q.update(later.id, { v: 3 });
    expect((await q.get(later.id))?.data).toEqual({ v: 3 });
    expect(await events()).toContainEqual(expect.objectContaining({ event: 'updated', id, what: 'data' }));
  });

  it('refuses a running job, an ended one and data over the payload limit, writing nothing', async ({
    q,
    claim,
    refused,
  }) => {
    const { id } = await q.enqueue({ v: 1 });
    await refused(() => q.update(id, 'x'.repeat(q.maxPayloadBytes)), 'EMQTOOBIG');
    await refused(() => q.update(id, (() => 1) as never), 'EMQINPUT');
    await claim(1);
    await refused(() => q.update(id, { v: 2 }), 'EMQSTATE');
    await refused(() => q.update('JOBmissing', {}), 'EMQNOJOB');
  });

  it('lets a handler change its own running job through ctx.update', async ({ q }) => {
    const { id } = await q.enqueue({ step: 0 });
    const consumer = q.consume(async (_job, ctx) => {
      await ctx.update({ step: 1 });
      return 'ok';
    });
    try {
      await q.waitFor(id, { timeoutMs: 10_000 });
    } finally {
      await consumer.close();
    }
    expect((await q.get(id))?.data).toEqual({ step: 1 });
  });
});

describe('retry of a completed job, retryAll by name or error', () => {
  it('re-runs a completed job: pending again with attempts 0, its result dropped', async ({
    raw,
    q,
    P,
    claim,
  }) => {
    const { id } = await q.enqueue({});
    const [j] = await claim(1);
    await q.run('complete', [P, 60_000, 0, id, j!.token, '"r"']);
    await q.retry(id);
    const view = await q.get(id);
    expect(view).toMatchObject({ state: 'pending', attempts: 0 });
    expect(view?.result).toBeUndefined();
    expect(await raw.zcard(`${P}completed`)).toBe(0);
    expect((await claim(1)).map((c) => c.id)).toEqual([id]);
  });

  it('retryAll keeps only jobs of a name, or whose error holds a text or matches a RegExp', async ({
    q,
    P,
    claim,
  }) => {
    const made = await q.enqueueMany([
      { data: 1, opts: { name: 'email', attempts: 1 } },
      { data: 2, opts: { name: 'email', attempts: 1 } },
      { data: 3, opts: { name: 'sms', attempts: 1 } },
    ]);
    const jobs = await claim(3);
    for (const [i, j] of jobs.entries()) {
      const message = i === 1 ? 'timeout talking to smtp' : 'bad address';
      await q.run('fail', [P, j.id, j.token, message, '', 0], j.id);
    }
    expect(await q.retryAll({ name: 'email', error: 'timeout', batch: 1 })).toBe(1);
    expect((await q.get(made[1]!.id))?.state).toBe('pending');
    expect(await q.retryAll({ error: /ADDRESS/i, name: 'sms' })).toBe(1);
    expect((await q.get(made[2]!.id))?.state).toBe('pending');
    expect((await q.get(made[0]!.id))?.state).toBe('dead');
    await expect(q.retryAll({ error: 5 as never })).rejects.toMatchObject({ code: 'EMQINPUT' });
    await expect(q.retryAll({ nme: 'x' } as never)).rejects.toMatchObject({ code: 'EMQINPUT' });
  });
});
