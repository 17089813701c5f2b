// A handler putting its running job back without spending an attempt, on a real redis-server
// with several consumers: snooze (SnoozeError, ctx.snooze) and step jobs (ctx.update, then
// snooze, the next run reads the new data), and back-pressure (RateLimitError, ctx.rateLimit):
// the queue, or a grouped job's lane only, claims nothing until the hold ends on the server
// clock, and consumers parked meanwhile (60 s beats: no beat can hide a missed wake) claim it
// when it ends. Both give back lane and queue-wide slots, and both are fenced by the lease token.
import type { Redis } from 'ioredis';
import { describe, expect } from 'vitest';
import type { Consumer } from '../../src/consumer/consumer.js';
import { RateLimitError, retryAfterMs, SnoozeError } from '../../src/consumer/putback.js';
import { EchoMQError } from '../../src/core/errors.js';
import type { Job, JobContext } from '../../src/core/types.js';
import { helperFixtures, queueTest, useRedisServer } from '../support/harness.js';
import type { Consumers } from '../support/observe.js';
import { completions, expectRefused, poll, streamEvents, within } from '../support/observe.js';

const env = useRedisServer();

/** The file's helpers over one test's queue. */
function helpers({ raw, P, pool, queueName }: { raw: Redis; P: string; pool: Consumers; queueName: string }) {
  /** Three consumers of the queue on their own connections, parked between wakes (60 s beats). */
  async function three(
    handler: (job: Job<never>, ctx: JobContext) => unknown,
    concurrency = 2,
  ): Promise<Consumer[]> {
    const cs: Consumer[] = [];
    for (let i = 0; i < 3; i++)
      cs.push((await pool.start(queueName, handler as never, { concurrency, beatMs: 60_000 })) as Consumer);
    return cs;
  }

  /** The server instant (ms) of the job's latest claim. */
  async function started(id: string): Promise<number> {
    return Number(await raw.hget(`${P}job:${id}`, 'started'));
  }
  return { three, started };
}
type Helpers = ReturnType<typeof helpers>;

const it = queueTest(env, 'putback')
  .extend<{ h: Helpers }>({
    h: async ({ raw, P, pool, queueName }, use) => use(helpers({ raw, P, pool, queueName })),
  })
  .extend<Helpers>(helperFixtures<Helpers>(['three', 'started']));

describe('snooze and step jobs', () => {
  it('runs a step job as a state machine: update, snooze, and the next run reads the new data, no attempt spent', async ({
    raw,
    q,
    P,
    three,
  }) => {
    type Step = { step: number; seen: number[] };
    const runs: number[] = [];
    const cs = await three(async (job: Job<Step>, ctx) => {
      runs.push(job.data.step);
      const seen = [...job.data.seen, job.data.step];
      if (job.data.step < 2) {
        await ctx.update({ step: job.data.step + 1, seen });
        ctx.snooze(20);
      }
      return seen;
    });
    const snoozed = new Promise<number[]>((resolve) => {
      const ats: number[] = [];
      for (const c of cs)
        c.on('snoozed', (_job, at) => {
          ats.push(at);
          if (ats.length === 2) resolve(ats);
        });
    });
    const { id } = await q.enqueue({ step: 0, seen: [] } as never, { attempts: 1 });
    expect(await within(q.waitFor(id, { timeoutMs: 10_000 }), 11_000, 'the last step')).toEqual([0, 1, 2]);
    expect(runs).toEqual([0, 1, 2]);
    expect((await within(snoozed, 1000, 'two snoozed events')).length).toBe(2);
    // attempts: 1 allowed, 3 runs: each snooze gave its attempt back.
    expect(await raw.hget(`${P}job:${id}`, 'attempts')).toBe('1');
    const delayed = await streamEvents(raw, q, 'delayed');
    expect(delayed.map((e) => [e.id, e.reason])).toEqual([
      [id, 'snooze'],
      [id, 'snooze'],
    ]);
  });

  it('throw new SnoozeError(ms) frees the lane slot and the queue-wide slot for the next job', async ({
    raw,
    q,
    P,
    three,
  }) => {
    await q.configure({ concurrency: 1 });
    await q.lanes.configure('g', { concurrency: 1 });
    const order: string[] = [];
    await three((job: Job<never>) => {
      const data = job.data as { n: string; snoozed?: boolean };
      order.push(data.n);
      if (data.n === 'a' && order.filter((n) => n === 'a').length === 1) throw new SnoozeError(300);
    });
    const a = (await q.enqueue({ n: 'a' } as never, { group: 'g' })).id;
    const b = (await q.enqueue({ n: 'b' } as never, { group: 'g' })).id;
    await within(q.waitFor(a, { timeoutMs: 10_000 }), 11_000, 'a after its snooze');
    await q.waitFor(b, { timeoutMs: 10_000 });
    expect(order).toEqual(['a', 'b', 'a']); // b ran while a slept: both slots were freed
    expect(await raw.hget(`${P}meta`, 'running')).toBeNull();
    expect(await raw.hgetall(`${P}lanes:running`)).toEqual({});
  });

  it('refuses a snooze under a lost lease like a late completion, and bad delays at the call', async ({
    raw,
    q,
    P,
    queueName,
    pool,
  }) => {
    const { id } = await q.enqueue('x');
    const [flat] = (await q.run('claim', [P, 1, 1])) as [(string | number)[]];
    const token = String(flat[1]);
    await poll(
      () => q.reap(),
      (r) => r.length === 1,
      'the expired lease to be recovered',
    );
    await expectRefused(() => q.run('snooze', [P, id, token, 1000], id), 'EMQLEASE');
    await expectRefused(() => q.run('rate_limit', [P, id, token, 1000], id), 'EMQLEASE');
    expect((await q.get(id))?.state).toBe('pending');
    expect(await raw.hget(`${P}meta`, 'held_until')).toBeNull();
    for (const bad of [0, -5, 1.5, Number.NaN]) {
      expect(() => new SnoozeError(bad)).toThrow(EchoMQError);
      expect(() => new RateLimitError(bad)).toThrow(/whole number >= 1/);
    }
    // From a handler: the bad call fails that attempt, saying why; nothing is put back.
    expect(await q.remove(id)).toBe(true);
    const other = (await q.enqueue('y', { attempts: 1 })).id;
    const c = await pool.start(queueName, (_job, ctx) => ctx.snooze(0), { concurrency: 1 });
    const failed = new Promise<Error>((resolve) => c.on('failed', (_job, err) => resolve(err)));
    expect((await within(failed, 10_000, 'the failed attempt')).message).toMatch(/snooze delayMs/);
    await poll(
      async () => (await q.get(other))?.state,
      (s) => s === 'dead',
      'the job dead-lettered',
    );
  });
});

