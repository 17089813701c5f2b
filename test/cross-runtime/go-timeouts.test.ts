// A job's own execution timeout (SPEC 8.1: the row's `timeout`, handed back by claim's
// `timeouts`) is honoured whichever runtime admitted the job and whichever consumes it, and it
// wins over the consumer's own timeoutMs: a short one ends a long run the consumer would let
// finish, a long one lets a run outlast the consumer's short one. Without Go the file skips.
import { describe, expect } from 'vitest';
import type { JobView } from '../../src/core/types.js';
import { queueTest, useRedisServer } from '../support/harness.js';
import { poll, within } from '../support/wait.js';
import { GoConsumer, goRun, haveGo, useGoBuild } from './go-runtime.js';

const env = useRedisServer();

interface Work {
  n: number;
  sleepMs: number;
}

const ended = (v: JobView | null) => v?.state === 'completed' || v?.state === 'dead';

describe.skipIf(!haveGo)("a job's own timeoutMs across Go and TypeScript", () => {
  const emqGo = useGoBuild();
  const it = queueTest<Work, unknown>(env, 'gotimeout');

  it('jobs enqueued from TypeScript with timeoutMs are timed out by their own bound in a Go consumer', async ({
    q,
    queueName: name,
  }) => {
    // The Go consumer's own timeout is 500 ms: the job's 150 ms ends a run of 60 s, and the
    // job's 60 s lets a run of 800 ms finish.
    const short = await q.enqueue({ n: 1, sleepMs: 60_000 }, { timeoutMs: 150, attempts: 1 });
    const long = await q.enqueue({ n: 2, sleepMs: 800 }, { timeoutMs: 60_000, attempts: 1 });
    const plain = await q.enqueue({ n: 3, sleepMs: 60_000 }, { attempts: 1 });
    const go = new GoConsumer(emqGo.bin, env.server.url, name, 4, ['--timeout-ms', '500']);
    try {
      await within(go.ready.promise, 20_000, 'the Go consumer to start');
      const rows = await Promise.all(
        [short, long, plain].map((j) => poll(() => q.get(j.id), ended, `job ${j.id} to end`, 20_000)),
      );
      expect(rows.map((r) => r!.state)).toEqual(['dead', 'completed', 'dead']);
      expect(rows[0]!.error!.message).toMatch(/^EMQTIMEOUT .*timeout of 150 ms/);
      expect(rows[1]!.result).toMatchObject({ by: 'go' });
      expect(rows[2]!.error!.message).toMatch(/^EMQTIMEOUT .*timeout of 500 ms/);
      expect(
        go
          .of('started')
          .map((l) => l.id)
          .sort(),
      ).toEqual([short.id, long.id, plain.id].sort());
      expect(await go.close()).toBe(0);
    } finally {
      await go.kill();
    }
  }, 60_000);

  it('jobs enqueued from Go with a timeout are timed out by their own bound in a TypeScript consumer', async ({
    q,
    queueName: name,
    consumers,
  }) => {
    const specs = [
      { data: { n: 1, sleepMs: 60_000 }, timeoutMs: 150, attempts: 1 },
      { data: { n: 2, sleepMs: 800 }, timeoutMs: 60_000, attempts: 1 },
      { data: { n: 3, sleepMs: 60_000 }, attempts: 1 },
      { data: { n: 4, sleepMs: 60_000 }, timeoutMs: 150, attempts: 1, delayMs: 1 },
    ];
    const ids = (
      JSON.parse(
        await goRun(emqGo.bin, ['produce', '--url', env.server.url, '--queue', name], JSON.stringify(specs)),
      ) as { id: string }[]
    ).map((a) => a.id);
    consumers.push(
      q.consume(
        async (job, { signal }) => {
          await new Promise<void>((resolve) => {
            const timer = setTimeout(resolve, job.data.sleepMs);
            signal.addEventListener('abort', () => {
              clearTimeout(timer);
              resolve();
            });
          });
          return { by: 'ts' };
        },
        { concurrency: 4, beatMs: 200, timeoutMs: 500 },
      ),
    );
    const rows = await Promise.all(ids.map((id) => poll(() => q.get(id), ended, `job ${id} to end`, 20_000)));
    expect(rows.map((r) => r!.state)).toEqual(['dead', 'completed', 'dead', 'dead']);
    expect(rows[1]!.result).toEqual({ by: 'ts' });
    // Each timed-out attempt ended by its own bound (the scheduled one's too), the plain one by the consumer's.
    expect(rows.map((r) => r!.error?.message.match(/timeout of (\d+) ms/)?.[1])).toEqual([
      '150',
      undefined,
      '500',
      '150',
    ]);
  }, 60_000);
});
