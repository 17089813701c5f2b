// The runtime and EMQ.COMPLETE (SPEC 26): a consumer on a module-loaded server completes and
// claims by the command; a queue outside its plain case (lanes, a flow parent) is refused once
// (EMQNATIVE, nothing written), goes by the script for a window, and every job still completes;
// 'off' never sends it; a module of an earlier release, without it, sweeps natively and completes
// by the script; complete.json's cases sent through the connector end as the script's.
import { execFileSync } from 'node:child_process';
import { join } from 'node:path';
import type { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EchoMQError } from '../../src/core/errors.js';
import { EchoMQ } from '../../src/queue/echomq.js';
import { script } from '../../src/wire/scripts.js';
import { type CallRunner, files, replay } from '../support/conformance.js';
import { uniqueQueue, useRedisServer } from '../support/harness.js';
import { loadModuleArgs, nativeModule } from '../support/native-module.js';
import { RedisServer } from '../support/redis-server.js';
import { ROOT } from '../support/run-process.js';
import { poll } from '../support/wait.js';

const env = nativeModule.path ? useRedisServer({ args: loadModuleArgs() }) : undefined;

/** The module as the release before EMQ.COMPLETE offered it (`make without-complete`). */
function moduleWithoutComplete(): string | undefined {
  if (!nativeModule.path) return undefined;
  execFileSync('make', ['-s', '-C', join(ROOT, 'module'), 'without-complete'], {
    stdio: ['ignore', 'ignore', 'inherit'],
  });
  return join(ROOT, 'module', 'build', 'echomq-without-complete.so');
}

/** A command's calls and failed calls so far (INFO commandstats; an error reply is a failed call). */
async function stats(raw: Redis, command: string): Promise<{ calls: number; failed: number }> {
  const info = await raw.info('commandstats');
  const name = command.toLowerCase().replace('.', '\\.');
  const m = new RegExp(`^cmdstat_${name}:calls=(\\d+),.*failed_calls=(\\d+)`, 'm').exec(info);
  return { calls: Number(m?.[1] ?? 0), failed: Number(m?.[2] ?? 0) };
}

/** How many more calls (and failed ones) `command` got while `body` ran. */
async function counted(raw: Redis, command: string, body: () => Promise<void>) {
  const before = await stats(raw, command);
  await body();
  const after = await stats(raw, command);
  return { calls: after.calls - before.calls, failed: after.failed - before.failed };
}

