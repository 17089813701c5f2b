// Bad input, thrown at every public verb and at the protocol scripts directly (fast-check). Each
// call must end in a typed EchoMQError with a known code or a valid result, never an untyped or
// raw Lua error; and a refused call must leave every key under the queue's prefix as it was
// (each key's encoding and content before and after). Runs are bounded so the file stays well under 40 s.
// The server loads the native module when it can be built (test/support/native-module.ts), so
// promote and sweep_stalled are fuzzed as the module's commands, the runtime's way to them.
import fc from 'fast-check';
import type { Redis } from 'ioredis';
import { describe, expect, test } from 'vitest';
import { RateLimitError, retryAfterMs, SnoozeError } from '../../src/consumer/putback.js';
import { EchoMQError, type ErrorCode } from '../../src/core/errors.js';
import { EchoMQ } from '../../src/queue/echomq.js';
import type { Queue } from '../../src/queue/queue.js';
import { PROTOCOL_VERSION } from '../../src/wire/keyspace.js';
import { loadScripts, type ScriptName } from '../../src/wire/scripts.js';
import { helperFixtures, uniqueQueue, useRedisServer } from '../support/harness.js';
import { keyState } from '../support/key-state.js';
import { loadModuleArgs } from '../support/native-module.js';
import { poll } from '../support/wait.js';

const env = useRedisServer({ args: loadModuleArgs() });

const CODES: readonly ErrorCode[] = [
  'EMQKIND',
  'EMQLEASE',
  'EMQNOJOB',
  'EMQSTATE',
  'EMQINPUT',
  'EMQCRON',
  'EMQTOOBIG',
  'EMQCANCELLED',
  'EMQTIMEOUT',
  'EMQJOBFAILED',
  'EMQPROTOCOL',
  'EMQFLEET',
  'EMQDATA',
];

/** Each test's own connection (payloads capped at 4 KiB) and raw client, closed after it. */
const base = test.extend<{ mq: EchoMQ; raw: Redis }>({
  // biome-ignore lint/correctness/noEmptyPattern: vitest reads a fixture's dependencies from this pattern
  mq: async ({}, use) => {
    const mq = await EchoMQ.connect({ url: env.server.url, maxPayloadBytes: 4096 });
    try {
      await use(mq);
    } finally {
      await mq.close();
    }
  },
  // biome-ignore lint/correctness/noEmptyPattern: vitest reads a fixture's dependencies from this pattern
  raw: async ({}, use) => {
    const raw = env.server.client();
    try {
      await use(raw);
    } finally {
      await raw.quit();
    }
  },
});

// ── snapshots ───────────────────────────────────────────────────────────────────

/** What each refused call was refused with (verb and code), counted. */
const refusals = new Map<string, number>();

/** The file's helpers over one test's connection. */
function helpers({ mq, raw }: Pick<{ mq: EchoMQ; raw: Redis }, 'mq' | 'raw'>) {
  /** Every key under the queue's prefix that has no ttl, by name (test/support/key-state.ts). */
  const snapshot = (q: Queue) => keyState(raw, q.keys.prefix);

  /**
   * Runs `call`: a valid result passes `valid` (when given); a failure must be an EchoMQError with
   * a known code, and must have left the queue's keys untouched.
   */
  async function judge(q: Queue, what: string, call: () => unknown, valid?: (r: unknown) => void) {
    const before = await snapshot(q);
    let result: unknown;
    try {
      result = await call();
    } catch (err) {
      if (!(err instanceof EchoMQError)) {
        throw new Error(`${what}: untyped error ${String((err as Error)?.message ?? err)}`);
      }
      expect(CODES, `${what}: ${err.message}`).toContain(err.code);
      refusals.set(`${what} ${err.code}`, (refusals.get(`${what} ${err.code}`) ?? 0) + 1);
      expect(await snapshot(q), `${what} refused with ${err.code} but changed keys`).toEqual(before);
      return;
    }
    valid?.(result);
  }

  /** A queue with jobs in every state, so scripts and verbs meet real rows. */
  async function populated(label: string): Promise<{ q: Queue; active: string; token: string }> {
    const q = mq.queue(uniqueQueue(label));
    await q.enqueue({ n: 'a' }, { id: 'JOBactive' });
    const [jobs] = (await q.run('claim', [q.keys.prefix, 1, 3_600_000])) as [string[]];
    const token = String(jobs[1]);
    await q.enqueue({ n: 'done' }, { id: 'JOBdone' });
    const [more] = (await q.run('claim', [q.keys.prefix, 1, 3_600_000])) as [string[]];
    await q.run('complete', [q.keys.prefix, 1000, 0, 'JOBdone', String(more[1]), '"ok"']);
    await q.enqueue({ n: 'dead' }, { id: 'JOBdead', attempts: 1 });
    const [d] = (await q.run('claim', [q.keys.prefix, 1, 3_600_000])) as [string[]];
    await q.run('fail', [q.keys.prefix, 'JOBdead', String(d[1]), 'boom', '', -1], 'JOBdead');
    await q.enqueue({ n: 'p' }, { id: 'JOBpending' });
    await q.enqueue({ n: 'g' }, { id: 'JOBlane', group: 'g' });
    await q.enqueueIn({ n: 's' }, 3_600_000, { id: 'JOBlater' });
    await q.lanes.configure('g', { concurrency: 2 });
    await q.repeat.register('tick', 3_600_000, { t: 1 });
    await q.schedulers.upsert('nightly', { pattern: '0 3 * * *' }, { data: { s: 1 } });
    return { q, active: 'JOBactive', token };
  }
  return { snapshot, judge, populated };
}
type Helpers = ReturnType<typeof helpers>;

const it = base
  .extend<{ h: Helpers }>({ h: async ({ mq, raw }, use) => use(helpers({ mq, raw })) })
  .extend<Helpers>(helperFixtures<Helpers>(['snapshot', 'judge', 'populated']));

