import { describe, expect } from 'vitest';
import type { Consumer } from '../../src/consumer/consumer.js';
import { mintedAt } from '../../src/core/ids.js';
import type { Handler } from '../../src/core/types.js';
import { helperFixtures, type QueueTestContext, queueTest, useRedisServer } from '../support/harness.js';
import { poll, refusal, streamEvents, within } from '../support/observe.js';

const env = useRedisServer();

type Step = { step: string; fail?: boolean };

/** A handler that fails the jobs marked fail, and returns children's results for parents. */
const worker: Handler<Step, unknown> = async (job, ctx) => {
  if (job.data.fail) throw new Error(`${job.data.step} broke`);
  const results = await ctx.childrenResults();
  return Object.keys(results).length > 0 ? { step: job.data.step, children: results } : job.data.step;
};

// ── helpers ─────────────────────────────────────────────────────────────────────

/** The file's helpers over one test's queue. */
function helpers({ pool, queueName }: Pick<QueueTestContext & { queueName: string }, 'pool' | 'queueName'>) {
  /** `n` consumers of the test's queue on connections of their own (closed after the test). */
  async function start(n: number, handler: Handler<Step, unknown> = worker): Promise<Consumer[]> {
    const cs: Consumer[] = [];
    for (let i = 0; i < n; i++) {
      cs.push(
        (await pool.start(queueName, handler, {
          concurrency: 4,
          backoff: { kind: 'fixed', ms: 1 },
        })) as Consumer,
      );
    }
    return cs;
  }
  return { start };
}
type Helpers = ReturnType<typeof helpers>;

const it = queueTest(env, 'flows')
  .extend<{ h: Helpers }>({ h: async ({ pool, queueName }, use) => use(helpers({ pool, queueName })) })
  .extend<Helpers>(helperFixtures<Helpers>(['start']));

// ── flows ───────────────────────────────────────────────────────────────────────

