// The version step (SPEC 22.3, 22.4) on a real redis-server: a queue is stamped with the
// connection's default version, speaks version 2's rule once stepped up (a job without attempts
// keeps no `max` and still gets 3), and migrate steps it only while every consumer that beats
// on it speaks 2: one of the previous release (no `protocols` in its heartbeat) holds it back
// until it has been silent for the window. Consumers running across the step carry on, and a
// runtime that speaks only 1 is refused afterwards.
import { describe, expect } from 'vitest';
import { EchoMQError } from '../../src/core/errors.js';
import { EchoMQ } from '../../src/queue/echomq.js';
import type { Queue } from '../../src/queue/queue.js';
import { queueTest, uniqueQueue, useRedisServer } from '../support/harness.js';
import { poll } from '../support/wait.js';

const env = useRedisServer();
// The queues start at version 1 (a fleet that still holds a release speaking 1 only), to step up.
const it = queueTest<{ fails?: number }, string>(env, 'migrate', { protocolVersion: 1 });

/** Writes the heartbeat a consumer of the previous release writes: no `protocols` (speaks 1). */
async function oldBeat(q: Queue<unknown, unknown>, id: string) {
  await q.run('heartbeat', [q.keys.prefix, id, JSON.stringify({ host: 'old-host', pid: 42, beatMs: 200 })]);
}

describe('the protocol version of a queue', () => {
  it('is stamped 2 by default, 1 with protocolVersion: 1, and a bad protocolVersion is refused', async ({
    mq,
    q,
    raw,
    key,
    others,
  }) => {
    // The file's connections pass protocolVersion: 1 (their queues start at 1, to step up).
    await q.enqueue({});
    expect(await q.protocolVersion()).toBe(1);
    expect(await raw.hget(key('meta'), 'version')).toBe('1');
    const byDefault = await EchoMQ.connect({ url: env.server.url });
    others.push(byDefault);
    const fresh = byDefault.queue(uniqueQueue('migrate-v2'));
    await fresh.enqueue({});
    expect(await fresh.protocolVersion()).toBe(2);
    expect(await raw.hget(`${fresh.keys.prefix}meta`, 'version')).toBe('2');
    // A stamped queue keeps its version whichever a connection stamps.
    expect(await byDefault.queue(q.name).protocolVersion()).toBe(1);
    expect(await mq.queue(fresh.name).protocolVersion()).toBe(2);
    await expect(EchoMQ.connect({ url: env.server.url, protocolVersion: 3 as 2 })).rejects.toThrow(
      /protocolVersion must be one of 1, 2/,
    );
  });

  it('at version 2 keeps no max for 3 attempts and runs them; at version 1 it writes max 3', async ({
    q,
    raw,
    key,
    consumers,
    others,
  }) => {
    const v2 = await EchoMQ.connect({ url: env.server.url, protocolVersion: 2 });
    others.push(v2);
    const q2 = v2.queue<{ fails?: number }, string>(uniqueQueue('migrate-v2'));
    const a = await q2.enqueue({ fails: 2 });
    const five = await q2.enqueue({}, { attempts: 5 });
    const later = await q2.enqueueIn({ fails: 5 }, 10);
    expect(await raw.hexists(`${q2.keys.prefix}job:${a.id}`, 'max')).toBe(0);
    expect(await raw.hget(`${q2.keys.prefix}job:${five.id}`, 'max')).toBe('5');
    expect(await raw.hexists(`${q2.keys.prefix}job:${later.id}`, 'max')).toBe(0);
    expect((await q2.get(a.id))!.maxAttempts).toBe(3);
    const one = await q.enqueue({});
    expect(await raw.hget(`${key('job:')}${one.id}`, 'max')).toBe('3');

    const seen: { id: string; attempts: number; max: number }[] = [];
    const c = q2.consume(
      async (job) => {
        seen.push({ id: job.id, attempts: job.attempts, max: job.maxAttempts });
        if (job.attempts <= (job.data.fails ?? 0)) throw new Error(`attempt ${job.attempts}`);
        return 'ok';
      },
      { backoff: { kind: 'fixed', ms: 1 } },
    );
    consumers.push(c);
    const done = await poll(
      async () => [await q2.get(a.id), await q2.get(later.id), await q2.get(five.id)],
      (views) => views.every((v) => v?.state === 'completed' || v?.state === 'dead'),
      'the three jobs ended',
      60_000,
    );
    expect(done.map((v) => v!.state)).toEqual(['completed', 'dead', 'completed']);
    // The job that fails twice ran 3 times, each handed over with 3 attempts; the one that
    // always fails stopped at 3 (version 1 would have given both one attempt).
    expect(seen.filter((s) => s.id === a.id).map((s) => [s.attempts, s.max])).toEqual([
      [1, 3],
      [2, 3],
      [3, 3],
    ]);
    expect(seen.filter((s) => s.id === later.id).map((s) => s.attempts)).toEqual([1, 2, 3]);
    expect((await q2.get(later.id))!.attempts).toBe(3);
  });
});