// ── hostile values ──────────────────────────────────────────────────────────────

const nastyStrings = [
  '',
  ' ',
  '{',
  '}',
  '{q}',
  'a{b}c',
  ':',
  'a:b',
  '\n',
  'a\nb',
  '\r\n',
  '\0',
  'x\u0000y',
  '*',
  '-',
  '$',
  'JOB',
  'JOB{x}',
  'JOB}{',
  'JOB:1',
  'JOB\n',
  'JOB x',
  'JOBok-1',
  'job1',
  'NaN',
  'nan',
  'inf',
  '-inf',
  '-1',
  '0x10',
  '1e400',
  '1.5',
  '\u{1F600}',
  '\uD800',
  'ö',
  'x'.repeat(201),
  'x'.repeat(513),
  'throttle',
  'debounce:5',
  'at',
  'in',
  'next',
  'one',
  'due',
  'completed',
  'dead',
  'cancelled',
  'all',
  'once',
  '1:1',
  '99999999999999999999',
  '99999999999999999999:99999999999999999999',
  '-99999999999999999999',
];

const nastyNumbers = [
  Number.NaN,
  Number.POSITIVE_INFINITY,
  Number.NEGATIVE_INFINITY,
  -1,
  -0,
  0,
  0.5,
  1.5,
  2 ** 31,
  2 ** 53,
  2 ** 53 + 2,
  Number.MAX_VALUE,
  Number.MIN_VALUE,
  -(2 ** 31),
  1e21,
];

const hostileString = fc.oneof(
  { weight: 3, arbitrary: fc.constantFrom(...nastyStrings) },
  { weight: 1, arbitrary: fc.string() },
  { weight: 1, arbitrary: fc.string({ unit: 'binary', maxLength: 40 }) },
  { weight: 1, arbitrary: fc.string({ maxLength: 20 }).map((s) => `JOB${s}`) },
);
const hostileNumber = fc.oneof(
  { weight: 3, arbitrary: fc.constantFrom(...nastyNumbers) },
  { weight: 1, arbitrary: fc.integer() },
  { weight: 1, arbitrary: fc.integer({ min: 0, max: 10_000 }) },
  { weight: 1, arbitrary: fc.double() },
);
const hostile: fc.Arbitrary<unknown> = fc.oneof(
  { weight: 3, arbitrary: hostileString },
  { weight: 3, arbitrary: hostileNumber },
  { weight: 1, arbitrary: fc.constantFrom(undefined, null, true, false, [], {}, () => 1, Symbol('s')) },
  { weight: 1, arbitrary: fc.anything({ maxDepth: 2 }) },
  { weight: 1, arbitrary: fc.bigInt() },
  { weight: 1, arbitrary: fc.date({ noInvalidDate: false }) },
);
const maybe = <T>(a: fc.Arbitrary<T>) => fc.option(a, { nil: undefined });
/** Mostly absent or valid, sometimes hostile: enough valid records to reach the wire. */
const often = <T>(valid: fc.Arbitrary<T>): fc.Arbitrary<unknown> =>
  fc.oneof(
    { weight: 4, arbitrary: fc.constant(undefined) },
    { weight: 4, arbitrary: valid },
    { weight: 1, arbitrary: hostile },
  );

/** Job data: anything JSON can or cannot carry, binary, huge (the queue's limit is 4 KiB). */
const payload: fc.Arbitrary<unknown> = fc.oneof(
  {
    weight: 3,
    arbitrary: fc.anything({ maxDepth: 3, withBigInt: true, withTypedArray: true, withMap: true }),
  },
  { weight: 1, arbitrary: fc.uint8Array({ maxLength: 64 }).map((b) => Buffer.from(b)) },
  { weight: 1, arbitrary: fc.constantFrom('x'.repeat(5000), { big: 'y'.repeat(4090) }, 'z'.repeat(4000)) },
  {
    weight: 1,
    arbitrary: fc.constantFrom(
      (() => {
        const o: Record<string, unknown> = {};
        o.self = o;
        return o;
      })(),
      {
        toJSON() {
          throw new Error('no');
        },
      },
      { toJSON: () => undefined },
      undefined,
      () => 1,
    ),
  },
);

const backoff = fc.oneof(
  hostile,
  fc.record(
    {
      kind: fc.constantFrom('fixed', 'exponential', 'jitter', 'x'),
      ms: hostile,
      base: hostile,
      cap: hostile,
      inner: fc.oneof(hostile, fc.constant({ kind: 'fixed', ms: 5 })),
    },
    { requiredKeys: [] },
  ),
);

const dedupe = fc.oneof(
  hostile,
  fc.record(
    { key: hostile, mode: fc.constantFrom('throttle', 'debounce', 'x', undefined), ttlMs: hostile },
    { requiredKeys: [] },
  ),
);

/** Enqueue options: plausible keys with hostile values, unknown keys, or not an object at all. */
const enqueueOpts: fc.Arbitrary<unknown> = fc.oneof(
  fc.constant(undefined),
  fc.record(
    {
      id: fc.oneof(
        hostile,
        fc.string({ maxLength: 30 }).map((s) => `JOB${s}`),
      ),
      name: hostile,
      priority: hostile,
      group: hostile,
      attempts: hostile,
      backoff,
      dedupe,
      removeOnComplete: fc.oneof(
        hostile,
        fc.record({ count: hostile, ageMs: hostile }, { requiredKeys: [] }),
      ),
      removeOnFail: hostile,
      tags: fc.oneof(hostile, fc.array(hostileString, { maxLength: 12 })),
      lifo: hostile,
    },
    { requiredKeys: [] },
  ),
  fc.dictionary(hostileString, hostile, { maxKeys: 3 }),
  hostile,
);

// Typed wrappers: the fuzz throws values the signatures do not allow.
// biome-ignore lint/suspicious/noExplicitAny: hostile input on purpose
type Any = any;

