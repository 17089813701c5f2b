// The public job verbs against a real redis-server: each verb's reply, the state of every key it
// touches afterwards (job row, which sorted set holds the id and at what score) and the events it
// appends to `emq:{<queue>}:events`.
import type { Redis } from 'ioredis';
import { describe, expect, vi } from 'vitest';
import type { ErrorCode } from '../../src/core/errors.js';
import { mintedAt } from '../../src/core/ids.js';
import type { EnqueueOptions } from '../../src/core/types.js';
import type { Queue } from '../../src/queue/queue.js';
import { queueTest, uniqueQueue, useRedisServer } from '../support/harness.js';
import {
  expectRefused,
  poll,
  refusal,
  scoreOf,
  serverNow as serverClock,
  streamFields,
} from '../support/observe.js';

const env = useRedisServer();

// ── helpers ─────────────────────────────────────────────────────────────────────

type Entry = Record<string, string>;

interface Claimed {
  id: string;
  token: number;
  attempts: number;
}

/** Reads and raw script calls on one test's queue (bound to it by the fixtures below). */
function helpersFor({
  q,
  raw,
  key,
  queueName: name,
}: {
  q: Queue;
  raw: Redis;
  key: (s: string, queue?: string) => string;
  queueName: string;
}) {
  const claim = async (n: number, leaseMs = 30_000): Promise<Claimed[]> => {
    const [flat] = (await q.run('claim', [q.keys.prefix, n, leaseMs])) as [(string | number)[], string];
    const out: Claimed[] = [];
    for (let i = 0; i < flat.length; i += 7) {
      out.push({ id: String(flat[i]), token: Number(flat[i + 1]), attempts: Number(flat[i + 2]) });
    }
    return out;
  };
  return {
    /** The queue's event stream as field maps, oldest first. */
    events: (queue = name): Promise<Entry[]> => streamFields(raw, key('events', queue)),
    /** The Redis server's clock in ms (the clock every script prices time with). */
    serverNow: () => serverClock(raw),
    row: (id: string): Promise<Record<string, string>> => raw.hgetall(key(`job:${id}`)),
    zscore: (set: string, id: string): Promise<number | null> => scoreOf(raw, key(set), id),
    /** Every key of the queue, sorted. */
    queueKeys: async (queue = name): Promise<string[]> => (await raw.keys(key('*', queue))).sort(),
    /** Calls promote until it has selected `n` due members in total. */
    promoteUntil: (n: number, queue: Queue = q): Promise<number> => {
      let total = 0;
      return poll(
        async () => {
          total += await queue.promote();
          return total;
        },
        (t) => t >= n,
        `${n} promoted`,
      );
    },
    claim,
    complete: async (job: Claimed, result = ''): Promise<string> => {
      const [statuses] = (await q.run('complete', [q.keys.prefix, 30_000, 0, job.id, job.token, result])) as [
        string[],
      ];
      return statuses[0]!;
    },
    fail: async (job: Claimed, delayMs: number, message = 'boom', stack = ''): Promise<string> =>
      (await q.run('fail', [q.keys.prefix, job.id, job.token, message, stack, delayMs], job.id)) as string,
    /** Enqueues one job and claims it, so it is active under a lease. */
    activeJob: async (opts?: EnqueueOptions): Promise<Claimed> => {
      const { id } = await q.enqueue({ work: true }, opts);
      const [job] = await claim(1);
      expect(job?.id).toBe(id);
      return job!;
    },
  };
}

type Helpers = ReturnType<typeof helpersFor>;

/** Each test's own queue and the helpers bound to it; real timers restored after each test. */
const it = queueTest(env, 'jobs').extend<Helpers & { helpers: Helpers }>({
  helpers: async ({ q, raw, key, queueName, defer }, use) => {
    defer(() => vi.useRealTimers());
    await use(helpersFor({ q, raw, key, queueName }));
  },
  events: async ({ helpers }, use) => use(helpers.events),
  serverNow: async ({ helpers }, use) => use(helpers.serverNow),
  row: async ({ helpers }, use) => use(helpers.row),
  zscore: async ({ helpers }, use) => use(helpers.zscore),
  queueKeys: async ({ helpers }, use) => use(helpers.queueKeys),
  promoteUntil: async ({ helpers }, use) => use(helpers.promoteUntil),
  claim: async ({ helpers }, use) => use(helpers.claim),
  complete: async ({ helpers }, use) => use(helpers.complete),
  fail: async ({ helpers }, use) => use(helpers.fail),
  activeJob: async ({ helpers }, use) => use(helpers.activeJob),
});

// ── enqueue ─────────────────────────────────────────────────────────────────────

