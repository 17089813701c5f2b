// Bad data in the store (issue 12, points 1, 2 and 7): one malformed row, a payload or backoff
// a consumer cannot use, ghost ids ahead of real work. Nothing else may be lost: the malformed
// job ends dead with a reason (EMQDATA naming the field), every other job runs, the consumer
// keeps running, and no call fails halfway.
import type { Redis } from 'ioredis';
import { describe, expect } from 'vitest';
import type { Consumer } from '../../src/consumer/consumer.js';
import type { Queue } from '../../src/queue/queue.js';
import { helperFixtures, queueTest, useRedisServer } from '../support/harness.js';
import { poll } from '../support/wait.js';

const env = useRedisServer();

/** The file's helpers over one test's queue: its consumers go to `consumers` (closed after the test). */
function helpers({
  q,
  raw,
  P,
  consumers,
}: {
  q: Queue<number, number>;
  raw: Redis;
  P: string;
  consumers: Consumer<number, number>[];
}) {
  /** The degraded beats of the test's consumers. */
  const errors: unknown[] = [];

  /** Enqueues `n` jobs (data 0..n-1) and returns their ids, in order. */
  async function enqueue(n: number): Promise<string[]> {
    const ids: string[] = [];
    for (let i = 0; i < n; i++) ids.push((await q.enqueue(i)).id);
    return ids;
  }

  /** Starts a consumer that completes every job (or runs `handler`) and records its degraded beats. */
  function consume(handler: (data: number) => number = (d) => d, beatMs = 200): Consumer<number, number> {
    const consumer = q.consume((job) => handler(job.data), { concurrency: 5, beatMs, leaseMs: 5000 });
    consumers.push(consumer);
    consumer.on('degraded', (err) => errors.push(err));
    return consumer;
  }

  async function settled(good: number, dead: number): Promise<void> {
    await poll(
      () => q.counts(),
      (c) => c.completed === good && c.dead === dead,
      `${good} completed and ${dead} dead`,
      15_000,
    );
  }

  async function expectDeadFor(id: string, field: string): Promise<void> {
    const view = await q.get(id);
    expect(view?.state).toBe('dead');
    expect(view?.error?.message).toMatch(new RegExp(`^EMQDATA job ${id}\\b.*\\b${field}\\b`));
    expect(await raw.zscore(`${P}dead`, id)).not.toBeNull();
  }
  return { errors, enqueue, consume, settled, expectDeadFor };
}
type Helpers = ReturnType<typeof helpers>;

const it = queueTest<number, number>(env, 'bad')
  .extend<{ h: Helpers }>({
    h: async ({ q, raw, P, consumers }, use) => use(helpers({ q, raw, P, consumers })),
  })
  .extend<Helpers>(helperFixtures<Helpers>(['errors', 'enqueue', 'consume', 'settled', 'expectDeadFor']));

describe('a malformed row is dead-lettered as EMQDATA and costs no other job', () => {
  it('claim: 20 good jobs beside one whose attempts is not a number all run', async ({
    raw,
    P,
    errors,
    enqueue,
    consume,
    settled,
    expectDeadFor,
  }) => {
    const ids = await enqueue(21);
    await raw.hset(`${P}job:${ids[10]}`, 'attempts', 'many');
    consume();
    await settled(20, 1);
    await expectDeadFor(ids[10]!, 'attempts');
    expect(errors).toEqual([]);
  });

  it('claim: a token, a max or a state no script writes', async ({
    raw,
    P,
    enqueue,
    consume,
    settled,
    expectDeadFor,
  }) => {
    const ids = await enqueue(8);
    await raw.hset(`${P}job:${ids[1]}`, 'token', '12abc');
    await raw.hset(`${P}job:${ids[3]}`, 'max', '2.5');
    await raw.hset(`${P}job:${ids[5]}`, 'state', 'Pending');
    consume();
    await settled(5, 3);
    await expectDeadFor(ids[1]!, 'token');
    await expectDeadFor(ids[3]!, 'max');
    await expectDeadFor(ids[5]!, 'state');
  });

  it('fail: a max that is not a number dead-letters the failing job instead of retrying forever', async ({
    raw,
    P,
    enqueue,
    consume,
    settled,
    expectDeadFor,
  }) => {
    const ids = await enqueue(4);
    // Written while the job runs: claim read a sound row, fail reads the malformed one.
    consume((d) => {
      if (d === 2) throw new Error('boom');
      return d;
    });
    await raw.hset(`${P}job:${ids[2]}`, 'max', 'lots');
    await settled(3, 1);
    await expectDeadFor(ids[2]!, 'max');
  });

  it('promote: a scheduled job whose prio is not a number is dead-lettered, the others released', async ({
    q,
    raw,
    P,
    consume,
    settled,
    expectDeadFor,
  }) => {
    const late = await q.enqueueIn(1, 30);
    const other = await q.enqueueIn(2, 30);
    await raw.hset(`${P}job:${late.id}`, 'prio', 'urgent');
    consume();
    await settled(1, 1);
    await expectDeadFor(late.id, 'prio');
    expect((await q.get(other.id))?.state).toBe('completed');
  });

  it('reap: an expired lease whose stalled count is not a number is dead-lettered, the others recovered', async ({
    q,
    raw,
    P,
    enqueue,
    consume,
    settled,
    expectDeadFor,
  }) => {
    const ids = await enqueue(3);
    // Three leases held by a consumer that died: each expired, one row malformed.
    await q.run('claim', [P, 3, 1]);
    await raw.hset(`${P}job:${ids[0]}`, 'stalled', '-');
    consume();
    await settled(2, 1);
    await expectDeadFor(ids[0]!, 'stalled');
  });

  it('a row whose state disagrees with its set is re-homed, never left in no set', async ({
    raw,
    P,
    enqueue,
    consume,
    settled,
  }) => {
    const ids = await enqueue(2);
    // An active row found in pending, absent from active: claim drops it and puts it in active,
    // expired, so recovery returns it and it runs.
    await raw.hset(`${P}job:${ids[0]}`, 'state', 'active', 'token', '1', 'attempts', '1');
    consume();
    await settled(2, 0);
  });
});