const RUNS = 150;

const jobIds = fc.oneof(
  fc.constantFrom('JOBactive', 'JOBdone', 'JOBdead', 'JOBpending', 'JOBlane', 'JOBlater', 'JOBnone'),
  hostile,
);

// ── the public verbs ────────────────────────────────────────────────────────────

describe('public verbs refuse hostile input with a typed error, or do something valid', () => {
  it('enqueue, enqueueAt, enqueueIn, enqueueMany', async ({ judge, populated }) => {
    const { q } = await populated('fz-admit');
    const statuses = ['enqueued', 'scheduled', 'duplicate', 'deduplicated'];
    const ok = (r: unknown) => {
      const { id, status } = r as { id: string; status: string };
      expect(id.startsWith('JOB')).toBe(true);
      expect(statuses).toContain(status);
    };
    await fc.assert(
      fc.asyncProperty(payload, enqueueOpts, async (data, opts) => {
        await judge(q, 'enqueue', () => q.enqueue(data, opts as Any), ok);
      }),
      { numRuns: RUNS },
    );
    await fc.assert(
      fc.asyncProperty(payload, hostile, enqueueOpts, async (data, at, opts) => {
        await judge(q, 'enqueueAt', () => q.enqueueAt(data, at as Any, opts as Any), ok);
      }),
      { numRuns: RUNS },
    );
    await fc.assert(
      fc.asyncProperty(payload, hostile, enqueueOpts, async (data, delay, opts) => {
        await judge(q, 'enqueueIn', () => q.enqueueIn(data, delay as Any, opts as Any), ok);
      }),
      { numRuns: RUNS },
    );
    await fc.assert(
      fc.asyncProperty(
        fc.oneof(
          fc.array(fc.record({ data: payload, opts: enqueueOpts }, { requiredKeys: [] }), { maxLength: 5 }),
          hostile,
        ),
        async (items) => {
          await judge(
            q,
            'enqueueMany',
            () => q.enqueueMany(items as Any),
            (r) => {
              for (const e of r as unknown[]) ok(e);
            },
          );
        },
      ),
      { numRuns: RUNS },
    );
  });

  it('get, cancel, remove, retry', async ({ judge, populated }) => {
    const { q } = await populated('fz-ids');
    await fc.assert(
      fc.asyncProperty(jobIds, async (id) => {
        await judge(q, 'get', () => q.get(id as Any));
      }),
      { numRuns: RUNS },
    );
    await fc.assert(
      fc.asyncProperty(fc.constantFrom('cancel', 'remove', 'retry'), jobIds, async (verb, id) => {
        await judge(q, verb, () => (q as Any)[verb](id));
      }),
      { numRuns: RUNS },
    );
  });

  it('promote(id), reschedule, reprioritize, update: a refused change writes nothing', async ({
    judge,
    populated,
  }) => {
    const { q } = await populated('fz-change');
    const verbs = {
      promote: (id: unknown) => q.promote(id as Any),
      reschedule: (id: unknown, arg: unknown) => q.reschedule(id as Any, arg as Any),
      reprioritize: (id: unknown, arg: unknown) => q.reprioritize(id as Any, arg as Any),
      update: (id: unknown, arg: unknown) => q.update(id as Any, arg as Any),
    };
    const when = fc.oneof(
      fc.record({ at: hostile, in: hostile }, { requiredKeys: [] }),
      fc.record({ in: fc.oneof(hostile, fc.integer({ min: 0, max: 3_600_000 })) }),
      fc.record({ at: fc.oneof(hostile, fc.integer({ min: 0, max: 2 ** 45 })) }),
      hostile,
    );
    const args = {
      promote: fc.constant(undefined),
      reschedule: when,
      reprioritize: hostile,
      update: payload,
    };
    for (const [verb, call] of Object.entries(verbs)) {
      await fc.assert(
        fc.asyncProperty(jobIds, args[verb as keyof typeof args], async (id, arg) => {
          await judge(q, verb, () => call(id, arg));
        }),
        { numRuns: RUNS },
      );
    }
  });

  it('drain and obliterate: refused options write nothing; obliterate waits for active jobs', async ({
    judge,
    populated,
  }) => {
    const { q } = await populated('fz-empty');
    const opts = fc.oneof(
      fc.record({ scheduled: hostile, batch: hostile, onProgress: hostile }, { requiredKeys: [] }),
      fc.record({ force: fc.constant(false), batch: fc.oneof(hostile, fc.integer({ min: 1, max: 50 })) }),
      fc.dictionary(hostileString, hostile, { maxKeys: 2 }),
      hostile,
    );
    await fc.assert(
      fc.asyncProperty(opts, async (o) => {
        await judge(q, 'obliterate', () => q.obliterate(o as Any));
      }),
      { numRuns: RUNS },
    );
    // JOBactive holds its lease: no unforced obliterate got through.
    expect((await q.get('JOBactive'))?.state).toBe('active');
    await fc.assert(
      fc.asyncProperty(opts, async (o) => {
        await judge(q, 'drain', () => q.drain(o as Any));
      }),
      { numRuns: RUNS },
    );
  });

  it('promote, reap, sweepStalled, pause/resume, clean', async ({ judge, populated }) => {
    const { q } = await populated('fz-sweeps');
    await fc.assert(
      fc.asyncProperty(hostile, async (batch) => {
        await judge(
          q,
          'promoteDue',
          () => q.promoteDue(batch as Any),
          (r) => expect(r).toBeTypeOf('number'),
        );
        await judge(
          q,
          'reap',
          () => q.reap(batch as Any),
          (r) => expect(Array.isArray(r)).toBe(true),
        );
      }),
      { numRuns: RUNS },
    );
    await fc.assert(
      fc.asyncProperty(
        fc.oneof(fc.record({ maxStalled: hostile, batch: hostile }, { requiredKeys: [] }), hostile),
        async (opts) => {
          await judge(q, 'sweepStalled', () => q.sweepStalled(opts as Any));
        },
      ),
      { numRuns: RUNS },
    );
    await fc.assert(
      fc.asyncProperty(
        fc.oneof(
          fc.record(
            {
              state: fc.oneof(fc.constantFrom('completed', 'dead', 'cancelled'), hostile),
              olderThanMs: hostile,
              limit: hostile,
            },
            { requiredKeys: [] },
          ),
          hostile,
        ),
        async (opts) => {
          await judge(q, 'clean', () => q.clean(opts as Any));
        },
      ),
      { numRuns: RUNS },
    );
    await fc.assert(
      fc.asyncProperty(fc.constantFrom('pause', 'resume'), maybe(hostile), async (verb, group) => {
        await judge(q, verb, () =>
          group === undefined ? (q as Any)[verb]() : (q.lanes as Any)[verb](group),
        );
      }),
      { numRuns: RUNS },
    );
  });

  it('configure and lanes.configure', async ({ judge, populated }) => {
    const { q } = await populated('fz-config');
    const rate = fc.oneof(hostile, fc.record({ max: hostile, perMs: hostile }, { requiredKeys: [] }));
    const count = fc.record({ count: hostile, ageMs: hostile }, { requiredKeys: [] });
    await fc.assert(
      fc.asyncProperty(
        fc.oneof(
          fc.record(
            {
              rateLimit: rate,
              retention: fc.oneof(
                hostile,
                fc.record({ completed: count, dead: count }, { requiredKeys: [] }),
              ),
              eventsMaxLen: hostile,
              concurrency: hostile,
            },
            { requiredKeys: [] },
          ),
          fc.dictionary(hostileString, hostile, { maxKeys: 2 }),
          hostile,
        ),
        async (settings) => {
          await judge(q, 'configure', () => q.configure(settings as Any));
        },
      ),
      { numRuns: RUNS },
    );
    await fc.assert(
      fc.asyncProperty(
        hostile,
        fc.oneof(fc.record({ concurrency: hostile, rateLimit: rate }, { requiredKeys: [] }), hostile),
        async (group, settings) => {
          await judge(q, 'lanes.configure', () => q.lanes.configure(group as Any, settings as Any));
        },
      ),
      { numRuns: RUNS },
    );
    // The queue still works after all of it.
    await q.configure({ eventsMaxLen: 10_000, rateLimit: null, concurrency: null });
    const { id } = await q.enqueue({ after: true });
    expect((await q.get(id))?.state).toBe('pending');
  });

  it('repeat.register and schedulers.upsert (invalid cron patterns and time zones)', async ({
    judge,
    populated,
  }) => {
    const { q } = await populated('fz-recur');
    await fc.assert(
      fc.asyncProperty(
        hostile,
        hostile,
        payload,
        fc.oneof(
          fc.record({ firstRunMs: hostile, catchUp: hostile, attempts: hostile }, { requiredKeys: [] }),
          hostile,
        ),
        async (name, every, template, opts) => {
          await judge(q, 'repeat.register', () =>
            q.repeat.register(name as Any, every as Any, template, opts as Any),
          );
        },
      ),
      { numRuns: RUNS },
    );
    const pattern = fc.oneof(
      hostile,
      fc.constantFrom(
        '0 9 * * *',
        '* * * * * * *',
        '61 * * * *',
        '0 0 31 2 *',
        '@daily',
        '@nope',
        'a b c d e',
        '*/0 * * * *',
      ),
    );
    const tz = fc.oneof(
      hostile,
      fc.constantFrom('UTC', 'Europe/Berlin', 'Mars/Olympus', 'Etc/GMT+99', '+01:00'),
    );
    await fc.assert(
      fc.asyncProperty(
        fc.oneof(fc.constantFrom('nightly', 'sched-1'), hostile),
        fc.oneof(
          fc.record(
            {
              every: hostile,
              pattern,
              tz,
              immediately: hostile,
              startDate: hostile,
              endDate: hostile,
              limit: hostile,
            },
            { requiredKeys: [] },
          ),
          fc.dictionary(hostileString, hostile, { maxKeys: 2 }),
          hostile,
        ),
        fc.oneof(
          fc.record(
            {
              name: hostile,
              data: payload,
              opts: fc.oneof(
                hostile,
                fc.record(
                  { priority: hostile, group: hostile, attempts: hostile, backoff, id: hostile },
                  { requiredKeys: [] },
                ),
              ),
            },
            { requiredKeys: [] },
          ),
          hostile,
        ),
        async (id, repeat, template) => {
          await judge(q, 'schedulers.upsert', () =>
            q.schedulers.upsert(id as Any, repeat as Any, template as Any),
          );
        },
      ),
      { numRuns: RUNS },
    );
  });

  it('retryAll, waitFor, events, counts and the recurrence listings', async ({ judge, populated }) => {
    const { q } = await populated('fz-misc');
    const optsOf = fc.oneof(
      hostile,
      fc.record(
        {
          state: fc.oneof(fc.constantFrom('dead', 'cancelled'), hostile),
          batch: hostile,
          timeoutMs: fc.oneof(fc.constantFrom(1, 5), hostile),
          from: fc.oneof(fc.constantFrom('$', '0', '0-0'), hostile),
          blockMs: fc.oneof(fc.constantFrom(1, 10), hostile),
          count: hostile,
          start: hostile,
          end: hostile,
        },
        { requiredKeys: [] },
      ),
    );
    const shortWait = (o: unknown) => {
      if (o === undefined) return { timeoutMs: 20 };
      if (typeof o !== 'object' || o === null) return o;
      const t = (o as { timeoutMs?: unknown }).timeoutMs;
      const long = t === undefined || (typeof t === 'number' && t > 20 && t < 2 ** 31);
      return long ? { ...o, timeoutMs: 20 } : o;
    };
    const verbs: Record<string, (a: unknown, o: unknown) => unknown> = {
      retryAll: (_a, o) => q.retryAll(o as Any),
      // a short wait: a valid but long timeout would only wait for a job that never runs here
      waitFor: (a, o) =>
        q.waitFor(a as Any, shortWait(o) as Any).catch((e) => {
          // a wait that runs out, or a job that ended badly, is a typed answer too
          if (e instanceof EchoMQError && ['EMQTIMEOUT', 'EMQJOBFAILED', 'EMQCANCELLED'].includes(e.code))
            return;
          throw e;
        }),
      events: async (_a, o) => {
        const r = q.events(o as Any);
        await r.close();
      },
      counts: () => q.counts(),
      'repeat.unregister': (a) => q.repeat.unregister(a as Any),
      'repeat.list': () => q.repeat.list(),
      'schedulers.get': (a) => q.schedulers.get(a as Any),
      'schedulers.list': (_a, o) => q.schedulers.list(o as Any),
      'schedulers.remove': (a) => q.schedulers.remove(a as Any),
    };
    await fc.assert(
      fc.asyncProperty(fc.constantFrom(...Object.keys(verbs)), jobIds, optsOf, async (verb, a, o) => {
        await judge(q, verb, () => verbs[verb]!(a, o));
      }),
      { numRuns: RUNS },
    );
  });

  it('mq.flow', async ({ mq, judge, populated }) => {
    const { q } = await populated('fz-flow');
    const job = (children: fc.Arbitrary<unknown>) =>
      fc.record(
        {
          queue: fc.oneof({ weight: 4, arbitrary: fc.constant(q.name) }, { weight: 1, arbitrary: hostile }),
          data: payload,
          name: hostile,
          opts: enqueueOpts,
          children,
        },
        { requiredKeys: ['queue'] },
      );
    const tree = job(fc.oneof(hostile, fc.array(job(fc.constant(undefined)), { maxLength: 3 })));
    await fc.assert(
      fc.asyncProperty(
        fc.oneof({ weight: 4, arbitrary: tree }, { weight: 1, arbitrary: hostile }),
        async (root) => {
          await judge(q, 'flow', () => mq.flow(root as Any));
        },
      ),
      { numRuns: RUNS },
    );
  });

  it('SnoozeError, RateLimitError and retryAfterMs (the delays a handler puts its job back with)', async ({
    mq,
    judge,
  }) => {
    const q = mq.queue(uniqueQueue('fz-putback'));
    await fc.assert(
      fc.asyncProperty(hostile, hostile, async (ms, header) => {
        await judge(
          q,
          'SnoozeError',
          () => new SnoozeError(ms as Any),
          (e) => {
            expect((e as SnoozeError).delayMs).toBeGreaterThanOrEqual(1);
          },
        );
        await judge(q, 'RateLimitError', () => new RateLimitError(ms as Any));
        await judge(
          q,
          'retryAfterMs',
          () => retryAfterMs(header as Any, ms as Any),
          (r) => {
            expect(Number.isInteger(r) && (r as number) >= 1).toBe(true);
          },
        );
      }),
      { numRuns: RUNS },
    );
  });

  it('consume options', async ({ mq, judge }) => {
    const q = mq.queue(uniqueQueue('fz-consume'));
    await fc.assert(
      fc.asyncProperty(
        fc.oneof(
          fc.record(
            {
              concurrency: often(fc.integer({ min: 1, max: 50 })),
              leaseMs: often(fc.integer({ min: 1, max: 60_000 })),
              extendMs: often(fc.integer({ min: 1, max: 60_000 })),
              beatMs: often(fc.integer({ min: 1, max: 5000 })),
              recovery: often(fc.constantFrom('reap', 'stalled', 'off')),
              maxStalled: often(fc.integer({ min: 0, max: 5 })),
              promoteBatch: often(fc.integer({ min: 1, max: 1000 })),
              ttlMs: often(fc.integer({ min: 1, max: 60_000 })),
              backoff: often(fc.constant({ kind: 'fixed', ms: 10 })),
              maxErrorBytes: often(fc.integer({ min: 1, max: 9000 })),
              maxStackBytes: often(fc.integer({ min: 1, max: 9000 })),
            },
            { requiredKeys: [] },
          ),
          hostile,
        ),
        async (opts) => {
          let consumer: ReturnType<Queue['consume']> | undefined;
          await judge(q, 'consume', () => {
            consumer = q.consume(() => 1, opts as Any);
          });
          if (!consumer) return;
          // A consumer that started runs a beat; every wire failure it reports is typed.
          const failures: unknown[] = [];
          consumer.on('degraded', (e) => failures.push(e));
          consumer.on('error', (e) => failures.push(e));
          await new Promise((r) => setTimeout(r, 20));
          await consumer.close({ timeoutMs: 0 });
          for (const f of failures) expect(f, String(f)).toBeInstanceOf(EchoMQError);
        },
      ),
      { numRuns: 40 },
    );
  });
});