describe('enqueue', () => {
  it('admits a job as pending at score 0 with its row and an added event', async ({
    raw,
    q,
    key,
    events,
    serverNow,
    row,
  }) => {
    const before = await serverNow();
    const { id, status } = await q.enqueue({ to: 'a@example.com' }, { name: 'email' });
    const after = await serverNow();

    expect(status).toBe('enqueued');
    expect(id).toMatch(/^JOB[0-9A-Z]{20}$/);
    // No created: the minted id holds the instant (SPEC section 3), one hash field less per job;
    // no max: a new queue is at protocol version 2, where a row without it allows 3 (SPEC 22.3).
    expect(await row(id)).toEqual({
      state: 'pending',
      payload: '{"to":"a@example.com"}',
      name: 'email',
    });
    const view = await q.get(id);
    expect(view?.maxAttempts).toBe(3);
    expect(view?.createdAt).toBe(mintedAt(id));
    expect(view!.createdAt).toBeGreaterThanOrEqual(before - 1000);
    expect(view!.createdAt).toBeLessThanOrEqual(after);
    expect(await raw.zrange(key('pending'), 0, -1, 'WITHSCORES')).toEqual([id, '0']);
    expect(await events()).toEqual([{ event: 'added', id, name: 'email' }]);
  });

  it('writes created for a caller id, and for an id of the minted shape minted long ago', async ({
    q,
    serverNow,
    row,
  }) => {
    const before = await serverNow();
    const old = `JOB0000000000${'A'.repeat(10)}`; // minted at epoch 0 by its time part
    for (const id of ['JOBcaller-1', old]) {
      await q.enqueue(1, { id });
      const r = await row(id);
      expect(Number(r.created)).toBeGreaterThanOrEqual(before);
      expect((await q.get(id))?.createdAt).toBe(Number(r.created));
    }
    expect(mintedAt(old)).toBe(0);
  });

  it('scores a prioritised job by its priority and keeps attempts and backoff on the row', async ({
    q,
    events,
    row,
    zscore,
  }) => {
    const { id } = await q.enqueue(
      { n: 1 },
      { priority: 7, attempts: 5, backoff: { kind: 'fixed', ms: 250 }, id: 'JOBprio-1' },
    );
    expect(id).toBe('JOBprio-1');
    expect(await zscore('pending', id)).toBe(7);
    expect(await row(id)).toMatchObject({ prio: '7', max: '5', backoff: '{"kind":"fixed","ms":250}' });
    expect(await events()).toEqual([{ event: 'added', id, name: '' }]);
  });

  it('sends a grouped job to its lane and the ring, not to flat pending', async ({ raw, q, key, row }) => {
    const { id } = await q.enqueue({ n: 1 }, { group: 'tenant-a', priority: 2 });
    expect(await raw.zcard(key('pending'))).toBe(0);
    expect(await raw.zrange(key('g:tenant-a:pending'), 0, -1, 'WITHSCORES')).toEqual([id, '2']);
    expect(await raw.zrange(key('ring'), 0, -1)).toEqual(['tenant-a']);
    expect(await raw.smembers(key('lanes'))).toEqual(['tenant-a']);
    expect((await row(id)).group).toBe('tenant-a');
  });

  it('the same id again is a duplicate and does not overwrite the row', async ({
    raw,
    q,
    key,
    events,
    row,
  }) => {
    const id = 'JOBdup-1';
    expect(await q.enqueue({ v: 1 }, { id, name: 'first' })).toEqual({ id, status: 'enqueued' });
    const before = await row(id);
    expect(await q.enqueue({ v: 2 }, { id, name: 'second', priority: 3 })).toEqual({
      id,
      status: 'duplicate',
    });

    expect(await row(id)).toEqual(before);
    expect(before.payload).toBe('{"v":1}');
    expect(await raw.zrange(key('pending'), 0, -1, 'WITHSCORES')).toEqual([id, '0']);
    expect(await events()).toEqual([{ event: 'added', id, name: 'first' }]);
  });

  it('two enqueues of one id in the same tick admit the first and report the second duplicate', async ({
    q,
    row,
  }) => {
    const id = 'JOBsame-tick';
    const [a, b] = await Promise.all([q.enqueue({ v: 'a' }, { id }), q.enqueue({ v: 'b' }, { id })]);
    expect([a.status, b.status]).toEqual(['enqueued', 'duplicate']);
    expect((await row(id)).payload).toBe('{"v":"a"}');
  });

  it('refuses a non-JOB id with EMQKIND before the wire, writing nothing', async ({ mq, q, queueKeys }) => {
    const calls: string[] = [];
    mq.connector.observe((verb) => calls.push(verb));
    for (const id of ['task-1', 'job-lowercase', 'JOB with space', 'JO']) {
      await expectRefused(() => q.enqueue({}, { id }), 'EMQKIND');
    }
    expect(calls).toEqual([]);
    expect(await queueKeys()).toEqual([]);
  });

  it('several enqueue() calls in one tick travel as one script call, admitted in call order', async ({
    mq,
    raw,
    q,
    key,
    row,
  }) => {
    await q.enqueue({ warm: true }); // the first call also stamps the protocol version (hello)
    const calls: string[] = [];
    mq.connector.observe((verb) => calls.push(verb));

    const results = await Promise.all(Array.from({ length: 50 }, (_, i) => q.enqueue({ i })));

    expect(calls).toEqual(['enqueue']);
    expect(results.every((r) => r.status === 'enqueued')).toBe(true);
    const pending = await raw.zrange(key('pending'), 0, -1);
    expect(pending.slice(1)).toEqual(results.map((r) => r.id)); // mint order is release order
    for (const [i, r] of results.entries()) expect((await row(r.id)).payload).toBe(JSON.stringify({ i }));
  });

  it('enqueueMany of 2,500 jobs returns statuses in input order in 4 script calls (slices of 625, two in flight)', async ({
    mq,
    raw,
    q,
    key,
    events,
  }) => {
    await q.enqueue({ pre: 'a' }, { id: 'JOBpre-a' });
    await q.enqueue({ pre: 'b' }, { id: 'JOBpre-b' });
    const calls: string[] = [];
    mq.connector.observe((verb) => calls.push(verb));
    const dupAt: Record<number, string> = { 10: 'JOBpre-a', 1500: 'JOBpre-b' };
    const items = Array.from({ length: 2500 }, (_, i) => ({
      data: { i },
      opts: dupAt[i] ? { id: dupAt[i] } : undefined,
    }));

    const out = await q.enqueueMany(items);

    expect(calls).toEqual(['enqueue', 'enqueue', 'enqueue', 'enqueue']);
    expect(out).toHaveLength(2500);
    for (const [i, r] of out.entries()) {
      expect(r.status).toBe(dupAt[i] ? 'duplicate' : 'enqueued');
      if (dupAt[i]) expect(r.id).toBe(dupAt[i]);
    }
    expect(new Set(out.map((r) => r.id)).size).toBe(2500);
    expect(await raw.zcard(key('pending'))).toBe(2500);
    const p = raw.pipeline();
    for (const r of out) p.hget(key(`job:${r.id}`), 'payload');
    const payloads = ((await p.exec()) ?? []).map(([, v]) => v);
    for (const [i, r] of out.entries()) {
      expect(payloads[i]).toBe(dupAt[i] ? JSON.stringify({ pre: r.id.slice(-1) }) : JSON.stringify({ i }));
    }
    expect((await events()).filter((e) => e.event === 'added')).toHaveLength(2500);
  });

  it('enqueueMany refuses a bad item anywhere in the input before sending any chunk', async ({
    mq,
    q,
    queueKeys,
  }) => {
    const calls: string[] = [];
    mq.connector.observe((verb) => calls.push(verb));
    const items = [{ data: 1 }, { data: 2 }, { data: 3, opts: { priority: -1 } }];
    await expectRefused(() => q.enqueueMany(items), 'EMQINPUT');
    expect(calls).toEqual([]);
    expect(await queueKeys()).toEqual([]);
  });

  it('enqueueMany refuses an item field beside data ({ data, id }: options go under opts), writing nothing', async ({
    q,
    queueKeys,
  }) => {
    const items = [{ data: 1 }, { data: 2, id: 'JOBmisplaced' }] as never;
    const err = await refusal(() => q.enqueueMany(items));
    expect(err.code).toBe('EMQINPUT');
    expect(err.message).toBe(
      'EMQINPUT: unknown enqueueMany item field "id"; known: data, opts (job options go under opts)',
    );
    expect(await queueKeys()).toEqual([]);
  });

  it('configure refuses an unknown setting at any level, saying what is allowed, and writes nothing', async ({
    q,
    queueKeys,
  }) => {
    const bad: [unknown, string][] = [
      [
        { eventsMax: 5 },
        'unknown queue setting "eventsMax"; known: rateLimit, retention, eventsMaxLen, idempotencyMs, concurrency, recovery, maxStalled',
      ],
      [
        { recovery: 'sometimes' },
        `recovery must be 'reap', 'stalled' or 'off' (got "sometimes"): set it to the recovery your consumers run, or null for the default`,
      ],
      [{ retention: { failed: { count: 1 } } }, 'unknown retention set "failed"; known: completed, dead'],
      [{ retention: { dead: { age: 1 } } }, 'unknown retention.dead option "age"; known: count, ageMs'],
    ];
    for (const [settings, message] of bad) {
      const err = await refusal(() => q.configure(settings as never));
      expect(err.code).toBe('EMQINPUT');
      expect(err.message).toBe(`EMQINPUT: ${message}`);
    }
    expect(await queueKeys()).toEqual([]);
  });

  it("configure keeps the module's lease-recovery mode in meta, and null takes it back to the default", async ({
    q,
    raw,
    key,
  }) => {
    await q.configure({ recovery: 'stalled', maxStalled: 2 });
    expect(await raw.hmget(key('meta'), 'recovery', 'max_stalled')).toEqual(['stalled', '2']);
    await q.configure({ recovery: null, maxStalled: null });
    expect(await raw.hmget(key('meta'), 'recovery', 'max_stalled')).toEqual([null, null]);
    const err = await refusal(() => q.configure({ maxStalled: -1 }));
    expect(err.code).toBe('EMQINPUT');
  });

  const circular: Record<string, unknown> = {};
  circular.self = circular;
  const refusals: [string, unknown, EnqueueOptions | undefined, ErrorCode][] = [
    ['an unknown option', {}, { delay: 5 } as unknown as EnqueueOptions, 'EMQINPUT'],
    ['a negative priority', {}, { priority: -1 }, 'EMQINPUT'],
    ['a fractional priority', {}, { priority: 1.5 }, 'EMQINPUT'],
    ['a group name with braces', {}, { group: 'a{b}' }, 'EMQINPUT'],
    ['an empty group name', {}, { group: '' }, 'EMQINPUT'],
    ['a group name with a space', {}, { group: 'a b' }, 'EMQINPUT'],
    ['zero attempts', {}, { attempts: 0 }, 'EMQINPUT'],
    ['an invalid backoff policy', {}, { backoff: { kind: 'linear' } as never }, 'EMQINPUT'],
    ['undefined data', undefined, undefined, 'EMQINPUT'],
    ['BigInt data', { n: 1n }, undefined, 'EMQINPUT'],
    ['circular data', circular, undefined, 'EMQINPUT'],
  ];
  it.for(refusals)(
    'refuses %s before the wire and writes nothing',
    async ([, data, opts, code], { mq, q, queueKeys }) => {
      const calls: string[] = [];
      mq.connector.observe((verb) => calls.push(verb));
      await expectRefused(() => q.enqueue(data, opts), code);
      await expectRefused(() => q.enqueueIn(data, 1000, opts), code);
      expect(calls).toEqual([]);
      expect(await queueKeys()).toEqual([]);
    },
  );

  it('refuses a payload over maxPayloadBytes with EMQTOOBIG and accepts one exactly at the limit', async ({
    mq,
    queueKeys,
  }) => {
    const small = uniqueQueue('small');
    const sq = mq.queue(small, { maxPayloadBytes: 64 });
    await expectRefused(() => sq.enqueue('x'.repeat(63)), 'EMQTOOBIG'); // 65 bytes encoded
    await expectRefused(() => sq.enqueue('é'.repeat(32)), 'EMQTOOBIG'); // 66 bytes: counted in bytes
    await expectRefused(() => sq.enqueueAt('x'.repeat(100), Date.now()), 'EMQTOOBIG');
    expect(await queueKeys(small)).toEqual([]);

    const { status } = await sq.enqueue('x'.repeat(62)); // 64 bytes encoded
    expect(status).toBe('enqueued');
  });

  it('refuses every verb with EMQCLOSED after close() and writes nothing', async ({ mq, q, queueKeys }) => {
    await mq.close();
    await expectRefused(() => q.enqueue({ a: 1 }), 'EMQCLOSED');
    await expectRefused(() => q.enqueueMany([{ data: 1 }]), 'EMQCLOSED');
    await expectRefused(() => q.enqueueAt({ a: 1 }, Date.now() + 1000), 'EMQCLOSED');
    await expectRefused(() => q.enqueueIn({ a: 1 }, 1000), 'EMQCLOSED');
    await expectRefused(() => q.get('JOBx'), 'EMQCLOSED');
    await expectRefused(() => q.counts(), 'EMQCLOSED');
    await expectRefused(() => q.cancel('JOBx'), 'EMQCLOSED');
    await expectRefused(() => q.remove('JOBx'), 'EMQCLOSED');
    await expectRefused(() => q.promote(), 'EMQCLOSED');
    await expectRefused(() => q.reap(), 'EMQCLOSED');
    await expectRefused(() => mq.queue('another'), 'EMQCLOSED');
    expect(await queueKeys()).toEqual([]);
  });
});

