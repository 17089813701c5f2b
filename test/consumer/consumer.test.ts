// The consumer against a real redis-server: concurrency, waking on new work, recovery after a
// crash, lease fencing of a zombie handler, retries and dead-lettering, cancellation, handback
// on close, ttl, idle and progress, and delayed jobs judged on the server's clock.
// Tests wait on events, idle() and bounded polls; none sleeps for a fixed time to "let it run".
import { type ChildProcess, spawn } from 'node:child_process';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect } from 'vitest';
import { type ConsumeOptions, type Consumer, UnrecoverableError } from '../../src/consumer/consumer.js';
import { EchoMQError } from '../../src/core/errors.js';
import { occurrenceId } from '../../src/core/ids.js';
import type { Handler } from '../../src/core/types.js';
import { EchoMQ } from '../../src/queue/echomq.js';
import type { Queue } from '../../src/queue/queue.js';
import { script } from '../../src/wire/scripts.js';
import {
  helperFixtures,
  type QueueTestContext,
  queueTest,
  redisOnly,
  useRedisServer,
} from '../support/harness.js';
import { deferred, fieldsOf, pause, poll, serverNow as serverClock, within } from '../support/observe.js';

const env = useRedisServer();
const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..', '..');

// ── helpers ─────────────────────────────────────────────────────────────────────

/** Resolves once `signal` aborts. */
function aborted(signal: AbortSignal): Promise<unknown> {
  return new Promise((resolve) => {
    if (signal.aborted) resolve(signal.reason);
    else signal.addEventListener('abort', () => resolve(signal.reason), { once: true });
  });
}

/** Resolves when the consumer has emitted `completed` for `count` jobs (after this call). */
function completions(c: Consumer, count: number): Promise<Map<string, unknown>> {
  const results = new Map<string, unknown>();
  return new Promise((resolve) => {
    const on = (job: { id: string }, result: unknown) => {
      results.set(job.id, result);
      if (results.size >= count) {
        c.off('completed', on);
        resolve(results);
      }
    };
    c.on('completed', on);
  });
}

type Entry = { streamMs: number } & Record<string, string>;

function items(n: number): { data: number }[] {
  return Array.from({ length: n }, (_, i) => ({ data: i }));
}

/** The file's helpers over one test's queue. */
function helpers({
  raw,
  q,
  key,
  consumers,
  defer,
}: Pick<QueueTestContext, 'raw' | 'q' | 'key' | 'consumers' | 'defer'>) {
  /** Child processes the test spawns: killed after it. */
  const children = (() => {
    const list: ChildProcess[] = [];
    defer(() => {
      for (const child of list.splice(0)) child.kill('SIGKILL');
    });
    return list;
  })();

  /** Starts a consumer that is closed after the test. */
  function consume<D = unknown, R = unknown>(
    handler: Handler<D, R>,
    opts?: ConsumeOptions,
    queue: Queue = q,
  ): Consumer<D, R> {
    const c = (queue as Queue<D, R>).consume(handler, opts);
    consumers.push(c as Consumer);
    return c;
  }

  /** This queue's events about job `id` (all of them without an id), oldest first. */
  async function events(id?: string): Promise<Entry[]> {
    const entries = await raw.xrange(key('events'), '-', '+');
    const out: Entry[] = [];
    for (const [streamId, fields] of entries) {
      const entry = fieldsOf(fields, { streamMs: Number(streamId.split('-')[0]) } as Entry);
      if (id === undefined || entry.id === id) out.push(entry);
    }
    return out;
  }

  /** The Redis server's clock in ms (the clock every script prices time with). */
  const serverNow = () => serverClock(raw);
  return { children, consume, events, serverNow };
}
type Helpers = ReturnType<typeof helpers>;

const it = queueTest(env, 'consumer')
  .extend<{ h: Helpers }>({
    h: async ({ raw, q, key, consumers, defer }, use) => use(helpers({ raw, q, key, consumers, defer })),
  })
  .extend<Helpers>(helperFixtures<Helpers>(['children', 'consume', 'events', 'serverNow']));

// ── concurrency and waking ──────────────────────────────────────────────────────