// ── the scripts, called directly ────────────────────────────────────────────────

type Arg = string | number;

const scriptAtom: fc.Arbitrary<Arg> = fc.oneof(
  { weight: 3, arbitrary: hostileString },
  { weight: 2, arbitrary: hostileNumber },
  { weight: 1, arbitrary: fc.constantFrom('0', '1', '10', '-1', '1000', '3600000', '', 'g', '*', '-') },
);
/** A field that is mostly a plausible value, sometimes a hostile one. */
const field = (...valid: Arg[]): fc.Arbitrary<Arg> =>
  fc.oneof({ weight: 2, arbitrary: fc.constantFrom(...valid) }, { weight: 1, arbitrary: scriptAtom });
const ids = (): fc.Arbitrary<Arg> =>
  field('JOBactive', 'JOBdone', 'JOBdead', 'JOBpending', 'JOBlane', 'JOBlater', 'JOBnone', 'JOBnew1');
const times = <T>(a: fc.Arbitrary<T[]>, min: number, max: number) =>
  fc.array(a, { minLength: min, maxLength: max }).map((xs) => xs.flat());

/** ARGV shaped like each script's contract, with hostile fields. `P` is the queue's prefix. */
function shapes(P: string, token: string): Record<ScriptName, fc.Arbitrary<Arg[]>> {
  const prefix = field(P);
  const num = (...v: Arg[]) => field(...v);
  const tok = field(token, 'x', '1');
  const tuple9 = fc.tuple(
    ids(),
    field('{}', '1', '"x"'),
    num('0', '5'),
    field('', 'g'),
    field('', 'n'),
    num('', '3'),
    field('', '{"kind":"fixed","delay":5}'),
    field('', 'dk'),
    field('', 'throttle', 'debounce:50'),
  );
  return {
    hello: fc.oneof(
      fc.tuple(field(PROTOCOL_VERSION, '2')),
      fc.tuple(field(PROTOCOL_VERSION, '2'), field('1', '2'), field('1', '2')),
    ),
    migrate: fc.tuple(prefix, field('1', '2'), field('2', '3'), field('0', '60000')),
    enqueue: fc.oneof(
      fc.tuple(prefix, times(tuple9, 1, 2)).map(([p, rest]) => [p, ...rest]),
      fc
        .tuple(
          prefix,
          times(
            fc.tuple(
              tuple9,
              field('', '0:-1', '5:100', '-1:x'),
              field('', '1:1'),
              field('', 'a,b'),
              field('', '1'),
            ),
            1,
            2,
          ),
        )
        .map(([p, rest]) => [p, '#13', ...rest.flat()]),
    ),
    flow_add: fc.oneof(
      fc
        .tuple(
          prefix,
          times(
            fc.tuple(
              ids(),
              field('{}'),
              num('0'),
              field('', 'g'),
              field(''),
              num(''),
              field(''),
              field('', 'JOBnew1'),
              field('', '1'),
            ),
            1,
            3,
          ),
        )
        .map(([p, rest]) => [p, ...rest]),
      // The #15 form: a job's own queue, retention, tags, lifo and ref flags.
      fc
        .tuple(
          prefix,
          times(
            fc.tuple(
              field('', 'emq:{other}:', 'emq:x:'),
              ids(),
              field('{}'),
              num('0'),
              field('', 'g'),
              field(''),
              num(''),
              field(''),
              field('', 'JOBnew1', 'emq:{other}:JOBp'),
              field('', '1', 'ignore'),
              field('', '0:-1', '1.5:0'),
              field('', '5:1000'),
              field('', 'a,b'),
              field('', '1'),
              field('', '1'),
            ),
            1,
            3,
          ),
        )
        .map(([p, rest]) => [p, '#15', ...rest]),
    ),
    schedule: fc.tuple(
      ids(),
      field('{}'),
      field('at', 'in'),
      num('0', '100', '1700000000000'),
      num('0', '3'),
      field('', 'g'),
      field(''),
      num('', '2'),
      field(''),
      field('', 'dk'),
      field('', 'debounce'),
    ),
    promote: fc.tuple(prefix, num('1', '100'), field('next', '')),
    claim: fc.tuple(prefix, num('1', '5'), num('1000', '30000')),
    complete: fc
      .tuple(prefix, num('1000'), num('0', '2'), times(fc.tuple(ids(), tok, field('', '"r"')), 0, 2))
      .map(([p, l, n, rest]) => [p, l, n, ...rest]),
    fail: fc.tuple(prefix, ids(), tok, field('boom'), field(''), num('0', '-1', '1000')),
    extend_lock: fc
      .tuple(prefix, num('1000'), times(fc.tuple(ids(), tok), 0, 2))
      .map(([p, l, rest]) => [p, l, ...rest]),
    reap: fc.tuple(prefix, num('100')),
    sweep_stalled: fc.tuple(prefix, num('1', '0'), num('100')),
    cancel: fc.tuple(prefix, ids()),
    remove: fc.tuple(prefix, ids()),
    handback: fc.tuple(prefix, times(fc.tuple(ids(), tok), 0, 2)).map(([p, rest]) => [p, ...rest]),
    snooze: fc.tuple(prefix, ids(), tok, num('1000', '0', '-1', '1.5')),
    rate_limit: fc.tuple(prefix, ids(), tok, num('1000', '0', '-1', '1.5')),
    progress: fc.tuple(ids(), tok, field('50', '{"a":1}')),
    register: fc.tuple(
      field('r1', 'tick'),
      num('1000'),
      field('{}'),
      field('next', '1700000000000'),
      prefix,
      field('', 'once', 'all'),
      num('', '2'),
    ),
    unregister: fc.tuple(prefix, field('r1', 'tick')),
    pump: fc.tuple(prefix, num('10')),
    addJobScheduler: fc.tuple(
      prefix,
      field('s1', 'nightly'),
      field('{"every":1000}'),
      field('', 'n'),
      field('{}'),
      num('0'),
      field('', 'g'),
      num(''),
      field(''),
      num('', '1900000000000'),
      field(''),
      num('0', '1'),
      field('', 'limit'),
    ),
    updateJobScheduler: fc.tuple(
      prefix,
      field('s1', 'nightly'),
      field('', 'JOBlater'),
      num('', '1900000000000'),
      field('', 'done'),
    ),
    getJobScheduler: fc.tuple(prefix, field('one', 'due'), field('nightly', '10')),
    removeJobScheduler: fc.tuple(prefix, field('s1', 'nightly')),
    pause: fc.oneof(fc.tuple(prefix), fc.tuple(prefix, field('g'))),
    resume: fc.oneof(fc.tuple(prefix), fc.tuple(prefix, field('g'))),
    configure: times(
      fc.tuple(
        field(
          'rate_max',
          'rate_ms',
          'events_max',
          'keep_completed',
          'keep_completed_ms',
          'keep_dead',
          'keep_dead_ms',
          'concurrency',
        ),
        num('-', '0', '5', '-1', '100'),
      ),
      1,
      2,
    ),
    configure_lane: fc.tuple(prefix, field('g', '*'), num('', '-', '2'), field('', '-', '5:1000')),
    heartbeat: fc.tuple(prefix, field('c1'), field('{}')),
    retry: fc.tuple(prefix, times(fc.tuple(ids()), 0, 3)).map(([p, rest]) => [p, ...rest]),
    clean: fc.tuple(prefix, field('completed', 'dead', 'cancelled'), num('0'), num('10')),
    promote_job: fc.tuple(prefix, ids()),
    drain: fc.tuple(prefix, num('1', '100'), field('0', '1')),
    // Mostly refused (a job is active and force is '0'): a forced one would empty the queue.
    obliterate: fc.tuple(prefix, num('0'), num('10'), field('0')),
    log: fc
      .tuple(
        prefix,
        num('100', '1', '0'),
        times(fc.tuple(ids(), tok, num('1', '0', '3'), field('a line')), 0, 2),
      )
      .map(([p, m, rest]) => [p, m, ...rest]),
    reschedule: fc.tuple(prefix, ids(), field('at', 'in'), num('0', '100', '1900000000000')),
    reprioritize: fc.tuple(prefix, ids(), num('0', '5')),
    update_data: fc.oneof(
      fc.tuple(prefix, ids(), field('{}', '"x"')),
      fc.tuple(prefix, ids(), field('{}'), tok),
    ),
    // A parent of this queue told of a child in another: mostly refused (a malformed child ref
    // or outcome), else counted once (the row set has no waiting parent: mostly ignored).
    child_notice: fc.tuple(
      prefix,
      ids(),
      field('emq:{other}:JOBc', 'JOBc'),
      field('completed', 'dead', 'removed'),
      field('', '1'),
      field('', 'boom'),
    ),
    notices: fc
      .tuple(prefix, num('1', '10', '0'), times(fc.tuple(ids()), 0, 2))
      .map(([p, n, rest]) => [p, n, ...rest]),
  } as Record<ScriptName, fc.Arbitrary<Arg[]>>;
}

