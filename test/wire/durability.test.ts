// Replicated acknowledgement (connect's and each call's `durability`): writes resolve once WAIT
// confirms the replicas, fail with EMQDURABILITY when they do not, and are safe to retry. The
// failover that makes it matter is test/chaos/failover.test.ts.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EchoMQ } from '../../src/queue/echomq.js';
import { uniqueQueue } from '../support/harness.js';
import { RedisServer } from '../support/redis-server.js';
import { poll } from '../support/wait.js';

describe('durability: replicated acknowledgement', () => {
  let primary: RedisServer;
  let replica: RedisServer;
  let alone: RedisServer;

  beforeAll(async () => {
    [primary, alone] = await Promise.all([RedisServer.start(), RedisServer.start()]);
    replica = await RedisServer.start({ args: ['--replicaof', '127.0.0.1', String(primary.port)] });
    const r = replica.client();
    await poll(
      () => r.info('replication'),
      (i) => i.includes('master_link_status:up'),
      'the replica in sync',
      20_000,
    );
    await r.quit();
  });
  afterAll(async () => {
    await Promise.all([primary?.stop(), replica?.stop(), alone?.stop()]);
  });

  it('enqueue and completions resolve once the replica has them', async () => {
    const mq = await EchoMQ.connect({ url: primary.url, durability: { replicas: 1, timeoutMs: 5000 } });
    try {
      const q = mq.queue(uniqueQueue('dur'));
      const ids = (await Promise.all(Array.from({ length: 50 }, (_, i) => q.enqueue({ i })))).map(
        (r) => r.id,
      );
      const r = replica.client();
      expect(await r.exists(...ids.map((id) => q.keys.key('job', id)))).toBe(50); // already there
      const c = q.consume(async () => 'done');
      await poll(
        () => q.counts(),
        (n) => n.completed === 50,
        '50 completed',
        20_000,
      );
      await c.close();
      expect(await r.zcard(q.keys.key('completed'))).toBe(50);
      await r.quit();
    } finally {
      await mq.close();
    }
  });

  it("sends durable writes by the connection's transport: FCALL (the library loaded again where flushed), or EVALSHA, each followed by WAIT", async () => {
    const raw = primary.client();
    const stats = async () => {
      const info = await raw.info('commandstats');
      const count = (cmd: string) => Number(new RegExp(`cmdstat_${cmd}:calls=(\\d+)`).exec(info)?.[1] ?? 0);
      const failed = Number(/cmdstat_fcall:.*failed_calls=(\d+)/.exec(info)?.[1] ?? 0);
      const load = count('function\\|load');
      return {
        fcall: count('fcall'),
        failed,
        load,
        evalsha: count('evalsha'),
        eval: count('eval'),
        wait: count('wait'),
      };
    };
    const r = replica.client();
    try {
      for (const scripts of ['functions', 'eval'] as const) {
        const mq = await EchoMQ.connect({
          url: primary.url,
          scripts,
          durability: { replicas: 1, timeoutMs: 5000 },
        });
        try {
          const q = mq.queue<number, number>(uniqueQueue(`dur-${scripts}`));
          await q.counts(); // connected, hello run
          // The durable connection finds neither the library nor the scripts: it loads them again.
          await raw.call('FUNCTION', 'FLUSH');
          await raw.script('FLUSH');
          await raw.config('RESETSTAT');
          // Concurrent enqueues go as few calls (one batch, or a few): each a durable write.
          const ids = (await Promise.all(Array.from({ length: 20 }, (_, i) => q.enqueue(i)))).map(
            (e) => e.id,
          );
          expect(await r.exists(...ids.map((id) => q.keys.key('job', id)))).toBe(20);
          const enqueued = await stats();
          expect(enqueued.wait).toBeGreaterThan(0);
          if (scripts === 'functions') {
            // The first FCALLs found no library: the writes loaded it and went again by FCALL.
            expect(enqueued).toMatchObject({ evalsha: 0, eval: 0 });
            expect(enqueued.failed).toBeGreaterThanOrEqual(1);
            expect(enqueued.load).toBeGreaterThanOrEqual(1);
            expect(enqueued.fcall).toBeGreaterThan(enqueued.failed);
          } else {
            // The first EVALSHAs found no script: those writes went by EVAL.
            expect(enqueued.fcall).toBe(0);
            expect(enqueued.eval).toBeGreaterThanOrEqual(1);
            expect(enqueued.evalsha).toBeGreaterThanOrEqual(enqueued.eval);
          }
          await raw.config('RESETSTAT');
          const c = q.consume(async (job) => job.data);
          await poll(
            () => q.counts(),
            (n) => n.completed === 20,
            '20 completed',
            20_000,
          );
          await c.close();
          expect(await r.zcard(q.keys.key('completed'))).toBe(20);
          // The completions, durable too: by the same transport, each batch with its WAIT.
          const completed = await stats();
          expect(completed.wait).toBeGreaterThan(0);
          if (scripts === 'functions') {
            expect(completed.fcall).toBeGreaterThan(0);
            expect(completed.evalsha + completed.eval).toBe(0);
          } else {
            expect(completed.fcall).toBe(0);
            expect(completed.evalsha).toBeGreaterThan(0);
          }
        } finally {
          await mq.close();
        }
      }
    } finally {
      raw.disconnect();
      r.disconnect();
    }
  });

  it('fails with EMQDURABILITY when no replica confirms; the job is on the primary, and a retry by id is safe', async () => {
    const mq = await EchoMQ.connect({ url: alone.url, durability: { replicas: 1, timeoutMs: 50 } });
    try {
      const q = mq.queue(uniqueQueue('alone'));
      await expect(q.enqueue({}, { id: 'JOBdur1' })).rejects.toMatchObject({ code: 'EMQDURABILITY' });
      await expect(q.enqueueMany([{ data: {} }])).rejects.toMatchObject({ code: 'EMQDURABILITY' });
      // Not waiting for this call: the retried id is a duplicate, nothing written twice.
      expect(await q.enqueue({}, { id: 'JOBdur1', durability: false })).toEqual({
        id: 'JOBdur1',
        status: 'duplicate',
      });
      expect((await q.counts()).pending).toBe(2);
    } finally {
      await mq.close();
    }
  });

  it('refuses a malformed durability, and one where no replica can exist', async () => {
    await expect(EchoMQ.connect({ url: alone.url, durability: { replicas: 0 } })).rejects.toMatchObject({
      code: 'EMQINPUT',
    });
    await expect(
      EchoMQ.connect({ url: alone.url, durability: { replicas: 1, wait: 5 } as never }),
    ).rejects.toMatchObject({ code: 'EMQINPUT' });
    await expect(EchoMQ.connect({ url: 'memory://', durability: { replicas: 1 } })).rejects.toMatchObject({
      code: 'EMQINPUT',
    });
    const mq = await EchoMQ.connect({ url: alone.url });
    try {
      await expect(mq.queue('x').enqueue({}, { durability: { replicas: 'one' } as never })).rejects.toThrow(
        /durability.replicas/,
      );
    } finally {
      await mq.close();
    }
  });
});