// ── enqueueAt / enqueueIn ───────────────────────────────────────────────────────

describe('enqueueAt and enqueueIn', () => {
  it('enqueueAt admits a scheduled row at its run-at score with a delayed event', async ({
    raw,
    q,
    key,
    events,
    serverNow,
    row,
  }) => {
    const runAt = (await serverNow()) + 60_000;
    const { id, status } = await q.enqueueAt({ a: 1 }, runAt, { name: 'later', priority: 4, group: 'g1' });
    expect(status).toBe('scheduled');
    // No attempts until the first claim (absent = 0), as enqueue's rows.
    expect(await row(id)).toEqual({
      state: 'scheduled',
      payload: '{"a":1}',
      created: expect.any(String),
      runat: String(runAt),
      prio: '4',
      group: 'g1',
      name: 'later',
    });
    expect((await q.get(id))?.maxAttempts).toBe(3);
    expect(await raw.zrange(key('schedule'), 0, -1, 'WITHSCORES')).toEqual([id, String(runAt)]);
    expect(await raw.zcard(key('pending'))).toBe(0);
    expect(await raw.exists(key('g:g1:pending'))).toBe(0);
    expect(await events()).toEqual([{ event: 'delayed', id, name: 'later', at: String(runAt) }]);
  });

  it('enqueueIn schedules at server now + delay', async ({ q, events, serverNow, row, zscore }) => {
    const before = await serverNow();
    const { id, status } = await q.enqueueIn({ a: 1 }, 5000);
    const after = await serverNow();
    expect(status).toBe('scheduled');
    const at = (await zscore('schedule', id))!;
    expect(at).toBeGreaterThanOrEqual(before + 5000);
    expect(at).toBeLessThanOrEqual(after + 5000);
    expect(await row(id)).toMatchObject({ state: 'scheduled', runat: String(at) });
    expect(await events()).toEqual([{ event: 'delayed', id, name: '', at: String(at) }]);
  });

  it('enqueueIn prices the delay on the server clock, not the caller skewed by an hour', async ({
    q,
    serverNow,
    zscore,
  }) => {
    vi.useFakeTimers({ toFake: ['Date'] });
    vi.setSystemTime(Date.now() + 3_600_000);
    const skewed = Date.now();
    const { id } = await q.enqueueIn({ a: 1 }, 5000);
    vi.useRealTimers();

    const now = await serverNow();
    const at = (await zscore('schedule', id))!;
    expect(Math.abs(at - (now + 5000))).toBeLessThan(2000);
    expect(Math.abs(at - (skewed + 5000))).toBeGreaterThan(3_000_000);
    // The job is not due yet, whatever the caller's clock says.
    expect(await q.promote()).toBe(0);
  });

  it('the same id again is a duplicate: neither the row nor its run-at moves', async ({
    raw,
    q,
    key,
    events,
    serverNow,
    row,
    zscore,
  }) => {
    const id = 'JOBsched-dup';
    const runAt = (await serverNow()) + 60_000;
    expect(await q.enqueueAt({ v: 1 }, runAt, { id })).toEqual({ id, status: 'scheduled' });
    const before = await row(id);
    expect(await q.enqueueAt({ v: 2 }, runAt + 5000, { id })).toEqual({ id, status: 'duplicate' });
    expect(await q.enqueueIn({ v: 3 }, 1, { id })).toEqual({ id, status: 'duplicate' });
    expect(await q.enqueue({ v: 4 }, { id })).toEqual({ id, status: 'duplicate' });

    expect(await row(id)).toEqual(before);
    expect(await zscore('schedule', id)).toBe(runAt);
    expect(await raw.zcard(key('pending'))).toBe(0);
    expect((await events()).map((e) => e.event)).toEqual(['delayed']);
  });

  it('scheduling the id of a pending job is a duplicate and leaves it pending', async ({
    raw,
    q,
    key,
    zscore,
  }) => {
    const { id } = await q.enqueue({ v: 1 });
    expect((await q.enqueueIn({ v: 2 }, 1000, { id })).status).toBe('duplicate');
    expect(await zscore('pending', id)).toBe(0);
    expect(await raw.zcard(key('schedule'))).toBe(0);
  });

  it('refuses a negative or fractional delay and a negative run-at, writing nothing', async ({
    q,
    queueKeys,
  }) => {
    await expectRefused(() => q.enqueueIn({}, -1), 'EMQINPUT');
    await expectRefused(() => q.enqueueIn({}, 1.5), 'EMQINPUT');
    await expectRefused(() => q.enqueueAt({}, -5), 'EMQINPUT');
    await expectRefused(() => q.enqueueIn({}, 10, { id: 'nope' }), 'EMQKIND');
    expect(await queueKeys()).toEqual([]);
  });

  // Every verb reports bad input through its promise, never by a synchronous throw.
  it('enqueueIn with a negative delay rejects its promise instead of throwing synchronously', async ({
    q,
  }) => {
    let promise: Promise<unknown> | undefined;
    expect(() => {
      promise = q.enqueueIn({}, -1);
    }).not.toThrow();
    await expect(promise).rejects.toMatchObject({ code: 'EMQINPUT' });
  });
});

