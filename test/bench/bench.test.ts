// Keeps the benchmark from rotting: runs `bench/run.ts --tiny` (very small N, one round) as
// a child process and checks it exits 0 with a table row and a JSON line for every workload.
// No timing assertions: the figures on a shared test machine mean nothing.
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { CEILINGS } from '../../bench/ceiling.js';
import { SCALING } from '../../bench/scaling.js';
import { WORKLOADS } from '../../bench/workloads.js';
import { ROOT, type Run, runProcess } from '../support/run-process.js';

function runBench(args: string[], timeoutMs: number): Promise<Run> {
  return runProcess(join(ROOT, 'node_modules', '.bin', 'tsx'), ['bench/run.ts', ...args], timeoutMs);
}

describe('bench', () => {
  it('runs every workload against both libraries and the ceiling, printing a row and a JSON line for each', async () => {
    // --tiny runs in ~30 s on an idle 2-core machine, about half of it fixed waits (delays of
    // 1 s, a scheduler watched 1 s, leases run out in scale-stalled); beside the suite's other
    // files it takes two to three times that. The budget is for a hang, not for load.
    const { code, stdout, stderr } = await runBench(['--tiny'], 170_000);
    expect(code, stderr).toBe(0);

    const json = stdout
      .split('\n')
      .filter((l) => l.startsWith('{'))
      .map((l) => JSON.parse(l) as { workload: string; echomq: Record<string, number | null> });
    const rows = stdout.split('\n').map((l) => l.split(/\s+/)[0]);

    for (const w of [...WORKLOADS, ...SCALING]) {
      expect(rows, `table row for ${w.id}`).toContain(w.id);
      const line = json.find((j) => j.workload === w.id);
      expect(line, `JSON line for ${w.id}`).toBeDefined();
      const l = line as unknown as { echomq: Record<string, unknown>; bullmq: Record<string, unknown> };
      for (const m of w.metrics) {
        expect(typeof l.echomq[m.key], `${w.id} EchoMQ ${m.key}`).toBe('number');
        expect(typeof l.bullmq[m.key], `${w.id} BullMQ ${m.key}`).toBe('number');
      }
    }
    for (const c of CEILINGS) {
      expect(rows, `table row for ${c.id}`).toContain(c.id);
      const line = json.find((j) => j.workload === c.id);
      expect(typeof line?.echomq.jobs_per_s, `${c.id} jobs/s`).toBe('number');
    }
  }, 180_000);
});
