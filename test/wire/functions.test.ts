// The scripts by FCALL (connect's `scripts: 'functions'`, the default): the same flow as by
// EVALSHA, side by side with an EVALSHA process on one queue, loaded again after a FUNCTION
// FLUSH under a running consumer, and EVALSHA without an error where FUNCTION or FCALL is refused
// (an ACL user without them, a server without FCALL as one older than 7.0).
import type { Redis } from 'ioredis';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { EchoMQ } from '../../src/queue/echomq.js';
import { library } from '../../src/wire/functions.js';
import { buildLibrary } from '../../src/wire/library.js';
import { loadScripts } from '../../src/wire/scripts.js';
import { coreFlow } from '../support/core-flow.js';
import { onMemory } from '../support/harness.js';
import { RedisServer } from '../support/redis-server.js';

/** Script calls the server ran since the last reset, by command. */
async function calls(raw: Redis): Promise<{ fcall: number; evalsha: number; eval: number }> {
  const info = await raw.info('commandstats');
  const count = (cmd: string) => Number(new RegExp(`cmdstat_${cmd}:calls=(\\d+)`).exec(info)?.[1] ?? 0);
  return { fcall: count('fcall'), evalsha: count('evalsha'), eval: count('eval') };
}

async function libraries(raw: Redis): Promise<string[]> {
  const list = (await raw.call('FUNCTION', 'LIST')) as unknown[][];
  return list.map((entry) => String(entry[1])).sort();
}

