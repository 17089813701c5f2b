// The module's timers when the server's event loop is held (SPEC 2.1, 26.1 point 10): a
// redis-server SIGSTOPped past its leases' deadlines, then SIGCONTed. The clock did not step, but
// no one could extend a lease while the server answered nothing, so a stop is a jump: the watch
// counts it, and the lease timers give each lease the time the stop took from it, as a
// consumer's pass would. Proven: the jump is counted, the firings after it (with the server
// clock past every deadline) recover nothing, and each lease is recovered once later on.
import type { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EchoMQ } from '../../src/queue/echomq.js';
import { uniqueQueue } from '../support/harness.js';
import { loadModuleArgs, nativeModule } from '../support/native-module.js';
import { serverNow } from '../support/observe.js';
import { RedisServer } from '../support/redis-server.js';
import {
  claimedJobs,
  expectOnceOnTime,
  firstLeasePass,
  pendingOf,
  scoresOf,
  timerCounters,
} from '../support/timer-observe.js';
import { pause, poll } from '../support/wait.js';

const TIMERS = loadModuleArgs({ timers: 'on' });

describe.skipIf(!nativeModule.path)(
  `the module's lease timers across a held event loop${nativeModule.missing ? ` (${nativeModule.missing})` : ''}`,
  () => {
    let server: RedisServer;
    let raw: Redis;
    beforeAll(async () => {
      server = await RedisServer.start({ args: TIMERS });
      raw = server.client();
    });
    afterAll(async () => {
      server?.resume();
      await raw?.quit();
      await server?.stop();
    });

    it('count a SIGSTOP past the deadlines as a jump and recover nothing early after SIGCONT', async () => {
      const queue = uniqueQueue('lease-held');
      // A first pass, so the queue has a clock_lease to measure the stop against.
      await firstLeasePass(server.url, raw, queue);
      // Out of the way, so the jobs below are the ones claimed: each recovered once.
      const [first] = await raw.zrange(`emq:{${queue}}:pending`, 0, -1);
      const mq = await EchoMQ.connect({ url: server.url });
      await mq.queue(queue).remove(first!);
      await mq.close();
      await claimedJobs(server.url, queue, 4, 500);
      const due = await scoresOf(raw, queue, 'active');
      const last = Math.max(...due.values());
      const before = await timerCounters(raw);

      // The stop is the stimulus, not a wait for a result: held past every deadline.
      server.pause();
      await pause(3000);
      server.resume();

      // The lease timer is due the moment the loop runs again; whether it or the watch looks at
      // the clocks first, the jump is counted before the firing recovers anything.
      const after = await poll(
        () => timerCounters(raw),
        (t) => t.jumps > before.jumps && t.leaseFirings > before.leaseFirings,
        'the jump counted and a lease firing after it',
        10_000,
      );
      const now = await serverNow(raw);
      expect(now, 'the server clock is past every deadline').toBeGreaterThan(last);
      expect(after.recovered - before.recovered, 'nothing recovered by the firings after the stop').toBe(0);

      // The leases got the stop's time back: recovered once, later, with no consumer.
      await poll(
        () => pendingOf(raw, queue),
        (c) => c === 4,
        'the leases recovered once their own time ran out',
        20_000,
      );
      await expectOnceOnTime(raw, queue, due, 'stalled');
      expect((await timerCounters(raw)).recovered - before.recovered).toBe(4);
    });
  },
);