/** Which ARGV entry names the job whose row is the script's `job` key. */
function jobOf(name: string, argv: Arg[]): string | undefined {
  const at = {
    schedule: 0,
    progress: 0,
    fail: 1,
    cancel: 1,
    remove: 1,
    promote_job: 1,
    reschedule: 1,
    reprioritize: 1,
    update_data: 1,
    snooze: 1,
    rate_limit: 1,
  }[name];
  if (at === undefined) return undefined;
  return String(argv[at] ?? 'JOBnone');
}

describe('scripts refuse hostile ARGV with an EMQ error reply, never a Lua runtime error', () => {
  const names = [...loadScripts().keys()].sort() as ScriptName[];

  it('queue.run(name, argv, jobId) with contract-shaped and random ARGV', async ({ judge, populated }) => {
    const { q, token } = await populated('fz-scripts');
    const shaped = shapes(q.keys.prefix, token);
    for (const name of names) {
      const arb = shaped[name];
      expect(arb, `no ARGV shape for ${name}`).toBeDefined();
      await fc.assert(
        fc.asyncProperty(
          fc.oneof(
            { weight: 3, arbitrary: arb },
            { weight: 1, arbitrary: fc.array(scriptAtom, { maxLength: 14 }) },
            {
              weight: 1,
              arbitrary: fc.array(scriptAtom, { maxLength: 14 }).map((a) => [q.keys.prefix, ...a]),
            },
          ),
          async (argv) => {
            await judge(q, `script ${name}`, () => q.run(name, argv, jobOf(name, argv)));
          },
        ),
        { numRuns: 100 },
      );
    }
    // After all of it, the queue still admits, claims and completes.
    const { id } = await q.enqueue({ after: true }, { id: 'JOBafter-scripts' });
    const [jobs] = (await q.run('claim', [q.keys.prefix, 1000, 60_000])) as [string[]];
    expect(jobs.filter((_, i) => i % 7 === 0)).toContain(id);
  }, 60_000);

  it('raw EVALSHA with binary and oversized ARGV', async ({ raw, snapshot, populated }) => {
    const { q, token } = await populated('fz-raw');
    const scripts = loadScripts();
    for (const s of scripts.values()) await raw.script('LOAD', s.body);
    const binary = fc.oneof(
      fc.uint8Array({ maxLength: 32 }).map((b) => Buffer.from(b)),
      fc.constantFrom(
        Buffer.from([0xff, 0xfe, 0x00, 0x7b, 0x7d]),
        Buffer.from('JOB\xff\x00', 'latin1'),
        Buffer.alloc(600_000, 0x61),
      ),
    );
    await fc.assert(
      fc.asyncProperty(
        fc.constantFrom(...names),
        fc.array(fc.oneof(binary, scriptAtom.map(String)), { maxLength: 10 }),
        fc.boolean(),
        async (name, rest, withPrefix) => {
          const s = scripts.get(name)!;
          const keys = s.keys.map((k) => q.keys.key(k, 'JOBactive'));
          const argv = withPrefix ? [q.keys.prefix, ...rest] : rest;
          const before = await snapshot(q);
          try {
            await raw.evalsha(s.sha, keys.length, ...keys, ...argv);
          } catch (err) {
            const message = (err as Error).message;
            expect(message, `${name}: a raw error on hostile ARGV`).toMatch(/^EMQ[A-Z]+ /);
            expect(await snapshot(q), `${name} refused but changed keys`).toEqual(before);
          }
        },
      ),
      { numRuns: 150 },
    );
    // The fixture's active job still holds its lease token.
    expect(await raw.hget(q.keys.job('JOBactive'), 'token')).toBe(token);
  }, 60_000);
});

