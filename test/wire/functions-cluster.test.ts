// The scripts by FCALL on a real Redis Cluster (3 primaries + 1 replica each). FUNCTION LOAD is per
// node: the library must be on each primary a queue's slot lives on, also after a resharding moves
// a queue to a primary that lost it, a FUNCTION FLUSH on one node under a running consumer, and a
// failover (a replica has the library by replication, so its promotion needs no load). INFO
// commandstats on each node says which command carried the verbs. Nothing here measures time.
import type { Cluster, Redis } from 'ioredis';
import { afterEach, describe, expect, it } from 'vitest';
import { EchoMQ } from '../../src/queue/echomq.js';
import type { Queue } from '../../src/queue/queue.js';
import { library } from '../../src/wire/functions.js';
import { keySlot } from '../../src/wire/slot.js';
import { clusterForFile, type RedisCluster } from '../support/redis-cluster.js';
import type { RedisServer } from '../support/redis-server.js';
import { poll } from '../support/wait.js';

const found = await clusterForFile({ masters: 3, replicas: 1 });
const env = found as { cluster: RedisCluster };

const slotOf = (queue: string) => keySlot(`emq:{${queue}}:`);

/** `perShard` queue names on each primary now, found by their hash tag's slot. */
async function queuesOnEveryShard(base: string, perShard: number): Promise<Map<RedisServer, string[]>> {
  const by = new Map<RedisServer, string[]>((await env.cluster.primaries()).map((p) => [p, []]));
  for (let i = 0; [...by.values()].some((l) => l.length < perShard); i++) {
    const name = `${base}-${i}`;
    const owner = await env.cluster.primaryOf(slotOf(name));
    const list = [...by].find(([p]) => p.port === owner.port)![1];
    if (list.length < perShard) list.push(name);
  }
  return by;
}

/** Script calls and library loads a node ran since its last RESETSTAT. */
async function stats(node: RedisServer) {
  const c = node.client();
  try {
    const info = await c.info('commandstats');
    const count = (cmd: string) => Number(new RegExp(`cmdstat_${cmd}:calls=(\\d+)`).exec(info)?.[1] ?? 0);
    return {
      fcall: count('fcall'),
      evalsha: count('evalsha'),
      eval: count('eval'),
      load: count('function\\|load'),
      wait: count('wait'),
    };
  } finally {
    c.disconnect();
  }
}

async function onEveryNode<T>(fn: (c: Redis) => Promise<T>): Promise<T[]> {
  return Promise.all(
    env.cluster.nodes
      .filter((n) => n.running)
      .map(async (n) => {
        const c = n.client();
        try {
          return await fn(c);
        } finally {
          c.disconnect();
        }
      }),
  );
}

async function libraries(node: RedisServer): Promise<string[]> {
  const c = node.client();
  try {
    return ((await c.call('FUNCTION', 'LIST')) as unknown[][]).map((e) => String(e[1]));
  } finally {
    c.disconnect();
  }
}

/**
 * Moves `slot` with its keys from `from` to `to` as redis-cli --cluster reshard does: IMPORTING
 * and MIGRATING, MIGRATE of every key, then SETSLOT NODE on every primary.
 */
async function moveSlot(slot: number, from: RedisServer, to: RedisServer): Promise<number> {
  const src = from.client();
  const dst = to.client();
  try {
    const srcId = (await src.cluster('MYID')) as string;
    const dstId = (await dst.cluster('MYID')) as string;
    await dst.cluster('SETSLOT', slot, 'IMPORTING', srcId);
    await src.cluster('SETSLOT', slot, 'MIGRATING', dstId);
    let moved = 0;
    for (;;) {
      const keys = (await src.cluster('GETKEYSINSLOT', slot, 50)) as string[];
      if (keys.length === 0) break;
      await src.migrate('127.0.0.1', to.port, '', 0, 10_000, 'KEYS', ...keys);
      moved += keys.length;
    }
    await dst.cluster('SETSLOT', slot, 'NODE', dstId);
    await src.cluster('SETSLOT', slot, 'NODE', dstId);
    await onEveryNode((c) => c.cluster('SETSLOT', slot, 'NODE', dstId).catch(() => undefined));
    return moved;
  } finally {
    src.disconnect();
    dst.disconnect();
  }
}

