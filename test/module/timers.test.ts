// The module moves time (SPEC 26.1): with it loaded, Redis itself releases each queue's delayed
// jobs at their instant, with no consumer running anywhere. Released in bounded slices, never
// early, only on a primary (a replica follows the primary's releases), from the data after a
// failover, a restart or a MODULE LOAD, and one queue with garbage in its keys holds up no other.
import type { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EchoMQ } from '../../src/queue/echomq.js';
import { uniqueQueue } from '../support/harness.js';
import { loadModuleArgs, nativeModule } from '../support/native-module.js';
import { RedisServer } from '../support/redis-server.js';
import { pendingOf, startReplicated } from '../support/timer-observe.js';
import { poll } from '../support/wait.js';

const TIMERS = loadModuleArgs({ timers: 'on' });
const SLICE = 64;

/** EMQ.TIMERS: [running, queues known, armed, firings, jobs released (approximate)]. */
async function timers(raw: Redis): Promise<{ running: number; firings: number; released: number }> {
  const [running, , , firings, released] = (await raw.call('EMQ.TIMERS')) as number[];
  return { running: running!, firings: firings!, released: released! };
}

/** Each job's 'waiting' event, ms of its stream id: when the server released it. */
async function releasedAt(raw: Redis, queue: string): Promise<Map<string, number>> {
  const at = new Map<string, number>();
  for (const [id, fields] of await raw.xrange(`emq:{${queue}}:events`, '-', '+')) {
    if (fields[1] === 'waiting') at.set(fields[3]!, Number(id.split('-')[0]));
  }
  return at;
}

/** Delayed jobs on `queue` at `url`, each `delays[i]` ms from now; returns id → run-at. */
async function delayed(url: string, queue: string, delays: number[]): Promise<Map<string, number>> {
  const mq = await EchoMQ.connect({ url });
  try {
    const q = mq.queue(queue);
    const ids = await Promise.all(delays.map(async (ms, n) => (await q.enqueueIn({ n }, ms)).id));
    const runAt = new Map<string, number>();
    for (const id of ids) runAt.set(id, (await q.get(id))!.runAt!);
    return runAt;
  } finally {
    await mq.close();
  }
}

/** Every job released once, at or after its instant. */
async function expectReleasedOnTime(raw: Redis, queue: string, runAt: Map<string, number>): Promise<void> {
  const at = await releasedAt(raw, queue);
  for (const [id, due] of runAt) {
    expect(at.get(id), `job ${id} released`).toBeDefined();
    expect(at.get(id)!, `job ${id} not before its instant`).toBeGreaterThanOrEqual(due);
  }
}

