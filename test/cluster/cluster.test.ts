// Scale-out on a real local Redis Cluster (3 masters): EchoMQ on an ioredis Cluster client, many
// queues spread over the shards by their hash tag, each with its own consumer, an events reader,
// lanes, delays, cancellation, and every end state reached.
import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { Cluster } from 'ioredis';
import { describe, expect, it, vi } from 'vitest';
import type { QueueEvent } from '../../src/core/types.js';
import type { QueueEvents } from '../../src/events/reader.js';
import { Inspector } from '../../src/inspect/inspector.js';
import { EchoMQ } from '../../src/queue/echomq.js';
import { keySlot } from '../../src/wire/slot.js';
import { clusterForFile, type RedisCluster } from '../support/redis-cluster.js';
import { ROOT } from '../support/run-process.js';

// No replicas: these tests kill no primary.
const found = await clusterForFile({ replicas: 0 });
const env = found as { cluster: RedisCluster };

async function until(what: string, check: () => Promise<boolean> | boolean, timeoutMs = 20_000) {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** A queue's slot, as the cluster computes it from the hash tag. */
function keySlotOf(queue: string): number {
  return keySlot(`emq:{${queue}}:`);
}

/** slot -> the port of the master serving it, from CLUSTER SLOTS. */
async function slotOwners(client: Cluster): Promise<(slot: number) => number> {
  const ranges = (await client.cluster('SLOTS')) as unknown as [number, number, [string, number]][];
  return (slot) => {
    const r = ranges.find(([lo, hi]) => slot >= lo && slot <= hi);
    if (!r) throw new Error(`slot ${slot} is not served`);
    return r[2][1];
  };
}

describe.skipIf(!found.cluster)('EchoMQ on a Redis Cluster', () => {
  it('spreads queues over the shards and runs every verb on each of them', async () => {
    const client = new Cluster(env.cluster.startupNodes);
    const mq = await EchoMQ.connect({ redis: client });
    const names = Array.from({ length: 12 }, (_, i) => `cl-${i}`);
    const queues = names.map((n) => mq.queue<{ n: number; fail?: boolean; hold?: boolean }>(n));
    const consumers: {
      close(o: { timeoutMs: number }): Promise<void>;
      on(e: string, f: (err: unknown) => void): unknown;
    }[] = [];
    const readers: QueueEvents[] = [];
    try {
      // Every key of a queue hashes to one slot; the queues land on more than one master.
      const owner = await slotOwners(client);
      const ports = new Set<number>();
      for (const q of queues) {
        const slots = new Set<number>();
        for (const k of [
          q.keys.key('meta'),
          q.keys.key('pending'),
          q.keys.key('events'),
          q.keys.job('JOBX'),
          q.keys.lane('a'),
        ]) {
          slots.add(Number(await client.cluster('KEYSLOT', k)));
        }
        expect(slots.size).toBe(1);
        ports.add(owner([...slots][0]!));
      }
      expect(ports.size).toBeGreaterThanOrEqual(2);

      const errors: unknown[] = [];
      const seen = new Map<string, QueueEvent[]>();
      for (const q of queues) {
        const list: QueueEvent[] = [];
        seen.set(q.name, list);
        const r = q.events({ blockMs: 500 });
        r.subscribe((e) => list.push(e));
        r.on('error', (err) => errors.push(err));
        readers.push(r);
      }
      await Promise.all(readers.map((r) => r.ready));

      const cancelled: string[] = [];
      for (const q of queues) {
        await q.lanes.configure('lane-a', { concurrency: 1 });
        await q.enqueue({ n: 1 });
        await q.enqueue({ n: 2 }, { group: 'lane-a' });
        await q.enqueueMany([
          { data: { n: 3 } },
          { data: { n: 4 }, opts: { group: 'lane-a' } },
          { data: { n: 5 }, opts: { group: 'lane-b', priority: 2 } },
        ]);
        await q.enqueueIn({ n: 6 }, 150);
        await q.enqueueAt({ n: 7 }, Date.now() + 100);
        await q.enqueue({ n: 8, fail: true }, { attempts: 1 });
        // A waiting job cancelled at once, and a running one cancelled through its signal.
        const later = await q.enqueueIn({ n: 9 }, 60_000);
        expect(await q.cancel(later.id)).toBe('cancelled');
        const held = await q.enqueue({ n: 10, hold: true });
        cancelled.push(held.id);
      }

      for (const [i, q] of queues.entries()) {
        consumers.push(
          q.consume(
            async (job, ctx) => {
              if (job.data.fail) throw new Error('boom');
              if (job.data.hold) {
                await new Promise<void>((resolve) => {
                  if (ctx.signal.aborted) resolve();
                  ctx.signal.addEventListener('abort', () => resolve());
                });
                throw ctx.signal.reason;
              }
              return job.data.n * 10;
            },
            { concurrency: 4, beatMs: 200, leaseMs: 3000, extendMs: 100 },
          ),
        );
        consumers[i]!.on('error', (err) => errors.push(err));
        consumers[i]!.on('degraded', (err) => errors.push(err));
        const heldId = cancelled[i]!;
        await until(`job ${heldId} active`, async () => (await q.get(heldId))?.state === 'active');
        expect(await q.cancel(heldId)).toBe('requested');
      }

      for (const q of queues) {
        await until(
          `queue ${q.name} to finish`,
          async () => {
            const c = await q.counts();
            return c.completed === 7 && c.dead === 1 && c.cancelled === 2;
          },
          30_000,
        );
        const c = await q.counts();
        expect(c).toMatchObject({ scheduled: 0, pending: 0, active: 0, waiting_children: 0 });
      }

      // The readers saw every transition of their own queue (and only of it).
      for (const q of queues) {
        await until(`events of ${q.name}`, () => {
          const evs = seen.get(q.name)!;
          return evs.filter((e) => e.event === 'completed').length === 7;
        });
        const evs = seen.get(q.name)!;
        const ids = new Set(evs.map((e) => e.id).filter(Boolean));
        for (const id of ids) expect(await q.get(id)).not.toBeNull();
        expect(evs.some((e) => e.event === 'delayed')).toBe(true);
        expect(evs.some((e) => e.event === 'retries_exhausted')).toBe(true);
        expect(evs.filter((e) => e.event === 'failed' && e.fields.reason === 'cancelled').length).toBe(2);
      }

      // Results round-trip through the shard that holds the queue.
      const q0 = queues[0]!;
      const done = await client.zrange(q0.keys.key('completed'), 0, -1);
      const results = await Promise.all(done.map(async (id) => (await q0.get(id))!.result));
      expect(results.sort()).toEqual([10, 20, 30, 40, 50, 60, 70].sort());

      // No leg of any consumer or reader failed on the cluster connections.
      expect(errors).toEqual([]);

      // The queue registry is one global key, on its own slot.
      expect((await client.smembers('emq:queues')).sort()).toEqual([...names].sort());
    } finally {
      await Promise.all(consumers.map((c) => c.close({ timeoutMs: 1000 })));
      await Promise.all(readers.map((r) => r.close()));
      await mq.close();
      client.disconnect();
    }
  }, 90_000);

  it('warns at connect when any master may evict keys', async () => {
    const node = env.cluster.nodes[1]!.client();
    const spy = vi.spyOn(process, 'emitWarning').mockImplementation(() => {});
    const client = new Cluster(env.cluster.startupNodes);
    try {
      await node.config('SET', 'maxmemory-policy', 'volatile-lru');
      await (await EchoMQ.connect({ redis: client })).close();
      const warnings = spy.mock.calls.filter(([, o]) => (o as { code?: string })?.code === 'EMQEVICTION');
      expect(warnings).toHaveLength(1);
      expect(String(warnings[0]![0])).toMatch(/maxmemory-policy is volatile-lru/);
    } finally {
      spy.mockRestore();
      await node.config('SET', 'maxmemory-policy', 'noeviction');
      await node.quit();
      client.disconnect();
    }
  });

  it('waitFor and a delayed job work through the cluster client', async () => {
    const client = new Cluster(env.cluster.startupNodes);
    const mq = await EchoMQ.connect({ redis: client });
    const q = mq.queue<number, number>('cl-wait');
    const consumer = q.consume(async (job) => job.data + 1, { beatMs: 200 });
    try {
      const { id } = await q.enqueueIn(41, 200);
      expect(await q.waitFor(id, { timeoutMs: 10_000 })).toBe(42);
      const view = await q.get(id);
      // The job never runs before its instant, and starts soon after it (the bound is loose: a
      // loaded machine; bench/cluster.ts measures how soon).
      expect(view!.startedAt!).toBeGreaterThanOrEqual(view!.runAt!);
      expect(view!.startedAt! - view!.runAt!).toBeLessThan(1500);
    } finally {
      await consumer.close({ timeoutMs: 1000 });
      await mq.close();
      client.disconnect();
    }
  }, 30_000);

  it('lists the queues of every shard in the Inspector and the CLI (the registry is on its own slot)', async () => {
    const client = new Cluster(env.cluster.startupNodes);
    const mq = await EchoMQ.connect({ redis: client });
    const names = Array.from({ length: 6 }, (_, i) => `ls${process.pid}-${i}`);
    try {
      for (const [i, n] of names.entries()) for (let k = 0; k <= i; k++) await mq.queue(n).enqueue({ k });
      const owner = await slotOwners(client);
      const shards = new Set(names.map((n) => owner(Number(keySlotOf(n)))));
      expect(shards.size).toBeGreaterThanOrEqual(2);
      const listed = await new Inspector(mq).queues();
      for (const [i, n] of names.entries()) {
        expect(listed.find((q) => q.name === n)).toMatchObject({ counts: { pending: i + 1 } });
      }
      // The CLI, given any one node's URL, finds it is a cluster and reads every shard.
      const node = env.cluster.nodes[2]!;
      const { stdout } = await promisify(execFile)(
        process.execPath,
        [join(ROOT, 'dist/cli/index.js'), '--url', node.url, '--json', 'queues'],
        { cwd: ROOT, env: { ...process.env, NO_COLOR: '1' }, timeout: 30_000 },
      );
      const rows = JSON.parse(stdout) as { name: string; counts: { pending: number } }[];
      for (const [i, n] of names.entries()) {
        expect(rows.find((q) => q.name === n)).toMatchObject({ counts: { pending: i + 1 } });
      }
    } finally {
      await mq.close();
      client.disconnect();
    }
  }, 60_000);
});
