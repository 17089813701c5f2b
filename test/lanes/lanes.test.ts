import { describe, expect } from 'vitest';
import type { Consumer } from '../../src/consumer/consumer.js';
import {
  helperFixtures,
  type QueueTestContext,
  queueTest,
  redisOnly,
  useRedisServer,
} from '../support/harness.js';
import {
  busiestWindow,
  completions,
  deferred,
  expectRefused,
  pause,
  poll,
  streamEvents,
  within,
} from '../support/observe.js';

const env = useRedisServer();

// ── helpers ─────────────────────────────────────────────────────────────────────

interface Claimed {
  id: string;
  token: string;
}

/** The file's helpers over one test's queue. */
function helpers({ raw, q, P }: Pick<QueueTestContext, 'raw' | 'q' | 'P'>) {
  /** Claims like a worker that will then crash: the jobs stay active under a lease of `leaseMs`. */
  async function claimRaw(n: number, leaseMs: number): Promise<Claimed[]> {
    const [flat] = (await q.run('claim', [P, n, leaseMs])) as [(string | number)[]];
    const out: Claimed[] = [];
    for (let i = 0; i < flat.length; i += 7) out.push({ id: String(flat[i]), token: String(flat[i + 1]) });
    return out;
  }

  async function completeRaw(job: Claimed): Promise<string> {
    const [statuses] = (await q.run('complete', [P, 30_000, 0, job.id, job.token, ''])) as [string[]];
    return statuses[0]!;
  }

  async function running(): Promise<Record<string, string>> {
    return raw.hgetall(`${P}lanes:running`);
  }

  /**
   * The invariant every path must keep: a group's running count equals its active jobs, and
   * every group with claimable jobs and a free slot is on the ring or waiting out a rate window.
   */
  async function expectLanesConsistent(): Promise<void> {
    const active = await raw.zrange(`${P}active`, 0, -1);
    const byGroup: Record<string, string> = {};
    for (const id of active) {
      const g = await raw.hget(`${P}job:${id}`, 'group');
      if (g) byGroup[g] = String(Number(byGroup[g] ?? 0) + 1);
    }
    expect(await running()).toEqual(byGroup);
    const ring = new Set(await raw.zrange(`${P}ring`, 0, -1));
    const limited = new Set(await raw.zrange(`${P}lanes:limited`, 0, -1));
    const paused = new Set(await raw.smembers(`${P}lanes:paused`));
    for (const lane of await q.lanes.list()) {
      const free = lane.concurrency === 0 || lane.running < lane.concurrency;
      if (lane.pending > 0 && free && !lane.paused) {
        expect(ring.has(lane.group) || limited.has(lane.group), `lane ${lane.group} is servable`).toBe(true);
      }
      if (lane.paused) expect(ring.has(lane.group), `paused lane ${lane.group} is off the ring`).toBe(false);
      expect(paused.has(lane.group)).toBe(lane.paused);
    }
  }
  return { claimRaw, completeRaw, running, expectLanesConsistent };
}
type Helpers = ReturnType<typeof helpers>;

const it = queueTest(env, 'lanes')
  .extend<{ h: Helpers }>({ h: async ({ raw, q, P }, use) => use(helpers({ raw, q, P })) })
  .extend<Helpers>(helperFixtures<Helpers>(['claimRaw', 'completeRaw', 'running', 'expectLanesConsistent']));

// ── concurrency across consumers ────────────────────────────────────────────────

