// What a job's page explains, as the library records it: which consumer ran each attempt
// (claim's trailing consumer, SPEC 19.5), on the row and on the active events.
import { describe, expect } from 'vitest';
import { foldAttempts } from '../../src/core/attempts.js';
import type { QueueEvent } from '../../src/core/types.js';
import { eventsOf } from '../../src/events/reader.js';
import { Inspector } from '../../src/inspect/inspector.js';
import { queueTest, useRedisServer } from '../support/harness.js';

const env = useRedisServer();
const it = queueTest<{ n: number }>(env, 'attempts');

describe('Inspector.job(queue, id).runs', () => {
  it('lists each attempt with its own error, wait, run time and consumer; q.get names the latest consumer', async ({
    mq,
    q,
  }) => {
    const long = `${'é'.repeat(150)}!`; // 301 bytes: the event keeps a bounded copy, the row all of it
    const { id } = await q.enqueue({ n: 1 }, { attempts: 3, backoff: { kind: 'fixed', ms: 20 } });
    const consumer = q.consume((job) => {
      if (job.attempts === 1) throw new Error('first failure');
      if (job.attempts === 2) throw new Error(long);
      return 'ok';
    });
    try {
      await q.waitFor(id, { timeoutMs: 10_000 });
    } finally {
      await consumer.close();
    }
    const job = (await new Inspector(mq).job(q.name, id))!;
    expect(job.runsPartial).toBe(false);
    expect(job.runs.map((r) => [r.attempt, r.outcome, r.reason, r.error])).toEqual([
      [1, 'failed', 'error', 'first failure'],
      [2, 'failed', 'error', `${'é'.repeat(100)}…`],
      [3, 'completed', undefined, undefined],
    ]);
    for (const r of job.runs) {
      expect(r.waitMs).toBeGreaterThanOrEqual(0);
      expect(r.runMs).toBeGreaterThanOrEqual(0);
      expect(r.endedAt).toBeGreaterThanOrEqual(r.startedAt);
    }
    // Retries wait out their backoff (20 ms) from the failure, on the server's clock. The
    // failure's instant is its event's stream id, which Redis may stamp 1 ms after the TIME the
    // script read (the retry's run-at is that TIME + backoff): the two clocks agree to 1 ms.
    expect(job.runs[1]!.readyAt).toBeGreaterThanOrEqual(job.runs[0]!.endedAt! + 20 - 1);
    expect(job.runs[1]!.startedAt).toBeGreaterThanOrEqual(job.runs[1]!.readyAt!);
    expect(job.runs.filter((r) => r.consumer === consumer.id).length).toBeGreaterThan(0);
    const view = (await q.get(id))!;
    expect(view.error?.message).toBe(long);
    expect(view.consumer).toBe(consumer.id);
  });

  it('a running job’s latest run is running, measured to the server’s now', async ({ mq, q, defer }) => {
    const { id } = await q.enqueue({ n: 1 });
    let release!: () => void;
    const held = new Promise<void>((r) => {
      release = r;
    });
    let started!: () => void;
    const running = new Promise<void>((r) => {
      started = r;
    });
    const consumer = q.consume(async () => {
      started();
      await held;
    });
    defer(() => consumer.close());
    await running;
    const job = (await new Inspector(mq).job(q.name, id))!;
    release();
    expect(job.state).toBe('active');
    expect(job.leaseUntil).toBeGreaterThan(job.startedAt!);
    expect(job.runs).toHaveLength(1);
    expect(job.runs[0]).toMatchObject({ attempt: 1, outcome: 'running', consumer: consumer.id });
    expect(job.runs[0]!.runMs).toBeGreaterThanOrEqual(0);
  });
});

describe('which consumer ran a job', () => {
  it('a consumer’s claim writes its id on the row and on the active event', async ({ q, raw, key }) => {
    const { id } = await q.enqueue({ n: 1 });
    const consumer = q.consume(() => 'ok');
    try {
      await q.waitFor(id, { timeoutMs: 10_000 });
    } finally {
      await consumer.close();
    }
    expect(await raw.hget(key(`job:${id}`), 'consumer')).toBe(consumer.id);
    const entries = await raw.xrange(key('events'), '-', '+');
    const active = entries.flatMap(([sid, flat]) => eventsOf(sid, flat)).filter((e) => e.event === 'active');
    expect(active.map((e) => [e.id, e.fields.consumer])).toEqual([[id, consumer.id]]);
  });

  it('jobs a completion claims (complete’s claim) record the consumer too', async ({ q, raw, key }) => {
    // One slot and three jobs: the first is claimed by the beat, the next two by the
    // completions before them (complete claims for the slot it frees).
    const ids: string[] = [];
    for (let n = 1; n <= 3; n++) ids.push((await q.enqueue({ n })).id);
    const consumer = q.consume(() => 'ok', { concurrency: 1 });
    try {
      for (const id of ids) await q.waitFor(id, { timeoutMs: 10_000 });
    } finally {
      await consumer.close();
    }
    for (const id of ids) expect(await raw.hget(key(`job:${id}`), 'consumer')).toBe(consumer.id);
  });
});

