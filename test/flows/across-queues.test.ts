// Flows across queues on a real redis-server: a child in another queue than its parent. One
// script admits the whole tree (a single server reaches every queue); a child's end reaches its
// parent's queue through the hand-off (a notice in the child's queue, applied by child_notice),
// counted exactly once when the hand-off is retried, raced, or left half done by a process that
// stopped. Also the flow reads (queue.flow, queue.dependencies) and enqueue options on flow jobs.
import { describe, expect } from 'vitest';
import type { Handler } from '../../src/core/types.js';
import { EchoMQ } from '../../src/queue/echomq.js';
import type { Queue } from '../../src/queue/queue.js';
import { PROTOCOL_VERSION } from '../../src/wire/keyspace.js';
import { keySlot } from '../../src/wire/slot.js';
import { queueTest, uniqueQueue, useRedisServer } from '../support/harness.js';
import { poll } from '../support/observe.js';

const env = useRedisServer();

type Step = { step: string; fail?: boolean };
const worker: Handler<Step, unknown> = async (job, ctx) => {
  if (job.data.fail) throw new Error(`${job.data.step} broke`);
  const results = await ctx.childrenResults();
  const failures = await ctx.childrenFailures();
  if (Object.keys(results).length + Object.keys(failures).length === 0) return job.data.step;
  return { step: job.data.step, results, failures };
};
const fast = { concurrency: 2, beatMs: 50, backoff: { kind: 'fixed', ms: 1 } } as const;

/** A parent in queue `name` with a child in it and a child in queue `other`. */
function twoQueueFlow(
  mq: EchoMQ,
  name: string,
  other: string,
  child: Partial<Step> = {},
  onChildFailure?: 'fail' | 'ignore',
) {
  return mq.flow({
    queue: name,
    data: { step: 'parent' },
    opts: onChildFailure ? { onChildFailure, attempts: 1 } : undefined,
    children: [
      { queue: name, data: { step: 'here' } },
      { queue: other, data: { step: 'there', ...child }, opts: { attempts: 1 } },
    ],
  });
}

/**
 * queueTest with a second queue: `other` (its name) and `qb` on the test's EchoMQ, and
 * `twoQueueFlow(child?, onChildFailure?)` over the two.
 */
const it = queueTest(env, 'xflow').extend<{
  other: string;
  qb: Queue;
  twoQueueFlow: (child?: Partial<Step>, onChildFailure?: 'fail' | 'ignore') => ReturnType<EchoMQ['flow']>;
}>({
  // biome-ignore lint/correctness/noEmptyPattern: vitest reads a fixture's dependencies from this pattern
  other: async ({}, use) => use(uniqueQueue('xflow-b')),
  qb: async ({ mq, other }, use) => use(mq.queue(other)),
  twoQueueFlow: async ({ mq, queueName, other }, use) =>
    use((child, onChildFailure) => twoQueueFlow(mq, queueName, other, child, onChildFailure)),
});

describe('a flow over two queues on one server', () => {
  it('is admitted in one call: each job in its own queue, the remote child naming its parent with its prefix', async ({
    mq,
    raw,
    queueName: name,
    q,
    P,
    other,
    qb,
    key,
    twoQueueFlow,
  }) => {
    const flow = await twoQueueFlow();
    const [here, there] = flow.children;
    expect(flow.status).toBe('added');
    expect((await q.get(flow.id))!.state).toBe('waiting_children');
    expect((await q.get(here!.id))!.state).toBe('pending');
    expect((await qb.get(there!.id))!.state).toBe('pending');
    expect(await q.get(there!.id)).toBeNull();
    // The other queue was written by the root queue's call: it was greeted (version, registry).
    expect(await raw.hget(key('meta', other), 'version')).toBe(PROTOCOL_VERSION);
    expect(await raw.sismember('emq:queues', other)).toBe(1);
    expect(await raw.hget(key(`job:${there!.id}`, other), 'parent')).toBe(`${P}${flow.id}`);
    expect(await raw.zrange(key(`job:${flow.id}:deps`), 0, -1)).toEqual([
      here!.id,
      `${qb.keys.prefix}${there!.id}`,
    ]);
    // Same ids again: the root exists, nothing written.
    expect((await mq.flow({ queue: name, data: {}, opts: { id: flow.id } })).status).toBe('duplicate');
  });

  it('runs the parent once both children completed, with both results, through the hand-off', async ({
    raw,
    queueName: name,
    q,
    other,
    key,
    pool,
    twoQueueFlow,
  }) => {
    const flow = await twoQueueFlow();
    const [here, there] = flow.children;
    await pool.start(name, worker, fast);
    await pool.start(other, worker, fast);
    const result = await q.waitFor(flow.id, { timeoutMs: 15_000 });
    expect(result).toEqual({
      step: 'parent',
      results: { [here!.id]: 'here', [there!.id]: 'there' },
      failures: {},
    });
    expect(await raw.zcard(key('notices', other))).toBe(0);
  });

  it('counts a child once when the hand-off is retried and raced, and loses nothing when a process stops between the halves', async ({
    raw,
    queueName: name,
    q,
    P,
    other,
    qb,
    key,
    pool,
    twoQueueFlow,
  }) => {
    const flow = await twoQueueFlow();
    const there = flow.children[1]!;
    const ref = `${qb.keys.prefix}${there.id}`;
    // A consumer whose beat (and so its delivery) comes only after a minute: the child's end is
    // recorded (first half), nothing delivers it; then the process goes away.
    const lone = await EchoMQ.connect({ url: env.server.url });
    const slow = lone.queue<Step>(other).consume(worker, { beatMs: 60_000 });
    await poll(
      () => qb.get(there.id),
      (j) => j?.state === 'completed',
      'the remote child to complete',
      10_000,
    );
    await slow.close();
    await lone.close();
    expect(await raw.zrange(key('notices', other), 0, -1)).toEqual([there.id]);
    expect(await raw.hgetall(key(`notice:${there.id}`, other))).toEqual({
      parent: `${P}${flow.id}`,
      outcome: 'completed',
      result: '"there"',
      error: '',
    });
    expect(await raw.hget(key(`job:${flow.id}`), 'children')).toBe('2');
    // The second half applied, but the process stopped before dropping the notice; applied again.
    const apply = () => q.run('child_notice', [P, flow.id, ref, 'completed', '"there"', '']);
    expect(await apply()).toBe(1);
    expect(await apply()).toBe(0);
    // Two deliverers race over the same notice: counted once, dropped.
    await Promise.all([qb.deliverNotices(), qb.deliverNotices()]);
    expect(await raw.zcard(key('notices', other))).toBe(0);
    expect(await raw.hget(key(`job:${flow.id}`), 'children')).toBe('1');
    expect(await raw.hgetall(key(`job:${flow.id}:results`))).toEqual({ [there.id]: '"there"' });
    // The local child completes: the parent runs, with the result delivered once.
    await pool.start(name, worker, fast);
    expect(await q.waitFor(flow.id, { timeoutMs: 15_000 })).toMatchObject({
      results: { [there.id]: 'there' },
    });
  });

  it("a remote child's failure reaches its parent: recorded with its error when the parent ignores failures, else the parent ends dead", async ({
    queueName: name,
    q,
    other,
    pool,
    twoQueueFlow,
  }) => {
    const ignoring = await twoQueueFlow({ fail: true }, 'ignore');
    const failing = await twoQueueFlow({ fail: true }, 'fail');
    await pool.start(name, worker, fast);
    await pool.start(other, worker, fast);
    const result = (await q.waitFor(ignoring.id, { timeoutMs: 15_000 })) as {
      failures: Record<string, string>;
    };
    expect(result.failures).toEqual({ [ignoring.children[1]!.id]: 'dead: there broke' });
    await poll(
      () => q.get(failing.id),
      (j) => j?.state === 'dead',
      'the failing parent to end dead',
      15_000,
    );
    expect((await q.get(failing.id))!.error?.message).toBe(`child ${failing.children[1]!.id} failed (dead)`);
  });
});

