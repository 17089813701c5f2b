// The module recovers expired leases itself (SPEC 26.1): a consumer SIGKILLed holding jobs has
// them returned to pending by the server at their lease deadline, with no other consumer beating
// a recovery leg; never before the deadline, each once, by the queue's recovery mode; only on a
// primary; nothing lost across an unload and a load; and a step of the wall clock recovers
// nothing early.
import type { ChildProcess } from 'node:child_process';
import type { Redis } from 'ioredis';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { EchoMQ } from '../../src/queue/echomq.js';
import { clockShim, ServerClock } from '../support/clock-shim.js';
import { uniqueQueue } from '../support/harness.js';
import { holdJobs, killHolder } from '../support/held-consumer.js';
import { loadModuleArgs, nativeModule } from '../support/native-module.js';
import { serverNow } from '../support/observe.js';
import { RedisServer } from '../support/redis-server.js';
import {
  claimedJobs,
  eventsOf,
  expectOnceOnTime,
  firstLeasePass,
  pendingOf,
  scoresOf,
  startReplicated,
  timerCounters,
} from '../support/timer-observe.js';
import { poll } from '../support/wait.js';

const TIMERS = loadModuleArgs({ timers: 'on' });

/** Every job recovered once (its one `stalled` event), at or after its deadline. */
const expectRecoveredOnTime = (raw: Redis, queue: string, due: Map<string, number>) =>
  expectOnceOnTime(raw, queue, due, 'stalled');

const deadlines = (raw: Redis, queue: string) => scoresOf(raw, queue, 'active');

describe.skipIf(!nativeModule.path)(
  `the module's lease timers${nativeModule.missing ? ` (${nativeModule.missing})` : ''}`,
  () => {
    let server: RedisServer;
    let raw: Redis;
    const children: ChildProcess[] = [];
    beforeAll(async () => {
      server = await RedisServer.start({ args: [...TIMERS, '--enable-module-command', 'yes'] });
      raw = server.client();
    });
    afterEach(() => {
      for (const c of children.splice(0)) c.kill('SIGKILL');
    });
    afterAll(async () => {
      await raw?.quit();
      await server?.stop();
    });

    it('return the jobs of a SIGKILLed consumer to pending at their deadline, with no consumer beating, each run again once', async () => {
      const queue = uniqueQueue('lease-kill');
      const n = 8;
      const mq = await EchoMQ.connect({ url: server.url });
      try {
        const q = mq.queue(queue);
        await Promise.all(Array.from({ length: n }, (_, i) => q.enqueue({ i })));
        const child = await holdJobs(server.url, queue, 1000, n);
        children.push(child);
        await killHolder(child);
        // The holder is dead: these deadlines are final.
        const due = await deadlines(raw, queue);
        expect(due.size).toBe(n);
        const before = await timerCounters(raw);
        expect(before.leaseArmed).toBeGreaterThan(0);
        await poll(
          () => pendingOf(raw, queue),
          (c) => c === n,
          'the server recovered every lease',
          20_000,
        );
        await expectRecoveredOnTime(raw, queue, due);
        expect((await timerCounters(raw)).recovered - before.recovered).toBe(n);

        // Run again by a consumer that never recovers anything itself: each ends once.
        const ended = new Map<string, number>();
        const c = q.consume(
          async (job) => {
            ended.set(job.id, (ended.get(job.id) ?? 0) + 1);
            return job.attempts;
          },
          { beatMs: 60_000, recovery: 'off', concurrency: 4 },
        );
        await poll(
          async () => (await q.counts()).completed,
          (done) => done === n,
          'the recovered jobs completed',
          20_000,
        );
        await c.close();
        expect([...ended.values()]).toEqual(Array(n).fill(1));
        for (const id of due.keys()) {
          expect(await q.get(id)).toMatchObject({ state: 'completed', attempts: 2, stalled: 1 });
          expect((await eventsOf(raw, queue)).get(id)!.map(([e]) => e)).toEqual([
            'added',
            'active',
            'stalled',
            'active',
            'completed',
          ]);
        }
      } finally {
        await mq.close();
      }
    });

    it('recover by the queue recovery mode: stalled dead-letters past max_stalled, off leaves the leases', async () => {
      const stalled = uniqueQueue('lease-stalled');
      const off = uniqueQueue('lease-off');
      await raw.hset(`emq:{${stalled}}:meta`, 'recovery', 'stalled', 'max_stalled', '0');
      await raw.hset(`emq:{${off}}:meta`, 'recovery', 'off');
      await claimedJobs(server.url, stalled, 5, 300);
      await claimedJobs(server.url, off, 5, 300);
      const due = await deadlines(raw, stalled);
      await poll(
        () => raw.zcard(`emq:{${stalled}}:dead`),
        (c) => c === 5,
        'the stalled queue dead-lettered its 5',
        20_000,
      );
      const events = await eventsOf(raw, stalled);
      for (const [id, deadline] of due) {
        const failed = events.get(id)!.filter(([e]) => e === 'failed');
        expect(failed.length).toBe(1);
        expect(failed[0]![1]).toBeGreaterThanOrEqual(deadline);
      }
      // Past every deadline of the 'off' queue by more than a backstop: nothing moved them.
      const last = Math.max(...(await deadlines(raw, off)).values());
      await poll(
        () => serverNow(raw),
        (now) => now > last + 1200,
        'the clock past the off queue deadlines',
        10_000,
      );
      expect(await raw.zcard(`emq:{${off}}:active`)).toBe(5);
      const list = (await raw.call('EMQ.TIMERS', 'LIST')) as [string, number, number, string, number][];
      const row = (q: string) => list.find((e) => e[0] === `emq:{${q}}:`);
      expect(row(stalled)?.[3]).toBe('stalled');
      expect(row(off)?.[3]).toBe('off');
    });

    it('lose nothing unloaded, and recover from the data on MODULE LOAD', async () => {
      const queue = uniqueQueue('lease-reload');
      expect(((await raw.call('EMQ.TIMERS', 'OFF')) as number[])[0]).toBe(0);
      await raw.call('MODULE', 'UNLOAD', 'echomq');
      try {
        await claimedJobs(server.url, queue, 6, 200);
        const due = await deadlines(raw, queue);
        const last = Math.max(...due.values());
        await poll(
          () => serverNow(raw),
          (now) => now > last + 300,
          'the clock past the deadlines',
          10_000,
        );
        expect(await raw.zcard(`emq:{${queue}}:active`)).toBe(6);
        await raw.call('MODULE', 'LOAD', nativeModule.path!, 'timers', 'on');
        await poll(
          () => pendingOf(raw, queue),
          (c) => c === 6,
          'recovered after the load',
          20_000,
        );
        await expectRecoveredOnTime(raw, queue, due);
      } finally {
        // The module is back for the tests after this one, whatever happened above.
        const mods = (await raw.call('MODULE', 'LIST')) as unknown[][];
        if (!mods.some((m) => m.includes('echomq'))) {
          await raw.call('MODULE', 'LOAD', nativeModule.path!, 'timers', 'on');
        }
      }
    });

    it('refuse a bad EMQ.TIMERS argument, saying what it takes', async () => {
      await expect(raw.call('EMQ.TIMERS', 'SOON')).rejects.toThrow(/EMQ.TIMERS takes \[ON\|OFF\|LIST\]/);
      await expect(raw.call('EMQ.TIMERS.RUNNING', 'x')).rejects.toThrow(/takes no arguments/);
      expect(await raw.call('EMQ.TIMERS.RUNNING')).toBe(1);
    });
  },
);