/** Enqueues `n` jobs on each queue, consumes them, and resolves with the handler's runs per job. */
async function runAll(
  queues: Queue<number, number>[],
  n: number,
  /** Runs inside each handler: the jobs started so far, in all and on this job's queue. */
  during: (done: number, onQueue: number, queue: string) => Promise<void> | void,
  enqueued: () => Promise<void> = async () => {},
): Promise<Map<string, number>> {
  const runs = new Map<string, number>();
  const ids: [Queue<number, number>, string][] = [];
  for (const q of queues) for (let i = 0; i < n; i++) ids.push([q, (await q.enqueue(i)).id]);
  await enqueued();
  let done = 0;
  const perQueue = new Map<string, number>();
  const consumers = queues.map((q) =>
    q.consume(
      async (job) => {
        runs.set(job.id, (runs.get(job.id) ?? 0) + 1);
        perQueue.set(q.name, (perQueue.get(q.name) ?? 0) + 1);
        await during(++done, perQueue.get(q.name)!, q.name);
        return job.data;
      },
      { concurrency: 2 },
    ),
  );
  try {
    // Counts, read again across a failover's dropped connections, until every job completed.
    await poll(
      () => Promise.all(queues.map((q) => q.counts().catch(() => undefined))),
      (all) => all.every((c) => c?.completed === n),
      `${n} jobs completed on each queue`,
      60_000,
    );
  } finally {
    await Promise.all(consumers.map((c) => c.close({ timeoutMs: 2000 })));
  }
  for (const q of queues)
    expect(await q.counts()).toMatchObject({ completed: n, pending: 0, active: 0, dead: 0 });
  expect(runs.size).toBe(ids.length);
  return runs;
}

async function resetStats(): Promise<void> {
  await onEveryNode((c) => c.config('RESETSTAT'));
}