describe('a parent and its children', () => {
  it('admits the parent waiting_children and the children pending, and resolves the ids shaped like the flow', async ({
    mq,
    raw,
    q,
    P,
    queueName: name,
  }) => {
    const flow = await mq.flow({
      queue: name,
      name: 'report',
      data: { step: 'report' },
      children: [
        { queue: name, name: 'fetch', data: { step: 'a' } },
        { queue: name, data: { step: 'b' }, children: [{ queue: name, data: { step: 'b1' } }] },
      ],
    });
    expect(flow).toMatchObject({
      status: 'added',
      children: [{ children: [] }, { children: [{ children: [] }] }],
    });
    const [a, b] = flow.children;
    const b1 = b!.children[0]!;
    expect((await q.get(flow.id))!).toMatchObject({ state: 'waiting_children', name: 'report' });
    expect((await q.get(b!.id))!.state).toBe('waiting_children');
    expect((await q.get(a!.id))!).toMatchObject({ state: 'pending', name: 'fetch' });
    expect((await q.get(b1.id))!.state).toBe('pending');
    expect(await raw.hget(`${P}job:${b1.id}`, 'parent')).toBe(b!.id);
    expect(await raw.hget(`${P}job:${flow.id}`, 'children')).toBe('2');
    expect((await q.counts()).waiting_children).toBe(2);
    expect((await streamEvents(raw, q)).map((e) => [e.event, e.id])).toEqual([
      ['waiting_children', flow.id],
      ['added', a!.id],
      ['waiting_children', b!.id],
      ['added', b1.id],
    ]);
  });

  it('leaves created off a flow job whose minted id holds it, as enqueue does, and writes it for a caller id', async ({
    mq,
    raw,
    q,
    P,
    queueName: name,
  }) => {
    const [t] = await raw.time();
    const flow = await mq.flow({
      queue: name,
      data: { step: 'p' },
      children: [{ queue: name, data: { step: 'c' }, opts: { id: 'JOBcaller-child' } }],
    });
    // The minted root: no created (SPEC section 3), one hash field less; its view reads the id's instant.
    expect(await raw.hkeys(`${P}job:${flow.id}`)).toEqual(expect.not.arrayContaining(['created']));
    expect((await q.get(flow.id))!.createdAt).toBe(mintedAt(flow.id));
    const created = Number(await raw.hget(`${P}job:JOBcaller-child`, 'created'));
    expect(created).toBeGreaterThanOrEqual(Number(t) * 1000);
    expect((await q.get('JOBcaller-child'))!.createdAt).toBe(created);
  });

  it('runs the parent once, after all its children complete across 3 consumers, with their results', async ({
    mq,
    raw,
    q,
    queueName: name,
    start,
  }) => {
    const children = Array.from({ length: 12 }, (_, i) => ({ queue: name, data: { step: `c${i}` } }));
    const starts: string[] = [];
    const cs = await start(3, async (job, ctx) => {
      starts.push(job.data.step);
      return worker(job, ctx);
    });
    const flow = await mq.flow({ queue: name, data: { step: 'parent' }, children });
    const result = (await q.waitFor(flow.id, { timeoutMs: 5000 })) as { children: Record<string, string> };
    const expected = Object.fromEntries(flow.children.map((c, i) => [c.id, `c${i}`]));
    expect(result).toEqual({ step: 'parent', children: expected });
    expect(starts.filter((s) => s === 'parent')).toHaveLength(1);
    expect(starts.indexOf('parent')).toBe(12); // after every child
    const waiting = (await streamEvents(raw, q, 'waiting')).map((e) => e.id);
    expect(waiting).toEqual([flow.id]);
    await within(Promise.all(cs.map((c) => c.idle())), 3000, 'idle consumers');
    expect((await q.counts()).waiting_children).toBe(0);
  });

  it('passes results up a nested flow: a child parent runs after its own children', async ({
    mq,
    q,
    queueName: name,
    start,
  }) => {
    await start(2);
    const flow = await mq.flow({
      queue: name,
      data: { step: 'root' },
      children: [
        { queue: name, data: { step: 'mid' }, children: [{ queue: name, data: { step: 'leaf' } }] },
        { queue: name, data: { step: 'side' } },
      ],
    });
    const [mid, side] = flow.children;
    const leaf = mid!.children[0]!;
    expect(await q.waitFor(flow.id, { timeoutMs: 5000 })).toEqual({
      step: 'root',
      children: { [mid!.id]: { step: 'mid', children: { [leaf.id]: 'leaf' } }, [side!.id]: 'side' },
    });
  });

  it('a retried child counts once, when it finally completes', async ({ mq, q, queueName: name, start }) => {
    let tries = 0;
    await start(1, async (job, ctx) => {
      if (job.data.step === 'flaky' && ++tries === 1) throw new Error('first try');
      return worker(job, ctx);
    });
    const flow = await mq.flow({
      queue: name,
      data: { step: 'p' },
      children: [{ queue: name, data: { step: 'flaky' }, opts: { attempts: 2 } }],
    });
    expect(await q.waitFor(flow.id, { timeoutMs: 5000 })).toEqual({
      step: 'p',
      children: { [flow.children[0]!.id]: 'flaky' },
    });
    expect(tries).toBe(2);
  });

  it('releases the parent into its lane and priority when its children are done', async ({
    mq,
    raw,
    q,
    P,
    queueName: name,
  }) => {
    await q.lanes.configure('reports', { concurrency: 1 });
    const flow = await mq.flow({
      queue: name,
      data: { step: 'p' },
      opts: { group: 'reports', priority: 3 },
      children: [{ queue: name, data: { step: 'c' } }],
    });
    await q.enqueue({ step: 'other' }, { group: 'reports' });
    const [flat] = (await q.run('claim', [P, 5, 30_000])) as [(string | number)[]];
    expect(flat.filter((_, i) => i % 7 === 0).length).toBe(2); // the child and the other job
    const childIdx = flat.indexOf(flow.children[0]!.id);
    await q.run('complete', [P, 30_000, 0, flat[childIdx]!, flat[childIdx + 1]!, '"c"']);
    expect((await q.get(flow.id))!.state).toBe('pending');
    expect(await raw.zscore(`${P}g:reports:pending`, flow.id)).toBe('3');
  });
});