describe('concurrency and waking', () => {
  it('never runs more handlers at once than its concurrency, and reaches it', async ({ q, consume }) => {
    let running = 0;
    let max = 0;
    let ran = 0;
    const c = consume(
      async () => {
        running += 1;
        max = Math.max(max, running);
        await pause(1 + Math.floor(Math.random() * 4));
        running -= 1;
        ran += 1;
      },
      { concurrency: 7 },
    );
    const done = completions(c, 200);
    await q.enqueueMany(items(200));
    await within(done, 15_000, '200 completions');
    await within(c.idle(), 2000, 'idle');
    expect(max).toBe(7);
    expect(ran).toBe(200);
    expect((await q.counts()).completed).toBe(200);
  });

  it('a burst wakes parked consumers at once, without waiting for the beat', async ({ q, consume }) => {
    const takers = new Set<number>();
    const cs = [0, 1, 2].map((i) =>
      consume(
        async () => {
          takers.add(i);
          await pause(10);
        },
        { beatMs: 10_000, concurrency: 5 },
      ),
    );
    await within(Promise.all(cs.map((c) => c.idle())), 3000, 'three idle consumers');
    let completed = 0;
    const all = deferred();
    for (const c of cs) {
      c.on('completed', () => {
        completed += 1;
        if (completed === 30) all.resolve();
      });
    }
    const started = performance.now();
    await q.enqueueMany(items(30));
    await within(all.promise, 5000, '30 completions');
    // The beat is 10 s: finishing far below it proves the wake stream, not the beat, woke them.
    expect(performance.now() - started).toBeLessThan(3000);
    expect(takers.size).toBeGreaterThan(1);
  });
});

// ── wakes are never lost ────────────────────────────────────────────────────────
// Each test gives the consumer a 60 s beat, so only a wake or a due timer can serve the work
// in time: on a consumer that lost the signal, the work would wait for the beat.

/** Runs `before` ahead of the consumer's next call of script `name` (once), on the wire. */
function ahead(queue: Queue, name: string, before: () => Promise<unknown>): void {
  // The consumer calls through the queue's wire (QueueWire.run), so the hook goes there.
  const run = queue.wire.run.bind(queue.wire);
  let armed = true;
  queue.wire.run = async (script, argv, jobId) => {
    if (armed && script === name) {
      armed = false;
      await before();
    }
    return run(script, argv, jobId);
  };
}

describe('wakes are never lost', () => {
  it("a 'w s' written between a busy consumer's last read and its short claim is seen: the delayed job runs before the beat", async ({
    q,
    consume,
  }) => {
    // Concurrency 1 with job A running: the consumer sleeps (all slots busy) and does not read
    // the wake stream. The delayed job D is scheduled right before A's acknowledgement, whose
    // claim comes back short with a wake id past D's 'w s'. The interleaving is forced by
    // running D's schedule call ahead of that complete, not by timing.
    const gate = deferred();
    const startedA = deferred();
    const c = consume(
      async (job) => {
        if ((job.data as { a?: boolean }).a) {
          startedA.resolve();
          await gate.promise;
        }
      },
      { concurrency: 1, beatMs: 60_000 },
    );
    await within(c.idle(), 5000, 'idle');
    const a = await q.enqueue({ a: true });
    await within(startedA.promise, 5000, 'A started');
    let d = '';
    ahead(q, 'complete', async () => {
      d = (await q.enqueueIn({}, 150)).id;
    });
    const done = completions(c, 2);
    gate.resolve();
    const ids = await within(done, 20_000, 'A and the delayed job');
    expect([...ids.keys()]).toEqual([a.id, d]);
    const job = await q.get(d);
    expect(job!.startedAt!).toBeGreaterThanOrEqual(job!.runAt!);
    expect(job!.startedAt! - job!.runAt!).toBeLessThan(30_000); // not the 60 s beat
  });

  it("a cadence registered just before a consumer's short claim runs at its first slot, not the beat", async ({
    q,
    consume,
    serverNow,
  }) => {
    // The register call runs ahead of the claim that a new job J wakes the consumer for: its
    // wake ('w r') then lies before the wake id that claim reports, and the consumer parks
    // after it. Only what the claim itself reports can tell the consumer the occurrence is due.
    const c = consume(async () => {}, { concurrency: 2, beatMs: 60_000 });
    await within(c.idle(), 5000, 'idle');
    let first = 0;
    ahead(q, 'claim', async () => {
      first = await serverNow();
      await q.repeat.register('r', 60_000, {}, { firstRunMs: first });
    });
    const done = completions(c, 2);
    const j = await q.enqueue({});
    const ids = await within(done, 20_000, 'J and the first occurrence');
    expect(new Set(ids.keys())).toEqual(new Set([j.id, occurrenceId('r', 'r', first)]));
  });

  it("a cron scheduler upserted just before a consumer's short claim makes every slot, not one a beat", async ({
    q,
    consume,
  }) => {
    // As above with a cron scheduler: promote releases its occurrences at their instants, and the
    // runtime's hand-off (the recurrence leg) must follow each release, though the consumer's
    // wake id is past the upsert's 'w r'.
    const runs: string[] = [];
    const c = consume(
      async (job) => {
        if (job.id.endsWith(':s:cron')) runs.push(job.id);
      },
      { concurrency: 2, beatMs: 60_000 },
    );
    await within(c.idle(), 5000, 'idle');
    ahead(q, 'claim', () => q.schedulers.upsert('cron', { pattern: '* * * * * *' }));
    await q.enqueue({});
    await poll(
      () => runs.length,
      (n) => n >= 3,
      'three cron runs',
      20_000,
    );
  });

  it('a claim over [ghost, J1, J2] takes J1, then J2, without waiting for a wake or the beat', async ({
    raw,
    q,
    key,
    consume,
  }) => {
    await raw.zadd(key('pending'), 0, 'JOB0'); // sorts before every minted id; its row is gone
    const j1 = await q.enqueue({ n: 1 });
    const j2 = await q.enqueue({ n: 2 });
    const c = consume(async () => {}, { concurrency: 1, beatMs: 60_000 });
    const ids = await within(completions(c, 2), 20_000, 'both jobs behind the ghost');
    expect([...ids.keys()]).toEqual([j1.id, j2.id]);
    expect(await raw.zcard(key('pending'))).toBe(0);
  });

  it("eviction's leftovers drain at full speed: 2,500 ghosts ahead of 100 jobs cost no beat", async ({
    raw,
    q,
    key,
    consume,
  }) => {
    const ghosts = Array.from({ length: 2500 }, (_, i) => ['0', `JOB0${String(i).padStart(5, '0')}`]).flat();
    await raw.zadd(key('pending'), ...ghosts);
    await q.enqueueMany(items(100));
    const c = consume(async () => {}, { concurrency: 10, beatMs: 60_000 });
    await within(completions(c, 100), 20_000, '100 jobs behind 2,500 ghosts');
    expect(await raw.zcard(key('pending'))).toBe(0);
  });
});