// ── promote ─────────────────────────────────────────────────────────────────────

describe('promote', () => {
  it('releases only due jobs to pending at their priority, with a waiting event', async ({
    raw,
    q,
    key,
    events,
    row,
    promoteUntil,
  }) => {
    const due = await q.enqueueIn({ due: true }, 20, { priority: 9 });
    const later = await q.enqueueIn({ due: false }, 60_000);

    expect(await promoteUntil(1)).toBe(1);
    expect(await q.promote()).toBe(0);

    expect(await row(due.id)).toMatchObject({ state: 'pending' });
    expect(await raw.zrange(key('pending'), 0, -1, 'WITHSCORES')).toEqual([due.id, '9']);
    expect(await raw.zrange(key('schedule'), 0, -1)).toEqual([later.id]);
    expect((await row(later.id)).state).toBe('scheduled');
    expect(await events()).toEqual([
      { event: 'delayed', id: due.id, name: '', at: expect.any(String) },
      { event: 'delayed', id: later.id, name: '', at: expect.any(String) },
      { event: 'waiting', id: due.id },
    ]);
  });

  it('releases at most batch due members per call', async ({ raw, q, key, serverNow }) => {
    const past = (await serverNow()) - 1000;
    for (let i = 0; i < 3; i++) await q.enqueueAt({ i }, past + i);
    expect(await q.promote(2)).toBe(2);
    expect(await raw.zcard(key('pending'))).toBe(2);
    expect(await q.promote(2)).toBe(1);
    expect(await raw.zcard(key('pending'))).toBe(3);
    expect(await raw.zcard(key('schedule'))).toBe(0);
  });

  it('removes and counts a ghost (scheduled id whose row is gone) without resurrecting it', async ({
    raw,
    q,
    key,
    events,
    promoteUntil,
  }) => {
    const { id } = await q.enqueueIn({ a: 1 }, 20);
    await raw.del(key(`job:${id}`));

    expect(await promoteUntil(1)).toBe(1);

    expect(await raw.exists(key(`job:${id}`))).toBe(0);
    expect(await raw.zcard(key('schedule'))).toBe(0);
    expect(await raw.zcard(key('pending'))).toBe(0);
    expect((await events()).map((e) => e.event)).toEqual(['delayed']);
  });

  it('releases a grouped job into its lane and puts the group on the ring', async ({
    raw,
    q,
    key,
    row,
    promoteUntil,
  }) => {
    const { id } = await q.enqueueIn({ a: 1 }, 20, { group: 'g7' });
    await promoteUntil(1);

    expect(await raw.zcard(key('pending'))).toBe(0);
    expect(await raw.zrange(key('g:g7:pending'), 0, -1, 'WITHSCORES')).toEqual([id, '0']);
    expect(await raw.zrange(key('ring'), 0, -1)).toEqual(['g7']);
    expect(await raw.smembers(key('lanes'))).toEqual(['g7']);
    expect((await row(id)).state).toBe('pending');
    expect((await q.counts()).pending).toBe(1);
  });

  it('promoteNext reports the server now and the next due instant (-1 when nothing is scheduled)', async ({
    q,
    serverNow,
  }) => {
    const before = await serverNow();
    const empty = await q.promoteNext();
    const after = await serverNow();
    expect(empty.count).toBe(0);
    expect(empty.nextDue).toBe(-1);
    expect(empty.now).toBeGreaterThanOrEqual(before);
    expect(empty.now).toBeLessThanOrEqual(after);

    const runAt = (await serverNow()) + 60_000;
    await q.enqueueAt({ a: 1 }, runAt);
    await q.enqueueIn({ b: 1 }, 20);
    const released = await poll(
      () => q.promoteNext(),
      (r) => r.count === 1,
      'the 20 ms job',
    );
    expect(released.nextDue).toBe(runAt);
    expect(released.now).toBeLessThan(runAt);
  });
});

