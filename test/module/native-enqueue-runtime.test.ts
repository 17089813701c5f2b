// The runtime and EMQ.ENQUEUE (SPEC 26): on a module-loaded server a plain enqueue (and
// enqueueMany) goes as the command, one call per call; a call outside its plain case (a group,
// a dedupe key, a job's own options) goes by the script without a refused try, and a plain one
// right after it goes as the command again (the choice is per call, not per queue); 'off' never
// sends it; what the command admitted a consumer runs to its end.
import type { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EchoMQ } from '../../src/queue/echomq.js';
import { uniqueQueue, useRedisServer } from '../support/harness.js';
import { loadModuleArgs, nativeModule } from '../support/native-module.js';
import { poll } from '../support/wait.js';

const env = nativeModule.path ? useRedisServer({ args: loadModuleArgs() }) : undefined;

/** How many more calls (and failed ones) `command` got while `body` ran (INFO commandstats). */
async function counted(raw: Redis, command: string, body: () => Promise<unknown>) {
  const read = async () => {
    const info = await raw.info('commandstats');
    const name = command.toLowerCase().replace('.', '\\.');
    const m = new RegExp(`^cmdstat_${name}:calls=(\\d+),.*failed_calls=(\\d+)`, 'm').exec(info);
    return { calls: Number(m?.[1] ?? 0), failed: Number(m?.[2] ?? 0) };
  };
  const before = await read();
  await body();
  const after = await read();
  return { calls: after.calls - before.calls, failed: after.failed - before.failed };
}

describe.skipIf(!nativeModule.path)(
  `the runtime and EMQ.ENQUEUE${nativeModule.missing ? ` (${nativeModule.missing})` : ''}`,
  () => {
    let raw: Redis;
    let mq: EchoMQ;
    beforeAll(async () => {
      raw = env!.server.client();
      mq = await EchoMQ.connect({ url: env!.server.url });
    });
    afterAll(async () => {
      await mq?.close();
      await raw?.quit();
    });

    it('a plain enqueue goes as EMQ.ENQUEUE, one command a call, and its rows read as any job', async () => {
      expect(mq.connector.native.get('enqueue')).toBe('EMQ.ENQUEUE');
      const q = mq.queue<{ n: number }>(uniqueQueue('ne'));
      await q.enqueue({ n: -1 }); // hello and the first call, outside the count
      let scripts = { calls: 0, failed: 0 };
      const native = await counted(raw, 'emq.enqueue', async () => {
        scripts = await counted(raw, 'fcall', async () => {
          for (let n = 0; n < 20; n++) await q.enqueue({ n });
          await q.enqueueMany(Array.from({ length: 500 }, (_, n) => ({ data: { n } })));
        });
      });
      expect(scripts.calls).toBe(0); // not one script call
      expect(native.failed).toBe(0);
      // 20 serial, then enqueueMany's slices (two in flight, at most four for 500 jobs)
      expect(native.calls).toBeGreaterThanOrEqual(21);
      expect(native.calls).toBeLessThanOrEqual(24);
      expect((await q.counts()).pending).toBe(521);
      const [first] = await q.enqueueMany([{ data: { n: 1000 } }]);
      const job = await q.get(first!.id);
      expect(job).toMatchObject({ state: 'pending', data: { n: 1000 }, attempts: 0, maxAttempts: 3 });
    });

    it('a call with a group or a dedupe key goes by the script untried, and the next plain one natively', async () => {
      const q = mq.queue<{ n: number }>(uniqueQueue('shape'));
      await q.enqueue({ n: -1 });
      const native = await counted(raw, 'emq.enqueue', async () => {
        await q.enqueue({ n: 0 }, { group: 'g' });
        await q.enqueue({ n: 1 }, { dedupe: { key: 'k', mode: 'throttle' } });
        await q.enqueueMany([{ data: { n: 2 } }, { data: { n: 3 }, opts: { group: 'h' } }]);
      });
      expect(native).toEqual({ calls: 0, failed: 0 }); // never sent, so never refused
      const after = await counted(raw, 'emq.enqueue', () => q.enqueue({ n: 4 }));
      expect(after).toEqual({ calls: 1, failed: 0 }); // no window: the choice is the call's
      expect((await q.counts()).pending).toBe(6); // every call admitted its jobs, lanes' included
    });

    it("module: 'off' sends no EMQ.ENQUEUE", async () => {
      const off = await EchoMQ.connect({ url: env!.server.url, module: 'off' });
      try {
        const q = off.queue<{ n: number }>(uniqueQueue('off'));
        const native = await counted(raw, 'emq.enqueue', async () => {
          for (let n = 0; n < 5; n++) await q.enqueue({ n });
        });
        expect(native.calls).toBe(0);
        expect((await q.counts()).pending).toBe(5);
      } finally {
        await off.close();
      }
    });

    it('jobs the command admitted are claimed and completed by a consumer, every one once', async () => {
      const q = mq.queue<{ n: number }>(uniqueQueue('run'));
      await q.enqueueMany(Array.from({ length: 300 }, (_, n) => ({ data: { n } })));
      const seen = new Map<number, number>();
      const consumer = q.consume(
        async (job) => {
          seen.set(job.data.n, (seen.get(job.data.n) ?? 0) + 1);
        },
        { concurrency: 20 },
      );
      await poll(
        () => q.counts(),
        (c) => c.completed === 300,
        '300 jobs completed',
        30_000,
      );
      await consumer.close();
      expect(seen.size).toBe(300);
      expect([...seen.values()].every((v) => v === 1)).toBe(true);
    });
  },
);