// ── recovery and fencing ────────────────────────────────────────────────────────

describe('recovery and fencing', () => {
  redisOnly("the consumer runs in a child process, which cannot reach this process's memory engine", it)(
    'a consumer process killed with SIGKILL mid-job has its job recovered after the lease and completed elsewhere',
    async ({ q, queueName: name, children, consume, events }) => {
      const { id } = await q.enqueue({ crash: true });
      const child = spawn(
        process.execPath,
        ['--import', 'tsx', join(ROOT, 'test/support/consumer-process.ts'), env.server.url, name, '500'],
        { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] },
      );
      children.push(child);
      let out = '';
      let err = '';
      const startedId = new Promise<string>((resolve, reject) => {
        child.stdout?.on('data', (d) => {
          out += d;
          const m = /started (\S+)/.exec(out);
          if (m) resolve(m[1]!);
        });
        child.stderr?.on('data', (d) => {
          err += d;
        });
        child.once('exit', (code) => reject(new Error(`consumer process exited (${code}): ${err}`)));
      });
      expect(await within(startedId, 15_000, 'the child consumer to start the job')).toBe(id);
      await new Promise<void>((resolve) => {
        child.once('exit', () => resolve());
        child.kill('SIGKILL');
      });
      const held = await q.get(id);
      expect(held).toMatchObject({ state: 'active', attempts: 1 });

      const c = consume(async (job) => ({ attempt: job.attempts }), { beatMs: 100 });
      const done = await within(completions(c, 1), 5000, 'the recovered job to complete');
      expect(done.get(id)).toEqual({ attempt: 2 });
      expect(await q.get(id)).toMatchObject({
        state: 'completed',
        attempts: 2,
        stalled: 1,
        result: { attempt: 2 },
      });
      expect((await events(id)).map((e) => e.event)).toEqual([
        'added',
        'active',
        'stalled',
        'active',
        'completed',
      ]);
    },
  );

  it("refuses a zombie handler's late completion: the first consumer emits lost and the second's result is stored", async ({
    q,
    consume,
    events,
  }) => {
    const secondStarted = deferred();
    const firstLost = deferred<string>();
    const { id } = await q.enqueue({ zombie: true });
    const firstStarted = deferred();
    const first = consume(
      async () => {
        firstStarted.resolve();
        await secondStarted.promise; // the lease (200 ms, never extended) expired and was re-claimed
        return 'first';
      },
      { concurrency: 1, leaseMs: 200, extendMs: 60_000 },
    );
    const firstCompleted: string[] = [];
    first.on('completed', (job) => firstCompleted.push(job.id));
    first.on('lost', (job) => firstLost.resolve(job.id));
    await within(firstStarted.promise, 3000, 'the first handler');

    let secondAttempt = 0;
    const second = consume(
      async (job) => {
        secondAttempt = job.attempts;
        secondStarted.resolve();
        await firstLost.promise;
        return 'second';
      },
      { beatMs: 50 },
    );
    const secondDone = completions(second, 1);
    expect(await within(firstLost.promise, 5000, "the first consumer's lost event")).toBe(id);
    expect((await within(secondDone, 3000, 'the second completion')).get(id)).toBe('second');
    expect(secondAttempt).toBe(2);
    expect(firstCompleted).toEqual([]);
    expect(await q.get(id)).toMatchObject({ state: 'completed', attempts: 2, result: 'second' });
    expect((await events(id)).filter((e) => e.event === 'completed')).toHaveLength(1);
  });

  // BUG: a lease found lost by the periodic extend_lock (Consumer.onLease, src/consumer.ts ~line 625)
  // only marks the job released and aborts its signal; when the handler then returns,
  // execute() sees `released` and calls finish() without emitting anything (and failed() does the
  // same when it throws). So `lost` ("the lease was taken over: the result was not stored") fires
  // only when the loss is found at complete/fail time, never when extend_lock finds it first.
  // Expected: one 'lost' event for the job; actual: none. Fix: emit 'lost' in onLease when
  // status === 'lost' (or in execute/failed when job.aborted === 'lost').
  it('a lease found lost at an extension aborts ctx.signal with EMQLEASE and emits lost', async ({
    raw,
    q,
    key,
    consume,
  }) => {
    const { id } = await q.enqueue({ taken: true });
    const started = deferred();
    const reason = deferred<unknown>();
    const c = consume(
      async (_job, ctx) => {
        started.resolve();
        reason.resolve(await aborted(ctx.signal));
        return 'late';
      },
      { concurrency: 1, extendMs: 50 }, // one slot: the consumer cannot re-claim the job itself
    );
    const lost: string[] = [];
    c.on('lost', (job) => lost.push(job.id));
    await within(started.promise, 3000, 'the handler');
    // Take the lease over as another consumer would: expire and reap it in one transaction (so no
    // extension slips in between), then claim it here.
    const reap = script('reap');
    const [, [reapErr, reaped]] = (await raw
      .multi()
      .zadd(key('active'), 0, id)
      .eval(reap.body, reap.keys.length, ...reap.keys.map((k) => q.keys.key(k)), q.keys.prefix, 100)
      .exec()) as [unknown, [unknown, unknown]];
    expect(reapErr).toBeNull();
    expect(reaped).toEqual([id]);
    await q.run('claim', [q.keys.prefix, 1, 30_000]);
    const why = await within(reason.promise, 3000, 'the signal to abort');
    expect((why as EchoMQError).code).toBe('EMQLEASE');
    await poll(
      async () => lost.length,
      (n) => n > 0,
      'a lost event',
      500,
    );
    expect(lost).toEqual([id]);
  });

  // The race behind spurious `lost` reports (~3 in 4,000 failed attempts): the periodic
  // extension lists the job while its fail is on the wire, the server runs the fail first, and
  // the extension answers `lost` for a lease that ended because the failure was stored. Made
  // deterministic here: the fail is held until the next extension is sent, then both go out in
  // that order on the one connection (so Redis runs them in that order).
  it('a lease extension racing a stored fail reports failed, never lost', async ({ raw, q, consume }) => {
    // Both scripts cached: a NOSCRIPT fallback would resend the fail after the extension.
    for (const name of ['fail', 'extend_lock'] as const) await raw.script('LOAD', script(name).body);
    const { id } = await q.enqueue({ fails: true });
    const run = q.wire.run.bind(q.wire);
    let heldFail: (() => void) | undefined;
    const extensions: unknown[] = [];
    q.wire.run = (name, argv, jobId) => {
      if (name === 'fail') {
        return new Promise((resolve, reject) => {
          heldFail = () => run(name, argv, jobId).then(resolve, reject);
        });
      }
      if (name === 'extend_lock' && heldFail) {
        heldFail();
        heldFail = undefined;
        const reply = run(name, argv, jobId);
        reply.then(
          (statuses) => extensions.push(statuses),
          () => {},
        );
        return reply;
      }
      return run(name, argv, jobId);
    };
    const failed = deferred<string>();
    const c = consume(
      () => {
        throw new Error('boom');
      },
      { concurrency: 1, extendMs: 20 },
    );
    const lost: string[] = [];
    c.on('lost', (job) => lost.push(job.id));
    c.on('failed', (job, _err, outcome) => failed.resolve(`${job.id} ${outcome}`));
    expect(await within(failed.promise, 3000, 'the failed event')).toBe(`${id} retry`);
    await poll(
      async () => extensions.length,
      (n) => n > 0,
      'the racing extension',
      3000,
    );
    expect(extensions[0]).toEqual(['lost']); // the race happened: the fail ran first
    await c.close();
    expect(lost).toEqual([]);
    expect(await q.get(id)).toMatchObject({ state: 'scheduled', attempts: 1, error: { message: 'boom' } });
  });

  // BUG: when a running job's lease expires (here: never extended; in life: extensions failing
  // through an outage longer than leaseMs) the consumer's own beat reaps it and, having a free
  // slot, claims it again. Consumer.started() (src/consumer.ts ~line 455) then does
  // `this.held.set(id, job)`, overwriting the first Running: the old handler keeps running but no
  // longer counts toward concurrency (free = concurrency - held.size), and its signal is never
  // aborted (extend() only walks `held`). Each further expiry adds another handler, so with
  // concurrency 2 a third handler of the same job starts. Expected: never more than 2 handlers;
  // actual: 3 within ~0.5 s. Fix: in started(), when held already has the id, abort the old Running
  // ('lost', emit lost) and keep counting handlers that have not returned toward concurrency
  // (e.g. a separate `handlers` counter used by `free`).
  it('a job re-claimed by the same consumer after its lease expired never pushes it past its concurrency', async ({
    q,
    consume,
  }) => {
    let running = 0;
    let max = 0;
    const end = deferred();
    consume(
      async (_job, ctx) => {
        running += 1;
        max = Math.max(max, running);
        await Promise.race([end.promise, aborted(ctx.signal)]);
        running -= 1;
      },
      { concurrency: 2, leaseMs: 200, extendMs: 60_000, beatMs: 50 },
    );
    const { id } = await q.enqueue({});
    try {
      await poll(
        async () => (await q.get(id))?.attempts,
        (a) => (a ?? 0) >= 2,
        'the re-claim',
        3000,
      );
      const exceeded = await poll(
        async () => max,
        (m) => m > 2,
        'a third handler',
        900,
      ).then(
        () => true,
        () => false,
      );
      expect(max).toBeLessThanOrEqual(2);
      expect(exceeded).toBe(false);
    } finally {
      end.resolve();
    }
  });
});

