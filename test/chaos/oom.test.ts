// A full server (issue 12, point 8): redis-server with maxmemory and noeviction, filled until it
// refuses writes. The calls that end jobs or free memory still run (their scripts declare
// `#!lua flags=allow-oom`): running jobs complete and fail, their leases keep being extended,
// clean deletes; a call that would only add (enqueue) is refused as EchoMQError EMQOOM, with
// nothing written.
import type { Redis } from 'ioredis';
import { describe, expect } from 'vitest';
import type { Consumer } from '../../src/consumer/consumer.js';
import { EchoMQError } from '../../src/core/errors.js';
import type { Queue } from '../../src/queue/queue.js';
import { helperFixtures, queueTest, useRedisServer } from '../support/harness.js';
import { deferred, pause, poll } from '../support/wait.js';

const env = useRedisServer({ args: ['--maxmemory-policy', 'noeviction'] });

/**
 * The file's helpers over one test's queue. The server is made whole again (unfill) after each
 * test, before its consumers close (they hand jobs back, which a full server would refuse).
 */
function helpers({
  q,
  raw,
  consumers,
  defer,
}: {
  q: Queue<number, number>;
  raw: Redis;
  consumers: Consumer<number, number>[];
  defer: (fn: () => unknown) => void;
}) {
  /**
   * Makes the server full: 2 MiB of filler, then maxmemory set 1 MiB below what it uses, so every
   * write a script does not flag allow-oom is refused until memory is freed or the limit raised.
   */
  async function fill(): Promise<void> {
    const chunk = 'x'.repeat(64 * 1024);
    for (let i = 0; i < 32; i++) await raw.set(`fill:${i}`, chunk);
    const used = Number(/used_memory:(\d+)/.exec(await raw.info('memory'))?.[1]);
    await raw.config('SET', 'maxmemory', String(used - 1024 * 1024));
    await expect(raw.set('fill:probe', 'x')).rejects.toThrow(/OOM/);
  }

  async function unfill(): Promise<void> {
    await raw.config('SET', 'maxmemory', '0');
    await raw.del(...(await raw.keys('fill:*')), 'fill:none');
  }
  // Deferred after the consumers fixture's own, so it runs before the consumers close.
  defer(unfill);

  /** Five dead jobs (for clean), then six running jobs held by a gate until the server is full. */
  async function sixRunning(lost: string[]) {
    for (let i = 0; i < 5; i++) await q.enqueue(-1, { attempts: 1 });
    const first = q.consume(
      (job) => {
        if (job.data < 0) throw new Error('doomed');
        return job.data;
      },
      { concurrency: 5 },
    );
    consumers.push(first);
    await poll(
      () => q.counts(),
      (c) => c.dead === 5,
      'five dead jobs',
    );
    await first.close();
    const gate = deferred();
    for (let i = 0; i < 6; i++) await q.enqueue(i, { attempts: 1 });
    const consumer = q.consume(
      async (job) => {
        await gate.promise;
        if (job.data >= 3) throw new Error('failed on a full server');
        return job.data;
      },
      { concurrency: 6, leaseMs: 2000, beatMs: 200 },
    );
    consumers.push(consumer);
    consumer.on('lost', (job) => lost.push(job.id));
    await poll(
      () => consumer.running,
      (n) => n === 6,
      'six jobs running',
    );
    return gate;
  }
  return { fill, unfill, sixRunning };
}
type Helpers = ReturnType<typeof helpers>;

const it = queueTest<number, number>(env, 'oom')
  .extend<{ h: Helpers }>({
    h: async ({ q, raw, consumers, defer }, use) => use(helpers({ q, raw, consumers, defer })),
  })
  .extend<Helpers>(helperFixtures<Helpers>(['fill', 'unfill', 'sixRunning']));

async function refusal(call: Promise<unknown>): Promise<EchoMQError> {
  const err = await call.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(EchoMQError);
  return err as EchoMQError;
}

describe('a full server (maxmemory, noeviction)', () => {
  it('a call that would only add (enqueue) is refused as EchoMQError EMQOOM saying what to do', async ({
    q,
    fill,
    unfill,
  }) => {
    await q.enqueue(1);
    await fill();
    const refused = await refusal(q.enqueue(99));
    expect(refused.code).toBe('EMQOOM');
    expect(refused.message).toMatch(/out of memory.*nothing was written.*Retry/);
    expect((await q.counts()).pending).toBe(1);
    await unfill();
    expect((await q.enqueue(101)).status).toBe('enqueued');
  });

  it('running jobs complete and fail, and their leases keep being extended (none reaped)', async ({
    q,
    fill,
    sixRunning,
  }) => {
    const lost: string[] = [];
    const gate = await sixRunning(lost);
    await fill();
    // Twice the lease passes: extensions land, so recovery reaps none of them.
    await pause(4500);
    expect(lost).toEqual([]);
    expect((await q.counts()).active).toBe(6);
    gate.resolve();
    await poll(
      () => q.counts(),
      (c) => c.completed === 3 && c.dead === 8,
      'three completed, three more dead',
    );
    expect(lost).toEqual([]);
  });

  it('clean deletes ended jobs on a full server', async ({ q, fill, sixRunning }) => {
    const gate = await sixRunning([]);
    gate.resolve();
    await poll(
      () => q.counts(),
      (c) => c.completed === 3 && c.dead === 8,
      'ended',
    );
    await fill();
    expect(await q.clean({ state: 'dead', olderThanMs: 0 })).toBe(8);
    expect(await q.clean({ state: 'completed', olderThanMs: 0 })).toBe(3);
  });
});