describe('a child that does not complete', () => {
  it('fails its parent (dead, with an error naming the child) and the parent above it', async ({
    mq,
    raw,
    q,
    queueName: name,
    start,
  }) => {
    const cs = await start(2);
    const flow = await mq.flow({
      queue: name,
      data: { step: 'root' },
      children: [
        {
          queue: name,
          data: { step: 'mid' },
          children: [{ queue: name, data: { step: 'bad', fail: true }, opts: { attempts: 2 } }],
        },
        { queue: name, data: { step: 'ok' } },
      ],
    });
    const mid = flow.children[0]!;
    const bad = mid.children[0]!;
    const err = await refusal(() => q.waitFor(flow.id, { timeoutMs: 5000 }));
    expect(err.code).toBe('EMQJOBFAILED');
    expect((await q.get(bad.id))!).toMatchObject({ state: 'dead', attempts: 2 });
    expect((await q.get(mid.id))!).toMatchObject({
      state: 'dead',
      error: { message: `child ${bad.id} failed (dead)` },
    });
    expect((await q.get(flow.id))!).toMatchObject({
      state: 'dead',
      error: { message: `child ${mid.id} failed (dead)` },
    });
    const failed = (await streamEvents(raw, q, 'failed')).filter((e) => e.reason === 'child');
    expect(failed.map((e) => [e.id, e.child])).toEqual([
      [mid.id, bad.id],
      [flow.id, mid.id],
    ]);
    await within(Promise.all(cs.map((c) => c.idle())), 3000, 'idle consumers');
    expect((await q.counts()).waiting_children).toBe(0);
    // The other child still ran; the dead parent ignores it.
    expect((await q.get(flow.children[1]!.id))!.state).toBe('completed');
  });

  it('with continueOnChildFailure the parent runs anyway, seeing only the completed children', async ({
    mq,
    q,
    queueName: name,
    start,
  }) => {
    await start(2);
    const flow = await mq.flow({
      queue: name,
      data: { step: 'p' },
      opts: { continueOnChildFailure: true },
      children: [
        { queue: name, data: { step: 'bad', fail: true }, opts: { attempts: 1 } },
        { queue: name, data: { step: 'good' } },
      ],
    });
    expect(await q.waitFor(flow.id, { timeoutMs: 5000 })).toEqual({
      step: 'p',
      children: { [flow.children[1]!.id]: 'good' },
    });
  });

  it("with onChildFailure 'ignore' the parent runs and reads which children failed and why", async ({
    mq,
    raw,
    q,
    P,
    queueName: name,
    start,
  }) => {
    await start(1, async (job, ctx) => {
      if (job.data.fail) throw new Error(`no ${job.data.step}`);
      if (job.data.step !== 'p') return job.data.step;
      return { results: await ctx.childrenResults(), failures: await ctx.childrenFailures() };
    });
    const flow = await mq.flow({
      queue: name,
      data: { step: 'p' },
      opts: { onChildFailure: 'ignore' },
      children: [
        { queue: name, data: { step: 'bad', fail: true }, opts: { attempts: 1 } },
        { queue: name, data: { step: 'good' } },
      ],
    });
    const [bad, good] = flow.children.map((c) => c.id);
    expect(await q.waitFor(flow.id, { timeoutMs: 5000 })).toEqual({
      results: { [good!]: 'good' },
      failures: { [bad!]: 'dead: no bad' },
    });
    await q.remove(flow.id);
    expect(await raw.exists(`${P}job:${flow.id}:failures`)).toBe(0);
    await expect(
      mq.flow({ queue: name, data: {}, opts: { onChildFailure: 'skip' as never }, children: [] }),
    ).rejects.toMatchObject({ code: 'EMQINPUT' });
  });

  it('a cancelled or removed child fails its waiting parent', async ({ mq, raw, q, P, queueName: name }) => {
    const one = await mq.flow({
      queue: name,
      data: { step: 'p1' },
      children: [{ queue: name, data: { step: 'c' } }],
    });
    expect(await q.cancel(one.children[0]!.id)).toBe('cancelled');
    expect((await q.get(one.id))!).toMatchObject({
      state: 'dead',
      error: { message: `child ${one.children[0]!.id} failed (cancelled)` },
    });
    const two = await mq.flow({
      queue: name,
      data: { step: 'p2' },
      children: [{ queue: name, data: { step: 'c' } }],
    });
    expect(await q.remove(two.children[0]!.id)).toBe(true);
    expect((await q.get(two.id))!.error!.message).toBe(`child ${two.children[0]!.id} failed (removed)`);
    expect(await raw.zcard(`${P}waiting_children`)).toBe(0);
    expect(await raw.zrange(`${P}dead`, 0, -1)).toEqual([one.id, two.id]);
  });

  it('a child dead-lettered by the stalled sweep fails its parent', async ({ mq, q, P, queueName: name }) => {
    const flow = await mq.flow({
      queue: name,
      data: { step: 'p' },
      children: [{ queue: name, data: { step: 'c' } }],
    });
    await q.run('claim', [P, 1, 30]);
    await poll(
      () => q.sweepStalled({ maxStalled: 0 }),
      (r) => r.dead.length === 1,
      'the child to stall',
    );
    expect((await q.get(flow.id))!.state).toBe('dead');
  });
});

