// Queue-wide concurrency (queue.configure({ concurrency })) with several consumers: the claim
// script caps the queue's running jobs across all of them, flat jobs and lanes together, and
// every path that takes a job off active gives its slot back exactly once (completion, a failed
// attempt retried, cancellation, a lease lost to reap or the stalled sweep, a stale completion
// from the crashed holder), so meta `running` returns to 0 (absent) once the queue is idle.
import type { Redis } from 'ioredis';
import { describe, expect } from 'vitest';
import type { Consumer } from '../../src/consumer/consumer.js';
import type { Queue } from '../../src/queue/queue.js';
import { helperFixtures, queueTest, useRedisServer } from '../support/harness.js';
import { completions, expectRefused, pause, poll, within } from '../support/observe.js';

const env = useRedisServer();

/** The file's helpers over one test's queue. */
function helpers({ raw, q, P }: { raw: Redis; q: Queue; P: string }) {
  /** The queue's counted slots (meta running), 0 when the field is absent. */
  async function running(): Promise<number> {
    return Number((await raw.hget(`${P}meta`, 'running')) ?? '0');
  }

  /** Claims like a worker that will then crash: the jobs stay active under a lease of `leaseMs`. */
  async function claimRaw(n: number, leaseMs: number): Promise<{ id: string; token: string }[]> {
    const [flat] = (await q.run('claim', [P, n, leaseMs])) as [(string | number)[]];
    const out: { id: string; token: string }[] = [];
    for (let i = 0; i < flat.length; i += 7) out.push({ id: String(flat[i]), token: String(flat[i + 1]) });
    return out;
  }
  return { running, claimRaw };
}
type Helpers = ReturnType<typeof helpers>;

const it = queueTest(env, 'qcap')
  .extend<{ h: Helpers }>({ h: async ({ raw, q, P }, use) => use(helpers({ raw, q, P })) })
  .extend<Helpers>(helperFixtures<Helpers>(['running', 'claimRaw']));