describe('migrate', () => {
  it('waits for a consumer of the previous release to go, then steps up while the consumers run on', async ({
    q,
    raw,
    key,
    consumers,
  }) => {
    const ran = new Map<string, number>();
    const c = q.consume(
      async (job) => {
        ran.set(job.id, (ran.get(job.id) ?? 0) + 1);
        if (job.attempts <= (job.data.fails ?? 0)) throw new Error('again');
        return 'ok';
      },
      { concurrency: 4, beatMs: 100, backoff: { kind: 'fixed', ms: 1 } },
    );
    consumers.push(c);
    const before: string[] = [];
    for (let i = 0; i < 20; i++) before.push((await q.enqueue({ fails: i % 3 === 0 ? 1 : 0 })).id);
    // Our consumer's beat says it speaks 1 and 2.
    await poll(
      async () => raw.hget(key('consumers:info'), c.id),
      (info) => info !== null && JSON.parse(info).protocols?.includes(2),
      'the consumer beat with its protocols',
      30_000,
    );
    // A consumer of the previous release beats too: the step is refused, naming it.
    await oldBeat(q as Queue<unknown, unknown>, 'old-consumer');
    const refused = await q.migrate({ windowMs: 1000 }).catch((err: unknown) => err);
    expect(refused).toBeInstanceOf(EchoMQError);
    expect((refused as EchoMQError).code).toBe('EMQFLEET');
    expect((refused as EchoMQError).message).toMatch(
      /consumer old-consumer \(old-host pid 42\) speaks protocol 1, not 2/,
    );
    expect(await raw.hget(key('meta'), 'version')).toBe('1');
    // Silent for longer than the window and three of its beats: it no longer counts.
    await poll(
      async () => q.migrate({ windowMs: 1000 }).catch((err: EchoMQError) => err.code),
      (r) => typeof r === 'object',
      'the old consumer aged out of the window',
      30_000,
    ).then((r) => expect(r).toEqual({ from: 1, version: 2, consumers: 1 }));
    expect(await raw.hget(key('meta'), 'version')).toBe('2');
    expect(await q.protocolVersion()).toBe(2);

    // The consumer that ran across the step goes on; new jobs follow version 2's rule.
    const after: string[] = [];
    for (let i = 0; i < 20; i++) after.push((await q.enqueue({ fails: i % 3 === 0 ? 2 : 0 })).id);
    expect(await raw.hexists(`${key('job:')}${after[0]}`, 'max')).toBe(0);
    await poll(
      async () => Promise.all([...before, ...after].map((id) => q.get(id))),
      (views) => views.every((v) => v?.state === 'completed'),
      'every job completed',
      60_000,
    );
    for (const id of before) expect(ran.get(id)).toBe(before.indexOf(id) % 3 === 0 ? 2 : 1);
    for (const id of after) expect(ran.get(id)).toBe(after.indexOf(id) % 3 === 0 ? 3 : 1);

    // A runtime that speaks only 1 (level 1's hello) is refused, and writes nothing.
    await expect(q.run('hello', ['1'])).rejects.toMatchObject({ code: 'EMQPROTOCOL' });
    // Nothing more to do, and no step down in place.
    expect(await q.migrate()).toEqual({ from: 2, version: 2, consumers: 0 });
    await expect(q.migrate({ to: 1 })).rejects.toThrow(/a step down to 1 is not made in place/);
    await expect(q.migrate({ to: 3 })).rejects.toMatchObject({ code: 'EMQINPUT' });
    await expect(q.migrate({ window: 5 } as never)).rejects.toThrow(/unknown migrate option "window"/);
  });
});
