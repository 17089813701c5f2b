// The module's timers on a Redis Cluster (SPEC 26.1 point 11), on a real local cluster of 3
// primaries with the module loaded on each, its timers on. `emq:queues` lives on one node, so
// each node arms from its own keys: the queues of its slots, and only those. Proven: delayed
// jobs of queues spread over every node reach pending at their instant with no consumer
// anywhere, each once; each node's EMQ.TIMERS LIST names exactly the queues whose slot it
// serves; and across a resharding the timers leave the moving slot alone (nothing released by
// either node while its keys are split), then the node the slot moved to releases its jobs.
import type { Redis } from 'ioredis';
import { describe, expect, it } from 'vitest';
import { EchoMQ } from '../../src/queue/echomq.js';
import { keySlot } from '../../src/wire/slot.js';
import { loadModuleArgs, nativeModule } from '../support/native-module.js';
import { serverNow } from '../support/observe.js';
import { clusterForFile, type RedisCluster } from '../support/redis-cluster.js';
import type { RedisServer } from '../support/redis-server.js';
import { expectOnceOnTime, listedQueues, timerCounters } from '../support/timer-observe.js';
import { poll } from '../support/wait.js';

const found = nativeModule.path
  ? await clusterForFile({ replicas: 0, loadModule: loadModuleArgs({ timers: 'on' }) })
  : { cluster: undefined, reason: nativeModule.missing };
const cluster = found.cluster as RedisCluster;

const slotOf = (queue: string) => keySlot(`emq:{${queue}}:`);

/** Delayed jobs through a cluster client: queue → (id → run-at). */
async function delayedOn(
  queues: string[],
  delay: (n: number) => number,
  perQueue: number,
): Promise<Map<string, Map<string, number>>> {
  const mq = await EchoMQ.connect({ redis: cluster.client() });
  try {
    const out = new Map<string, Map<string, number>>();
    for (const name of queues) {
      const q = mq.queue(name);
      const ids = await Promise.all(
        Array.from({ length: perQueue }, async (_, n) => (await q.enqueueIn({ n }, delay(n))).id),
      );
      const runAt = new Map<string, number>();
      for (const id of ids) runAt.set(id, (await q.get(id))!.runAt!);
      out.set(name, runAt);
    }
    return out;
  } finally {
    await mq.close();
  }
}

/** Runs `f` with a plain client on `node`. */
async function on<T>(node: RedisServer, f: (raw: Redis) => Promise<T>): Promise<T> {
  const raw = node.client();
  try {
    return await f(raw);
  } finally {
    raw.disconnect();
  }
}

describe.skipIf(!found.cluster)(
  `the module's timers on a Redis Cluster${found.reason ? ` (${found.reason})` : ''}`,
  () => {
    it('each node releases the queues of its own slots at their instant, and lists only those', async () => {
      const names = Array.from({ length: 9 }, (_, i) => `tc-${i}`);
      const owners = new Map<string, RedisServer>();
      for (const name of names) owners.set(name, await cluster.primaryOf(slotOf(name)));
      expect(new Set(owners.values()).size, 'the queues land on every primary').toBe(3);

      const jobs = await delayedOn(names, (n) => 50 + n * 40, 12);
      for (const name of names) {
        await on(owners.get(name)!, async (raw) => {
          await poll(
            () => raw.zcard(`emq:{${name}}:pending`),
            (c) => c === 12,
            `${name} released on its node`,
            20_000,
          );
          await expectOnceOnTime(raw, name, jobs.get(name)!, 'waiting');
        });
      }
      for (const node of await cluster.primaries()) {
        const mine = names.filter((n) => owners.get(n) === node).map((n) => `emq:{${n}}:`);
        await on(node, async (raw) => {
          expect((await listedQueues(raw)).sort(), `node ${node.port} lists its own queues only`).toEqual(
            mine.sort(),
          );
          expect((await timerCounters(raw)).released).toBe(mine.length * 12);
        });
      }
    });

    it('leave a slot alone while it moves, and release its jobs on the node it moved to', async () => {
      const name = 'tc-moving';
      const slot = slotOf(name);
      const from = await cluster.primaryOf(slot);
      const to = (await cluster.primaries()).find((n) => n !== from)!;
      const idOf = (node: RedisServer) => on(node, async (raw) => String(await raw.cluster('MYID')));
      const [fromId, toId] = [await idOf(from), await idOf(to)];
      const jobs = (await delayedOn([name], (n) => 3000 + n * 10, 10)).get(name)!;
      const last = Math.max(...jobs.values());

      await on(to, (raw) => raw.cluster('SETSLOT', slot, 'IMPORTING', fromId));
      await on(from, (raw) => raw.cluster('SETSLOT', slot, 'MIGRATING', toId));
      await on(from, async (raw) => {
        // Past every instant, and a retry, while the slot is migrating: nothing released.
        await poll(
          () => serverNow(raw),
          (now) => now > last + 1500,
          'the clock past the instants',
          20_000,
        );
        expect(await raw.zcard(`emq:{${name}}:schedule`)).toBe(jobs.size);
        const events = await raw.xrange(`emq:{${name}}:events`, '-', '+');
        expect(events.some(([, f]) => f.includes('waiting'))).toBe(false);
        // The keys move (MIGRATE writes them on `to` with RESTORE), then the slot is `to`'s.
        for (;;) {
          const keys = (await raw.cluster('GETKEYSINSLOT', slot, 100)) as string[];
          if (keys.length === 0) break;
          await raw.call('MIGRATE', '127.0.0.1', String(to.port), '', '0', '5000', 'KEYS', ...keys);
        }
      });
      // An importing node answers a key of the slot after ASKING only (the next command).
      const releasedMidMove = await on(to, async (raw) => {
        await raw.call('ASKING');
        return raw.zcard(`emq:{${name}}:pending`);
      });
      expect(releasedMidMove, 'nothing released mid-move').toBe(0);
      for (const node of [to, from, ...(await cluster.primaries()).filter((n) => n !== to && n !== from)]) {
        await on(node, (raw) => raw.cluster('SETSLOT', slot, 'NODE', toId));
      }
      await on(to, async (raw) => {
        await poll(
          () => raw.zcard(`emq:{${name}}:pending`),
          (c) => c === jobs.size,
          'released on the node the slot moved to',
          20_000,
        );
        await expectOnceOnTime(raw, name, jobs, 'waiting');
        expect(await listedQueues(raw)).toContain(`emq:{${name}}:`);
      });
      expect(await on(from, listedQueues)).not.toContain(`emq:{${name}}:`);
    });
  },
);