describe('admission', () => {
  it('refuses a child without a queue name, before the wire, and writes nothing', async ({
    mq,
    raw,
    P,
    queueName: name,
  }) => {
    const err = await refusal(() =>
      mq.flow({ queue: name, data: {}, children: [{ queue: 7 as unknown as string, data: {} }] }),
    );
    expect(err.code).toBe('EMQINPUT');
    expect(err.message).toMatch(/root.children\[0\] needs a queue name/);
    expect(await raw.keys(`${P}job:*`)).toEqual([]);
  });

  it('is atomic: a child id that exists fails the whole flow and writes nothing', async ({
    mq,
    raw,
    q,
    P,
    queueName: name,
  }) => {
    const taken = await q.enqueue({ step: 'taken' });
    const err = await refusal(() =>
      mq.flow({
        queue: name,
        data: { step: 'p' },
        children: [
          { queue: name, data: { step: 'c' } },
          { queue: name, data: {}, opts: { id: taken.id } },
        ],
      }),
    );
    expect(err.code).toBe('EMQSTATE');
    expect(await raw.keys(`${P}job:*`)).toEqual([`${P}job:${taken.id}`]);
    expect(await raw.zcard(`${P}pending`)).toBe(1);
  });

  it('answers duplicate for a root id that exists, writing nothing', async ({
    mq,
    raw,
    P,
    queueName: name,
  }) => {
    const first = await mq.flow({
      queue: name,
      data: { step: 'p' },
      opts: { id: 'JOBflow-root' },
      children: [{ queue: name, data: { step: 'c' } }],
    });
    expect(first.status).toBe('added');
    const again = await mq.flow({
      queue: name,
      data: { step: 'p' },
      opts: { id: 'JOBflow-root' },
      children: [{ queue: name, data: { step: 'c' } }],
    });
    expect(again.status).toBe('duplicate');
    expect(await raw.exists(`${P}job:${again.children[0]!.id}`)).toBe(0);
  });

  it('refuses dedupe on flow jobs and unknown fields', async ({ mq, queueName: name }) => {
    expect(
      (
        await refusal(() =>
          mq.flow({ queue: name, data: {}, opts: { dedupe: { key: 'k', mode: 'throttle' } } as never }),
        )
      ).code,
    ).toBe('EMQINPUT');
    expect((await refusal(() => mq.flow({ queue: name, data: {}, child: [] } as never))).code).toBe(
      'EMQINPUT',
    );
  });

  it('refuses a child that is not a flow job with EMQINPUT naming its place in the tree, writing nothing', async ({
    mq,
    raw,
    P,
    queueName: name,
  }) => {
    const cases: [unknown, string][] = [
      [[undefined], 'the flow job at root.children[0] must be an object'],
      [[{ queue: name, data: {} }, null], 'the flow job at root.children[1] must be an object'],
      [
        [{ queue: name, data: {}, children: [7] }],
        'the flow job at root.children[0].children[0] must be an object',
      ],
      [[{ queue: name, data: {}, children: 'x' }], 'root.children[0].children must be an array'],
    ];
    for (const [children, message] of cases) {
      const err = await refusal(() => mq.flow({ queue: name, data: {}, children } as never));
      expect(err.code).toBe('EMQINPUT');
      expect(err.message).toContain(message);
    }
    expect(await raw.keys(`${P}*`)).toEqual([]);
  });

  it('a parent removed while waiting takes its results with it, and its children end normally', async ({
    mq,
    raw,
    q,
    P,
    queueName: name,
  }) => {
    const flow = await mq.flow({
      queue: name,
      data: { step: 'p' },
      children: [
        { queue: name, data: { step: 'a' } },
        { queue: name, data: { step: 'b' } },
      ],
    });
    const [flat] = (await q.run('claim', [P, 2, 30_000])) as [(string | number)[]];
    await q.run('complete', [P, 30_000, 0, flat[0]!, flat[1]!, '"a"']);
    expect(await raw.hgetall(`${P}job:${flow.id}:results`)).toEqual({ [String(flat[0])]: '"a"' });
    expect(await q.remove(flow.id)).toBe(true);
    expect(await raw.exists(`${P}job:${flow.id}`, `${P}job:${flow.id}:results`)).toBe(0);
    expect(await raw.zcard(`${P}waiting_children`)).toBe(0);
    const [statuses] = (await q.run('complete', [P, 30_000, 0, flat[7]!, flat[8]!, '"b"'])) as [string[]];
    expect(statuses).toEqual(['OK']);
    expect(await raw.exists(`${P}job:${flow.id}`, `${P}job:${flow.id}:results`)).toBe(0);
  });
});
