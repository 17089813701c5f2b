// A TypeScript-defined scheduler served by Go alone: the TypeScript runtime upserts an
// every-100 ms scheduler and a cron every second, and only `emq-go consume` processes run the
// queue (two of them, kept half busy by other jobs). Every slot must run once, none skipped,
// none twice, none before its instant: promote's hand-off, the cron lookahead (cut to one
// instant here, so Go's recurrence leg must top it up and hand off) and the Go consumer's beat
// have to work together. The figures (slots, lateness p50/p99 on the server clock) are printed.
// Without Go the file skips, saying so.
import { describe, expect } from 'vitest';
import type { JobView } from '../../src/core/types.js';
import { queueTest, useRedisServer } from '../support/harness.js';
import { poll, within } from '../support/wait.js';
import { GoConsumer, haveGo, useGoBuild } from './go-runtime.js';

const env = useRedisServer();

/** How long the schedulers run before they are removed. */
const RUN_MS = 6000;

function percentile(sorted: number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor((sorted.length * p) / 100))]!;
}

describe.skipIf(!haveGo)('a TypeScript-defined scheduler served by a Go-only consumer fleet', () => {
  const emqGo = useGoBuild();
  const it = queueTest(env, 'gorec');

  it('runs every slot of an every-100 ms and a cron-every-second scheduler once, none skipped, none early', async ({
    q,
    raw,
    key,
    queueName: name,
  }) => {
    const fleet = [0, 1].map(() => new GoConsumer(emqGo.bin, env.server.url, name, 3));
    try {
      await within(Promise.all(fleet.map((g) => g.ready.promise)), 20_000, 'the Go consumers to start');
      const fast = await q.schedulers.upsert('fast', { every: 100 }, { name: 'fast', data: { n: 0 } });
      const tick = await q.schedulers.upsert(
        'tick',
        { pattern: '* * * * * *' },
        { name: 'tick', data: { n: 0 } },
      );
      expect([fast.status, tick.status]).toEqual(['created', 'created']);
      // One instant of lookahead instead of 16: the cron slots after it need Go's leg.
      const ahead = (await raw.hget(key('scheduler:tick'), 'ahead')) ?? '';
      expect(ahead.split(' ').length).toBe(16);
      await raw.hset(key('scheduler:tick'), 'ahead', ahead.split(' ')[0]!);

      // Other work keeps the fleet about half busy: 2 jobs of 150 ms every 100 ms over 6 slots.
      let n = 1;
      const until = Date.now() + RUN_MS;
      while (Date.now() < until) {
        await q.enqueueMany([
          { data: { n: n++, sleepMs: 150 }, opts: { name: 'load', priority: 5 } },
          { data: { n: n++, sleepMs: 150 }, opts: { name: 'load', priority: 5 } },
        ]);
        await new Promise((r) => setTimeout(r, 100));
      }
      expect(await q.schedulers.remove('fast')).toBe(true);
      expect(await q.schedulers.remove('tick')).toBe(true);
      await poll(
        () => q.counts(),
        (c) => c.pending + c.active === 0,
        'the fleet to finish',
        20_000,
      );
      await Promise.all(fleet.map((g) => g.close()));

      const started = fleet.flatMap((g) => g.of('started'));
      const times = new Map<string, number>();
      for (const line of started) times.set(line.id!, (times.get(line.id!) ?? 0) + 1);
      const rows = (await Promise.all([...times.keys()].map((id) => q.get(id)))) as JobView[];
      const lines: string[] = [];
      for (const [sched, period, first] of [
        ['fast', 100, fast.nextRunAt],
        ['tick', 1000, tick.nextRunAt],
      ] as const) {
        const runs = rows.filter((r) => r.name === sched).sort((a, b) => a.runAt! - b.runAt!);
        // Every occurrence ran once, its slots are the grid from the first with no gap.
        for (const r of runs) expect(times.get(r.id), `${sched} ${r.id} runs`).toBe(1);
        expect(runs[0]?.runAt).toBe(first);
        const gaps = runs.slice(1).map((r, i) => r.runAt! - runs[i]!.runAt!);
        expect(gaps.filter((g) => g !== period)).toEqual([]);
        expect(runs.length).toBeGreaterThanOrEqual(sched === 'fast' ? RUN_MS / 100 / 2 : 3);
        // None early (the row's start and run-at are both server-clock instants).
        const lateness = runs.map((r) => r.startedAt! - r.runAt!).sort((a, b) => a - b);
        expect(lateness[0]).toBeGreaterThanOrEqual(0);
        lines.push(
          `${sched}: ${runs.length} slots, lateness p50 ${percentile(lateness, 50)} ms, p99 ${percentile(lateness, 99)} ms, max ${lateness.at(-1)} ms`,
        );
      }
      const load = rows.filter((r) => r.name === 'load').length;
      console.log(`go-only fleet (2 x 3 slots, ${load} other jobs): ${lines.join('; ')}`);
    } finally {
      for (const g of fleet) await g.kill();
    }
  }, 90_000);
});
