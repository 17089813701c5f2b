// Per-job logs (src/jobs/logs.ts, protocol/scripts/log.lua) on a real server: ctx.log lines kept with
// the job, bounded in count and length, read back with queue.logs, deleted with the job, and sent
// with the acknowledgement or the lease checkpoint, never one call per line.
import { describe, expect } from 'vitest';
import type { EchoMQ } from '../../src/queue/echomq.js';
import { queueTest, useRedisServer } from '../support/harness.js';

const env = useRedisServer();
const it = queueTest<{ n: number }>(env, 'logs');

/** Counts the script calls by verb while `body` runs. */
async function counting(mq: EchoMQ, body: () => Promise<void>): Promise<Map<string, number>> {
  const calls = new Map<string, number>();
  const stop = mq.connector.observe((name) => calls.set(name, (calls.get(name) ?? 0) + 1));
  try {
    await body();
  } finally {
    stop();
  }
  return calls;
}

describe('ctx.log and queue.logs', () => {
  it('keeps a handler’s lines with the job, in order, and pages through them', async ({ q }) => {
    const { id } = await q.enqueue({ n: 5 });
    const consumer = q.consume((job, ctx) => {
      for (let i = 1; i <= job.data.n; i++) ctx.log(`step ${i}`);
      return 'done';
    });
    try {
      await q.waitFor(id, { timeoutMs: 10_000 });
    } finally {
      await consumer.close();
    }
    expect(await q.logs(id)).toEqual({ logs: ['step 1', 'step 2', 'step 3', 'step 4', 'step 5'], count: 5 });
    expect(await q.logs(id, { from: 3, count: 10 })).toEqual({ logs: ['step 4', 'step 5'], count: 5 });
    expect(await q.logs(id, { from: 1, count: 2 })).toEqual({ logs: ['step 2', 'step 3'], count: 5 });
    expect(await q.logs('JOBnone')).toEqual({ logs: [], count: 0 });
  });

  it('keeps the newest maxLogLines across attempts and cuts an over-long line with a marker', async ({
    q,
  }) => {
    const { id } = await q.enqueue({ n: 0 }, { attempts: 2, backoff: { kind: 'fixed', ms: 1 } });
    const consumer = q.consume(
      (job, ctx) => {
        for (let i = 1; i <= 4; i++) ctx.log(`attempt ${job.attempts} line ${i}`);
        ctx.log('é'.repeat(100));
        if (job.attempts === 1) throw new Error('again');
      },
      { maxLogLines: 6, maxLogLineBytes: 64 },
    );
    try {
      await q.waitFor(id, { timeoutMs: 10_000 });
    } finally {
      await consumer.close();
    }
    const { logs, count } = await q.logs(id);
    expect(count).toBe(6);
    // Attempt 1's first four lines were trimmed; its cut line is the oldest kept.
    expect(logs.slice(1, 5)).toEqual([
      'attempt 2 line 1',
      'attempt 2 line 2',
      'attempt 2 line 3',
      'attempt 2 line 4',
    ]);
    for (const cut of [logs[0]!, logs[5]!]) {
      expect(cut).toMatch(/^é+… \[truncated, 200 bytes\]$/);
      expect(Buffer.byteLength(cut)).toBeLessThanOrEqual(64);
    }
  });

  it('sends lines with the acknowledgements: no call per line', async ({ mq, q }) => {
    const jobs = await q.enqueueMany(Array.from({ length: 40 }, (_, i) => ({ data: { n: i } })));
    const calls = await counting(mq, async () => {
      const consumer = q.consume(
        (_job, ctx) => {
          for (let i = 0; i < 25; i++) ctx.log(`line ${i}`);
        },
        { concurrency: 10 },
      );
      try {
        await q.waitFor(jobs[39]!.id, { timeoutMs: 10_000 });
        await consumer.idle();
      } finally {
        await consumer.close();
      }
    });
    // 1,000 lines travelled in at most as many calls as there were acknowledgements.
    expect(calls.get('log') ?? 0).toBeGreaterThan(0);
    expect(calls.get('log')!).toBeLessThanOrEqual(calls.get('complete') ?? 0);
    for (const { id } of jobs) expect((await q.logs(id)).count).toBe(25);
  });

  it('shows a running job’s lines at its next lease checkpoint, before it ends', async ({ q }) => {
    const { id } = await q.enqueue({ n: 0 });
    let release!: () => void;
    const held = new Promise<void>((r) => {
      release = r;
    });
    const consumer = q.consume(
      async (_job, ctx) => {
        ctx.log('started');
        await held;
      },
      { extendMs: 50 },
    );
    try {
      await expect.poll(async () => (await q.logs(id)).logs, { timeout: 10_000 }).toEqual(['started']);
      expect((await q.get(id))?.state).toBe('active');
    } finally {
      release();
      await consumer.close();
    }
  });

  it('deletes the log with the job: remove, clean and retention', async ({ raw, q, P }) => {
    const consumer = q.consume((_job, ctx) => ctx.log('x'));
    const ids: string[] = [];
    try {
      for (let i = 0; i < 3; i++) {
        const { id } = await q.enqueue({ n: i });
        ids.push(id);
        await q.waitFor(id, { timeoutMs: 10_000 });
      }
    } finally {
      await consumer.close();
    }
    for (const id of ids) expect(await raw.exists(`${P}job:${id}:logs`)).toBe(1);
    await q.remove(ids[0]!);
    expect(await raw.exists(`${P}job:${ids[0]}:logs`)).toBe(0);
    await q.clean({ state: 'completed', limit: 1 });
    expect(await raw.exists(`${P}job:${ids[1]}:logs`)).toBe(0);
    await q.configure({ retention: { completed: { count: 0 } } });
    const again = q.consume(() => 1);
    try {
      const { id } = await q.enqueue({ n: 9 });
      await q.waitFor(id, { timeoutMs: 10_000 }).catch(() => {});
      await expect.poll(() => raw.exists(`${P}job:${ids[2]}:logs`), { timeout: 10_000 }).toBe(0);
    } finally {
      await again.close();
    }
  });

  it('refuses bad input: ctx.log of a non-string, logs options', async ({ q }) => {
    const { id } = await q.enqueue({ n: 0 }, { attempts: 1 });
    const consumer = q.consume((_job, ctx) => {
      ctx.log(5 as never);
    });
    try {
      await expect(q.waitFor(id, { timeoutMs: 10_000 })).rejects.toMatchObject({ code: 'EMQJOBFAILED' });
    } finally {
      await consumer.close();
    }
    expect((await q.get(id))?.error?.message).toContain('ctx.log takes a string');
    await expect(q.logs(id, { from: -1 })).rejects.toMatchObject({ code: 'EMQINPUT' });
    await expect(q.logs(id, { count: 0 })).rejects.toMatchObject({ code: 'EMQINPUT' });
    await expect(q.logs(id, { start: 1 } as never)).rejects.toMatchObject({ code: 'EMQINPUT' });
    await expect(q.logs('nope')).rejects.toMatchObject({ code: 'EMQKIND' });
  });
});