describe('lane concurrency', () => {
  it('never runs more jobs of a group than its concurrency across 3 consumers, and reaches it', async ({
    q,
    pool,
    queueName: name,
    running,
    expectLanesConsistent,
  }) => {
    await q.lanes.configure('two', { concurrency: 2 });
    await q.lanes.configureDefault({ concurrency: 3 });
    const now: Record<string, number> = {};
    const max: Record<string, number> = {};
    const handler = async (job: { data: { g: string } }) => {
      const g = job.data.g;
      now[g] = (now[g] ?? 0) + 1;
      max[g] = Math.max(max[g] ?? 0, now[g]!);
      await pause(1 + Math.floor(Math.random() * 3));
      now[g]! -= 1;
    };
    const cs: Consumer[] = [];
    for (let i = 0; i < 3; i++) cs.push((await pool.start(name, handler, { concurrency: 8 })) as Consumer);
    const done = completions(cs, 150);
    await q.enqueueMany(
      Array.from({ length: 150 }, (_, i) => {
        const g = ['two', 'three', 'other'][i % 3]!;
        return { data: { g }, opts: { group: g } };
      }),
    );
    await within(done, 15_000, '150 completions');
    expect(max).toEqual({ two: 2, three: 3, other: 3 });
    await within(Promise.all(cs.map((c) => c.idle())), 3000, 'idle consumers');
    expect(await running()).toEqual({});
    await expectLanesConsistent();
  });

  redisOnly(
    "a 10,000-job volume test: admitting them takes the memory engine's JavaScript Lua ~10x longer than Redis; lane order is proven on memory by the tests around it",
    it,
  )(
    'serves 50 small groups before a group of 10,000 has run 100 jobs',
    async ({ raw, q, P, pool, queueName: name }) => {
      await q.enqueueMany(Array.from({ length: 10_000 }, (_, i) => ({ data: i, opts: { group: 'big' } })));
      const small: { data: number; opts: { group: string } }[] = [];
      for (let g = 0; g < 50; g++)
        for (let i = 0; i < 10; i++) small.push({ data: i, opts: { group: `s${g}` } });
      await q.enqueueMany(small);

      const starts: string[] = []; // the group of each job, in start order
      const handler = async (job: { id: string }, _ctx: unknown) => {
        starts.push((await raw.hget(`${P}job:${job.id}`, 'group'))!);
      };
      const cs: Consumer[] = [];
      for (let i = 0; i < 3; i++) cs.push((await pool.start(name, handler, { concurrency: 10 })) as Consumer);
      await poll(
        async () => starts.filter((g) => g !== 'big').length,
        (n) => n === 500,
        'the 500 small jobs to start',
        15_000,
      );
      const bigBefore = (group: string) =>
        starts.slice(0, starts.indexOf(group)).filter((g) => g === 'big').length;
      for (let g = 0; g < 50; g++) expect(bigBefore(`s${g}`)).toBeLessThan(100);
      // Round-robin: every small job (10 turns of the ring) starts before big's 100th job.
      const lastSmall = starts.length - 1 - [...starts].reverse().findIndex((g) => g !== 'big');
      expect(starts.slice(0, lastSmall).filter((g) => g === 'big').length).toBeLessThan(100);
    },
  );
});

// ── pause ───────────────────────────────────────────────────────────────────────

describe('lane pause', () => {
  it('a paused lane holds its jobs while the other lanes and flat jobs flow, and runs them on resume', async ({
    raw,
    q,
    pool,
    queueName: name,
    expectLanesConsistent,
  }) => {
    expect(await q.lanes.pause('held')).toBe(true);
    expect(await q.lanes.pause('held')).toBe(false);
    const ran: string[] = [];
    const cs: Consumer[] = [];
    for (let i = 0; i < 2; i++) {
      cs.push(
        (await pool.start(
          name,
          (job: { data: string }) => {
            ran.push(job.data);
          },
          { concurrency: 4 },
        )) as Consumer,
      );
    }
    const first = completions(cs, 10);
    for (let i = 0; i < 5; i++) {
      await q.enqueue('held', { group: 'held' });
      await q.enqueue('free', { group: 'free' });
      await q.enqueue('flat');
    }
    await within(first, 5000, 'the free lane and flat jobs');
    await within(Promise.all(cs.map((c) => c.idle())), 3000, 'idle consumers');
    expect(ran.filter((d) => d === 'held')).toEqual([]);
    const held = (await q.lanes.list()).find((l) => l.group === 'held');
    expect(held).toMatchObject({ pending: 5, running: 0, paused: true });
    await expectLanesConsistent();
    const [paused] = await streamEvents(raw, q, 'paused');
    expect(paused).toMatchObject({ id: '', group: 'held' });

    const rest = completions(cs, 5);
    expect(await q.lanes.resume('held')).toBe(true);
    await within(rest, 5000, 'the held lane after resume');
    expect(ran.filter((d) => d === 'held')).toHaveLength(5);
    expect((await streamEvents(raw, q, 'resumed'))[0]).toMatchObject({ group: 'held' });
    await expectLanesConsistent();
  });
});