describe.skipIf(onMemory)('scripts by FCALL', () => {
  let server: RedisServer;
  let raw: Redis;
  beforeAll(async () => {
    server = await RedisServer.start();
    raw = server.client();
  });
  afterAll(async () => {
    raw?.disconnect();
    await server?.stop();
  });
  beforeEach(async () => {
    await raw.call('FUNCTION', 'FLUSH');
    await raw.config('RESETSTAT');
  });

  it('runs the whole core flow by FCALL by default, loading the library once', async () => {
    const mq = await EchoMQ.connect({ url: server.url });
    try {
      await coreFlow(mq, 'fn-core');
    } finally {
      await mq.close();
    }
    const n = await calls(raw);
    expect(n.fcall).toBeGreaterThan(10);
    expect(n.evalsha + n.eval).toBe(0);
    expect(await libraries(raw)).toEqual([library().name]);
  }, 60_000);

  it("runs it by EVALSHA with scripts: 'eval', and refuses an unknown transport", async () => {
    const mq = await EchoMQ.connect({ url: server.url, scripts: 'eval' });
    try {
      await coreFlow(mq, 'fn-eval');
    } finally {
      await mq.close();
    }
    const n = await calls(raw);
    expect(n.fcall).toBe(0);
    expect(n.evalsha).toBeGreaterThan(10);
    await expect(EchoMQ.connect({ url: server.url, scripts: 'lua' as never })).rejects.toThrow(
      /scripts must be 'functions' .* or 'eval' .*got "lua"/,
    );
  }, 60_000);

  it('shares a queue with an EVALSHA process: every job done once, by either', async () => {
    const byFcall = await EchoMQ.connect({ url: server.url });
    const byEval = await EchoMQ.connect({ url: server.url, scripts: 'eval' });
    const done = new Map<string, number>();
    try {
      const qf = byFcall.queue<number, number>('fn-fleet');
      const qe = byEval.queue<number, number>('fn-fleet');
      const ids: string[] = [];
      for (let i = 0; i < 100; i++) ids.push((await (i % 2 ? qf : qe).enqueue(i)).id);
      const handler = (job: { id: string; data: number }) => {
        done.set(job.id, (done.get(job.id) ?? 0) + 1);
        return job.data * 2;
      };
      const consumers = [qf.consume(handler, { concurrency: 3 }), qe.consume(handler, { concurrency: 3 })];
      const results = await Promise.all(ids.map((id) => qf.waitFor(id, { timeoutMs: 20_000 })));
      await Promise.all(consumers.map((c) => c.close()));
      expect(results).toEqual(ids.map((_, i) => i * 2));
      expect(done.size).toBe(100);
      expect([...done.values()].every((n) => n === 1)).toBe(true);
      expect(await qe.counts()).toMatchObject({ completed: 100, pending: 0, active: 0 });
    } finally {
      await byFcall.close();
      await byEval.close();
    }
    const n = await calls(raw);
    expect(n.fcall).toBeGreaterThan(0);
    expect(n.evalsha).toBeGreaterThan(0);
  }, 60_000);

  it('loads the library again after a FUNCTION FLUSH under a running consumer: no job lost', async () => {
    const mq = await EchoMQ.connect({ url: server.url });
    try {
      const q = mq.queue<number, number>('fn-flush');
      const ids: string[] = [];
      for (let i = 0; i < 60; i++) ids.push((await q.enqueue(i)).id);
      let flushed = 0;
      const consumer = q.consume(
        async (job) => {
          if (job.data % 20 === 10) {
            await raw.call('FUNCTION', 'FLUSH');
            flushed++;
          }
          return job.data;
        },
        { concurrency: 4 },
      );
      const results = await Promise.all(ids.map((id) => q.waitFor(id, { timeoutMs: 20_000 })));
      await consumer.close();
      expect(flushed).toBe(3);
      expect(results).toEqual(ids.map((_, i) => i));
      expect(await q.counts()).toMatchObject({ completed: 60, pending: 0, active: 0, dead: 0 });
    } finally {
      await mq.close();
    }
    expect(await libraries(raw)).toEqual([library().name]);
    expect((await calls(raw)).evalsha).toBe(0);
  }, 60_000);

  it("loads beside another release's library and never replaces it", async () => {
    // The previous release: other scripts (here one changed), so another hash, the same verbs.
    const previous = buildLibrary(
      [...loadScripts().values()].map((s) =>
        s.name === 'claim' ? { ...s, body: `${s.body}\n-- older` } : s,
      ),
    );
    await raw.call('FUNCTION', 'LOAD', previous.code);
    const mq = await EchoMQ.connect({ url: server.url });
    try {
      const q = mq.queue<number, number>('fn-beside');
      await q.enqueue(1);
      expect(await q.counts()).toMatchObject({ pending: 1 });
    } finally {
      await mq.close();
    }
    expect(await libraries(raw)).toEqual([library().name, previous.name].sort());
  });

  describe('falls back to EVALSHA with no error', () => {
    it('for an ACL user without FCALL, and one with FCALL but not FUNCTION LOAD', async () => {
      await raw.call('ACL', 'SETUSER', 'nofcall', 'on', '>pw', '~*', '&*', '+@all', '-fcall', '-fcall_ro');
      await raw.call('ACL', 'SETUSER', 'noload', 'on', '>pw', '~*', '&*', '+@all', '-function');
      for (const user of ['nofcall', 'noload']) {
        await raw.config('RESETSTAT');
        const mq = await EchoMQ.connect({ url: `redis://${user}:pw@127.0.0.1:${server.port}` });
        try {
          await coreFlow(mq, `fn-acl-${user}`);
        } finally {
          await mq.close();
        }
        const n = await calls(raw);
        expect(n.evalsha, user).toBeGreaterThan(10);
        // At most the first call tried FCALL (found no library, and the load was refused).
        expect(n.fcall, user).toBeLessThanOrEqual(user === 'noload' ? 1 : 0);
        expect(await libraries(raw), user).toEqual([]);
      }
    }, 60_000);

    it('on a server without FCALL (as before Redis 7.0)', async () => {
      const old = await RedisServer.start({ args: ['--rename-command', 'FCALL', ''] });
      const oldRaw = old.client();
      try {
        const mq = await EchoMQ.connect({ url: old.url });
        try {
          await coreFlow(mq, 'fn-old');
        } finally {
          await mq.close();
        }
        expect((await calls(oldRaw)).evalsha).toBeGreaterThan(10);
      } finally {
        oldRaw.disconnect();
        await old.stop();
      }
    }, 60_000);
  });
});