// ── retries ─────────────────────────────────────────────────────────────────────

describe('retries', () => {
  it('retries follow the backoff policy on the server clock, then dead-letter with retries_exhausted', async ({
    q,
    consume,
    events,
  }) => {
    const { id } = await q.enqueue({ fails: true }, { attempts: 3, backoff: { kind: 'fixed', ms: 50 } });
    const outcomes: [number, string, string][] = [];
    const dead = deferred();
    const c = consume(async (job) => {
      throw new Error(`boom on attempt ${job.attempts}`);
    });
    c.on('failed', (job, error, outcome) => {
      outcomes.push([job.attempts, error.message, outcome]);
      if (outcome === 'dead') dead.resolve();
    });
    await within(dead.promise, 5000, 'the job to dead-letter');
    expect(outcomes).toEqual([
      [1, 'boom on attempt 1', 'retry'],
      [2, 'boom on attempt 2', 'retry'],
      [3, 'boom on attempt 3', 'dead'],
    ]);

    const job = await q.get(id);
    expect(job).toMatchObject({ state: 'dead', attempts: 3, error: { message: 'boom on attempt 3' } });
    expect(job?.error?.stack).toContain('boom on attempt 3');
    expect(job?.error?.stack).toContain('consumer.test.ts');

    const log = await events(id);
    expect(log.map((e) => [e.event, e.attempt ?? e.reason ?? ''])).toEqual([
      ['added', ''],
      ['active', '1'],
      ['failed', '1'],
      ['delayed', ''],
      ['waiting', ''],
      ['active', '2'],
      ['failed', '2'],
      ['delayed', ''],
      ['waiting', ''],
      ['active', '3'],
      ['failed', '3'],
      ['retries_exhausted', '3'],
    ]);
    // The retried failures carry reason 'error' (the last one's reason: see the it.fails below).
    expect(
      log
        .filter((e) => e.event === 'failed')
        .slice(0, 2)
        .map((e) => e.reason),
    ).toEqual(['error', 'error']);
    // Server clock: each retry's run-at is its failure + 50 ms, it was claimed no earlier, and the
    // attempts are at least 50 ms apart. Stream ids carry the server's ms, read a moment after the
    // script's TIME, so a failure's id may be 1 ms past the instant its run-at was priced from.
    const active = log.filter((e) => e.event === 'active');
    const failed = log.filter((e) => e.event === 'failed');
    const delayed = log.filter((e) => e.event === 'delayed');
    for (const i of [0, 1]) {
      const delay = Number(delayed[i]!.at) - failed[i]!.streamMs;
      expect(delay).toBeGreaterThanOrEqual(49);
      expect(delay).toBeLessThanOrEqual(50);
      expect(active[i + 1]!.streamMs).toBeGreaterThanOrEqual(Number(delayed[i]!.at));
      expect(active[i + 1]!.streamMs - active[i]!.streamMs).toBeGreaterThanOrEqual(50);
    }
    expect(job?.startedAt).toBeGreaterThanOrEqual(Number(delayed[1]!.at));
  });

  // BUG: Consumer.failed() (src/consumer.ts ~line 539) passes delay_ms -1 ("never retry: an
  // unrecoverable error", per fail.lua's contract) whenever attempts are used up, so fail.lua
  // writes the last `failed` event with reason 'unrecoverable' for an ordinary error that simply
  // ran out of attempts. Expected reason 'error' (the job was retryable); actual 'unrecoverable'.
  // Fix: pass -1 only for UnrecoverableError / a cancel, and the backoff delay (or 0) otherwise;
  // fail.lua already dead-letters on attempts >= max.
  it('a job that runs out of attempts is reported failed with reason error, not unrecoverable', async ({
    q,
    consume,
    events,
  }) => {
    const { id } = await q.enqueue({}, { attempts: 2, backoff: { kind: 'fixed', ms: 0 } });
    const dead = deferred();
    const c = consume(async () => {
      throw new Error('plain failure');
    });
    c.on('failed', (_job, _error, outcome) => {
      if (outcome === 'dead') dead.resolve();
    });
    await within(dead.promise, 3000, 'the job to dead-letter');
    const failed = (await events(id)).filter((e) => e.event === 'failed');
    expect(failed.map((e) => [e.attempt, e.reason])).toEqual([
      ['1', 'error'],
      ['2', 'error'],
    ]);
  });

  it('an UnrecoverableError dead-letters after one attempt, whatever attempts are left', async ({
    q,
    consume,
    events,
  }) => {
    const { id } = await q.enqueue({}, { attempts: 5, backoff: { kind: 'fixed', ms: 10 } });
    const failed = deferred<string>();
    let calls = 0;
    const c = consume(async () => {
      calls += 1;
      throw new UnrecoverableError('cannot ever work');
    });
    c.on('failed', (_job, _error, outcome) => failed.resolve(outcome));
    expect(await within(failed.promise, 3000, 'the failure')).toBe('dead');
    expect(calls).toBe(1);
    expect(await q.get(id)).toMatchObject({
      state: 'dead',
      attempts: 1,
      error: { message: 'cannot ever work' },
    });
    const log = (await events(id)).filter((e) => e.event === 'failed' || e.event === 'retries_exhausted');
    expect(log.map((e) => [e.event, e.reason, e.attempt])).toEqual([
      ['failed', 'unrecoverable', '1'],
      ['retries_exhausted', undefined, '1'],
    ]);
  });
});