describe('queue-wide concurrency', () => {
  it('never runs more than the cap across 3 consumers, flat and lanes together, and reaches it', async ({
    raw,
    q,
    P,
    queueName,
    pool,
    running,
  }) => {
    await q.configure({ concurrency: 3 });
    let now = 0;
    let max = 0;
    const tries = new Map<string, number>();
    const handler = async (job: { id: string; data: { fail: boolean } }) => {
      now += 1;
      max = Math.max(max, now);
      try {
        await pause(1 + Math.floor(Math.random() * 3));
        const n = (tries.get(job.id) ?? 0) + 1;
        tries.set(job.id, n);
        if (job.data.fail && n === 1) throw new Error('first attempt fails');
      } finally {
        now -= 1;
      }
    };
    const cs: Consumer[] = [];
    for (let i = 0; i < 3; i++)
      cs.push((await pool.start(queueName, handler, { concurrency: 8 })) as Consumer);
    const done = completions(cs, 90);
    await q.enqueueMany(
      Array.from({ length: 90 }, (_, i) => ({
        data: { fail: i % 10 === 0 },
        opts: {
          ...(i % 3 === 0 ? { group: `g${i % 2}` } : {}),
          attempts: 3,
          backoff: { kind: 'fixed', ms: 0 },
        },
      })),
    );
    await within(done, 20_000, '90 completions');
    expect(max).toBe(3);
    await within(Promise.all(cs.map((c) => c.idle())), 3000, 'idle consumers');
    expect(await running()).toBe(0);
    expect(await raw.hexists(`${P}meta`, 'running')).toBe(0);
  });

  it('gives back the slots of a crashed holder once: recovered by reap, its late completion refused', async ({
    q,
    P,
    queueName,
    pool,
    running,
    claimRaw,
  }) => {
    await q.configure({ concurrency: 2 });
    const ids: string[] = [];
    for (let i = 0; i < 4; i++) ids.push((await q.enqueue({ i })).id);
    const crashed = await claimRaw(4, 1);
    expect(crashed).toHaveLength(2); // the cap, not the 4 asked for
    expect(await running()).toBe(2);
    expect(await claimRaw(1, 30_000)).toEqual([]); // at the cap: nothing for anyone

    // The leases (1 ms) have expired: reap recovers both, giving both slots back.
    await poll(
      () => q.reap(),
      (r) => r.length === 2,
      'reap to recover the crashed leases',
    );
    expect(await running()).toBe(0);
    // The crashed holder comes back and completes: refused, and no slot is given back twice.
    const [statuses] = (await q.run('complete', [P, 30_000, 0, crashed[0]!.id, crashed[0]!.token, ''])) as [
      string[],
    ];
    expect(statuses).toEqual(['EMQLEASE']);
    expect(await running()).toBe(0);

    let now = 0;
    let max = 0;
    const handler = async () => {
      now += 1;
      max = Math.max(max, now);
      await pause(2);
      now -= 1;
    };
    const cs = [await pool.start(queueName, handler, { concurrency: 4 })] as Consumer[];
    cs.push((await pool.start(queueName, handler, { concurrency: 4 })) as Consumer);
    // Counted in Redis, not by listeners attached after the consumers started: the first may
    // finish all four before the second has started.
    await poll(
      () => q.counts(),
      (c) => c.completed === 4,
      'the 4 jobs',
      10_000,
    );
    expect(max).toBeLessThanOrEqual(2);
    await within(Promise.all(cs.map((c) => c.idle())), 3000, 'idle consumers');
    expect(await running()).toBe(0);
    for (const id of ids) expect((await q.get(id))?.state).toBe('completed');
  });

  it('gives back the slot of a job dead-lettered by the stalled sweep and of a cancelled one', async ({
    q,
    running,
    claimRaw,
  }) => {
    await q.configure({ concurrency: 3 });
    const a = (await q.enqueue('a')).id;
    const b = (await q.enqueue('b')).id;
    const held = await claimRaw(2, 1);
    expect(held.map((j) => j.id).sort()).toEqual([a, b].sort());
    expect(await q.cancel(b)).toBe('requested');
    // max_stalled 0: the sweep dead-letters a (its first expiry) and ends b cancelled.
    await poll(
      () => q.sweepStalled({ maxStalled: 0 }),
      (r) => r.dead.length === 1,
      'the sweep to end both expired leases',
    );
    expect((await q.get(a))?.state).toBe('dead');
    expect((await q.get(b))?.state).toBe('cancelled');
    expect(await running()).toBe(0);
  });

  it('gives back the slots of the jobs a closing consumer hands back, and the next consumer runs them', async ({
    q,
    queueName,
    pool,
    running,
  }) => {
    await q.configure({ concurrency: 2 });
    for (let i = 0; i < 3; i++) await q.enqueue({ i });
    const started: string[] = [];
    const first = await pool.start(
      queueName,
      async (job: { id: string }, ctx: { signal: AbortSignal }) => {
        started.push(job.id);
        await new Promise((resolve) => ctx.signal.addEventListener('abort', resolve));
        throw new Error('closed under me');
      },
      { concurrency: 5 },
    );
    await poll(
      async () => started.length,
      (n) => n === 2,
      'two jobs to start (the cap)',
    );
    expect(await running()).toBe(2);
    await first.close({ timeoutMs: 0 });
    expect(await running()).toBe(0);
    expect((await q.counts()).pending).toBe(3);

    const second = await pool.start(queueName, () => 'ok', { concurrency: 5 });
    await within(completions([second as Consumer], 3), 10_000, 'the 3 jobs on the next consumer');
    await within(second.idle(), 3000, 'an idle consumer');
    expect(await running()).toBe(0);
  });

  it('refuses a cap that is not a whole number >= 1, writing nothing; null removes it', async ({
    raw,
    q,
    P,
  }) => {
    for (const bad of [0, -1, 1.5, Number.NaN, '2']) {
      await expectRefused(() => q.configure({ concurrency: bad as number }), 'EMQINPUT');
    }
    expect(await raw.hget(`${P}meta`, 'concurrency')).toBeNull();
    await q.configure({ concurrency: 2 });
    expect(await raw.hget(`${P}meta`, 'concurrency')).toBe('2');
    await q.configure({ concurrency: null });
    expect(await raw.hget(`${P}meta`, 'concurrency')).toBeNull();
  });
});