// ── the paths that move grouped jobs ────────────────────────────────────────────

describe('lanes stay consistent', () => {
  it('promote releases due grouped jobs into their lane, within its concurrency', async ({
    q,
    pool,
    queueName: name,
    running,
    expectLanesConsistent,
  }) => {
    await q.lanes.configure('g', { concurrency: 1 });
    let now = 0;
    let max = 0;
    const c = await pool.start(
      name,
      async () => {
        now += 1;
        max = Math.max(max, now);
        await pause(2);
        now -= 1;
      },
      { concurrency: 5 },
    );
    const done = completions([c as Consumer], 4);
    for (let i = 0; i < 4; i++) await q.enqueueIn(i, 30, { group: 'g' });
    await within(done, 5000, '4 delayed grouped jobs');
    expect(max).toBe(1);
    expect(await running()).toEqual({});
    await expectLanesConsistent();
  });

  it('reap returns an expired grouped job to its lane and releases its slot exactly once', async ({
    raw,
    q,
    P,
    claimRaw,
    completeRaw,
    running,
    expectLanesConsistent,
  }) => {
    await q.lanes.configure('g', { concurrency: 1 });
    await q.enqueue('a', { group: 'g' });
    await q.enqueue('b', { group: 'g' });
    const [crashed] = await claimRaw(1, 40);
    expect(await running()).toEqual({ g: '1' });
    expect(await claimRaw(5, 40)).toEqual([]); // the lane is at its limit

    const recovered = await poll(
      () => q.reap(),
      (ids) => ids.length > 0,
      'the lease to expire',
    );
    expect(recovered).toEqual([crashed!.id]);
    expect(await running()).toEqual({});
    expect(await raw.zrange(`${P}g:g:pending`, 0, -1)).toContain(crashed!.id);
    expect(await raw.zrange(`${P}ring`, 0, -1)).toEqual(['g']);
    await expectLanesConsistent();

    // The crashed worker comes back and acknowledges: refused, and the slot is not freed again.
    expect(await completeRaw(crashed!)).toBe('EMQLEASE');
    expect(await running()).toEqual({});

    const [again] = await claimRaw(1, 30_000);
    expect(await running()).toEqual({ g: '1' });
    expect(await completeRaw(again!)).toBe('OK');
    expect(await running()).toEqual({});
    await expectLanesConsistent();
    expect((await q.get(crashed!.id))!.stalled).toBe(1);
  });

  it('the stalled sweep dead-letters a grouped job once and frees its slot once', async ({
    raw,
    q,
    P,
    claimRaw,
    running,
    expectLanesConsistent,
  }) => {
    await q.lanes.configure('g', { concurrency: 1 });
    await q.enqueue('a', { group: 'g' });
    await q.enqueue('b', { group: 'g' });
    const [crashed] = await claimRaw(1, 40);
    const { dead } = await poll(
      () => q.sweepStalled({ maxStalled: 0 }),
      (r) => r.dead.length > 0,
      'the lease to expire',
    );
    expect(dead).toEqual([crashed!.id]);
    expect(await running()).toEqual({});
    expect(await raw.zrange(`${P}ring`, 0, -1)).toEqual(['g']); // the lane's next job is servable
    await expectRefusedLease(() =>
      q.run('fail', [P, crashed!.id, crashed!.token, 'late', '', 0], crashed!.id),
    );
    expect(await running()).toEqual({});
    const [next] = await claimRaw(1, 30_000);
    expect(next!.id).not.toBe(crashed!.id);
    expect(await running()).toEqual({ g: '1' });
    await expectLanesConsistent();
  });

  it('a retried grouped job goes back to its lane, and the lane keeps its concurrency', async ({
    q,
    pool,
    queueName: name,
    running,
    expectLanesConsistent,
  }) => {
    await q.lanes.configure('g', { concurrency: 1 });
    let now = 0;
    let max = 0;
    const tries = new Map<number, number>();
    const cs: Consumer[] = [];
    for (let i = 0; i < 2; i++) {
      cs.push(
        (await pool.start(
          name,
          async (job: { data: number }) => {
            now += 1;
            max = Math.max(max, now);
            tries.set(job.data, (tries.get(job.data) ?? 0) + 1);
            await pause(1);
            now -= 1;
            if (tries.get(job.data) === 1) throw new Error('first try fails');
          },
          { concurrency: 4, backoff: { kind: 'fixed', ms: 5 } },
        )) as Consumer,
      );
    }
    const done = completions(cs, 5);
    await q.enqueueMany(Array.from({ length: 5 }, (_, i) => ({ data: i, opts: { group: 'g' } })));
    await within(done, 8000, '5 jobs, each retried once');
    expect(max).toBe(1);
    expect([...tries.values()]).toEqual([2, 2, 2, 2, 2]);
    await within(Promise.all(cs.map((c) => c.idle())), 3000, 'idle consumers');
    expect(await running()).toEqual({});
    await expectLanesConsistent();
  });

  it('cancelling a waiting or running grouped job frees its place, and the lane carries on', async ({
    raw,
    q,
    P,
    pool,
    queueName: name,
    running,
    expectLanesConsistent,
  }) => {
    await q.lanes.configure('g', { concurrency: 1 });
    const gate = deferred();
    const started = deferred<string>();
    const c = await pool.start(
      name,
      async (job: { id: string; data: string }, ctx) => {
        if (job.data === 'long') {
          started.resolve(job.id);
          await Promise.race([gate.promise, new Promise((r) => ctx.signal.addEventListener('abort', r))]);
          ctx.signal.throwIfAborted();
        }
        return job.data;
      },
      { concurrency: 3, extendMs: 20 },
    );
    const long = await q.enqueue('long', { group: 'g' });
    const waiting = await q.enqueue('waiting', { group: 'g' });
    const last = await q.enqueue('last', { group: 'g' });
    expect(await within(started.promise, 3000, 'the long job')).toBe(long.id);
    expect(await q.cancel(waiting.id)).toBe('cancelled');
    expect(await q.cancel(long.id)).toBe('requested');
    expect(await q.waitFor(last.id, { timeoutMs: 5000 })).toBe('last');
    expect((await q.get(long.id))!.state).toBe('cancelled');
    expect((await q.get(waiting.id))!.state).toBe('cancelled');
    await within(c.idle(), 3000, 'idle');
    expect(await running()).toEqual({});
    expect(await raw.zcard(`${P}g:g:pending`)).toBe(0);
    await expectLanesConsistent();
  });
});

