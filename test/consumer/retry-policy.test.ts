// A retry policy as code (src/consumer/retry-policy.ts) on a real redis-server with several
// consumers: a function of the attempt, the error and the job picks the delay or dead-letters;
// a per-name policy takes its place for its jobs; undefined leaves it to the declarative backoff;
// a policy that throws or answers garbage dead-letters the job with that reason.
import { describe, expect } from 'vitest';
import type { ConsumeOptions, Consumer } from '../../src/consumer/consumer.js';
import type { RetryPolicy } from '../../src/consumer/retry-policy.js';
import type { Queue } from '../../src/queue/queue.js';
import { queueTest, useRedisServer } from '../support/harness.js';
import { expectRefused } from '../support/observe.js';

const env = useRedisServer();

type Data = { status: number };

/** Each test's own queue, and `twoConsumers(opts)`: see below. */
const it = queueTest<Data, string>(env, 'retrypolicy').extend<{
  twoConsumers: (opts: ConsumeOptions) => string[];
}>({
  twoConsumers: async ({ q, consumers }, use) => use((opts) => twoConsumers(q, consumers, opts)),
});

class HttpError extends Error {
  constructor(readonly status: number) {
    super(`HTTP ${status}`);
  }
}

/** Two consumers of a handler that fails with its job's status on the first attempts. */
function twoConsumers(
  q: Queue<Data, string>,
  consumers: Consumer<Data, string>[],
  opts: ConsumeOptions,
): string[] {
  const seen: string[] = [];
  for (let i = 0; i < 2; i++) {
    const c = q.consume(async (job) => {
      if (job.attempts < 3) throw new HttpError(job.data.status);
      return `ok after ${job.attempts}`;
    }, opts);
    c.on('failed', (job, err, outcome) =>
      seen.push(`${(job.data as { status: number }).status} #${job.attempts} ${outcome}: ${err.message}`),
    );
    consumers.push(c);
  }
  return seen;
}

describe('retry policy as code', () => {
  it('retries a 503 at once and dead-letters a 400 on its first failure', async ({ q, twoConsumers }) => {
    const retry: RetryPolicy = (_attempts, error) =>
      error instanceof HttpError && error.status < 500 ? 'dead' : 0;
    const seen = twoConsumers({ retry });
    const bad = await q.enqueue({ status: 400 }, { attempts: 5 });
    const busy = await q.enqueue({ status: 503 }, { attempts: 5, backoff: { kind: 'fixed', ms: 600_000 } });
    expect(await q.waitFor(busy.id, { timeoutMs: 20_000 })).toBe('ok after 3');
    await expect(q.waitFor(bad.id, { timeoutMs: 20_000 })).rejects.toThrow(/EMQJOBFAILED/);
    expect(seen.filter((s) => s.startsWith('400'))).toEqual(['400 #1 dead: HTTP 400']);
    expect(seen.filter((s) => s.startsWith('503'))).toEqual([
      '503 #1 retry: HTTP 503',
      '503 #2 retry: HTTP 503',
    ]);
  });

  it('a per-name policy takes the place of the default; undefined leaves it to the backoff', async ({
    q,
    twoConsumers,
  }) => {
    const calls: string[] = [];
    const seen = twoConsumers({
      retry: () => 'dead',
      retryByName: {
        fetch: (attempts, _error, job) => {
          calls.push(`${job.name} ${attempts}`);
          return attempts === 1 ? 5 : undefined; // then the job's own fixed backoff
        },
      },
    });
    const { id } = await q.enqueue(
      { status: 503 },
      { name: 'fetch', attempts: 3, backoff: { kind: 'fixed', ms: 1 } },
    );
    const other = await q.enqueue({ status: 503 }, { name: 'other', attempts: 3 });
    expect(await q.waitFor(id, { timeoutMs: 20_000 })).toBe('ok after 3');
    await expect(q.waitFor(other.id, { timeoutMs: 20_000 })).rejects.toThrow(/EMQJOBFAILED/);
    expect(calls).toEqual(['fetch 1', 'fetch 2']);
    expect(seen.filter((s) => s.startsWith('503 #1 dead'))).toHaveLength(1);
  });

  it('a policy that throws or returns garbage dead-letters the job, saying why', async ({
    q,
    twoConsumers,
  }) => {
    const seen = twoConsumers({
      retryByName: {
        throws: () => {
          throw new Error('policy bug');
        },
        garbage: () => -3 as number,
        words: () => 'later' as 'dead',
      },
    });
    const ids = await Promise.all(
      ['throws', 'garbage', 'words'].map((name) => q.enqueue({ status: 503 }, { name, attempts: 5 })),
    );
    for (const { id } of ids)
      await expect(q.waitFor(id, { timeoutMs: 20_000 })).rejects.toThrow(/EMQJOBFAILED/);
    const errors = await Promise.all(ids.map(async ({ id }) => (await q.get(id))?.error?.message));
    expect(errors[0]).toMatch(
      /^EMQINPUT the retry policy for job \S+ threw policy bug .*dead-lettered. Its error: HTTP 503$/,
    );
    expect(errors[1]).toMatch(/the retry policy for job \S+ returned -3 /);
    expect(errors[2]).toMatch(/the retry policy for job \S+ returned 'later' /);
    expect(seen).toHaveLength(3);
    for (const { id } of ids) expect((await q.get(id))?.attempts).toBe(1);
  });

  it('refuses a policy that is not a function at consume()', async ({ q }) => {
    await expectRefused(() => q.consume(async () => 'x', { retry: 1000 as never }), 'EMQINPUT');
    await expectRefused(
      () => q.consume(async () => 'x', { retryByName: { a: 'dead' as never } }),
      'EMQINPUT',
    );
    await expectRefused(() => q.consume(async () => 'x', { retryByName: [] as never }), 'EMQINPUT');
    expect(q.consumers).toHaveLength(0);
  });
});