describe.skipIf(!found.cluster)('scripts by FCALL on a Redis Cluster', () => {
  let client: Cluster | undefined;
  afterEach(() => {
    client?.disconnect();
    client = undefined;
  });

  it('runs queues on all three primaries by FCALL, durable writes too; replicas get the library', async () => {
    await onEveryNode((c) => c.call('FUNCTION', 'FLUSH').catch(() => undefined)); // replicas refuse: READONLY
    await resetStats();
    client = env.cluster.client();
    const mq = await EchoMQ.connect({ redis: client, durability: { replicas: 1, timeoutMs: 5000 } });
    const shards = await queuesOnEveryShard(`fc${process.pid}`, 2);
    try {
      const queues = [...shards.values()].flat().map((n) => mq.queue<number, number>(n));
      const runs = await runAll(queues, 15, () => {});
      expect([...runs.values()].every((r) => r === 1)).toBe(true);
    } finally {
      await mq.close();
    }
    for (const primary of shards.keys()) {
      const n = await stats(primary);
      expect(n.fcall).toBeGreaterThan(0);
      expect(n.evalsha + n.eval).toBe(0);
      expect(n.wait).toBeGreaterThan(0); // the durable writes' WAIT, on the primary that took them
      expect(n.load).toBe(1); // loaded once per primary, however many calls found it missing
    }
    // Each replica has the library by replication, loaded by no one.
    for (const node of env.cluster.nodes) expect(await libraries(node)).toEqual([library().name]);
  }, 120_000);

  it("moves a queue's slot mid-run to a primary without the library: loaded there, every job done once", async () => {
    client = env.cluster.client();
    const mq = await EchoMQ.connect({ redis: client });
    const shards = await queuesOnEveryShard(`rs${process.pid}`, 1);
    // The queue that stays is on the third primary: until the move nothing calls the target.
    const [[from, [moving]], [to], [, [staying]]] = [...shards] as [
      [RedisServer, string[]],
      [RedisServer, string[]],
      [RedisServer, string[]],
    ];
    // The target primary (and its replica) lose the library: they never saw this release's.
    const c = to.client();
    await c.call('FUNCTION', 'DELETE', library().name).catch(() => undefined);
    c.disconnect();
    await resetStats();
    let moved = -1;
    let before: string[] = [];
    try {
      const queues = [moving!, staying!].map((n) => mq.queue<number, number>(n));
      const runs = await runAll(queues, 40, async (done) => {
        if (done !== 20) return;
        before = await libraries(to);
        moved = await moveSlot(slotOf(moving!), from, to);
      });
      expect([...runs.values()].every((r) => r === 1)).toBe(true);
    } finally {
      await mq.close();
    }
    expect(before).toEqual([]);
    expect(moved).toBeGreaterThan(0);
    expect((await env.cluster.primaryOf(slotOf(moving!))).port).toBe(to.port);
    const n = await stats(to);
    expect(n.load).toBeGreaterThanOrEqual(1);
    expect(n.fcall).toBeGreaterThan(0);
    expect((await stats(from)).fcall).toBeGreaterThan(0);
    for (const node of [from, to]) expect((await stats(node)).evalsha).toBe(0);
    expect(await libraries(to)).toEqual([library().name]);
  }, 120_000);

  it('loads the library again after a FUNCTION FLUSH on one primary under running consumers', async () => {
    client = env.cluster.client();
    const mq = await EchoMQ.connect({ redis: client });
    const shards = await queuesOnEveryShard(`ff${process.pid}`, 1);
    const [[flushed, [flushedQueue]]] = [...shards] as [[RedisServer, string[]]];
    await resetStats();
    let flushes = 0;
    try {
      const queues = [...shards.values()].flat().map((n) => mq.queue<number, number>(n));
      const runs = await runAll(queues, 30, async (_, onQueue, queue) => {
        // Jobs 5, 15, 25 of the flushed primary's queue: later jobs of it find the library gone.
        if (queue !== flushedQueue || onQueue % 10 !== 5) return;
        const c = flushed!.client();
        try {
          await c.call('FUNCTION', 'FLUSH');
          flushes++;
          // The next flush only once the calls that found the library missing loaded it again:
          // one flushing it between a load and the call sent again sends that call by EVALSHA.
          await poll(
            () => libraries(flushed!),
            (names) => names.includes(library().name),
            'the library loaded again',
            10_000,
          );
        } finally {
          c.disconnect();
        }
      });
      expect([...runs.values()].every((r) => r === 1)).toBe(true);
    } finally {
      await mq.close();
    }
    expect(flushes).toBe(3);
    const n = await stats(flushed!);
    expect(n.load).toBeGreaterThanOrEqual(1);
    for (const primary of shards.keys()) {
      expect(await libraries(primary)).toEqual([library().name]);
      const s = await stats(primary);
      expect(s.fcall).toBeGreaterThan(0);
      expect(s.evalsha + s.eval).toBe(0);
    }
  }, 120_000);

  it('goes on by FCALL through a failover: the promoted replica has the library without a load', async () => {
    client = env.cluster.client();
    const mq = await EchoMQ.connect({ redis: client });
    const shards = await queuesOnEveryShard(`fo${process.pid}`, 1);
    const [victim] = [...shards.keys()];
    const [replica] = await env.cluster.replicasOf(victim!);
    await resetStats();
    let promoted: RedisServer | undefined;
    try {
      const queues = [...shards.values()].flat().map((n) => mq.queue<number, number>(n));
      const runs = await runAll(
        queues,
        20,
        async (done) => {
          if (done === 15) promoted = await env.cluster.failover(victim!);
        },
        // The enqueues loaded the library on the primary; its replica has it by replication.
        () =>
          poll(
            () => libraries(replica!),
            (names) => names.includes(library().name),
            'the library on the replica',
            10_000,
          ).then(() => resetStats()),
      );
      expect(runs.size).toBe(60);
    } finally {
      await mq.close();
    }
    expect(promoted?.port).toBe(replica!.port);
    const n = await stats(promoted!);
    expect(n.fcall).toBeGreaterThan(0);
    expect(n.load + n.evalsha + n.eval).toBe(0);
    await env.cluster.rejoin(victim!);
  }, 120_000);
});
