// `echomq job <queue> <id>` explains the job as the dashboard's page does, where it fits a
// terminal: the consumer, each attempt (consumer, start, wait, run time, outcome, error) and a
// flow's children. Run as a child process from source, no tmux.
import { spawn } from 'node:child_process';
import { describe, expect } from 'vitest';
import { queueTest, useRedisServer } from '../support/harness.js';
import { ROOT } from '../support/run-process.js';

const env = useRedisServer();
const it = queueTest<{ n: number }>(env, 'clijob');

function cli(args: string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const child = spawn(process.execPath, ['--import', 'tsx', 'src/cli/index.ts', ...args], {
    cwd: ROOT,
    env: { ...process.env, REDIS_URL: env.server.url, NO_COLOR: '1', FORCE_COLOR: '' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (b: Buffer) => {
    stdout += b;
  });
  child.stderr.on('data', (b: Buffer) => {
    stderr += b;
  });
  return new Promise((resolve) => child.on('close', (code) => resolve({ code, stdout, stderr })));
}

describe('echomq job', () => {
  it('prints the consumer and each attempt with its outcome and error, and --json carries the runs', async ({
    q,
  }) => {
    const { id } = await q.enqueue({ n: 1 }, { attempts: 2, backoff: { kind: 'fixed', ms: 10 } });
    const c = q.consume((job) => {
      if (job.attempts === 1) throw new Error('smtp 421: try again later');
      return 'sent';
    });
    try {
      await q.waitFor(id, { timeoutMs: 10_000 });
    } finally {
      await c.close();
    }
    const text = await cli(['job', q.name, id]);
    expect(text.stderr).toBe('');
    expect(text.code).toBe(0);
    const lines = text.stdout.split('\n');
    expect(lines).toContain(`  consumer    ${c.id}`);
    const at = lines.indexOf('attempts');
    expect(lines[at + 1]).toMatch(/^ {2}# +CONSUMER +STARTED +WAITED +RAN +OUTCOME +ERROR$/);
    expect(lines[at + 2]).toMatch(
      new RegExp(`^  1  ${c.id}  \\S+ \\S+ +\\d+ms +\\d+ms +failed \\(error\\)  smtp 421: try again later$`),
    );
    expect(lines[at + 3]).toMatch(/^ {2}2 .* completed$/);
    const json = JSON.parse((await cli(['job', q.name, id, '--json'])).stdout) as {
      runs: { attempt: number; outcome: string; error?: string; consumer?: string }[];
    };
    expect(json.runs.map((r) => [r.attempt, r.outcome, r.error, r.consumer])).toEqual([
      [1, 'failed', 'smtp 421: try again later', c.id],
      [2, 'completed', undefined, c.id],
    ]);
  }, 120_000);
});