// ── cancel ──────────────────────────────────────────────────────────────────────

describe('cancel', () => {
  it('cancels a scheduled job at once: out of schedule, into cancelled, failed event', async ({
    raw,
    q,
    key,
    events,
    serverNow,
    row,
    zscore,
  }) => {
    const { id } = await q.enqueueIn({ a: 1 }, 60_000);
    const before = await serverNow();
    expect(await q.cancel(id)).toBe('cancelled');
    const after = await serverNow();

    expect(await raw.zcard(key('schedule'))).toBe(0);
    const at = (await zscore('cancelled', id))!;
    expect(at).toBeGreaterThanOrEqual(before);
    expect(at).toBeLessThanOrEqual(after);
    expect(await row(id)).toMatchObject({ state: 'cancelled', finished: String(at) });
    expect((await events()).at(-1)).toEqual({ event: 'failed', id, reason: 'cancelled' });
  });

  it('cancels a pending job at once', async ({ raw, q, key, events, row, zscore }) => {
    const { id } = await q.enqueue({ a: 1 });
    expect(await q.cancel(id)).toBe('cancelled');
    expect(await raw.zcard(key('pending'))).toBe(0);
    expect(await zscore('cancelled', id)).not.toBeNull();
    expect((await row(id)).state).toBe('cancelled');
    expect((await events()).at(-1)).toEqual({ event: 'failed', id, reason: 'cancelled' });
  });

  it('cancels a grouped pending job by removing it from its lane', async ({ raw, q, key, row, claim }) => {
    const { id } = await q.enqueue({ a: 1 }, { group: 'lane1' });
    const other = await q.enqueue({ b: 1 }, { group: 'lane1' });
    expect(await q.cancel(id)).toBe('cancelled');
    expect(await raw.zrange(key('g:lane1:pending'), 0, -1)).toEqual([other.id]);
    expect((await row(id)).state).toBe('cancelled');
    expect((await q.counts()).pending).toBe(1);
    // The lane still serves its remaining job.
    expect((await claim(5)).map((j) => j.id)).toEqual([other.id]);
  });

  it('an active job gets a cancel request and stays active under its lease', async ({
    raw,
    q,
    key,
    events,
    row,
    zscore,
    activeJob,
  }) => {
    const job = await activeJob();
    const lease = await zscore('active', job.id);
    const eventsBefore = await events();

    expect(await q.cancel(job.id)).toBe('requested');

    expect(await row(job.id)).toMatchObject({ state: 'active', cancel: '1', token: String(job.token) });
    expect(await zscore('active', job.id)).toBe(lease);
    expect(await raw.zcard(key('cancelled'))).toBe(0);
    expect(await events()).toEqual(eventsBefore);
    expect((await q.get(job.id))?.cancelRequested).toBe(true);
  });

  it('refuses a completed job with EMQSTATE and leaves it completed', async ({
    raw,
    q,
    key,
    row,
    zscore,
    complete,
    activeJob,
  }) => {
    const job = await activeJob();
    expect(await complete(job)).toBe('OK');
    await expectRefused(() => q.cancel(job.id), 'EMQSTATE');
    expect((await row(job.id)).state).toBe('completed');
    expect(await zscore('completed', job.id)).not.toBeNull();
    expect(await raw.zcard(key('cancelled'))).toBe(0);
  });

  it('refuses a job already cancelled with EMQSTATE', async ({ q }) => {
    const { id } = await q.enqueue({ a: 1 });
    await q.cancel(id);
    await expectRefused(() => q.cancel(id), 'EMQSTATE');
  });

  it('refuses an unknown id with EMQNOJOB and a non-JOB id with EMQKIND', async ({ raw, q, key }) => {
    await expectRefused(() => q.cancel('JOBunknown'), 'EMQNOJOB');
    await expectRefused(() => q.cancel('unknown'), 'EMQKIND');
    expect(await raw.exists(key('job:JOBunknown'))).toBe(0);
    expect(await raw.exists(key('events'))).toBe(0);
  });
});