function expectRefusedLease(call: () => Promise<unknown>): Promise<void> {
  return expectRefused(call, 'EMQLEASE');
}

// ── rate limits ─────────────────────────────────────────────────────────────────

describe('lane rate limit', () => {
  it('starts at most max jobs of the lane in any perMs window (server clock), other lanes unhindered', async ({
    q,
    pool,
    queueName: name,
    expectLanesConsistent,
  }) => {
    await q.lanes.configure('api', { rateLimit: { max: 5, perMs: 200 } });
    const cs: Consumer[] = [];
    for (let i = 0; i < 2; i++) cs.push((await pool.start(name, () => {}, { concurrency: 10 })) as Consumer);
    const done = completions(cs, 30);
    const api = await q.enqueueMany(
      Array.from({ length: 20 }, (_, i) => ({ data: i, opts: { group: 'api' } })),
    );
    const other = await q.enqueueMany(
      Array.from({ length: 10 }, (_, i) => ({ data: i, opts: { group: 'db' } })),
    );
    await within(done, 8000, '30 completions');

    const startedOf = async (ids: { id: string }[]) =>
      Promise.all(ids.map(async (j) => (await q.get(j.id))!.startedAt!));
    const apiStarts = await startedOf(api);
    expect(busiestWindow(apiStarts, 200)).toBeLessThanOrEqual(5);
    // 20 jobs at 5 per 200 ms: the last starts in the fourth window or later.
    expect(Math.max(...apiStarts) - Math.min(...apiStarts)).toBeGreaterThanOrEqual(600);
    // The db lane is not held behind the api lane's windows: all of it starts before the api
    // lane's last window opens (an order on the server clock, not a duration).
    const dbStarts = await startedOf(other);
    expect(Math.max(...dbStarts)).toBeLessThan([...apiStarts].sort((x, y) => x - y)[15]!);
    await expectLanesConsistent();
  });

  it('the consumers of a rate-limited lane park on a timer until the window reopens instead of polling', async ({
    q,
    pool,
    queueName: name,
  }) => {
    await q.lanes.configure('api', { rateLimit: { max: 2, perMs: 250 } });
    const calls: string[] = [];
    const cs: Consumer[] = [];
    for (let i = 0; i < 2; i++) {
      const c = (await pool.start(name, () => {}, { concurrency: 10, beatMs: 10_000 })) as Consumer;
      c.queue.connector.observe((verb) => calls.push(verb));
      cs.push(c);
    }
    await within(Promise.all(cs.map((c) => c.idle())), 3000, 'idle consumers');
    calls.length = 0;
    const done = completions(cs, 8);
    await q.enqueueMany(Array.from({ length: 8 }, (_, i) => ({ data: i, opts: { group: 'api' } })));
    const ids = await within(done, 9000, '8 rate-limited jobs before a 10 s beat');
    // Started on the server clock: 2 per 250 ms, so four windows; each window reopening woke a
    // parked consumer (a timer), not its 10 s beat: the last starts well inside one beat.
    const starts = await Promise.all(ids.map(async (id) => (await q.get(id))!.startedAt!));
    expect(busiestWindow(starts, 250)).toBeLessThanOrEqual(2);
    const span = Math.max(...starts) - Math.min(...starts);
    expect(span).toBeGreaterThanOrEqual(750);
    expect(span).toBeLessThan(5000);
    // A polling consumer would make hundreds of calls in that time; parked ones make a few a window.
    const claims = calls.filter((v) => v === 'claim' || v === 'complete').length;
    expect(claims).toBeLessThan(40);
  });
});