// ── cancel and close ────────────────────────────────────────────────────────────

describe('cancel and close', () => {
  it('a cancel from another connection aborts ctx.signal within one extendMs and the job ends cancelled', async ({
    raw,
    q,
    key,
    others,
    queueName: name,
    consume,
    events,
  }) => {
    const other = await EchoMQ.connect({ url: env.server.url });
    others.push(other);
    const started = deferred();
    const abortedAt = deferred<[number, unknown]>();
    const c = consume(
      async (_job, ctx) => {
        started.resolve();
        const reason = await aborted(ctx.signal);
        abortedAt.resolve([performance.now(), reason]);
        throw reason;
      },
      // A 60 s lease and beat: only the lease extension (every 100 ms) can bring the cancel in time.
      { extendMs: 100, leaseMs: 60_000, beatMs: 60_000 },
    );
    const outcome = deferred<string>();
    c.on('failed', (_job, _error, o) => outcome.resolve(o));
    const { id } = await q.enqueue({ long: true });
    await within(started.promise, 3000, 'the handler');

    const requestedAt = performance.now();
    expect(await other.queue(name).cancel(id)).toBe('requested');
    const [at, reason] = await within(abortedAt.promise, 10_000, 'the signal to abort');
    // One extend period (100 ms) plus a round trip on an idle machine; the bound is what holds on a
    // loaded one and still tells the extension from the lease (60 s) and the beat (60 s).
    expect(at - requestedAt).toBeLessThan(10_000);
    expect(reason).toBeInstanceOf(EchoMQError);
    expect((reason as EchoMQError).code).toBe('EMQCANCELLED');
    expect(await within(outcome.promise, 2000, 'the failed event')).toBe('cancelled');
    expect(await q.get(id)).toMatchObject({ state: 'cancelled', attempts: 1 });
    expect(await raw.zscore(key('cancelled'), id)).not.toBeNull();
    expect((await events(id)).at(-1)).toMatchObject({ event: 'failed', reason: 'cancelled' });
  });

  it('ctx.checkpoint() extends the lease, and throws EMQCANCELLED once a cancel was requested', async ({
    raw,
    q,
    key,
    consume,
    serverNow,
  }) => {
    const started = deferred();
    const extend = deferred();
    const extended = deferred();
    const cancelled = deferred();
    const thrown = deferred<unknown>();
    const c = consume(
      async (_job, ctx) => {
        started.resolve();
        await extend.promise;
        await ctx.checkpoint();
        extended.resolve();
        await cancelled.promise;
        try {
          await ctx.checkpoint();
        } catch (err) {
          thrown.resolve(err);
          throw err;
        }
        thrown.resolve(undefined);
        return 'not cancelled';
      },
      { leaseMs: 5000, extendMs: 60_000 }, // no periodic extension: only the checkpoints extend
    );
    const outcome = deferred<string>();
    c.on('failed', (_job, _error, o) => outcome.resolve(o));
    const { id } = await q.enqueue({});
    await within(started.promise, 3000, 'the handler');
    const before = await serverNow();
    extend.resolve();
    await within(extended.promise, 3000, 'the first checkpoint');
    expect(Number(await raw.zscore(key('active'), id))).toBeGreaterThanOrEqual(before + 5000);

    expect(await q.cancel(id)).toBe('requested');
    cancelled.resolve();
    const err = await within(thrown.promise, 3000, 'the second checkpoint');
    expect(err).toBeInstanceOf(EchoMQError);
    expect((err as EchoMQError).code).toBe('EMQCANCELLED');
    expect(await within(outcome.promise, 2000, 'the failed event')).toBe('cancelled');
    expect(await q.get(id)).toMatchObject({ state: 'cancelled' });
  });

  it('close() hands unfinished jobs back at once: pending again, no attempt spent, signal aborted', async ({
    raw,
    q,
    key,
    consume,
    events,
  }) => {
    const started = deferred();
    const reason = deferred<unknown>();
    const c = consume(
      async (_job, ctx) => {
        started.resolve();
        const why = await aborted(ctx.signal);
        reason.resolve(why);
        throw why;
      },
      { concurrency: 2 },
    );
    const failed: string[] = [];
    c.on('failed', (job) => failed.push(job.id));
    const { id } = await q.enqueue({ unfinished: true });
    await within(started.promise, 3000, 'the handler');
    expect(await q.get(id)).toMatchObject({ state: 'active', attempts: 1 });

    const closing = performance.now();
    await within(c.close({ timeoutMs: 100 }), 3000, 'close');
    expect(performance.now() - closing).toBeLessThan(600);
    expect(await q.get(id)).toMatchObject({ state: 'pending', attempts: 0 });
    expect(await raw.zscore(key('active'), id)).toBeNull();
    expect(await raw.zscore(key('pending'), id)).not.toBeNull();
    const why = await within(reason.promise, 1000, 'the signal to abort');
    expect((why as EchoMQError).code).toBe('EMQCLOSED');
    expect((await events(id)).at(-1)?.event).toBe('waiting');

    const next = consume(async (job) => job.attempts);
    expect((await within(completions(next, 1), 3000, 'the second consumer')).get(id)).toBe(1);
    expect(await q.get(id)).toMatchObject({ state: 'completed', attempts: 1, result: 1 });
    expect(failed).toEqual([]); // a handed-back job is not a failure
  });
});

