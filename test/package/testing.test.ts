// The memory engine's movable clock and echomq/testing: mq.clock moves the server clock every
// script reads and the consumers parked on the engine act on what fell due at once (their beat is
// set to a minute here, so only the move can make them act in time); runUntilIdle runs a queue
// until nothing is left, stepping the clock through a window; enqueued shows what waits to run.
import { afterEach, describe, expect, it } from 'vitest';
import type { EchoMQError } from '../../src/core/errors.js';
import type { Job } from '../../src/index.js';
import { EchoMQ } from '../../src/queue/echomq.js';
import { enqueued, runUntilIdle } from '../../src/testing.js';
import { useRedisServer } from '../support/harness.js';
import { deferred, within } from '../support/wait.js';

const env = useRedisServer();
const open: EchoMQ[] = [];

async function memory(): Promise<EchoMQ> {
  const mq = await EchoMQ.connect({ url: 'memory://' });
  open.push(mq);
  return mq;
}

afterEach(async () => {
  for (const mq of open.splice(0)) await mq.close();
});

function refusal(fn: () => unknown): EchoMQError {
  try {
    fn();
  } catch (err) {
    return err as EchoMQError;
  }
  throw new Error('expected a refusal');
}

const MINUTE_BEAT = { beatMs: 60_000 };

describe('mq.clock', () => {
  it('moves the server clock that TIME and the scripts read: advance by ms or a duration, set to an instant', async () => {
    const mq = await memory();
    const client = mq.connector.client;
    const serverNow = async () => {
      const [s, us] = await client.time();
      return Number(s) * 1000 + Math.floor(Number(us) / 1000);
    };
    const before = await serverNow();
    mq.clock.advance('1d');
    expect(await serverNow()).toBeGreaterThanOrEqual(before + 86_400_000);
    mq.clock.set('2026-03-28T12:00:00Z');
    const at = await serverNow();
    expect(at).toBeGreaterThanOrEqual(Date.parse('2026-03-28T12:00:00Z'));
    expect(at).toBeLessThan(Date.parse('2026-03-28T12:01:00Z'));
    mq.clock.advance(500);
    expect(mq.clock.now()).toBeGreaterThanOrEqual(at + 500);
    // A scheduled job's run-at is written with that clock.
    const q = mq.queue('clocked');
    const { id } = await q.enqueueIn({}, 60_000);
    expect((await q.get(id))?.runAt).toBeGreaterThanOrEqual(at + 60_500);
  });

  it('refuses a bad move, and on a Redis connection refuses every call, saying why', async () => {
    const mq = await memory();
    expect(refusal(() => mq.clock.advance(-1)).code).toBe('EMQINPUT');
    expect(refusal(() => mq.clock.advance('soon')).code).toBe('EMQINPUT');
    expect(refusal(() => mq.clock.set('not a date')).message).toContain('clock.set takes an instant');
    const onRedis = await EchoMQ.connect({ url: env.server.url });
    open.push(onRedis);
    const err = refusal(() => onRedis.clock.advance(1000));
    expect(err.code).toBe('EMQINPUT');
    expect(err.message).toContain('mq.clock.advance() works on a memory engine only');
    expect(refusal(() => onRedis.clock.now()).code).toBe('EMQINPUT');
  });

  it('a consumer parked on the engine runs a job delayed by 5 minutes as soon as the clock passes its run-at', async () => {
    const mq = await memory();
    const q = mq.queue<string>('delayed');
    const ran = deferred<number>();
    const consumer = q.consume(() => ran.resolve(mq.clock.now()), MINUTE_BEAT);
    await consumer.idle();
    const { id } = await q.enqueueIn('later', 5 * 60_000);
    const runAt = (await q.get(id))!.runAt!;
    mq.clock.advance('5m');
    const startedAt = await within(ran.promise, 20_000, 'the delayed job to run after the move');
    expect(startedAt).toBeGreaterThanOrEqual(runAt);
    await consumer.close();
  });

  it('a lease expires when the clock passes it: the running job is recovered and runs again, the first attempt lost', async () => {
    const mq = await memory();
    const q = mq.queue<string>('leases');
    const attempts: number[] = [];
    const lost = deferred<Job>();
    const second = deferred<void>();
    const consumer = q.consume(
      (job, ctx) => {
        attempts.push(job.attempts);
        if (job.attempts === 2) return second.resolve();
        // The first attempt hangs until its lease is taken away.
        return new Promise<void>((resolve) => ctx.signal.addEventListener('abort', () => resolve()));
      },
      { ...MINUTE_BEAT, leaseMs: 30_000 },
    );
    consumer.on('lost', (job) => lost.resolve(job));
    const { id } = await q.enqueue('stuck');
    await within(
      new Promise<void>((resolve) => {
        const check = () => (attempts.length === 1 ? resolve() : setTimeout(check, 5));
        check();
      }),
      20_000,
      'the first attempt to start',
    );
    mq.clock.advance(30_001);
    expect((await within(lost.promise, 20_000, 'the first attempt to be lost')).id).toBe(id);
    await within(second.promise, 20_000, 'the second attempt');
    expect(attempts).toEqual([1, 2]);
    await consumer.idle();
    expect((await q.get(id))?.state).toBe('completed');
    await consumer.close();
  });
});