// ── remove ──────────────────────────────────────────────────────────────────────

describe('remove', () => {
  /** What a setup may use of its test. */
  type Setup = (
    t: Pick<Helpers, 'activeJob' | 'complete' | 'fail'> & { q: Queue },
  ) => Promise<{ id: string; set: string }>;
  const setups: [string, Setup][] = [
    ['scheduled', async ({ q }) => ({ id: (await q.enqueueIn({}, 60_000)).id, set: 'schedule' })],
    ['pending', async ({ q }) => ({ id: (await q.enqueue({})).id, set: 'pending' })],
    [
      'pending in a lane',
      async ({ q }) => ({ id: (await q.enqueue({}, { group: 'rm' })).id, set: 'g:rm:pending' }),
    ],
    [
      'completed',
      async ({ activeJob, complete }) => {
        const job = await activeJob();
        await complete(job, '"done"');
        return { id: job.id, set: 'completed' };
      },
    ],
    [
      'dead',
      async ({ activeJob, fail }) => {
        const job = await activeJob();
        expect(await fail(job, -1)).toBe('dead');
        return { id: job.id, set: 'dead' };
      },
    ],
    [
      'cancelled',
      async ({ q }) => {
        const { id } = await q.enqueue({});
        await q.cancel(id);
        return { id, set: 'cancelled' };
      },
    ],
  ];

  it.for(setups)(
    'removes a %s job: out of its set, row deleted, removed event',
    async ([state, setup], { q, raw, key, row, zscore, events, activeJob, complete, fail }) => {
      const { id, set } = await setup({ q, activeJob, complete, fail });
      const prev = (await row(id)).state;
      expect(prev).toBe(state === 'pending in a lane' ? 'pending' : state);
      expect(await zscore(set, id)).not.toBeNull();

      expect(await q.remove(id)).toBe(true);

      expect(await zscore(set, id)).toBeNull();
      expect(await raw.exists(key(`job:${id}`))).toBe(0);
      expect((await events()).at(-1)).toEqual({ event: 'removed', id, prev });
      expect(Object.values(await q.counts()).reduce((a, b) => a + b, 0)).toBe(0);
      expect(await q.remove(id)).toBe(false);
    },
  );

  it('refuses an active job with EMQSTATE and leaves it running', async ({ q, row, zscore, activeJob }) => {
    const job = await activeJob();
    const lease = await zscore('active', job.id);
    await expectRefused(() => q.remove(job.id), 'EMQSTATE');
    expect((await row(job.id)).state).toBe('active');
    expect(await zscore('active', job.id)).toBe(lease);
  });

  it('answers false for an unknown id and writes no event', async ({ raw, q, key }) => {
    expect(await q.remove('JOBnever')).toBe(false);
    expect(await raw.exists(key('events'))).toBe(0);
  });
});