// ── drained ─────────────────────────────────────────────────────────────────────

describe('drained with lanes', () => {
  it('is emitted once, after the last job of a lane held back by its concurrency is taken', async ({
    raw,
    q,
    pool,
    queueName: name,
  }) => {
    await q.lanes.configure('one', { concurrency: 1 });
    await q.enqueueMany(Array.from({ length: 5 }, (_, i) => ({ data: i, opts: { group: 'one' } })));
    const c = (await pool.start(name, () => {}, { concurrency: 5 })) as Consumer;
    await within(completions([c], 5), 5000, '5 completions');
    const all = await streamEvents(raw, q);
    expect(all.filter((e) => e.event === 'drained')).toHaveLength(1);
    expect(all.map((e) => e.event).lastIndexOf('active')).toBeLessThan(
      all.map((e) => e.event).indexOf('drained'),
    );
  });
});

describe('lane settings', () => {
  it('concurrency null removes the lane’s own setting (the default applies again); unknown settings are refused', async ({
    q,
  }) => {
    await q.lanes.configureDefault({ concurrency: 4 });
    await q.enqueue({}, { group: 'own' });
    await q.lanes.configure('own', { concurrency: 1, rateLimit: { max: 2, perMs: 1000 } });
    const lane = async () => (await q.lanes.list()).find((l) => l.group === 'own')!;
    expect(await lane()).toMatchObject({ concurrency: 1, rateLimit: { max: 2, perMs: 1000 } });
    await q.lanes.configure('own', { concurrency: null, rateLimit: null });
    expect(await lane()).toMatchObject({ concurrency: 4, rateLimit: null });
    await expectRefused(() => q.lanes.configure('own', { concurency: 2 } as never), 'EMQINPUT');
  });
});
