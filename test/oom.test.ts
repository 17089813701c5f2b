// A full server (issue 12, point 8): redis-server with maxmemory and noeviction, filled until it
// refuses writes. The calls that end jobs or free memory still run (their scripts declare
// `#!lua flags=allow-oom`): running jobs complete and fail, their leases keep being extended,
// clean deletes; a call that would only add (enqueue) is refused as EchoMQError EMQOOM, with
// nothing written.
import type { Redis } from 'ioredis';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { Consumer } from '../src/consumer/consumer.js';
import { EchoMQError } from '../src/core/errors.js';
import { EchoMQ } from '../src/echomq.js';
import type { Queue } from '../src/queue.js';
import { uniqueQueue, useRedisServer } from './support/harness.js';
import { deferred, pause, poll } from './support/wait.js';

const env = useRedisServer({ args: ['--maxmemory-policy', 'noeviction'] });

let mq: EchoMQ;
let raw: Redis;
let q: Queue<number, number>;
let consumer: Consumer<number, number> | undefined;

beforeEach(async () => {
  mq = await EchoMQ.connect({ url: env.server.url });
  raw = env.server.client();
  q = mq.queue(uniqueQueue('oom'));
});

afterEach(async () => {
  await unfill();
  await consumer?.close({ timeoutMs: 0 });
  consumer = undefined;
  await mq.close();
  await raw.quit();
});

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

async function refusal(call: Promise<unknown>): Promise<EchoMQError> {
  const err = await call.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(EchoMQError);
  return err as EchoMQError;
}

/** Five dead jobs (for clean), then six running jobs held by a gate until the server is full. */
async function sixRunning(lost: string[]) {
  for (let i = 0; i < 5; i++) await q.enqueue(-1, { attempts: 1 });
  consumer = q.consume(
    (job) => {
      if (job.data < 0) throw new Error('doomed');
      return job.data;
    },
    { concurrency: 5 },
  );
  await poll(
    () => q.counts(),
    (c) => c.dead === 5,
    'five dead jobs',
  );
  await consumer.close();
  const gate = deferred();
  for (let i = 0; i < 6; i++) await q.enqueue(i, { attempts: 1 });
  consumer = q.consume(
    async (job) => {
      await gate.promise;
      if (job.data >= 3) throw new Error('failed on a full server');
      return job.data;
    },
    { concurrency: 6, leaseMs: 2000, beatMs: 200 },
  );
  consumer.on('lost', (job) => lost.push(job.id));
  await poll(
    () => consumer!.running,
    (n) => n === 6,
    'six jobs running',
  );
  return gate;
}

describe('a full server (maxmemory, noeviction)', () => {
  it('a call that would only add (enqueue) is refused as EchoMQError EMQOOM saying what to do', async () => {
    await q.enqueue(1);
    await fill();
    const refused = await refusal(q.enqueue(99));
    expect(refused.code).toBe('EMQOOM');
    expect(refused.message).toMatch(/out of memory.*nothing was written.*Retry/);
    expect((await q.counts()).pending).toBe(1);
    await unfill();
    expect((await q.enqueue(101)).status).toBe('enqueued');
  });

  it('running jobs complete and fail, and their leases keep being extended (none reaped)', async () => {
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

  it('clean deletes ended jobs on a full server', async () => {
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