// ── get and counts ──────────────────────────────────────────────────────────────

describe('get', () => {
  it('returns null for an unknown id', async ({ q }) => {
    expect(await q.get('JOBmissing')).toBeNull();
  });

  it('views a pending job: data, limits, priority, name, backoff and creation time', async ({
    q,
    serverNow,
  }) => {
    const before = await serverNow();
    const { id } = await q.enqueue(
      { user: 42, tags: ['a'] },
      { name: 'report', priority: 5, attempts: 4, backoff: { kind: 'exponential', base: 100, cap: 1000 } },
    );
    const after = await serverNow();
    const view = (await q.get(id))!;
    expect(view).toEqual({
      id,
      name: 'report',
      state: 'pending',
      data: { user: 42, tags: ['a'] },
      attempts: 0,
      maxAttempts: 4,
      priority: 5,
      backoff: { kind: 'exponential', base: 100, cap: 1000 },
      stalled: 0,
      cancelRequested: false,
      createdAt: expect.any(Number),
    });
    expect(view.createdAt).toBeGreaterThanOrEqual(before);
    expect(view.createdAt).toBeLessThanOrEqual(after);
  });

  it('views a scheduled grouped job with its runAt and group', async ({ q, serverNow }) => {
    const runAt = (await serverNow()) + 60_000;
    const { id } = await q.enqueueAt(null, runAt, { group: 'gv' });
    expect(await q.get(id)).toMatchObject({
      state: 'scheduled',
      data: null,
      group: 'gv',
      runAt,
      attempts: 0,
    });
  });

  it('views the error of a failed attempt and the result and timestamps of a completed one', async ({
    q,
    claim,
    complete,
    fail,
    activeJob,
  }) => {
    const first = await activeJob({ attempts: 3 });
    expect(await fail(first, 0, 'disk full', 'Error: disk full\n    at work (w.ts:1:1)')).toBe('retry');
    const failed = (await q.get(first.id))!;
    expect(failed).toMatchObject({
      state: 'pending',
      attempts: 1,
      maxAttempts: 3,
      error: { message: 'disk full', stack: 'Error: disk full\n    at work (w.ts:1:1)' },
    });
    expect(failed.startedAt).toBeGreaterThanOrEqual(failed.createdAt);
    expect(failed.finishedAt).toBeUndefined();

    const [second] = await claim(1);
    expect(second?.attempts).toBe(2);
    expect(await complete(second!, JSON.stringify({ rows: 3 }))).toBe('OK');
    const done = (await q.get(first.id))!;
    expect(done).toMatchObject({ state: 'completed', attempts: 2, result: { rows: 3 } });
    expect(done.finishedAt).toBeGreaterThanOrEqual(done.startedAt!);
    expect(done.startedAt).toBeGreaterThanOrEqual(failed.startedAt!);
  });

  it('refuses a non-JOB id with EMQKIND', async ({ q }) => {
    await expectRefused(() => q.get('abc'), 'EMQKIND');
  });
});