// ── lifecycle: ttl, idle, progress ──────────────────────────────────────────────

describe('lifecycle', () => {
  it('ttlMs closes the consumer by itself', async ({ q, consume }) => {
    const opened = performance.now();
    const c = consume(async () => {}, { ttlMs: 300, beatMs: 50 });
    const closed = new Promise<number>((resolve) => c.once('closed', () => resolve(performance.now())));
    const at = await within(closed, 3000, 'the ttl to close the consumer');
    expect(at - opened).toBeGreaterThanOrEqual(300);
    await within(c.close(), 1000, 'close() after the ttl closed it');
    await q.enqueue({ after: true });
    await pause(100); // nothing claims after the ttl: the only fixed wait, to show an absence
    expect((await q.counts()).pending).toBe(1);
  });

  // BUG: the ttl is only checked at the top of the beat loop (src/consumer.ts, loop(), ~line 262),
  // and park() waits min(beat remainder, next due, beatMs) without the ttl's remainder. A parked
  // consumer with ttlMs 200 and beatMs 5000 lives ~5 s instead of ~200 ms.
  // Expected: 'closed' within ~ttlMs; actual: after the next beat. Fix: in park(), also bound
  // `wait` by `this.startedAt + this.ttlMs - performance.now()` when ttlMs is set.
  it('ttlMs closes a parked consumer on time even when the beat is longer', async ({ consume }) => {
    const opened = performance.now();
    const c = consume(async () => {}, { ttlMs: 200, beatMs: 5000 });
    const closed = new Promise<number>((resolve) => c.once('closed', () => resolve(performance.now())));
    const at = await within(closed, 1200, 'the ttl to close the consumer');
    expect(at - opened).toBeLessThan(1000);
  });

  it('idle() resolves on an empty queue, and again once enqueued work is done', async ({ q, consume }) => {
    const c = consume(async (job) => job.data);
    await within(c.idle(), 2000, 'idle on an empty queue');
    const done = completions(c, 5);
    await q.enqueueMany(items(5));
    await within(done, 3000, 'five completions');
    await within(c.idle(), 2000, 'idle after the work');
    expect(c.running).toBe(0);
    expect((await q.counts()).completed).toBe(5);
  });

  it('ctx.progress stores progress on the row and emits a progress event', async ({ q, consume, events }) => {
    const checked = deferred();
    const stored = deferred<unknown>();
    const c = consume(async (job, ctx) => {
      await ctx.progress(50);
      await ctx.progress({ step: 2, of: 3 });
      stored.resolve((await q.get(job.id))?.progress);
      await checked.promise;
      return 'done';
    });
    const done = completions(c, 1);
    const { id } = await q.enqueue({});
    expect(await within(stored.promise, 3000, 'progress')).toEqual({ step: 2, of: 3 });
    checked.resolve();
    await within(done, 3000, 'completion');
    const progress = (await events(id)).filter((e) => e.event === 'progress').map((e) => e.progress);
    expect(progress).toEqual(['50', '{"step":2,"of":3}']);
    expect((await q.get(id))?.progress).toEqual({ step: 2, of: 3 });
  });
});

// ── delayed jobs ────────────────────────────────────────────────────────────────

describe('delayed jobs', () => {
  it('never starts a delayed job before its run instant on the server clock', async ({ q, consume }) => {
    const c = consume(async () => {}, { beatMs: 5000 });
    await within(c.idle(), 2000, 'idle');
    const done = completions(c, 30);
    const ids = await Promise.all(
      Array.from(
        { length: 30 },
        async (_, i) => (await q.enqueueIn({ i }, 50 + Math.round((i * 250) / 29))).id,
      ),
    );
    await within(done, 5000, '30 delayed completions');
    for (const id of ids) {
      const job = await q.get(id);
      expect(job?.state).toBe('completed');
      expect(job?.startedAt).toBeGreaterThanOrEqual(job!.runAt!);
      // The consumer's due timer (not its 5 s beat) released it.
      expect(job!.startedAt! - job!.runAt!).toBeLessThan(1000);
    }
  });
});
