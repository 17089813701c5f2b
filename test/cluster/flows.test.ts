// Flows across queues on a real local Redis Cluster (3 masters): queues on different slots are
// admitted per queue (parent first) and their children reach the parent through the hand-off;
// { atomic: true } refuses such a flow with nothing written; queues whose hash tags share a slot
// are admitted in one atomic call. keySlot agrees with CLUSTER KEYSLOT.
import { Cluster } from 'ioredis';
import { describe, expect, it } from 'vitest';
import type { Handler } from '../../src/core/types.js';
import { EchoMQ } from '../../src/queue/echomq.js';
import { keySlot } from '../../src/wire/slot.js';
import { clusterForFile, type RedisCluster } from '../support/redis-cluster.js';

// No replicas: these tests kill no primary.
const found = await clusterForFile({ replicas: 0 });
const env = found as { cluster: RedisCluster };

type Step = { step: string };
const worker: Handler<Step, unknown> = async (job, ctx) => {
  const results = await ctx.childrenResults();
  return Object.keys(results).length === 0 ? job.data.step : results;
};

/** A queue name, after `base`, whose hash tag maps to slot `slot` (or any other slot). */
function nameIn(base: string, slot: number | undefined, same: boolean): string {
  for (let i = 0; ; i++) {
    const name = `${base}-${i}`;
    const s = keySlot(`emq:{${name}}:`);
    if (slot === undefined || (s === slot) === same) return name;
  }
}

describe.skipIf(!found.cluster)('flows across queues on a Redis Cluster', () => {
  it('admits queues on different slots per queue, refuses them atomically, and hands each child to its parent once', async () => {
    const client = new Cluster(env.cluster.startupNodes);
    const mq = await EchoMQ.connect({ redis: client });
    const a = nameIn(`xa${process.pid}`, undefined, true);
    const b = nameIn(`xb${process.pid}`, keySlot(`emq:{${a}}:`), false);
    const c = nameIn(`xc${process.pid}`, keySlot(`emq:{${a}}:`), false);
    const consumers: { close(o: { timeoutMs: number }): Promise<void> }[] = [];
    try {
      for (const n of [a, b]) {
        expect(Number(await client.cluster('KEYSLOT', `emq:{${n}}:meta`))).toBe(keySlot(`emq:{${n}}:meta`));
      }
      const tree = {
        queue: a,
        data: { step: 'root' },
        children: [
          { queue: a, data: { step: 'a1' } },
          { queue: b, data: { step: 'b1' }, children: [{ queue: c, data: { step: 'c1' } }] },
        ],
      };
      // Atomic admission cannot reach three slots: refused before the wire, nothing written.
      const ids = { opts: { id: 'JOBxroot' } };
      await expect(mq.flow({ ...tree, ...ids }, { atomic: true })).rejects.toMatchObject({
        code: 'EMQINPUT',
        message: expect.stringMatching(/different Redis Cluster hash slots.*nothing was written/),
      });
      expect(await client.exists(`emq:{${a}}:job:JOBxroot`)).toBe(0);

      const flow = await mq.flow(tree);
      const [a1, b1] = flow.children;
      const c1 = b1!.children[0]!;
      const qa = mq.queue(a);
      expect(await qa.flow(flow.id)).toMatchObject({
        state: 'waiting_children',
        children: [
          { id: a1!.id, queue: a, state: 'pending' },
          {
            id: b1!.id,
            queue: b,
            state: 'waiting_children',
            children: [{ id: c1.id, queue: c, state: 'pending' }],
          },
        ],
      });
      for (const n of [a, b, c]) {
        consumers.push(mq.queue<Step>(n).consume(worker, { beatMs: 100, concurrency: 2 }));
      }
      const result = await qa.waitFor(flow.id, { timeoutMs: 20_000 });
      expect(result).toEqual({ [a1!.id]: 'a1', [b1!.id]: { [c1.id]: 'c1' } });
      for (const n of [a, b, c]) expect(await client.zcard(`emq:{${n}}:notices`)).toBe(0);
      expect(await client.smembers(`emq:{${a}}:job:${flow.id}:processed`)).toEqual(
        expect.arrayContaining([a1!.id, `emq:{${b}}:${b1!.id}`]),
      );
    } finally {
      await Promise.all(consumers.map((x) => x.close({ timeoutMs: 0 })));
      await mq.close();
    }
  }, 60_000);

  it('admits queues whose hash tags share a slot in one atomic call', async () => {
    const client = new Cluster(env.cluster.startupNodes);
    const mq = await EchoMQ.connect({ redis: client });
    const a = nameIn(`ya${process.pid}`, undefined, true);
    const b = nameIn(`yb${process.pid}`, keySlot(`emq:{${a}}:`), true);
    try {
      expect(Number(await client.cluster('KEYSLOT', `emq:{${b}}:meta`))).toBe(
        Number(await client.cluster('KEYSLOT', `emq:{${a}}:meta`)),
      );
      const flow = await mq.flow(
        { queue: a, data: { step: 'root' }, children: [{ queue: b, data: { step: 'b1' } }] },
        { atomic: true },
      );
      expect(flow.status).toBe('added');
      expect((await mq.queue(b).get(flow.children[0]!.id))!.state).toBe('pending');
      expect(await client.hget(`emq:{${b}}:job:${flow.children[0]!.id}`, 'parent')).toBe(
        `emq:{${a}}:${flow.id}`,
      );
    } finally {
      await mq.close();
    }
  }, 60_000);
});