// ── limits ──────────────────────────────────────────────────────────────────────

describe('limits', () => {
  it('payloads over maxPayloadBytes are refused with EMQTOOBIG before the wire', async ({ mq, snapshot }) => {
    const q = mq.queue(uniqueQueue('fz-big'));
    const before = await snapshot(q);
    await expect(q.enqueue('x'.repeat(5000))).rejects.toMatchObject({ code: 'EMQTOOBIG' });
    await expect(q.enqueueMany([{ data: 1 }, { data: 'y'.repeat(4096) }])).rejects.toMatchObject({
      code: 'EMQTOOBIG',
    });
    expect(await snapshot(q)).toEqual(before);
    // Exactly at the limit is accepted (the limit counts the JSON text's bytes).
    expect((await q.enqueue('z'.repeat(4094))).status).toBe('enqueued');
  });

  it('the events stream stays near its configured cap (eventsMaxLen)', async ({ mq, raw }) => {
    const q = mq.queue(uniqueQueue('fz-cap'));
    await q.configure({ eventsMaxLen: 200 });
    // Distinct names: one added entry a job (jobs sharing a name share one entry).
    for (let i = 0; i < 5; i++) {
      await q.enqueueMany(
        Array.from({ length: 1000 }, (_, j) => ({ data: i * 1000 + j, opts: { name: `n${j}` } })),
      );
    }
    const len = await raw.xlen(q.keys.key('events'));
    // MAXLEN ~ trims whole stream nodes (100 entries each by default): near the cap, never far over.
    expect(len).toBeGreaterThanOrEqual(200);
    expect(len).toBeLessThanOrEqual(200 + 100);
    // A queue without a setting keeps the default cap of 10,000 entries.
    const d = mq.queue(uniqueQueue('fz-cap-default'));
    for (let i = 0; i < 12; i++) {
      await d.enqueueMany(Array.from({ length: 1000 }, (_, j) => ({ data: j, opts: { name: `n${j}` } })));
    }
    const dlen = await raw.xlen(d.keys.key('events'));
    expect(dlen).toBeGreaterThanOrEqual(10_000);
    expect(dlen).toBeLessThanOrEqual(10_100);
  });
});

