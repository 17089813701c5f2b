// Batch consumption (queue.consumeBatch) on a real redis-server with several consumers: up to
// `size` jobs per handler call, a batch that waits at most waitMs to fill, a per-job outcome, one
// complete call for a batch's completions, and size 0 refused.
import { describe, expect } from 'vitest';
import { queueTest, useRedisServer } from '../support/harness.js';
import { deferred, expectRefused } from '../support/observe.js';

const env = useRedisServer();

const it = queueTest<number, number>(env, 'batch');

describe('queue.consumeBatch()', () => {
  it('hands two consumers batches of at most size jobs; every job runs once', async ({ q, consumers }) => {
    const sizes: number[] = [];
    const seen: number[] = [];
    for (let i = 0; i < 2; i++) {
      const c = q.consumeBatch(
        async (batch) => {
          sizes.push(batch.jobs.length);
          for (const job of batch.jobs) seen.push(job.data);
          return batch.jobs.map((job) => job.data * 10);
        },
        { size: 4, waitMs: 20, concurrency: 2 },
      );
      consumers.push(c);
    }
    const made = await q.enqueueMany(Array.from({ length: 30 }, (_, n) => ({ data: n })));
    const results = await Promise.all(made.map(({ id }) => q.waitFor(id, { timeoutMs: 20_000 })));
    expect(results).toEqual(Array.from({ length: 30 }, (_, n) => n * 10));
    expect(seen.sort((a, b) => a - b)).toEqual(Array.from({ length: 30 }, (_, n) => n));
    expect(Math.max(...sizes)).toBeLessThanOrEqual(4);
    expect(sizes.reduce((a, b) => a + b, 0)).toBe(30);
  });

  it('completes some jobs of a batch and fails others; the completions go as one complete call', async ({
    q,
    consumers,
  }) => {
    const c = q.consumeBatch(
      async (batch) => {
        for (const job of batch.jobs) if (job.data % 2 === 1) batch.fail(job, new Error(`odd ${job.data}`));
        return batch.jobs.map((job) => job.data);
      },
      { size: 6, waitMs: 5000 },
    );
    consumers.push(c);
    const failed: string[] = [];
    c.on('failed', (_job, err, outcome) => failed.push(`${err.message} ${outcome}`));
    let completeCalls = 0;
    const unobserve = q.connector.observe((name) => {
      if (name === 'complete') completeCalls += 1;
    });
    const made = await q.enqueueMany(
      Array.from({ length: 6 }, (_, n) => ({ data: n, opts: { attempts: 1 } })),
    );
    for (const { id } of made) await q.waitFor(id, { timeoutMs: 20_000 }).catch(() => {});
    unobserve();
    expect(failed.sort()).toEqual(['odd 1 dead', 'odd 3 dead', 'odd 5 dead']);
    expect(await q.counts()).toMatchObject({ completed: 3, dead: 3 });
    expect(completeCalls).toBe(1);
  });

  it('a batch waits at most waitMs to fill, then runs with what it has', async ({ q, consumers }) => {
    const got = deferred<number>();
    const c = q.consumeBatch(
      async (batch) => {
        got.resolve(batch.jobs.length);
        return undefined;
      },
      { size: 50, waitMs: 100 },
    );
    consumers.push(c);
    const { id } = await q.enqueue(7);
    expect(await got.promise).toBe(1);
    expect(await q.waitFor(id, { timeoutMs: 10_000 })).toBeUndefined(); // completed without a result
  });

  it('a handler that throws fails every job of its batch', async ({ q, consumers }) => {
    const c = q.consumeBatch(
      async () => {
        throw new Error('downstream down');
      },
      { size: 3 },
    );
    consumers.push(c);
    const made = await q.enqueueMany([1, 2, 3].map((data) => ({ data, opts: { attempts: 1 } })));
    for (const { id } of made)
      await expect(q.waitFor(id, { timeoutMs: 10_000 })).rejects.toThrow(/EMQJOBFAILED/);
    expect((await q.get(made[0]!.id))?.error?.message).toBe('downstream down');
  });

  it('refuses size 0, a bad waitMs or concurrency, and a handler that is not a function', async ({ q }) => {
    await expectRefused(() => q.consumeBatch(async () => [], { size: 0 }), 'EMQINPUT');
    await expectRefused(() => q.consumeBatch(async () => [], { size: 2, waitMs: -1 }), 'EMQINPUT');
    await expectRefused(() => q.consumeBatch(async () => [], { size: 2, concurrency: 0 }), 'EMQINPUT');
    await expectRefused(() => q.consumeBatch('x' as never, { size: 2 }), 'EMQINPUT');
    await expectRefused(() => q.consumeBatch(async () => [], { size: 2, sise: 3 } as never), 'EMQINPUT');
    expect(q.consumers).toHaveLength(0);
  });
});
