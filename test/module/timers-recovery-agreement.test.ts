// A consumer's own `recovery` where the module's timers recover by meta (SPEC 26.1 point 12):
// a consumer started with 'stalled' or 'off' on a queue whose meta names no recovery writes its
// own there, so the server runs what the consumer asked for; one whose meta names another is told
// on its 'error' channel (EMQFLEET, both values, how to fix) and meta is left as it was; the
// default consumer writes nothing. Without the module a consumer writes nothing to meta.
import type { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ConsumeOptions, Consumer } from '../../src/consumer/consumer.js';
import { EchoMQError } from '../../src/core/errors.js';
import { EchoMQ } from '../../src/queue/echomq.js';
import { uniqueQueue } from '../support/harness.js';
import { loadModuleArgs, nativeModule } from '../support/native-module.js';
import { RedisServer } from '../support/redis-server.js';
import { claimedJobs } from '../support/timer-observe.js';
import { poll, within } from '../support/wait.js';

const meta = (raw: Redis, queue: string) => raw.hgetall(`emq:{${queue}}:meta`);

/** A consumer on `queue` that claims nothing it did not enqueue (there is nothing to claim). */
function idle(mq: EchoMQ, queue: string, opts: ConsumeOptions): Consumer {
  return mq.queue(queue).consume(async () => undefined, { beatMs: 50, ...opts });
}

/** The consumer's first beats ran their recovery pass (a heartbeat lists it). */
async function beaten(raw: Redis, queue: string): Promise<void> {
  await poll(
    () => raw.zcard(`emq:{${queue}}:consumers`),
    (n) => n > 0,
    'the consumer to beat',
    10_000,
  );
}

describe.skipIf(!nativeModule.path)(
  `a consumer's recovery on the module's timers${nativeModule.missing ? ` (${nativeModule.missing})` : ''}`,
  () => {
    let server: RedisServer;
    let raw: Redis;
    let mq: EchoMQ;
    beforeAll(async () => {
      server = await RedisServer.start({ args: loadModuleArgs({ timers: 'on' }) });
      raw = server.client();
      mq = await EchoMQ.connect({ url: server.url });
    });
    afterAll(async () => {
      await mq?.close();
      await raw?.quit();
      await server?.stop();
    });

    it("writes a consumer's 'stalled' into a meta that names none, and the server then runs it", async () => {
      const queue = uniqueQueue('agree-stalled');
      const c = idle(mq, queue, { recovery: 'stalled', maxStalled: 0 });
      await poll(
        () => meta(raw, queue),
        (m) => m.recovery === 'stalled',
        'meta recovery written',
        10_000,
      );
      await c.close();
      expect((await meta(raw, queue)).max_stalled).toBe('0');
      // Leases run out with no consumer: the server dead-letters them (maxStalled 0), not reaps.
      await claimedJobs(server.url, queue, 3, 200);
      await poll(
        () => raw.zcard(`emq:{${queue}}:dead`),
        (n) => n === 3,
        'the server ran the consumer recovery',
        20_000,
      );
      expect(await raw.zcard(`emq:{${queue}}:pending`)).toBe(0);
    });

    it("writes 'off' likewise, and nothing for the default reap", async () => {
      const off = uniqueQueue('agree-off');
      const reap = uniqueQueue('agree-reap');
      const a = idle(mq, off, { recovery: 'off' });
      const b = idle(mq, reap, {});
      await poll(
        () => meta(raw, off),
        (m) => m.recovery === 'off',
        'meta recovery off',
        10_000,
      );
      await beaten(raw, reap);
      await Promise.all([a.close(), b.close()]);
      const m = await meta(raw, off);
      expect(m.max_stalled).toBeUndefined();
      expect((await meta(raw, reap)).recovery).toBeUndefined();
    });

    it('never overwrites another explicit meta value: the consumer is told both and how to fix', async () => {
      const queue = uniqueQueue('agree-differs');
      await mq.queue(queue).configure({ recovery: 'stalled', maxStalled: 2 });
      const c = idle(mq, queue, { recovery: 'off' });
      const warned = new Promise<EchoMQError>((resolve) =>
        c.on('error', (err) => err instanceof EchoMQError && err.code === 'EMQFLEET' && resolve(err)),
      );
      const err = await within(warned, 10_000, 'the EMQFLEET warning');
      await c.close();
      expect(err.message).toContain(`queue ${queue}`);
      expect(err.message).toContain("recovery 'off'");
      expect(err.message).toContain("'stalled' (maxStalled 2)");
      expect(err.message).toContain("queue.configure({ recovery: 'off' })");
      expect(err.message).toContain("start this consumer with recovery: 'stalled', maxStalled: 2");
      const m = await meta(raw, queue);
      expect([m.recovery, m.max_stalled]).toEqual(['stalled', '2']);
    });
  },
);

describe("a consumer's recovery without the module", () => {
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

  it('writes nothing to meta: the consumers run their own recovery', async () => {
    const queue = uniqueQueue('agree-plain');
    const mq = await EchoMQ.connect({ url: server.url });
    try {
      const c = idle(mq, queue, { recovery: 'stalled', maxStalled: 0 });
      await beaten(raw, queue);
      await c.close();
      expect((await meta(raw, queue)).recovery).toBeUndefined();
    } finally {
      await mq.close();
    }
  });
});
