// The idempotency window (issue 12, point 6): an ended job's id stays known after retention or
// clean deleted its row, so a producer that retries an enqueue (after a timeout, say) gets
// `duplicate` instead of running the job twice; past the window the id is free again.
import { describe, expect } from 'vitest';
import type { Consumer } from '../../src/consumer/consumer.js';
import type { Queue } from '../../src/queue/queue.js';
import { queueTest, useRedisServer } from '../support/harness.js';
import { pause, poll } from '../support/wait.js';

const env = useRedisServer();

/** Each test's own queue, and `complete(n, fail?)`: enqueues `n` jobs with ids of our own (`JOBidem-<i>`) and runs them all to an end. */
const it = queueTest<number, number>(env, 'idem').extend<{
  complete: (n: number, fail?: boolean) => Promise<string[]>;
}>({
  complete: async ({ q, consumers }, use) => use((n, fail) => complete(q, consumers, n, fail)),
});

async function complete(
  q: Queue<number, number>,
  consumers: Consumer<number, number>[],
  n: number,
  fail = false,
): Promise<string[]> {
  const ids = Array.from({ length: n }, (_, i) => `JOBidem-${i}`);
  await q.enqueueMany(ids.map((id, i) => ({ data: i, opts: { id, attempts: 1 } })));
  const consumer = q.consume(
    (job) => {
      if (fail) throw new Error('no');
      return job.data;
    },
    { concurrency: 20, beatMs: 100 },
  );
  consumers.push(consumer); // closed after the test if it fails before the close below
  await poll(
    () => q.counts(),
    (c) => c.pending + c.active + c.scheduled === 0,
    `${n} jobs ended`,
    30_000,
  );

  await consumer.close();
  return ids;
}

describe('ended ids stay known for the idempotency window, whatever retention deleted', () => {
  it('default retention (1,000 completed), 1,200 completions: the first id enqueued again is a duplicate', async ({
    raw,
    q,
    P,
    complete,
  }) => {
    const ids = await complete(1200);
    // Retention (in batches: up to 100 over the 1,000) deleted the rows of the earliest: their
    // ids are known all the same.
    expect(await raw.exists(`${P}job:${ids[0]}`)).toBe(0);
    const kept = await raw.zcard(`${P}completed`);
    expect(kept).toBeGreaterThanOrEqual(1000);
    expect(kept).toBeLessThanOrEqual(1100);
    expect(await q.enqueue(5, { id: ids[0] })).toEqual({ id: ids[0], status: 'duplicate' });
    expect(
      (
        await q.enqueueMany([
          { data: 1, opts: { id: ids[1] } },
          { data: 2, opts: { id: 'JOBidem-new' } },
        ])
      ).map((r) => r.status),
    ).toEqual(['duplicate', 'enqueued']);
    expect(await q.enqueueIn(5, 1000, { id: ids[2] })).toEqual({ id: ids[2], status: 'duplicate' });
    expect(await raw.exists(`${P}job:${ids[0]}`)).toBe(0); // nothing was written for it
  });

  it('dead-lettered jobs trimmed by their retention, and jobs deleted by clean, are known too', async ({
    raw,
    q,
    P,
    complete,
  }) => {
    await q.configure({ retention: { dead: { count: 5 } } });
    const ids = await complete(20, true);
    expect(await raw.exists(`${P}job:${ids[0]}`)).toBe(0);
    expect(await q.enqueue(1, { id: ids[0] })).toMatchObject({ status: 'duplicate' });
    // clean deletes the 5 kept: they stay known as well.
    expect(await q.clean({ state: 'dead', olderThanMs: 0 })).toBe(5);
    expect(await q.enqueue(1, { id: ids[19] })).toMatchObject({ status: 'duplicate' });
  });

  it('configure({ idempotencyMs }): past the window an ended id may be enqueued again; 0 keeps none', async ({
    raw,
    q,
    P,
    complete,
  }) => {
    const windowMs = 300;
    await q.configure({ retention: { completed: { count: 0 } }, idempotencyMs: windowMs });
    const [id] = await complete(1);
    const ended = Number(await raw.zscore(`${P}ids:ended`, id!));
    // The window is server time from the job's end: each attempt is judged by the server's
    // clock read just after it, so the test holds on a loaded machine (no fixed pause).
    const serverMs = async () => {
      const [s, us] = (await raw.time()) as [number, number];
      return Number(s) * 1000 + Math.floor(Number(us) / 1000);
    };
    let duplicates = 0;
    for (;;) {
      const { status } = await q.enqueue(1, { id });
      const after = await serverMs();
      if (status === 'enqueued') break;
      expect(status).toBe('duplicate');
      duplicates++;
      expect(after - ended).toBeLessThan(windowMs + 5000); // not held past its window
      await pause(20);
    }
    const freedAt = await serverMs();
    expect(freedAt - ended).toBeGreaterThanOrEqual(windowMs); // never freed inside it
    expect(duplicates).toBeGreaterThan(0); // the id was held at first
    await q.remove(id!);
    await q.configure({ idempotencyMs: 0 });
    const [again] = await complete(1);
    expect(again).toBe(id);
    expect(await raw.exists(`${P}ids:ended`)).toBe(0);
    expect(await q.enqueue(1, { id })).toMatchObject({ status: 'enqueued' });
  });

  it('keeps only the id and its end instant: a compact structure, trimmed as it is written', async ({
    raw,
    P,
    complete,
  }) => {
    await complete(1200);
    const n = await raw.zcard(`${P}ids:ended`);
    expect(n).toBeGreaterThanOrEqual(100);
    const bytes = Number(await raw.call('MEMORY', 'USAGE', `${P}ids:ended`, 'SAMPLES', '0'));
    const row = Number(await raw.call('MEMORY', 'USAGE', `${P}job:JOBidem-1199`, 'SAMPLES', '0'));
    // Far less than the row it stands for (measured: about 80 bytes an id against 200+ a row).
    expect(bytes / n).toBeLessThan(row);
    expect(await raw.pttl(`${P}ids:ended`)).toBeGreaterThan(0); // an idle queue keeps none
  });
});