describe('counts', () => {
  it('counts each state, with every lane counted in pending', async ({ q, claim, complete, fail }) => {
    expect(await q.counts()).toEqual({
      scheduled: 0,
      pending: 0,
      active: 0,
      completed: 0,
      dead: 0,
      cancelled: 0,
      waiting_children: 0,
    });

    await q.enqueue({ flat: 1 });
    await q.enqueue({ flat: 2 });
    for (let i = 0; i < 3; i++) await q.enqueue({ i }, { group: 'ga' });
    await q.enqueue({ g: 'b' }, { group: 'gb' });
    await q.enqueueIn({ later: true }, 60_000);
    const cancelled = await q.enqueue({ c: 1 });
    await q.cancel(cancelled.id);

    const [job] = await claim(1); // the ring's head lane (ga) is served first
    expect(await q.counts()).toEqual({
      scheduled: 1,
      pending: 5,
      active: 1,
      completed: 0,
      dead: 0,
      cancelled: 1,
      waiting_children: 0,
    });

    await complete(job!);
    const [dead] = await claim(1);
    await fail(dead!, -1);
    expect(await q.counts()).toEqual({
      scheduled: 1,
      pending: 4,
      active: 0,
      completed: 1,
      dead: 1,
      cancelled: 1,
      waiting_children: 0,
    });
  });
});
