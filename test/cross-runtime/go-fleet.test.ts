// Go and TypeScript consumers sharing the controls of one queue: a lane with concurrency 1
// served by both never runs two of its jobs at once (the claim script enforces the cap on the
// server, whichever runtime claims), and a cancel requested from TypeScript stops a running Go
// handler (its context is cancelled at its next lease extension) and ends the job cancelled.
// Without Go the file skips, saying so.
import { describe, expect } from 'vitest';
import type { JobView } from '../../src/core/types.js';
import type { FlowTree } from '../../src/wire/flow-reads.js';
import { queueTest, useRedisServer } from '../support/harness.js';
import { poll, within } from '../support/wait.js';
import { GoConsumer, goRun, haveGo, useGoBuild } from './go-runtime.js';

const env = useRedisServer();

interface Work {
  n: number;
  sleepMs?: number;
}

describe.skipIf(!haveGo)('Go and TypeScript consumers under one lane and one cancel', () => {
  const emqGo = useGoBuild();
  const it = queueTest<Work, unknown>(env, 'gofleet');

  it('a lane of concurrency 1 served by Go and TypeScript never runs two at once', async ({
    q,
    queueName: name,
    consumers,
  }) => {
    await q.lanes.configure('one', { concurrency: 1 });
    const go = new GoConsumer(emqGo.bin, env.server.url, name, 4);
    try {
      await within(go.ready.promise, 20_000, 'the Go consumer to start');
      const ts = q.consume(
        async (job) => {
          await new Promise((r) => setTimeout(r, job.data.sleepMs ?? 0));
          return { by: 'ts' };
        },
        { concurrency: 4, beatMs: 200 },
      );
      consumers.push(ts);
      // Two at a time, a bit apart: both runtimes are parked on the wake stream when a pair
      // comes, so each pair is raced for (a runtime completing a lane job claims the lane's
      // next in the same call, so a queue filled at once would stay with one runtime).
      const ids: string[] = [];
      for (let n = 0; n < 30; n += 2) {
        for (const m of [n, n + 1])
          ids.push((await q.enqueue({ n: m, sleepMs: 15 }, { group: 'one', name: 'lane' })).id);
        await new Promise((r) => setTimeout(r, 60));
      }
      await poll(
        () => q.counts(),
        (c) => c.completed === 30,
        'every job to complete',
        30_000,
      );
      const rows = (await Promise.all(ids.map((id) => q.get(id)))) as JobView[];
      rows.sort((a, b) => a.startedAt! - b.startedAt!);
      const overlaps = rows.slice(1).filter((r, i) => r.startedAt! < rows[i]!.finishedAt!);
      expect(overlaps.map((r) => r.id)).toEqual([]);
      const byGo = rows.filter((r) => (r.result as { by?: string }).by === 'go').length;
      console.log(
        `lane of concurrency 1: ${rows.length} jobs, ${byGo} run by Go, ${rows.length - byGo} by TypeScript, 0 overlapping`,
      );
      // Both runtimes held the lane in turn, or the test proves nothing.
      expect(byGo).toBeGreaterThan(0);
      expect(rows.length - byGo).toBeGreaterThan(0);
      expect(await go.close()).toBe(0);
    } finally {
      await go.kill();
    }
  }, 60_000);

  it('a cancel requested from TypeScript stops a running Go handler and ends the job cancelled', async ({
    q,
    queueName: name,
  }) => {
    // A 900 ms lease is extended every 300 ms: the extension is where a cancel reaches the handler.
    const go = new GoConsumer(emqGo.bin, env.server.url, name, 2, ['--lease-ms', '900']);
    try {
      await within(go.ready.promise, 20_000, 'the Go consumer to start');
      const { id } = await q.enqueue({ n: 1, sleepMs: 60_000 }, { name: 'long' });
      await poll(
        () => go.of('started'),
        (lines) => lines.some((l) => l.id === id),
        'the Go handler to start',
        10_000,
      );
      expect(await q.cancel(id)).toBe('requested');
      const row = await poll(
        () => q.get(id),
        (v) => v?.state === 'cancelled',
        'the job to end cancelled',
        10_000,
      );
      expect(row!.attempts).toBe(1);
      await poll(
        () => go.of('failed'),
        (lines) => lines.some((l) => l.id === id && l.outcome === 'cancelled'),
        "the Go consumer's cancelled outcome",
        5000,
      );
      expect(go.of('started').filter((l) => l.id === id)).toHaveLength(1);
      expect(await go.close()).toBe(0);
    } finally {
      await go.kill();
    }
  }, 60_000);

  it('a flow added by Go is read by TypeScript, which runs it children first', async ({
    q,
    queueName: name,
    consumers,
  }) => {
    const spec = {
      name: 'report',
      data: { n: 0 },
      children: [
        { name: 'part', data: { n: 1 } },
        { name: 'part', data: { n: 2 }, children: [{ name: 'leaf', data: { n: 3 } }] },
      ],
    };
    const out = JSON.parse(
      await goRun(emqGo.bin, ['flow', '--url', env.server.url, '--queue', name], JSON.stringify(spec)),
    ) as { status: string; tree: { id: string } };
    expect(out.status).toBe('added');
    const shape = (t: FlowTree | null): unknown =>
      t && { name: t.name, state: t.state, queue: t.queue, children: t.children.map(shape) };
    expect(shape(await q.flow(out.tree.id))).toEqual({
      name: 'report',
      state: 'waiting_children',
      queue: name,
      children: [
        { name: 'part', state: 'pending', queue: name, children: [] },
        {
          name: 'part',
          state: 'waiting_children',
          queue: name,
          children: [{ name: 'leaf', state: 'pending', queue: name, children: [] }],
        },
      ],
    });
    const order: string[] = [];
    const ts = q.consume(
      async (job) => {
        order.push(job.name ?? '');
        return { by: 'ts', n: job.data.n };
      },
      { concurrency: 1, beatMs: 200 },
    );
    consumers.push(ts);
    expect(await q.waitFor(out.tree.id, { timeoutMs: 20_000 })).toEqual({ by: 'ts', n: 0 });
    expect(order.at(-1)).toBe('report');
    expect(order.indexOf('leaf')).toBeLessThan(order.lastIndexOf('part'));
    const deps = await q.dependencies(out.tree.id);
    expect(deps.pending).toEqual([]);
    expect(deps.processed.map((d) => d.result)).toEqual([
      { by: 'ts', n: 1 },
      { by: 'ts', n: 2 },
    ]);
  }, 60_000);
});
