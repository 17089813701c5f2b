// consumer.pause() / resume() on a real redis-server: the paused consumer stops claiming and its
// running jobs finish, while the queue is not paused and another consumer goes on taking work.
import { describe, expect } from 'vitest';
import { queueTest, useRedisServer } from '../support/harness.js';
import { deferred } from '../support/observe.js';

const env = useRedisServer();
const it = queueTest<number, number>(env, 'cpause');

describe('consumer.pause() and resume()', () => {
  it('stops this consumer claiming once its running job finishes; the other consumer takes the rest', async ({
    q,
    consumers,
  }) => {
    const ran: Record<string, number[]> = { a: [], b: [] };
    const gate = deferred();
    const started = deferred();
    const a = q.consume(async (job) => {
      ran.a!.push(job.data);
      if (job.data === 0) {
        started.resolve();
        await gate.promise;
      }
      return job.data;
    });
    consumers.push(a);
    await q.enqueue(0);
    await started.promise;
    const paused = a.pause();
    expect(a.paused).toBe(true);
    // Its running job holds the pause open until it finishes.
    let settled = false;
    void paused.then(() => {
      settled = true;
    });
    for (let i = 1; i <= 5; i++) await q.enqueue(i);
    expect(settled).toBe(false);
    gate.resolve();
    await paused;
    expect(await q.isPaused()).toBe(false); // the queue itself is not paused
    const b = q.consume(async (job) => {
      ran.b!.push(job.data);
      return job.data;
    });
    consumers.push(b);
    await b.idle();
    expect(ran.a).toEqual([0]);
    expect(ran.b!.sort()).toEqual([1, 2, 3, 4, 5]);
    expect(await a.idle()).toBeUndefined(); // a paused consumer with nothing running is idle
  });

  it('resume() claims again at once', async ({ q, consumers }) => {
    const seen: number[] = [];
    const c = q.consume(async (job) => {
      seen.push(job.data);
      return job.data;
    });
    consumers.push(c);
    await c.pause();
    const ids = [];
    for (let i = 0; i < 3; i++) ids.push((await q.enqueue(i)).id);
    expect(await q.counts()).toMatchObject({ pending: 3, active: 0 });
    c.resume();
    expect(c.paused).toBe(false);
    for (const id of ids) await q.waitFor(id, { timeoutMs: 10_000 });
    expect(seen.sort()).toEqual([0, 1, 2]);
  });
});