describe('back-pressure from the handler (RateLimitError)', () => {
  it('holds the whole queue for every consumer on the server clock, then parked consumers run the job', async ({
    raw,
    q,
    P,
    three,
    started,
  }) => {
    let thrown = false;
    const cs = await three(async (job: Job<never>, ctx) => {
      if (!thrown && (job.data as { first?: boolean }).first) {
        thrown = true;
        ctx.rateLimit(800);
      }
    }, 1);
    const limited = new Promise<number>((resolve) => {
      for (const c of cs) c.on('rateLimited', (_job, until) => resolve(until));
    });
    const ids = [(await q.enqueue({ first: true } as never, { attempts: 1 })).id];
    const until = await within(limited, 10_000, 'the rate limit');
    const from = until - 800; // the server instant the hold was set
    const done = completions(cs, 5);
    for (let i = 0; i < 4; i++) ids.push((await q.enqueue({} as never)).id);
    await within(done, 15_000, 'every job once the hold ended');
    for (const id of ids) {
      const at = await started(id);
      expect(at <= from || at >= until, `${id} started at ${at}, inside the hold ${from}..${until}`).toBe(
        true,
      );
    }
    // The limited job was not charged an attempt (attempts 1 allowed, and it ran twice).
    expect(await raw.hget(`${P}job:${ids[0]}`, 'attempts')).toBe('1');
    const [waiting] = await streamEvents(raw, q, 'waiting');
    expect(waiting).toMatchObject({ id: ids[0], reason: 'rate_limit', until: String(until) });
  });

  it("holds only a grouped job's lane: the other lanes and flat jobs flow meanwhile", async ({
    raw,
    q,
    P,
    three,
    started,
  }) => {
    await q.configure({ concurrency: 10 });
    let thrown = false;
    const cs = await three(async (job: Job<never>) => {
      if (!thrown && (job.data as { api?: boolean }).api) {
        thrown = true;
        throw new RateLimitError(retryAfterMs('4'));
      }
    });
    const limited = new Promise<number>((resolve) => {
      for (const c of cs) c.on('rateLimited', (_job, until) => resolve(until));
    });
    const api = [(await q.enqueue({ api: true } as never, { group: 'api' })).id];
    const until = await within(limited, 10_000, 'the rate limit');
    api.push((await q.enqueue({ api: true } as never, { group: 'api' })).id);
    const others = [(await q.enqueue({} as never, { group: 'other' })).id, (await q.enqueue({} as never)).id];
    for (const id of others) await q.waitFor(id, { timeoutMs: 10_000 });
    for (const id of api) await q.waitFor(id, { timeoutMs: 15_000 });
    for (const id of api) expect(await started(id)).toBeGreaterThanOrEqual(until);
    expect(Math.min(...(await Promise.all(others.map(started))))).toBeLessThan(until);
    await within(Promise.all(cs.map((c) => c.idle())), 3000, 'idle consumers');
    expect(await raw.hget(`${P}meta`, 'running')).toBeNull();
    expect(await raw.hgetall(`${P}lanes:running`)).toEqual({});
  });

  it('maps a Retry-After header (delta-seconds or an HTTP-date) to ms in one call', () => {
    const now = Date.parse('2026-10-21T07:28:00Z');
    expect(retryAfterMs('120', 1000, now)).toBe(120_000);
    expect(retryAfterMs(' 0 ', 1000, now)).toBe(1);
    expect(retryAfterMs('Wed, 21 Oct 2026 07:28:30 GMT', 1000, now)).toBe(30_000);
    expect(retryAfterMs('Wed, 21 Oct 2026 07:27:00 GMT', 1000, now)).toBe(1); // already past
    expect(retryAfterMs(null, 2500, now)).toBe(2500);
    expect(retryAfterMs('soon', 2500, now)).toBe(2500);
    expect(() => retryAfterMs(null, 0)).toThrow(EchoMQError);
  });
});
