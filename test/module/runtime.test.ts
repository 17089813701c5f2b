// The runtime and the native module: EchoMQ.connect detects EMQ.PROMOTE and EMQ.STALLED.CHECK
// (COMMAND INFO) and sends the sweeps as module commands where the server offers them, as scripts
// elsewhere; 'off' and 'require' say otherwise. A server that loses the module mid-run gets the
// scripts again, and consumers with and without the module share a queue.
import type { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EchoMQ } from '../../src/queue/echomq.js';
import { uniqueQueue, useRedisServer } from '../support/harness.js';
import { loadModuleArgs, nativeModule } from '../support/native-module.js';
import { RedisServer } from '../support/redis-server.js';
import { poll } from '../support/wait.js';

const env = nativeModule.path ? useRedisServer({ args: loadModuleArgs() }) : undefined;

/** How many times the server ran a command (INFO commandstats). */
async function calls(raw: Redis, command: string): Promise<number> {
  const info = await raw.info('commandstats');
  const m = new RegExp(`^cmdstat_${command.toLowerCase().replace('.', '\\.')}:calls=(\\d+)`, 'm').exec(info);
  return Number(m?.[1] ?? 0);
}

describe.skipIf(!nativeModule.path)(
  `the runtime and the native module${nativeModule.missing ? ` (${nativeModule.missing})` : ''}`,
  () => {
    let raw: Redis;
    let plain: RedisServer;
    beforeAll(async () => {
      raw = env!.server.client();
      plain = await RedisServer.start();
    });
    afterAll(async () => {
      await raw?.quit();
      await plain?.stop();
    });

    it("module 'auto' (the default) sends both sweeps as the module's commands", async () => {
      const mq = await EchoMQ.connect({ url: env!.server.url });
      try {
        expect([...mq.connector.native.values()].sort()).toEqual([
          'EMQ.COMPLETE',
          'EMQ.ENQUEUE',
          'EMQ.PROMOTE',
          'EMQ.STALLED.CHECK',
        ]);
        const q = mq.queue(uniqueQueue('auto'));
        await q.enqueueAt({ n: 1 }, 1000, { id: 'JOBdue' });
        const [promotes, checks] = [await calls(raw, 'emq.promote'), await calls(raw, 'emq.stalled.check')];
        expect(await q.promote()).toBe(1);
        expect(await q.promoteNext()).toMatchObject({ count: 0, nextDue: -1 });
        expect(await q.sweepStalled()).toEqual({ recovered: [], dead: [] });
        expect(await calls(raw, 'emq.promote')).toBe(promotes + 2);
        expect(await calls(raw, 'emq.stalled.check')).toBe(checks + 1);
        expect((await q.get('JOBdue'))?.state).toBe('pending');
      } finally {
        await mq.close();
      }
    });

    it("module 'off' sends the scripts, even where the module is loaded", async () => {
      const mq = await EchoMQ.connect({ url: env!.server.url, module: 'off' });
      try {
        expect(mq.connector.native.size).toBe(0);
        const q = mq.queue(uniqueQueue('off'));
        const before = await calls(raw, 'emq.promote');
        await q.promote();
        expect(await calls(raw, 'emq.promote')).toBe(before);
      } finally {
        await mq.close();
      }
    });

    it("module 'require' connects where the module is loaded and refuses with EMQNOMODULE where not", async () => {
      const mq = await EchoMQ.connect({ url: env!.server.url, module: 'require' });
      expect(mq.connector.native.size).toBe(4);
      await mq.close();
      await expect(EchoMQ.connect({ url: plain.url, module: 'require' })).rejects.toMatchObject({
        code: 'EMQNOMODULE',
      });
    });

    it("module 'auto' on a server without the module uses the scripts", async () => {
      const mq = await EchoMQ.connect({ url: plain.url });
      try {
        expect(mq.connector.native.size).toBe(0);
        const q = mq.queue(uniqueQueue('plain'));
        await q.enqueueAt({ n: 1 }, 1000, { id: 'JOBdue' });
        expect(await q.promote()).toBe(1);
      } finally {
        await mq.close();
      }
    });

    it('a server that unloads the module mid-run gets the scripts again, the call answered', async () => {
      const server = await RedisServer.start({
        args: [...loadModuleArgs(), '--enable-module-command', 'yes'],
      });
      const mq = await EchoMQ.connect({ url: server.url });
      const admin = server.client();
      try {
        const q = mq.queue(uniqueQueue('unload'));
        await q.enqueueAt({ n: 1 }, 1000, { id: 'JOBa' });
        expect(await q.promote()).toBe(1);
        await admin.call('MODULE', 'UNLOAD', 'echomq');
        await q.enqueueAt({ n: 2 }, 1000, { id: 'JOBb' });
        expect(await q.promote()).toBe(1);
        expect(mq.connector.native.size).toBe(0);
        expect((await q.get('JOBb'))?.state).toBe('pending');
      } finally {
        await mq.close();
        await admin.quit();
        await server.stop();
      }
    });

    it('consumers with and without the module share a queue: every delayed and stalled job runs once', async () => {
      const name = uniqueQueue('mixed');
      const withModule = await EchoMQ.connect({ url: env!.server.url });
      const withScripts = await EchoMQ.connect({ url: env!.server.url, module: 'off' });
      const runs = new Map<number, number>();
      try {
        const producer = withScripts.queue<{ n: number }>(name);
        // Jobs whose lease has already run out (a consumer that died holding them): recovered.
        for (let n = 0; n < 20; n++) await producer.enqueue({ n }, { id: `JOBstalled${n}` });
        await producer.run('claim', [producer.keys.prefix, 20, 1]);
        for (let n = 20; n < 60; n++) await producer.enqueueIn({ n }, n % 5, { id: `JOBdelayed${n}` });
        const handler = async (job: { data: { n: number } }) => {
          runs.set(job.data.n, (runs.get(job.data.n) ?? 0) + 1);
        };
        const consumers = [withModule, withScripts].map((mq) =>
          mq
            .queue<{ n: number }>(name)
            .consume(handler, { concurrency: 4, recovery: 'stalled', maxStalled: 5, beatMs: 50 }),
        );
        await poll(
          () => producer.counts(),
          (c) => c.completed === 60,
          'all 60 jobs completed',
          30_000,
        );
        await Promise.all(consumers.map((c) => c.close()));
        expect([...runs.keys()].sort((a, b) => a - b)).toEqual(Array.from({ length: 60 }, (_, n) => n));
        expect([...runs.values()].every((count) => count === 1)).toBe(true);
        expect(await calls(raw, 'emq.stalled.check')).toBeGreaterThan(0);
      } finally {
        await withModule.close();
        await withScripts.close();
      }
    }, 60_000);
  },
);
