// Time that survives the server's clock (SPEC section 2.1): a redis-server whose wall clock is
// stepped an hour forward or back (test/support/clock-shim.c, LD_PRELOADed), and one paused with
// SIGSTOP for longer than the leases. Healthy holders keep their jobs (none runs twice), delayed
// jobs do not run early, and nothing stalls for the size of a backward step.
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { Consumer } from '../../src/consumer/consumer.js';
import { EchoMQ } from '../../src/queue/echomq.js';
import { type ServerClock as Clock, clockShim, ServerClock } from '../support/clock-shim.js';
import { uniqueQueue } from '../support/harness.js';
import { RedisServer } from '../support/redis-server.js';
import { pause, poll } from '../support/wait.js';

const HOUR = 3_600_000;

describe.skipIf(!clockShim.path)(
  `a server clock that steps or stops${clockShim.missing ? ` (${clockShim.missing})` : ''}`,
  () => {
    let clock: Clock;
    let server: RedisServer;
    let mq: EchoMQ;
    const consumers: Consumer[] = [];

    beforeAll(async () => {
      clock = new ServerClock();
      server = await RedisServer.start({ env: clock.env });
      mq = await EchoMQ.connect({ url: server.url });
    });
    afterEach(async () => {
      await Promise.all(consumers.splice(0).map((c) => c.close()));
    });
    afterAll(async () => {
      await mq?.close();
      await server?.stop();
    });

    /** A handler that holds each job `ms` and counts its starts by id. */
    function holding(ms: number) {
      const starts = new Map<string, number>();
      const handler = async (job: { id: string }) => {
        starts.set(job.id, (starts.get(job.id) ?? 0) + 1);
        await pause(ms);
        return 'ok';
      };
      return { starts, handler, twice: () => [...starts.values()].filter((n) => n > 1).length };
    }

    it('the shim moves the clock scripts read (TIME), and only that', async () => {
      const raw = server.client();
      const before = Number((await raw.time())[0]);
      clock.step(HOUR);
      const after = Number((await raw.time())[0]);
      clock.step(-HOUR);
      await raw.quit();
      expect(after - before).toBeGreaterThanOrEqual(3599);
      expect(after - before).toBeLessThan(3620);
    });

    it('a step forward of an hour: no live lease is reaped, no job runs twice, no delayed job runs early', async () => {
      const q = mq.queue(uniqueQueue('fwd'));
      const run = holding(5000);
      const delayed: string[] = [];
      for (let i = 0; i < 20; i++) delayed.push((await q.enqueueIn({ late: i }, 60_000 + i * 3000)).id);
      const c = q.consume(run.handler, { concurrency: 20, leaseMs: 2000 });
      consumers.push(c);
      for (let i = 0; i < 20; i++) await q.enqueue({ now: i });
      await poll(
        () => run.starts.size,
        (n) => n === 20,
        '20 jobs running',
      );
      await pause(1200); // a recovery pass and a promote see the clock before the step
      clock.step(HOUR);
      try {
        await poll(
          () => q.counts(),
          (n) => n.completed === 20,
          '20 completed',
          20_000,
        );
        expect(run.twice()).toBe(0);
        expect(delayed.filter((id) => run.starts.has(id))).toEqual([]);
        expect((await q.counts()).scheduled).toBe(20);
      } finally {
        clock.step(-HOUR);
      }
    });

    it('a step back of an hour: a dead holder’s job, a delayed job and a rate-limited queue carry on within seconds', async () => {
      const q = mq.queue(uniqueQueue('back'));
      await q.configure({ rateLimit: { max: 2, perMs: 1000 } });
      const done: string[] = [];
      // A worker that claims one job and dies: its lease must still end on time.
      const dead = await q.enqueue({ dead: true });
      await q.run('claim', [q.keys.prefix, 1, 3000]);
      const c = q.consume(
        async (job) => {
          done.push(job.id);
          return 'ok';
        },
        { concurrency: 4, leaseMs: 3000 },
      );
      consumers.push(c);
      await pause(1200); // its first recovery pass and promote keep the clock before the step
      const late = (await q.enqueueIn({ delayed: true }, 2000)).id;
      for (let i = 0; i < 6; i++) await q.enqueue({ rate: i });
      clock.step(-HOUR);
      try {
        await poll(
          () => done.length,
          (n) => n >= 8,
          'all 8 jobs done',
          20_000,
        );
        expect(done).toContain(dead.id);
        expect(done).toContain(late);
      } finally {
        clock.step(HOUR);
      }
    });

    it('a SIGSTOP longer than the lease: the first pass after it recovers none of the healthy holders’ jobs, none runs twice', async () => {
      const name = uniqueQueue('stop');
      const q = mq.queue(name);
      const run = holding(8000);
      const c = q.consume(run.handler, { concurrency: 30, leaseMs: 2000, recovery: 'off' });
      consumers.push(c);
      // The recovery pass comes from another connection, sent first once the server stops, so
      // the server runs it before the holders' queued extensions (the order that loses jobs).
      const other = await EchoMQ.connect({ url: server.url });
      try {
        const sweeper = other.queue(name);
        for (let i = 0; i < 30; i++) await q.enqueue({ i });
        await poll(
          () => run.starts.size,
          (n) => n === 30,
          '30 jobs running',
        );
        for (let i = 0; i < 4; i++) {
          expect(await sweeper.reap(100, 1000)).toEqual([]);
          await pause(300);
        }
        server.pause();
        const first = sweeper.reap(100, 1000);
        await pause(5000);
        server.resume();
        expect(await first).toEqual([]);
        await poll(
          () => q.counts(),
          (n) => n.completed === 30,
          '30 completed',
          20_000,
        );
        expect(run.twice()).toBe(0);
      } finally {
        await other.close();
      }
    });
  },
);