describe('runUntilIdle', () => {
  it('runs what is due, leaves a retry in backoff for later, and runs it once the window reaches it', async () => {
    const mq = await memory();
    const q = mq.queue<{ to: string }>('retries');
    q.consume(
      (job) => {
        if (job.attempts === 1) throw new Error('the mail server timed out');
      },
      { ...MINUTE_BEAT, backoff: { kind: 'fixed', ms: 5 * 60_000 } },
    );
    const { id } = await q.enqueue({ to: 'ada@example.com' }, { name: 'welcome' });
    expect(await runUntilIdle(q)).toEqual({ completed: 0, retried: 1, dead: 0, cancelled: 0, lost: 0 });
    const [waiting] = await enqueued(q, { name: 'welcome' });
    expect(waiting).toMatchObject({ id, state: 'scheduled', attempts: 1 });
    expect(waiting!.runAt! - mq.clock.now()).toBeGreaterThan(4 * 60_000);
    // Four minutes are not enough; five are.
    expect((await runUntilIdle(q, { advance: '4m' })).completed).toBe(0);
    expect((await runUntilIdle(q, { advance: '1m' })).completed).toBe(1);
    expect((await q.get(id))?.state).toBe('completed');
    expect(await enqueued(q)).toEqual([]);
  });

  it('runs a daily 09:00 Europe/Berlin scheduler across the spring DST change, at 08:00 and then 07:00 UTC', async () => {
    const mq = await memory();
    mq.clock.set('2026-03-27T12:00:00Z'); // a Friday; Berlin moves to summer time on Sunday 29th
    const q = mq.queue<{ kind: string }>('daily');
    const ranAt: string[] = [];
    await q.schedulers.upsert(
      'morning',
      { pattern: '0 9 * * *', tz: 'Europe/Berlin' },
      { data: { kind: 'digest' } },
    );
    const summary = await runUntilIdle(q, {
      handler: () => {
        ranAt.push(new Date(mq.clock.now()).toISOString().slice(0, 16));
      },
      consume: MINUTE_BEAT,
      until: '2026-03-30T12:00:00Z',
    });
    expect(ranAt).toEqual(['2026-03-28T08:00', '2026-03-29T07:00', '2026-03-30T07:00']);
    expect(summary.completed).toBe(3);
    expect(mq.clock.now()).toBeGreaterThanOrEqual(Date.parse('2026-03-30T12:00:00Z'));
    // The next occurrence waits for tomorrow's 09:00.
    expect((await enqueued(q)).map((j) => new Date(j.runAt!).toISOString())).toEqual([
      '2026-03-31T07:00:00.000Z',
    ]);
  });

  it('goes on while handlers enqueue more, and counts each outcome', async () => {
    const mq = await memory();
    const q = mq.queue<{ step: number }>('chain');
    q.consume(async (job) => {
      if (job.data.step < 3) await q.enqueue({ step: job.data.step + 1 });
      if (job.data.step === 3) throw new Error('the last step fails for good');
    }, MINUTE_BEAT);
    await q.enqueue({ step: 1 }, { attempts: 1 });
    expect(await runUntilIdle(q)).toEqual({ completed: 2, retried: 1, dead: 0, cancelled: 0, lost: 0 });
  });

  it('refuses without a consumer, with an unknown option, and a clock window on Redis', async () => {
    const mq = await memory();
    const q = mq.queue('nobody');
    await expect(runUntilIdle(q)).rejects.toThrow(/no consumer runs queue nobody/);
    q.consume(() => {});
    await expect(runUntilIdle(q, { advnce: '1m' } as never)).rejects.toThrow(
      /unknown runUntilIdle option "advnce"/,
    );
    await expect(runUntilIdle(q, { advance: '1m', until: 0 })).rejects.toThrow(/advance or until, not both/);
    const onRedis = await EchoMQ.connect({ url: env.server.url });
    open.push(onRedis);
    const r = onRedis.queue(`redis-${process.pid}`);
    await expect(runUntilIdle(r, { handler: () => {}, advance: '1m' })).rejects.toThrow(
      /this queue is on Redis/,
    );
    // Without a window it runs on Redis too.
    await r.enqueue({});
    expect((await runUntilIdle(r, { handler: () => {} })).completed).toBe(1);
  });
});

describe('enqueued', () => {
  it('lists the waiting jobs matching a name and a data pattern, in pending lanes and the schedule', async () => {
    const mq = await memory();
    const q = mq.queue<{ user: { id: number; plan: string }; tags: string[] }>('signups');
    await q.enqueue({ user: { id: 1, plan: 'pro' }, tags: ['a'] }, { name: 'welcome' });
    await q.enqueue({ user: { id: 2, plan: 'free' }, tags: ['a'] }, { name: 'welcome', group: 'eu' });
    await q.enqueueIn({ user: { id: 1, plan: 'pro' }, tags: ['b'] }, 60_000, { name: 'nudge' });
    expect(await enqueued(q)).toHaveLength(3);
    expect(await enqueued(q, { name: 'welcome' })).toHaveLength(2);
    expect((await enqueued(q, { data: { user: { id: 1 } } })).map((j) => j.name).sort()).toEqual([
      'nudge',
      'welcome',
    ]);
    expect(await enqueued(q, { name: 'welcome', data: { user: { plan: 'free' } } })).toMatchObject([
      { group: 'eu', state: 'pending' },
    ]);
    expect(await enqueued(q, { data: { tags: ['a', 'b'] } })).toEqual([]);
    expect(await enqueued(q, { name: 'nudge', state: 'pending' })).toEqual([]);
    await expect(enqueued(q, { nam: 'welcome' } as never)).rejects.toThrow(
      /unknown enqueued filter field "nam"/,
    );
  });
});
