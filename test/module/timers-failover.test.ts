// The module's timers across a Sentinel failover (SPEC 26.1 points 4 and 5), on real processes:
// a primary and a replica, both with the module loaded and its timers on, and 3 Sentinels.
// Delayed jobs due after the failover and the leases of a SIGKILLed consumer are left with no
// consumer anywhere; the primary is SIGKILLed and Sentinel promotes the replica. Proven: the
// replica never fires while it is one; the promoted replica releases and recovers from the data
// alone; each job is moved once (one `waiting`, one `stalled`), never before its instant.
import type { ChildProcess } from 'node:child_process';
import type { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EchoMQ } from '../../src/queue/echomq.js';
import { uniqueQueue } from '../support/harness.js';
import { holdJobs, killHolder } from '../support/held-consumer.js';
import { loadModuleArgs, nativeModule } from '../support/native-module.js';
import type { RedisServer } from '../support/redis-server.js';
import { Sentinels, sentinelBinary } from '../support/sentinel.js';
import {
  delayedJobs,
  expectOnceOnTime,
  scoresOf,
  startReplicated,
  timerCounters,
} from '../support/timer-observe.js';
import { poll } from '../support/wait.js';

const TIMERS = loadModuleArgs({ timers: 'on' });
const missing = nativeModule.missing ?? ('missing' in sentinelBinary ? sentinelBinary.missing : undefined);

describe.skipIf(missing !== undefined)(
  `the module's timers across a Sentinel failover${missing ? ` (${missing})` : ''}`,
  () => {
    let primary: RedisServer;
    let replica: RedisServer;
    let sentinels: Sentinels;
    let p: Redis;
    let r: Redis;
    let holder: ChildProcess | undefined;

    beforeAll(async () => {
      ({ primary, replica, p, r } = await startReplicated(TIMERS));
      sentinels = await Sentinels.start(3, primary.port, 1);
    }, 60_000);

    afterAll(async () => {
      holder?.kill('SIGKILL');
      sentinels?.stop();
      p?.disconnect();
      await r?.quit();
      await primary?.stop();
      await replica?.stop();
    });

    it('resume on the promoted replica: released and recovered from the data, each once, none early; the replica never fires', async () => {
      const delayedQ = uniqueQueue('fo-delayed');
      const leasedQ = uniqueQueue('fo-leased');
      // Released by the old primary before the failover: the replica only follows.
      const early = await delayedJobs(
        primary.url,
        delayedQ,
        Array.from({ length: 20 }, (_, i) => 10 + i * 5),
      );
      // Leases of a dead holder and delayed jobs, both due once the primary is gone (Sentinel takes
      // about 1 s to call it down, then elects and promotes): only the promoted replica can move them.
      const n = 6;
      const conn = await EchoMQ.connect({ url: primary.url });
      try {
        await Promise.all(Array.from({ length: n }, (_, i) => conn.queue(leasedQ).enqueue({ i })));
      } finally {
        await conn.close();
      }
      holder = await holdJobs(primary.url, leasedQ, 4000, n);
      await killHolder(holder);
      const late = await delayedJobs(
        primary.url,
        delayedQ,
        Array.from({ length: 30 }, (_, i) => 3000 + i * 20),
      );
      const leases = await scoresOf(p, leasedQ, 'active');
      expect(leases.size).toBe(n);
      await poll(
        () => p.zcard(`emq:{${delayedQ}}:pending`),
        (c) => c === early.size,
        'the primary released the early ones',
        20_000,
      );
      await p.call('WAIT', '1', '5000');
      const onReplica = await timerCounters(r);
      expect(onReplica.firings, 'a replica never fires a promote timer').toBe(0);
      expect(onReplica.leaseFirings, 'nor a lease timer').toBe(0);
      expect(await r.call('EMQ.TIMERS.RUNNING')).toBe(0);
      expect(await r.zcard(`emq:{${delayedQ}}:schedule`)).toBe(late.size);
      expect(await r.zcard(`emq:{${leasedQ}}:active`)).toBe(n);

      await primary.kill();
      await poll(
        () => sentinels.primaryPort(),
        (port) => port === replica.port,
        'Sentinel to promote the replica',
        30_000,
      );
      await poll(
        () => r.call('EMQ.TIMERS.RUNNING'),
        (v) => v === 1,
        'the timers running on the promoted replica',
        10_000,
      );
      await poll(
        async () => [await r.zcard(`emq:{${delayedQ}}:pending`), await r.zcard(`emq:{${leasedQ}}:pending`)],
        ([d, l]) => d === early.size + late.size && l === n,
        'the promoted replica released and recovered everything',
        30_000,
      );
      await expectOnceOnTime(r, delayedQ, new Map([...early, ...late]), 'waiting');
      await expectOnceOnTime(r, leasedQ, leases, 'stalled');
      const promoted = await timerCounters(r);
      expect(promoted.firings).toBeGreaterThan(0);
      expect(promoted.recovered).toBe(n);
      expect(promoted.released).toBe(late.size);
    }, 90_000);
  },
);
