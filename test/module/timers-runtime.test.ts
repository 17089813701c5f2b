// The runtime uses the module's timers (SPEC 19.1, 26.1): hello lists `emq.timers` where they
// run (never erring where they cannot be asked), and a consumer that sees it promotes and
// recovers only as a backstop while the server releases its delayed jobs at their instant and
// recovers a SIGKILLed consumer's jobs.
import type { ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Redis } from 'ioredis';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { BACKSTOP_BEATS } from '../../src/consumer/legs.js';
import { EchoMQ } from '../../src/queue/echomq.js';
import { uniqueQueue } from '../support/harness.js';
import { holdJobs, killHolder } from '../support/held-consumer.js';
import { loadModuleArgs, nativeModule } from '../support/native-module.js';
import { RedisServer } from '../support/redis-server.js';
import { ROOT } from '../support/run-process.js';
import { pause, poll } from '../support/wait.js';

const TIMERS = loadModuleArgs({ timers: 'on' });
const HELLO = readFileSync(join(ROOT, 'protocol/scripts/hello.lua'), 'utf8');

/** hello's features for a new queue, asked as a runtime of level 2 does. */
async function features(client: Redis): Promise<string[]> {
  const reply = (await client.eval(
    HELLO,
    1,
    `emq:{${uniqueQueue('hello')}}:meta`,
    '1',
    '1',
    '2',
  )) as unknown[];
  return (reply[2] as string[]).map(String);
}

/** How many EMQ.PROMOTE calls clients sent (the timers' own firings are no client call). */
async function promoteCalls(raw: Redis): Promise<number> {
  const m = /cmdstat_emq\.promote:calls=(\d+)/.exec(await raw.info('commandstats'));
  return m ? Number(m[1]) : 0;
}

describe.skipIf(!nativeModule.path)(
  `a runtime on the module's timers${nativeModule.missing ? ` (${nativeModule.missing})` : ''}`,
  () => {
    let server: RedisServer;
    let raw: Redis;
    const children: ChildProcess[] = [];
    beforeAll(async () => {
      server = await RedisServer.start({ args: TIMERS });
      raw = server.client();
    });
    afterEach(() => {
      for (const c of children.splice(0)) c.kill('SIGKILL');
    });
    afterAll(async () => {
      await raw?.quit();
      await server?.stop();
    });

    it('hello lists emq.timers while they run, and not once stopped; a user without the command gets no error', async () => {
      expect(await features(raw)).toEqual(['emq.promote', 'emq.stalled.check', 'emq.timers']);
      await raw.call('EMQ.TIMERS', 'OFF');
      try {
        expect(await features(raw)).toEqual(['emq.promote', 'emq.stalled.check']);
      } finally {
        await raw.call('EMQ.TIMERS', 'ON');
      }
      await raw.acl(
        'SETUSER',
        'notimers',
        'reset',
        'on',
        '>pw-notimers',
        '~emq:*',
        '+@all',
        '-emq.timers.running',
      );
      const limited = server.client();
      try {
        await limited.auth('notimers', 'pw-notimers');
        await expect(limited.call('EMQ.TIMERS.RUNNING')).rejects.toThrow(/NOPERM/);
        expect(await features(limited)).toEqual(['emq.promote', 'emq.stalled.check']);
      } finally {
        await limited.quit();
      }
    });

    it('a consumer that sees it promotes only as a backstop, and its delayed jobs still start at their instant', async () => {
      const beatMs = 100;
      const runFor = async (queue: string): Promise<{ calls: number; startedLate: number[] }> => {
        const mq = await EchoMQ.connect({ url: server.url });
        try {
          const q = mq.queue(queue);
          const started = new Map<string, number>();
          const c = q.consume(
            async (job) => {
              const [s, us] = (await raw.time()) as unknown as [string, string];
              started.set(job.id, Number(s) * 1000 + Math.floor(Number(us) / 1000));
            },
            { beatMs },
          );
          await pause(200); // the consumer's first beat (its hello, its first promote) is behind it
          const before = await promoteCalls(raw);
          const ids = await Promise.all(
            Array.from({ length: 10 }, async (_, i) => (await q.enqueueIn({ i }, 300 + i * 200)).id),
          );
          const runAt = new Map<string, number>();
          for (const id of ids) runAt.set(id, (await q.get(id))!.runAt!);
          await poll(
            async () => (await q.counts()).completed,
            (n) => n === ids.length,
            'every delayed job completed',
            30_000,
          );
          const calls = (await promoteCalls(raw)) - before;
          await c.close();
          return { calls, startedLate: ids.map((id) => started.get(id)! - runAt.get(id)!) };
        } finally {
          await mq.close();
        }
      };
      const on = await runFor(uniqueQueue('backstop-on'));
      await raw.call('EMQ.TIMERS', 'OFF');
      let off: Awaited<ReturnType<typeof runFor>>;
      try {
        off = await runFor(uniqueQueue('backstop-off'));
      } finally {
        await raw.call('EMQ.TIMERS', 'ON');
      }
      // Nothing early either way; with the timers, a promote per BACKSTOP_BEATS beats at most
      // (about 2.1 s of delays: ~2 backstop passes), against one a beat or per due instant.
      for (const late of [...on.startedLate, ...off.startedLate]) expect(late).toBeGreaterThanOrEqual(0);
      expect(on.calls).toBeLessThan(off.calls);
      expect(on.calls * BACKSTOP_BEATS).toBeLessThanOrEqual(off.calls + 2 * BACKSTOP_BEATS);
    });

    it("a SIGKILLed consumer's jobs are recovered by the server and run again by a backstop consumer", async () => {
      const queue = uniqueQueue('runtime-kill');
      const n = 6;
      const mq = await EchoMQ.connect({ url: server.url });
      try {
        const q = mq.queue(queue);
        await Promise.all(Array.from({ length: n }, (_, i) => q.enqueue({ i })));
        const child = await holdJobs(server.url, queue, 1000, n);
        children.push(child);
        await killHolder(child);
        const recoveredBefore = ((await raw.call('EMQ.TIMERS')) as number[])[7]!;
        // A consumer whose own recovery pass is 60 s away after its first: the server recovers.
        const runs = new Map<string, number>();
        const c = q.consume(
          async (job) => {
            runs.set(job.id, (runs.get(job.id) ?? 0) + 1);
          },
          { beatMs: 6000, concurrency: n },
        );
        await poll(
          async () => (await q.counts()).completed,
          (done) => done === n,
          'the recovered jobs completed',
          30_000,
        );
        await c.close();
        expect([...runs.values()]).toEqual(Array(n).fill(1));
        expect(((await raw.call('EMQ.TIMERS')) as number[])[7]! - recoveredBefore).toBe(n);
      } finally {
        await mq.close();
      }
    });
  },
);

describe('hello on a server without the module', () => {
  let server: RedisServer;
  let raw: Redis;
  beforeAll(async () => {
    server = await RedisServer.start();
    raw = server.client();
  });
  afterAll(async () => {
    await raw?.quit();
    await server?.stop();
  });

  it('lists no feature and does not err', async () => {
    expect(await features(raw)).toEqual([]);
  });
});