describe.skipIf(!nativeModule.path)(
  `the module's timers${nativeModule.missing ? ` (${nativeModule.missing})` : ''}`,
  () => {
    let server: RedisServer;
    let raw: Redis;
    beforeAll(async () => {
      server = await RedisServer.start({ args: [...TIMERS, '--enable-module-command', 'yes'] });
      raw = server.client();
    });
    afterAll(async () => {
      await raw?.quit();
      await server?.stop();
    });

    it('release every delayed job at its instant with no consumer anywhere, and a queue with garbage holds up none', async () => {
      // A queue whose meta is not a hash: EMQ.PROMOTE refuses it, its timer retries later.
      const bad = uniqueQueue('timers-bad');
      await raw.set(`emq:{${bad}}:meta`, 'not a hash');
      await raw.zadd(`emq:{${bad}}:schedule`, 1, 'JOBgarbage');
      const queue = uniqueQueue('timers');
      const runAt = await delayed(
        server.url,
        queue,
        Array.from({ length: 300 }, (_, i) => 20 + ((i * 37) % 600)),
      );
      await poll(
        () => pendingOf(raw, queue),
        (n) => n === 300,
        'the server released all 300',
        30_000,
      );
      await expectReleasedOnTime(raw, queue, runAt);
      expect(await raw.zcard(`emq:{${queue}}:schedule`)).toBe(0);
      const t = await timers(raw);
      expect(t.running).toBe(1);
      expect(t.firings).toBeGreaterThan(0);
      expect(await raw.zcard(`emq:{${bad}}:schedule`)).toBe(1);
    });

    it('release a burst due at one instant in bounded slices', async () => {
      const queue = uniqueQueue('timers-burst');
      const before = await timers(raw);
      const mq = await EchoMQ.connect({ url: server.url });
      const n = 3000;
      let runAt: Map<string, number>;
      try {
        const q = mq.queue(queue);
        const [sec] = (await raw.time()) as unknown as [string, string];
        const at = Number(sec) * 1000 + 1500; // one instant for all, after they are all in
        const ids = await Promise.all(Array.from({ length: n }, (_, i) => q.enqueueAt({ i }, at)));
        runAt = new Map(ids.map((r) => [r.id, at]));
      } finally {
        await mq.close();
      }
      await poll(
        () => pendingOf(raw, queue),
        (c) => c === n,
        'the burst released',
        30_000,
      );
      await expectReleasedOnTime(raw, queue, runAt);
      const after = await timers(raw);
      // At most SLICE per firing: the burst took at least n / SLICE firings.
      expect(after.firings - before.firings).toBeGreaterThanOrEqual(Math.ceil(n / SLICE));
    });

    it('hold MODULE UNLOAD until stopped, lose nothing unloaded, and arm from the registry on MODULE LOAD', async () => {
      const queue = uniqueQueue('timers-reload');
      await expect(raw.call('MODULE', 'UNLOAD', 'echomq')).rejects.toThrow(/timer/i);
      expect(((await raw.call('EMQ.TIMERS', 'OFF')) as number[])[0]).toBe(0);
      await raw.call('MODULE', 'UNLOAD', 'echomq');
      const runAt = await delayed(server.url, queue, [50, 100, 150, 200]);
      // Past every instant with no module and no consumer: nothing moved them.
      const last = Math.max(...runAt.values());
      await poll(
        async () => {
          const [s, us] = (await raw.time()) as unknown as [string, string];
          return Number(s) * 1000 + Math.floor(Number(us) / 1000);
        },
        (now) => now > last,
        'the server clock past the last instant',
        10_000,
      );
      expect(await raw.zcard(`emq:{${queue}}:schedule`)).toBe(4);
      await raw.call('MODULE', 'LOAD', nativeModule.path!, 'timers', 'on');
      await poll(
        () => pendingOf(raw, queue),
        (c) => c === 4,
        'released after the load',
        30_000,
      );
      await expectReleasedOnTime(raw, queue, runAt);
    });

    it('refuse a load argument they do not know, and a bad EMQ.TIMERS argument', async () => {
      await expect(raw.call('EMQ.TIMERS', 'SOON')).rejects.toThrow(/EMQ.TIMERS takes \[ON\|OFF\|LIST\]/);
      const other = await RedisServer.start({
        args: ['--loadmodule', nativeModule.path!, 'timers', 'maybe'],
      }).catch((err: Error) => err);
      expect(other).toBeInstanceOf(Error);
    });
  },
);

describe.skipIf(!nativeModule.path)("the module's timers on a replica and across a failover", () => {
  let primary: RedisServer;
  let replica: RedisServer;
  let p: Redis;
  let r: Redis;
  beforeAll(async () => {
    ({ primary, replica, p, r } = await startReplicated(TIMERS));
  });
  afterAll(async () => {
    p?.disconnect();
    await r?.quit();
    await primary?.stop();
    await replica?.stop();
  });

  it('fire on the primary only; after a failover the new primary releases from the data', async () => {
    const queue = uniqueQueue('timers-ha');
    const first = await delayed(
      primary.url,
      queue,
      Array.from({ length: 50 }, (_, i) => 10 + i * 4),
    );
    await poll(
      () => pendingOf(p, queue),
      (n) => n === 50,
      'the primary released the first 50',
      30_000,
    );
    await p.call('WAIT', '1', '5000');
    expect(await pendingOf(r, queue)).toBe(50);
    expect((await timers(r)).firings).toBe(0);

    // Jobs due after the primary dies: only the promoted replica can release them.
    const second = await delayed(
      primary.url,
      queue,
      Array.from({ length: 40 }, (_, i) => 1500 + i * 5),
    );
    await p.call('WAIT', '1', '5000');
    expect(await r.zcard(`emq:{${queue}}:schedule`)).toBe(40);
    await primary.kill();
    await r.call('REPLICAOF', 'NO', 'ONE');
    await poll(
      () => pendingOf(r, queue),
      (n) => n === 90,
      'the new primary released the rest',
      30_000,
    );
    await expectReleasedOnTime(r, queue, new Map([...first, ...second]));
    expect((await timers(r)).firings).toBeGreaterThan(0);
  });
});