// ── bad data in the store (issue 12) ────────────────────────────────────────────

describe('garbage in any field of any row in any set loses no other job', () => {
  const FIELDS = [
    'state',
    'attempts',
    'token',
    'max',
    'prio',
    'stalled',
    'payload',
    'backoff',
    'group',
    'runat',
    'parent',
    'dedupe',
    'cancel',
    'created',
  ] as const;
  const SETS = ['pending', 'lane', 'schedule', 'active'] as const;
  const garbage = fc.oneof(
    fc.string({ maxLength: 12 }),
    fc.constantFrom('', 'x', '1.5', '-', '-0', '007', 'NaN', 'inf', '1e3', ' 1', '0x10', '{', 'null', '[]'),
    fc.constantFrom('{"kind":"linear"}', '{"kind":"fixed","ms":-1}', '99999999999999999999', 'Pending'),
  );

  it('the malformed job ends completed (harmless garbage) or dead with a reason; every other job completes; the consumer carries on', async ({
    mq,
    raw,
  }) => {
    await fc.assert(
      fc.asyncProperty(
        fc.constantFrom(...SETS),
        fc.constantFrom(...FIELDS),
        garbage,
        fc.nat({ max: 3 }),
        async (set, field, value, pick) => {
          const q = mq.queue<number, number>(uniqueQueue('fz-rows'));
          const P = q.keys.prefix;
          // Two jobs in each set: flat pending, a lane, due in the schedule, active under a lease
          // that expired (its consumer died).
          const active = [(await q.enqueue(0)).id, (await q.enqueue(1)).id];
          await q.run('claim', [P, 2, 1]);
          const ids: Record<(typeof SETS)[number], string[]> = {
            active,
            pending: [(await q.enqueue(2)).id, (await q.enqueue(3)).id],
            lane: [(await q.enqueue(4, { group: 'g' })).id, (await q.enqueue(5, { group: 'g' })).id],
            schedule: [(await q.enqueueIn(6, 1)).id, (await q.enqueueIn(7, 1)).id],
          };
          const bad = ids[set][pick % 2]!;
          await raw.hset(`${P}job:${bad}`, field, value);
          const degraded: unknown[] = [];
          const consumer = q.consume((job) => job.data, { concurrency: 4, beatMs: 50, leaseMs: 2000 });
          consumer.on('degraded', (err) => degraded.push(err));
          try {
            const all = Object.values(ids).flat();
            const ended = async () => Promise.all(all.map((id) => q.get(id)));
            const views = await poll(
              ended,
              (vs) => vs.every((v) => v === null || ['completed', 'dead', 'cancelled'].includes(v.state)),
              `every job of ${set}/${field}=${JSON.stringify(value)} ended`,
              15_000,
            );
            for (const v of views) {
              if (v?.id === bad || v === null) continue;
              expect(v.state, `${v.id} beside ${set}/${field}=${JSON.stringify(value)}`).toBe('completed');
            }
            const view = views[all.indexOf(bad)];
            if (view && view.state !== 'completed') {
              expect(view.state).toBe('dead');
              expect(view.error?.message ?? '').not.toBe('');
            }
            // The consumer is still running: a new job is taken and completed.
            const after = await q.enqueue(99);
            await poll(
              () => q.get(after.id),
              (v) => v?.state === 'completed',
              'a job after the bad one',
              15_000,
            );
            expect(degraded).toEqual([]);
          } finally {
            await consumer.close({ timeoutMs: 0 });
          }
        },
      ),
      { numRuns: 40 },
    );
  });
});
