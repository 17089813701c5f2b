// Execution timeouts (SPEC 8.1) on a real redis-server with several consumers: a job's own
// timeoutMs (stored on its row by enqueue, handed back by claim) and a consumer's default; at the
// deadline the signal aborts, the attempt fails with reason timeout and is retried per its
// policy, and what the old run returns afterwards never completes the job (its token is stale).
import { describe, expect } from 'vitest';
import type { ConsumeOptions, Consumer } from '../../src/consumer/consumer.js';
import type { Handler } from '../../src/core/types.js';
import { queueTest, useRedisServer } from '../support/harness.js';
import { deferred, expectRefused, streamFields } from '../support/observe.js';

const env = useRedisServer();

/** Each test's own queue, and consume(): q.consume, closed after the test. */
const it = queueTest(env, 'timeouts').extend<{
  consume: (handler: Handler<unknown, unknown>, opts?: ConsumeOptions) => Consumer;
}>({
  consume: async ({ q, consumers }, use) =>
    use((handler, opts) => {
      const c = q.consume(handler, opts);
      consumers.push(c);
      return c;
    }),
});

/** Resolves once `ms` have passed or the signal aborted, whichever is first (a cooperative wait). */
function sleepUnless(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const t = setTimeout(resolve, ms);
    signal?.addEventListener('abort', () => {
      clearTimeout(t);
      resolve();
    });
  });
}

describe('timeoutMs', () => {
  it("a job's own timeout aborts its signal, fails the attempt with reason timeout, and the retry completes", async ({
    raw,
    q,
    consume,
  }) => {
    const aborted = deferred<string>();
    const failures: string[] = [];
    const handler: Handler<unknown, unknown> = async (job, ctx) => {
      if (job.attempts === 1) {
        ctx.signal.addEventListener('abort', () => aborted.resolve(String(ctx.signal.reason)));
        await sleepUnless(60_000, ctx.signal);
        return 'late'; // returned after the timeout: never stored
      }
      return 'on time';
    };
    for (let i = 0; i < 2; i++) {
      consume(handler, { leaseMs: 30_000 }).on('failed', (_job, err, outcome) =>
        failures.push(`${outcome} ${err.message}`),
      );
    }
    const { id } = await q.enqueue(null, { timeoutMs: 150, backoff: { kind: 'fixed', ms: 1 } });
    expect(await q.waitFor(id, { timeoutMs: 20_000 })).toBe('on time');
    expect(await aborted.promise).toMatch(/EMQTIMEOUT: job \S+ ran past its timeout of 150 ms/);
    expect(failures).toEqual([expect.stringMatching(/^retry EMQTIMEOUT: .*ran past its timeout of 150 ms/)]);
    const failed = (await streamFields(raw, q.keys.key('events'))).filter((e) => e.event === 'failed');
    expect(failed).toEqual([expect.objectContaining({ id, attempt: '1', reason: 'timeout' })]);
    const row = await q.get(id);
    expect(row).toMatchObject({ state: 'completed', attempts: 2, result: 'on time' });
  });

  it("the consumer's timeoutMs applies to jobs without their own; a job's own timeout wins", async ({
    q,
    consume,
  }) => {
    const outcomes: string[] = [];
    const c = consume(
      async (job, ctx) => {
        await sleepUnless((job.data as { ms: number }).ms, ctx.signal);
        if (ctx.signal.aborted) throw ctx.signal.reason;
        return 'done';
      },
      { timeoutMs: 100, concurrency: 4 },
    );
    c.on('failed', (job, err, outcome) =>
      outcomes.push(
        `${job.data === null ? '' : (job.data as { tag: string }).tag} ${outcome} ${err.message.slice(0, 10)}`,
      ),
    );
    const slow = await q.enqueue({ ms: 60_000, tag: 'slow' }, { attempts: 1 });
    const own = await q.enqueue({ ms: 400, tag: 'own' }, { timeoutMs: 20_000 });
    expect(await q.waitFor(own.id, { timeoutMs: 20_000 })).toBe('done');
    await expect(q.waitFor(slow.id, { timeoutMs: 20_000 })).rejects.toThrow(/EMQJOBFAILED/);
    expect(outcomes).toEqual(['slow dead EMQTIMEOUT']);
    expect((await q.get(slow.id))?.error?.message).toMatch(/ran past its timeout of 100 ms/);
  });

  it("a result sent with the timed-out attempt's token is refused (EMQLEASE), also by the script", async ({
    q,
    consume,
  }) => {
    const token = deferred<string>();
    const release = deferred();
    consume(async (job) => {
      if (job.attempts === 1) {
        token.resolve((job as unknown as { token: string }).token);
        await release.promise; // ignores its signal entirely
        return 'late';
      }
      return 'retried';
    });
    const { id } = await q.enqueue(null, { timeoutMs: 100, backoff: { kind: 'fixed', ms: 60_000 } });
    const stale = await token.promise;
    // The attempt was failed at its deadline: the job waits for its retry, the old run goes on.
    const events = q.events({ from: '0' });
    const delayed = deferred();
    events.subscribe((e) => e.id === id && delayed.resolve(), 'delayed');
    await delayed.promise;
    await events.close();
    const [statuses] = (await q.run('complete', [q.keys.prefix, 1000, 0, id, stale, '"late"'])) as [string[]];
    expect(statuses).toEqual(['EMQLEASE']);
    release.resolve();
    expect(await q.get(id)).toMatchObject({ state: 'scheduled', attempts: 1 });
  });

  it('refuses a timeoutMs below 1 at enqueue and at consume', async ({ q }) => {
    await expectRefused(() => q.enqueue(null, { timeoutMs: 0 }), 'EMQINPUT');
    await expectRefused(() => q.enqueueIn(null, 10, { timeoutMs: 1.5 }), 'EMQINPUT');
    await expectRefused(() => q.consume(async () => 1, { timeoutMs: -5 }), 'EMQINPUT');
    expect(await q.counts()).toMatchObject({ pending: 0, scheduled: 0 });
  });

  it('a scheduled job keeps its timeout on its row until it runs', async ({ raw, q }) => {
    const { id } = await q.enqueueIn(null, 60_000, { timeoutMs: 750 });
    expect(await raw.hget(q.keys.job(id), 'timeout')).toBe('750');
  });
});
