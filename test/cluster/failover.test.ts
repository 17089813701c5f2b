// EchoMQ on a real Redis Cluster of 3 primaries + 3 replicas, a primary killed mid-run: queues on
// every shard with delayed jobs, retries, a lane, flows whose children sit on other shards, a
// scheduler and an events reader each, enqueues and completions acknowledged with durability
// (WAIT to the primary that took each write). The replica of the killed primary is promoted and
// the old primary comes back as its replica. Every acknowledged job ends once (one end state),
// none starts before its instant, none is lost. Nothing here measures time: the waits are bounds.
import type { Cluster } from 'ioredis';
import { describe, expect, it } from 'vitest';
import type { Consumer } from '../../src/consumer/consumer.js';
import { EchoMQError } from '../../src/core/errors.js';
import type { QueueEvent } from '../../src/core/types.js';
import type { QueueEvents } from '../../src/events/reader.js';
import { EchoMQ } from '../../src/queue/echomq.js';
import type { Queue } from '../../src/queue/queue.js';
import { keySlot } from '../../src/wire/slot.js';
import { clusterForFile, type RedisCluster } from '../support/redis-cluster.js';
import { poll } from '../support/wait.js';

const found = await clusterForFile({ masters: 3, replicas: 1 });
const env = found as { cluster: RedisCluster };

type Data = { n: number; failOnce?: boolean; lane?: boolean };

/** `perShard` queue names for each primary, found by their hash tag's slot. */
async function queuesOnEveryShard(
  cluster: RedisCluster,
  base: string,
  perShard: number,
): Promise<string[][]> {
  const primaries = await cluster.primaries();
  const by = new Map<number, string[]>(primaries.map((p) => [p.port, []]));
  for (let i = 0; [...by.values()].some((l) => l.length < perShard); i++) {
    const name = `${base}-${i}`;
    const list = by.get((await cluster.primaryOf(keySlot(`emq:{${name}}:`))).port)!;
    if (list.length < perShard) list.push(name);
  }
  return [...by.values()];
}

/** Retries an enqueue by its id until it is acknowledged (a retried id is `duplicate`: safe). */
async function acknowledged(call: () => Promise<unknown>): Promise<void> {
  for (let i = 0; ; i++) {
    try {
      await call();
      return;
    } catch (err) {
      if (i > 200 || (err instanceof EchoMQError && err.code === 'EMQINPUT')) throw err; // ~40 s of failover: far past the bound below
      await new Promise((r) => setTimeout(r, 200));
    }
  }
}