/** A job's event as Inspector.job reads it: stamped `ms` on the server's clock. */
function ev(ms: number, event: QueueEvent['event'], fields: Record<string, string> = {}): QueueEvent {
  return { event, id: 'JOB1', streamId: `${ms}-0`, fields };
}
const row = { state: 'dead' as const, attempts: 3, createdAt: 1000 };

describe('foldAttempts: a job’s runs from its events and row', () => {
  it('gives each attempt its wait, run, consumer and error, a retry waiting from its run-at', () => {
    const { runs, partial } = foldAttempts(
      { ...row, startedAt: 9000, finishedAt: 9500 },
      [
        ev(1000, 'added', { name: '' }),
        ev(1200, 'active', { attempt: '1', consumer: 'w1' }),
        ev(1700, 'failed', { attempt: '1', reason: 'error', error: 'first' }),
        ev(1700, 'delayed', { at: '3700' }),
        ev(3710, 'waiting'),
        ev(3800, 'active', { attempt: '2', consumer: 'w2' }),
        ev(8800, 'failed', { attempt: '2', reason: 'timeout', error: 'second' }),
        ev(8800, 'waiting'),
        ev(9000, 'active', { attempt: '3' }),
        ev(9500, 'failed', { attempt: '3', reason: 'error' }),
        ev(9500, 'retries_exhausted', { attempt: '3' }),
      ],
      10_000,
    );
    expect(partial).toBe(false);
    expect(runs.map((r) => [r.attempt, r.consumer, r.waitMs, r.runMs, r.outcome, r.reason, r.error])).toEqual(
      [
        [1, 'w1', 200, 500, 'failed', 'error', 'first'],
        [2, 'w2', 100, 5000, 'failed', 'timeout', 'second'],
        [3, undefined, 200, 500, 'failed', 'error', undefined],
      ],
    );
  });

  it('the row’s error fills the latest failed run the events carry none for (events before SPEC 19.7 kept it)', () => {
    const { runs } = foldAttempts(
      { ...row, attempts: 1, startedAt: 1100, error: { message: 'whole' } },
      [
        ev(1000, 'added'),
        ev(1100, 'active', { attempt: '1' }),
        ev(1300, 'failed', { attempt: '1', reason: 'unrecoverable' }),
      ],
      2000,
    );
    expect(runs).toEqual([
      {
        attempt: 1,
        readyAt: 1000,
        startedAt: 1100,
        endedAt: 1300,
        waitMs: 100,
        runMs: 200,
        outcome: 'failed',
        reason: 'unrecoverable',
        error: 'whole',
      },
    ]);
  });

  it('a handback, a snooze and a stall end a run; the next run keeps or counts on the attempt', () => {
    const { runs } = foldAttempts(
      { state: 'active', attempts: 2, createdAt: 1000, startedAt: 5000 },
      [
        ev(1000, 'added'),
        ev(1000, 'active', { attempt: '1' }),
        ev(1500, 'waiting'), // handback
        ev(1600, 'active', { attempt: '1' }),
        ev(2000, 'delayed', { at: '3000', reason: 'snooze' }),
        ev(3050, 'active', { attempt: '1' }),
        ev(4000, 'stalled'),
        ev(5000, 'active', { attempt: '2' }),
      ],
      5400,
    );
    expect(runs.map((r) => [r.attempt, r.waitMs, r.runMs, r.outcome, r.reason])).toEqual([
      [1, 0, 500, 'returned', 'handback'],
      [1, 100, 400, 'returned', 'snooze'],
      [1, 50, 950, 'stalled', undefined],
      [2, 1000, 400, 'running', undefined],
    ]);
  });

  it('with its events trimmed away, the row stands in for the latest run and says the list is partial', () => {
    const { runs, partial } = foldAttempts(
      { ...row, state: 'completed', attempts: 2, startedAt: 5000, finishedAt: 5250, consumer: 'w9' },
      [],
      9000,
    );
    expect(partial).toBe(true);
    expect(runs).toEqual([
      { attempt: 2, consumer: 'w9', startedAt: 5000, endedAt: 5250, runMs: 250, outcome: 'completed' },
    ]);
    expect(foldAttempts({ state: 'pending', attempts: 0, createdAt: 1 }, [ev(1, 'added')], 2)).toEqual({
      runs: [],
      partial: false,
    });
  });
});