describe('reading a flow', () => {
  it('queue.flow(id) gives the tree with every job in its queue and state; dependencies pages pending and processed children', async ({
    queueName: name,
    q,
    other,
    pool,
    twoQueueFlow,
  }) => {
    const flow = await twoQueueFlow();
    const [here, there] = flow.children;
    expect(await q.flow(flow.id)).toEqual({
      id: flow.id,
      queue: name,
      state: 'waiting_children',
      children: [
        { id: here!.id, queue: name, state: 'pending', children: [] },
        { id: there!.id, queue: other, state: 'pending', children: [] },
      ],
    });
    expect(await q.flow('JOBnone')).toBeNull();
    const first = await q.dependencies(flow.id, { count: 1 });
    expect(first).toEqual({ processed: [], pending: [{ id: here!.id, queue: name }], cursor: 1 });
    await pool.start(other, worker, fast);
    await poll(
      () => q.dependencies(flow.id, { cursor: 1 }),
      (d) => d.processed.length === 1,
      'the remote child processed',
      15_000,
    );
    expect(await q.dependencies(flow.id, { cursor: 1, count: 1 })).toEqual({
      processed: [{ id: there!.id, queue: other, result: 'there' }],
      pending: [],
      cursor: 0,
    });
    expect((await q.flow(flow.id))!.children[1]!.state).toBe('completed');
    await expect(q.dependencies(flow.id, { count: 0 })).rejects.toMatchObject({ code: 'EMQINPUT' });
  });
});

describe('enqueue options on flow jobs', () => {
  it('takes retention, tags and lifo on any job of a flow', async ({
    mq,
    raw,
    queueName: name,
    q,
    key,
    pool,
  }) => {
    const flow = await mq.flow({
      queue: name,
      data: { step: 'parent' },
      opts: { tags: ['report'] },
      children: [
        { queue: name, data: { step: 'a' }, opts: { removeOnComplete: true, tags: ['x', 'y'] } },
        { queue: name, data: { step: 'b' }, opts: { lifo: true } },
      ],
    });
    const [a, b] = flow.children;
    expect((await q.get(flow.id))!.tags).toEqual(['report']);
    expect((await q.get(a!.id))!.tags).toEqual(['x', 'y']);
    // The lifo leaf goes before the other one of its priority.
    expect(Number(await raw.zscore(key('pending'), b!.id))).toBeLessThan(0);
    await pool.start(name, worker, fast);
    expect(await q.waitFor(flow.id, { timeoutMs: 15_000 })).toMatchObject({
      results: { [a!.id]: 'a', [b!.id]: 'b' },
    });
    expect(await q.get(a!.id)).toBeNull(); // removed as it completed, its result kept on the parent
  });
});

describe('the hash slot rule', () => {
  it('keySlot is Redis Cluster’s CRC16 of the hash tag', () => {
    expect(keySlot('emq:{a}:x')).toBe(15495);
    expect(keySlot('emq:{orders}:meta')).toBe(105);
    expect(keySlot('foo')).toBe(12182);
    expect(keySlot('{user1000}.following')).toBe(3443);
    expect(keySlot('{}x')).toBe(keySlot('{}x'));
  });
});