describe('a consumer meeting bad data fails that job and carries on', () => {
  for (const [what, field, value] of [
    ['a payload that is not JSON', 'payload', '{oops'],
    ['a backoff that is not JSON', 'backoff', '{"kind":'],
    ['an unknown backoff policy', 'backoff', '{"kind":"linear","ms":5}'],
    ['a backoff of the wrong shape', 'backoff', '{"kind":"fixed","ms":-1}'],
  ] as const) {
    it(`${what}: dead with EMQDATA naming the ${field}, no handler run, the batch beside it runs`, async ({
      raw,
      P,
      errors,
      enqueue,
      consume,
      settled,
      expectDeadFor,
    }) => {
      const ids = await enqueue(12);
      await raw.hset(`${P}job:${ids[4]}`, field, value);
      const ran: number[] = [];
      const failed: string[] = [];
      consume((d) => {
        ran.push(d);
        if (d === 4) throw new Error('the handler of the bad job ran');
        return d;
      }).on('failed', (job, err, outcome) => failed.push(`${job.id} ${outcome} ${err.message.slice(0, 7)}`));
      await settled(11, 1);
      await expectDeadFor(ids[4]!, field);
      expect(failed).toEqual(field === 'payload' ? [`${ids[4]} dead EMQDATA`] : [`${ids[4]} dead EMQDATA`]);
      expect(ran).not.toContain(4);
      expect(errors).toEqual([]);
    });
  }

  it('a backoff that fails only when used (a retry) dead-letters the job with EMQDATA', async ({
    raw,
    P,
    enqueue,
    consume,
    settled,
    expectDeadFor,
  }) => {
    const [id] = await enqueue(1);
    // Well-formed JSON the runtime reads at claim, but the jitter depth makes delayMs refuse it.
    let deep = '{"kind":"fixed","ms":1}';
    for (let i = 0; i < 12; i++) deep = `{"kind":"jitter","inner":${deep}}`;
    await raw.hset(`${P}job:${id}`, 'backoff', deep, 'max', '3');
    consume(() => {
      throw new Error('boom');
    });
    await settled(0, 1);
    await expectDeadFor(id!, 'backoff');
  });
});

describe('ghosts cost nothing (point 7)', () => {
  // The beat is a minute: a consumer that waited a beat per handful of ghosts would finish
  // nothing within the test's bound.
  it('300 ghost ids ahead of 100 real jobs in pending: every real job runs without waiting for a beat', async ({
    raw,
    P,
    enqueue,
    consume,
    settled,
  }) => {
    const ids = await enqueue(100);
    const ghosts: (string | number)[] = [];
    for (let i = 0; i < 300; i++) ghosts.push(0, `JOB0000000000${String(i).padStart(4, '0')}`);
    await raw.zadd(`${P}pending`, ...ghosts);
    consume((d) => d, 60_000);
    await settled(100, 0);
    expect(await raw.zcard(`${P}pending`)).toBe(0);
    expect(ids).toHaveLength(100);
  });

  it('300 ghosts ahead of 100 real jobs in a lane, and 300 in the schedule ahead of due jobs', async ({
    q,
    raw,
    P,
    consume,
    settled,
  }) => {
    for (let i = 0; i < 100; i++) await q.enqueue(i, { group: 'g' });
    const ghosts: (string | number)[] = [];
    for (let i = 0; i < 300; i++) ghosts.push(0, `JOB0000000000${String(i).padStart(4, '0')}`);
    await raw.zadd(`${P}g:g:pending`, ...ghosts);
    const due: (string | number)[] = [];
    for (let i = 0; i < 300; i++) due.push(1, `JOB0000000001${String(i).padStart(4, '0')}`);
    await raw.zadd(`${P}schedule`, ...due);
    for (let i = 0; i < 50; i++) await q.enqueueIn(1000 + i, 1);
    consume((d) => d, 60_000);
    await settled(150, 0);
  });
});