describe.skipIf(!nativeModule.path)(
  `the runtime and EMQ.COMPLETE${nativeModule.missing ? ` (${nativeModule.missing})` : ''}`,
  () => {
    let raw: Redis;
    beforeAll(() => {
      raw = env!.server.client();
    });
    afterAll(async () => {
      await raw?.quit();
    });

    /** `jobs` enqueued on a fresh queue of `mq`, then a consumer of `concurrency` until all completed. */
    async function processAll(
      mq: EchoMQ,
      jobs: { data: { n: number }; opts?: { group?: string } }[],
      concurrency = 1,
    ) {
      const q = mq.queue<{ n: number }>(uniqueQueue('nc'));
      await q.enqueueMany(jobs);
      const consumer = q.consume(async () => 'ok', { concurrency });
      await poll(
        () => q.counts(),
        (c) => c.completed === jobs.length,
        `${jobs.length} jobs completed`,
        30_000,
      );
      await consumer.close();
      return q;
    }
    const plainJobs = (n: number) => Array.from({ length: n }, (_, i) => ({ data: { n: i } }));

    it('a consumer on a module server completes and claims by EMQ.COMPLETE, not by the script', async () => {
      const mq = await EchoMQ.connect({ url: env!.server.url });
      try {
        expect(mq.connector.native.get('complete')).toBe('EMQ.COMPLETE');
        let fcalls = { calls: 0, failed: 0 };
        const native = await counted(raw, 'emq.complete', async () => {
          fcalls = await counted(raw, 'fcall', () => processAll(mq, plainJobs(200)).then(() => {}));
        });
        expect(native.failed).toBe(0);
        expect(native.calls).toBeGreaterThanOrEqual(150); // one a job at concurrency 1, a few batched
        // The scripts left: enqueueMany, hello, the first claim, the beats (heartbeat, notices)
        expect(fcalls.calls).toBeLessThan(native.calls / 4);
      } finally {
        await mq.close();
      }
    });

    it('a queue with lanes is refused once, goes by the script, and every job completes', async () => {
      const mq = await EchoMQ.connect({ url: env!.server.url });
      try {
        const jobs = plainJobs(100).map((j, i) => ({ ...j, opts: { group: `g${i % 3}` } }));
        const native = await counted(raw, 'emq.complete', () => processAll(mq, jobs).then(() => {}));
        expect(native).toEqual({ calls: 1, failed: 1 }); // one refusal in the 30 s window, not 100
      } finally {
        await mq.close();
      }
    });

    it("a flow's children (a parent to hand off to) are refused once; the whole flow completes", async () => {
      const mq = await EchoMQ.connect({ url: env!.server.url });
      try {
        const name = uniqueQueue('flow');
        const q = mq.queue<{ n: number }>(name);
        const native = await counted(raw, 'emq.complete', async () => {
          const flow = await mq.flow({
            queue: name,
            data: { n: -1 },
            children: Array.from({ length: 20 }, (_, n) => ({ queue: name, data: { n } })),
          });
          const consumer = q.consume(async () => 'ok', { concurrency: 1 });
          await poll(
            () => q.get(flow.id),
            (job) => job?.state === 'completed',
            'the flow parent completed',
            30_000,
          );
          await consumer.close();
          expect((await q.counts()).completed).toBe(21);
        });
        expect(native).toEqual({ calls: 1, failed: 1 });
      } finally {
        await mq.close();
      }
    });

    it('the command is tried again once the window has run out, and a plain queue beside is not held back', async () => {
      const mq = await EchoMQ.connect({ url: env!.server.url });
      mq.connector.nativeRefusedMs = 100;
      try {
        const laned = mq.queue<{ n: number }>(uniqueQueue('window'));
        const plain = mq.queue<{ n: number }>(uniqueQueue('beside'));
        await laned.enqueueMany(plainJobs(3).map((j) => ({ ...j, opts: { group: 'g' } })));
        await plain.enqueueMany(plainJobs(2));
        const held = async (q: typeof laned, n: number) => {
          const [flat] = (await q.run('claim', [q.keys.prefix, n, 30_000, 'test'])) as [unknown[]];
          return Array.from({ length: n }, (_, i) => [String(flat[7 * i]), String(flat[7 * i + 1])] as const);
        };
        const ack = async (q: typeof laned, [id, token]: readonly [string, string]) => {
          const [statuses] = (await q.run('complete', [q.keys.prefix, 30_000, 0, id, token, ''])) as [
            string[],
          ];
          expect(statuses).toEqual(['OK']);
        };
        const lanes = await held(laned, 3);
        const plains = await held(plain, 2);
        const first = await counted(raw, 'emq.complete', async () => {
          await ack(laned, lanes[0]!); // refused: the script, and the window opens
          await ack(laned, lanes[1]!); // the script at once
          await ack(plain, plains[0]!); // another queue: the command
        });
        expect(first).toEqual({ calls: 2, failed: 1 });
        await new Promise((r) => setTimeout(r, 150));
        const later = await counted(raw, 'emq.complete', async () => {
          await ack(laned, lanes[2]!); // the window ran out: tried (and refused) again
          await ack(plain, plains[1]!);
        });
        expect(later).toEqual({ calls: 2, failed: 1 });
        expect((await laned.counts()).completed).toBe(3);
        expect((await plain.counts()).completed).toBe(2);
      } finally {
        await mq.close();
      }
    });

    it("module 'off' sends no EMQ.COMPLETE", async () => {
      const mq = await EchoMQ.connect({ url: env!.server.url, module: 'off' });
      try {
        const native = await counted(raw, 'emq.complete', () => processAll(mq, plainJobs(30)).then(() => {}));
        expect(native.calls).toBe(0);
      } finally {
        await mq.close();
      }
    });

    it('durability writes stay scripts: a replicated complete sends no EMQ.COMPLETE', async () => {
      const replica = await RedisServer.start({
        args: ['--replicaof', '127.0.0.1', String(env!.server.port)],
      });
      const r = replica.client();
      await poll(
        () => r.info('replication'),
        (info) => /master_link_status:up/.test(info),
        'the replica in sync',
        10_000,
      );
      r.disconnect();
      const mq = await EchoMQ.connect({ url: env!.server.url, durability: { replicas: 1, timeoutMs: 5000 } });
      try {
        const native = await counted(raw, 'emq.complete', () => processAll(mq, plainJobs(5)).then(() => {}));
        expect(native.calls).toBe(0);
      } finally {
        await mq.close();
        await replica.stop();
      }
    });

    describe('a module of an earlier release, without EMQ.COMPLETE', () => {
      let older: RedisServer;
      let olderRaw: Redis;
      beforeAll(async () => {
        older = await RedisServer.start({
          args: ['--loadmodule', moduleWithoutComplete()!, 'timers', 'off'],
        });
        olderRaw = older.client();
      });
      afterAll(async () => {
        olderRaw?.disconnect();
        await older?.stop();
      });

      it("sweeps natively and completes by the script; module: 'require' is satisfied", async () => {
        const mq = await EchoMQ.connect({ url: older.url, module: 'require' });
        try {
          expect([...mq.connector.native.values()].sort()).toEqual(['EMQ.PROMOTE', 'EMQ.STALLED.CHECK']);
          const promotes = await counted(olderRaw, 'emq.promote', async () => {
            const q = await processAll(mq, plainJobs(20));
            await q.promote();
          });
          expect(promotes.calls).toBeGreaterThan(0);
          expect((await stats(olderRaw, 'emq.complete')).calls).toBe(0);
        } finally {
          await mq.close();
        }
      });

      it('a connection that took the server for one with EMQ.COMPLETE (a failover) sends the script and keeps the sweeps', async () => {
        const mq = await EchoMQ.connect({ url: older.url, module: 'require' });
        try {
          mq.connector.native.set('complete', 'EMQ.COMPLETE');
          const q = mq.queue<{ n: number }>(uniqueQueue('failover'));
          await q.enqueue({ n: 1 }, { id: 'JOBa' });
          const [flat] = (await q.run('claim', [q.keys.prefix, 1, 30_000, 'test'])) as [unknown[]];
          const reply = (await q.run('complete', [
            q.keys.prefix,
            30_000,
            0,
            'JOBa',
            String(flat[1]),
            '',
          ])) as [string[]];
          expect(reply[0]).toEqual(['OK']);
          expect((await q.get('JOBa'))?.state).toBe('completed');
          expect([...mq.connector.native.values()].sort()).toEqual(['EMQ.PROMOTE', 'EMQ.STALLED.CHECK']);
        } finally {
          await mq.close();
        }
      });
    });

    describe("complete.json's cases sent through the connector (EMQ.COMPLETE, or the script after a refusal) end as the script's", () => {
      let mq: EchoMQ;
      beforeAll(async () => {
        mq = await EchoMQ.connect({ url: env!.server.url });
        mq.connector.nativeRefusedMs = 0; // every case tries the command: no queue held back by a window
      });
      afterAll(async () => {
        await mq?.close();
      });
      const viaConnector: CallRunner = async (_client, s, keys, argv) => {
        try {
          return { reply: await mq.connector.run(script(s.name as 'complete'), keys, argv) };
        } catch (err) {
          // The reply as Redis gave it (the connector wraps EMQxxx replies in an EchoMQError)
          return {
            error: err instanceof EchoMQError && err.cause instanceof Error ? err.cause : (err as Error),
          };
        }
      };
      for (const c of files.find((f) => f.script === 'complete')!.cases) {
        it(c.name, async () => {
          let problems: string[] = [];
          const tried = await counted(raw, 'emq.complete', async () => {
            problems = await replay(raw, c, viaConnector);
          });
          expect(problems).toEqual([]);
          expect(tried.calls, 'the command was tried').toBe(1);
        });
      }
    });
  },
);