describe.skipIf(!nativeModule.path)("the module's lease timers on a replica", () => {
  let primary: RedisServer;
  let replica: RedisServer;
  let p: Redis;
  let r: Redis;
  beforeAll(async () => {
    ({ primary, replica, p, r } = await startReplicated(TIMERS));
  });
  afterAll(async () => {
    await p?.quit();
    await r?.quit();
    await primary?.stop();
    await replica?.stop();
  });

  it('recover on the primary only; the replica follows its effects', async () => {
    const queue = uniqueQueue('lease-ha');
    await claimedJobs(primary.url, queue, 10, 200);
    const due = await deadlines(p, queue);
    await poll(
      () => pendingOf(p, queue),
      (c) => c === 10,
      'the primary recovered',
      20_000,
    );
    await p.call('WAIT', '1', '5000');
    expect(await pendingOf(r, queue)).toBe(10);
    expect(await r.zcard(`emq:{${queue}}:active`)).toBe(0);
    await expectRecoveredOnTime(r, queue, due);
    expect((await timerCounters(r)).leaseFirings).toBe(0);
    expect(await r.call('EMQ.TIMERS.RUNNING')).toBe(0);
  });
});

describe.skipIf(!nativeModule.path || !clockShim.path)(
  "the module's lease timers when the wall clock steps",
  () => {
    const clock = new ServerClock();
    let server: RedisServer;
    let raw: Redis;
    beforeAll(async () => {
      server = await RedisServer.start({ args: TIMERS, env: clock.env });
      raw = server.client();
    });
    afterAll(async () => {
      await raw?.quit();
      await server?.stop();
    });

    it('recover nothing early after a step forward: each lease keeps the time it had left', async () => {
      const queue = uniqueQueue('lease-step');
      // A first pass, so the queue has a clock_lease to measure the step against.
      await firstLeasePass(server.url, raw, queue);
      const mq = await EchoMQ.connect({ url: server.url });
      try {
        const q = mq.queue(queue);
        const held = await q.claim(4, { leaseMs: 4000 });
        expect(held.length).toBe(1);
        await Promise.all(Array.from({ length: 3 }, (_, i) => q.enqueue({ i })));
        expect((await q.claim(3, { leaseMs: 4000 })).length).toBe(3);
        const before = await timerCounters(raw);
        const started = performance.now();
        clock.step(60_000);
        // The watch sees the step and every timer fires at once: the queue's lease timer (armed
        // 4 s out, nothing else fires it before) has a firing only from the jump.
        await poll(
          () => timerCounters(raw),
          (t) => t.jumps > before.jumps && t.leaseFirings > before.leaseFirings,
          'the watch to count the step and a lease firing after it',
          10_000,
        );
        // Before the leases' own 4 s ran out (a slow machine may have spent them: then unchecked).
        if (performance.now() - started < 3800) expect(await raw.zcard(`emq:{${queue}}:active`)).toBe(4);
        await poll(
          () => pendingOf(raw, queue),
          (c) => c === 4,
          'the leases recovered once their own time ran out',
          20_000,
        );
        expect(performance.now() - started).toBeGreaterThanOrEqual(3500);
      } finally {
        await mq.close();
      }
    });
  },
);
