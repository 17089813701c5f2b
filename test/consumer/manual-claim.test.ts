// Manual consumption (queue.claim) on a real redis-server: jobs taken by hand with their lease
// tokens; complete, fail and extend fenced by the token like a consumer's own calls, a late call
// refused with EMQLEASE and nothing changed; several claimers never get the same job.
import { describe, expect } from 'vitest';
import { UnrecoverableError } from '../../src/consumer/consumer.js';
import { EchoMQError } from '../../src/core/errors.js';
import { queueTest, useRedisServer } from '../support/harness.js';
import { expectRefused, refusal } from '../support/observe.js';

const env = useRedisServer();
const it = queueTest<{ n: number }, string>(env, 'manual');

describe('queue.claim()', () => {
  it('hands each job to one claimer only, and complete() stores the result', async ({ mq, q }) => {
    for (let n = 0; n < 6; n++) await q.enqueue({ n });
    const other = mq.queue<{ n: number }, string>(q.name);
    const [a, b] = await Promise.all([q.claim(4), other.claim(4)]);
    const ids = [...a!, ...b!].map((j) => j.id);
    expect(new Set(ids).size).toBe(6);
    expect(await q.claim(1)).toEqual([]);
    for (const job of [...a!, ...b!]) await job.complete(`done ${job.data.n}`);
    expect(await q.counts()).toMatchObject({ completed: 6, active: 0, pending: 0 });
    const first = a![0]!;
    expect(first.attempts).toBe(1);
    expect((await q.get(first.id))?.result).toBe(`done ${first.data.n}`);
  });

  it('fail() retries per the backoff while attempts remain, then dead; an UnrecoverableError dead-letters at once', async ({
    q,
  }) => {
    const { id } = await q.enqueue({ n: 1 }, { attempts: 2, backoff: { kind: 'fixed', ms: 0 } });
    const [first] = await q.claim(1);
    expect(await first!.fail(new Error('flaky'))).toBe('retry');
    const [second] = await q.claim(1);
    expect(second!.attempts).toBe(2);
    expect(await second!.fail('gave up')).toBe('dead');
    expect((await q.get(id))?.error?.message).toBe('gave up');
    await q.enqueue({ n: 2 }, { attempts: 9 });
    const [third] = await q.claim(1);
    expect(await third!.fail(new UnrecoverableError('bad input'))).toBe('dead');
  });

  it('a late complete, fail or extend (the lease taken over) is refused with EMQLEASE and changes nothing', async ({
    raw,
    q,
  }) => {
    const { id } = await q.enqueue({ n: 1 });
    const [stale] = await q.claim(1, { leaseMs: 50 });
    // Its lease runs out and recovery hands the job to another claimer.
    await raw.zadd(q.keys.key('active'), 1, id);
    await q.reap();
    const [fresh] = await q.claim(1);
    expect(fresh!.id).toBe(id);
    for (const late of [
      () => stale!.complete('late'),
      () => stale!.fail(new Error('late')),
      () => stale!.extend(),
    ]) {
      const err = await refusal(late);
      expect(err.code).toBe('EMQLEASE');
      expect(err.message).toMatch(/came too late, the lease token \d+ is no longer the job's/);
    }
    expect(await q.get(id)).toMatchObject({ state: 'active', attempts: 2 });
    await fresh!.complete('fresh');
    expect((await q.get(id))?.result).toBe('fresh');
    await fresh!.complete('fresh'); // sent again under the same token: idempotent (SPEC 8), not refused
    await expectRefused(() => fresh!.fail(new Error('after the end')), 'EMQLEASE');
  });

  it('extend() pushes the lease deadline and reports a requested cancel', async ({ raw, q }) => {
    const { id } = await q.enqueue({ n: 1 });
    const [job] = await q.claim(1, { leaseMs: 1000 });
    const before = Number(await raw.zscore(q.keys.key('active'), id));
    expect(await job!.extend(600_000)).toBe('ok');
    expect(Number(await raw.zscore(q.keys.key('active'), id))).toBeGreaterThan(before + 500_000);
    expect(await q.cancel(id)).toBe('requested');
    expect(await job!.extend()).toBe('cancel');
    expect(await job!.fail(new Error('stopped'))).toBe('cancelled');
  });

  it('snooze() puts the job back for later without spending an attempt; a late snooze is refused', async ({
    q,
  }) => {
    const { id } = await q.enqueue({ n: 1 });
    const [job] = await q.claim(1);
    const at = await job!.snooze(60_000);
    expect(await q.get(id)).toMatchObject({ state: 'scheduled', attempts: 0, runAt: at });
    await expectRefused(() => job!.snooze(10), 'EMQLEASE');
    await expectRefused(() => job!.snooze(0), 'EMQINPUT');
  });

  it('refuses n below 1, a bad leaseMs or an unknown option, claiming nothing', async ({ q }) => {
    await q.enqueue({ n: 1 });
    for (const call of [
      () => q.claim(0),
      () => q.claim(1, { leaseMs: 0 }),
      () => q.claim(1, { lease: 5 } as never),
    ]) {
      expect(await refusal(call)).toBeInstanceOf(EchoMQError);
    }
    expect(await q.counts()).toMatchObject({ pending: 1, active: 0 });
  });
});