describe.skipIf(!found.cluster)('EchoMQ on a Redis Cluster with replicas, a primary killed mid-run', () => {
  it('refuses durability asking more replicas than a shard has', async () => {
    const client = env.cluster.client();
    try {
      await expect(EchoMQ.connect({ redis: client, durability: { replicas: 2 } })).rejects.toMatchObject({
        code: 'EMQINPUT',
        message: expect.stringMatching(/asks for 2 replica\(s\), but the shard of .* has 1/),
      });
    } finally {
      client.disconnect();
    }
  });

  it('ends every acknowledged job once, none early, across the failover', async () => {
    const cluster = env.cluster;
    const client: Cluster = cluster.client();
    const mq = await EchoMQ.connect({ redis: client, durability: { replicas: 1, timeoutMs: 1000 } });
    const shards = await queuesOnEveryShard(cluster, `fo${process.pid}`, 2);
    const names = shards.flat();
    const queues = new Map<string, Queue<Data>>(names.map((n) => [n, mq.queue<Data>(n)]));
    const consumers: Consumer<Data>[] = [];
    const readers: QueueEvents[] = [];
    const completedEvents = new Map<string, Set<string>>(names.map((n) => [n, new Set()]));
    const acked = new Map<string, Set<string>>(names.map((n) => [n, new Set()]));
    const inLane = new Map<string, number>(names.map((n) => [n, 0]));
    let laneOverrun = 0;
    try {
      for (const [name, q] of queues) {
        await q.lanes.configure('lane-a', { concurrency: 1 });
        const r = q.events({ blockMs: 500 });
        r.subscribe((e: QueueEvent) => {
          if (e.event === 'completed' && e.id) completedEvents.get(name)!.add(e.id);
        });
        r.on('error', () => {}); // the failover drops its connection: it reads on from its id
        readers.push(r);
      }
      await Promise.all(readers.map((r) => r.ready));
      for (const [name, q] of queues) {
        const c = q.consume(
          async (job) => {
            const lane = job.data.lane === true;
            if (lane && inLane.set(name, inLane.get(name)! + 1).get(name)! > 1) laneOverrun += 1;
            try {
              await new Promise((r) => setTimeout(r, 5));
              if (job.data.failOnce && job.attempts === 1) throw new Error('first attempt fails');
              return job.data.n;
            } finally {
              if (lane) inLane.set(name, inLane.get(name)! - 1);
            }
          },
          { concurrency: 4, beatMs: 200, leaseMs: 4000 },
        );
        c.on('error', () => {}); // legs fail while the shard fails over; the beat goes on
        consumers.push(c);
      }

      // A scheduler on each shard's first queue, and a flow whose children sit on the other shards.
      for (const [first] of shards)
        await queues.get(first!)!.schedulers.upsert('tick', { every: 300, limit: 5 });
      const flow = await mq.flow({
        queue: shards[0]![1]!,
        data: { n: -1 },
        children: shards.map(([first]) => ({ queue: first!, data: { n: -2 } })),
      });

      let serial = 0;
      const produce = async (count: number) => {
        const work: Promise<void>[] = [];
        for (let i = 0; i < count; i++) {
          for (const [name, q] of queues) {
            const n = serial++;
            const id = `JOBfo${n}`;
            const opts = {
              id,
              ...(n % 3 === 0 ? { group: 'lane-a' } : {}),
              ...(n % 5 === 0 ? { attempts: 3, backoff: { kind: 'fixed' as const, ms: 50 } } : {}),
            };
            const data: Data = {
              n,
              ...(n % 5 === 0 ? { failOnce: true } : {}),
              ...(n % 3 === 0 ? { lane: true } : {}),
            };
            work.push(
              acknowledged(() =>
                n % 4 === 0 ? q.enqueueIn(data, 50 + (n % 7) * 40, opts) : q.enqueue(data, opts),
              ).then(() => void acked.get(name)!.add(id)),
            );
          }
        }
        await Promise.all(work);
      };

      await produce(20);
      // Kill the primary of the first shard while the second half is being produced and run.
      const victim = await cluster.primaryOf(keySlot(`emq:{${shards[0]![0]}}:`));
      const second = produce(20);
      await cluster.failover(victim);
      await second;
      await cluster.rejoin(victim); // back as the promoted one's replica: WAIT can confirm again
      await produce(10);

      for (const [name, q] of queues) {
        const want = acked.get(name)!;
        await poll(
          async () => {
            const ends = await Promise.all(
              [...want].map(async (id) => (await q.get(id).catch(() => null))?.state),
            );
            return ends.filter((s) => s === 'completed').length;
          },
          (done) => done === want.size,
          `every acknowledged job of ${name} completed`,
          60_000,
        );
        for (const id of want) {
          const v = (await q.get(id))!;
          // Ended once: in the completed set, in no other state's set.
          expect(v.state).toBe('completed');
          expect(Number(await client.zscore(q.keys.key('completed'), id))).toBeGreaterThan(0);
          expect(await client.zscore(q.keys.key('dead'), id)).toBeNull();
          // Never early: a delayed job started at or after its instant (server ms).
          if (v.runAt !== undefined) expect(v.startedAt!).toBeGreaterThanOrEqual(v.runAt);
        }
        // The reader saw each completion (a completion it read on the old primary may be read again).
        await poll(
          () => [...want].filter((id) => !completedEvents.get(name)!.has(id)).length,
          (missing) => missing === 0,
          `the events reader of ${name} to see every completion`,
          20_000,
        );
      }
      expect(laneOverrun).toBe(0);

      // The cross-shard flow's parent ran once its children (on every shard) had.
      const parent = mq.queue(shards[0]![1]!);
      await poll(
        async () => (await parent.get(flow.id))?.state,
        (s) => s === 'completed',
        'the flow parent to complete',
        30_000,
      );
      // Each scheduler made its 5 occurrences (limit) and each ended completed.
      for (const [first] of shards) {
        const q = queues.get(first!)!;
        await poll(
          async () => (await q.schedulers.get('tick'))?.ended,
          (ended) => ended === 'limit',
          `the scheduler on ${first} to make its occurrences`,
          30_000,
        );
        expect((await q.schedulers.get('tick'))!.iterationCount).toBe(5);
      }
      // Nothing is left outside an end state, and no job of any kind was dead-lettered.
      for (const q of queues.values()) {
        await poll(
          () => q.counts(),
          (c) => c.pending + c.active + c.scheduled + c.waiting_children === 0,
          `${q.name} to drain`,
          30_000,
        );
        expect((await q.counts()).dead).toBe(0);
      }
    } finally {
      await Promise.all(consumers.map((c) => c.close({ timeoutMs: 1000 })));
      await Promise.all(readers.map((r) => r.close()));
      await mq.close();
      client.disconnect();
    }
  }, 180_000);
});
