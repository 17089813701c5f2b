// Three runtimes on one queue: TypeScript, Go (runtimes/go, through emq-go) and Elixir
// (runtimes/elixir, through EchoMQ.CLI), each producing and consuming at once. Every job must
// end exactly once whichever runtime ran it, none early, with retries crossing runtimes; and
// an Elixir consumer killed holding jobs loses none of them: they are reaped after its lease
// and end once elsewhere, never claimed again before that lease ran out.
// Without Elixir (Debian's elixir and erlang-redis-client) the file skips, saying so; the
// three-runtime test also needs Go (golang-go, golang-github-gomodule-redigo-dev).
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { beforeAll, describe, expect } from 'vitest';
import type { QueueEvent } from '../../src/core/types.js';
import { eventsOf } from '../../src/events/reader.js';
import { queueTest, useRedisServer } from '../support/harness.js';
import { ROOT, runProcess } from '../support/run-process.js';
import { poll, within } from '../support/wait.js';
import { GO_DIR, GO_ENV, goRun, haveGo, LineConsumer, useGoBuild } from './go-runtime.js';
import {
  endsDead,
  enqueueSpecs,
  expectedStatuses,
  jobMix,
  type Spec,
  specsWire,
  tsHandler,
  type Work,
} from './job-mix.js';

const EX_DIR = join(ROOT, 'runtimes', 'elixir');
const eredis = spawnSync('erl', [
  '-noshell',
  '-eval',
  'halt(case code:which(eredis) of non_existing -> 1; _ -> 0 end).',
]);
const haveElixir = spawnSync('elixir', ['--version']).status === 0 && eredis.status === 0;
if (!haveElixir) {
  console.warn(
    'Elixir cross-runtime tests skipped: Elixir or eredis is missing (apt-get install elixir erlang-redis-client)',
  );
}
const EX_ENV = { ...process.env, MIX_ENV: 'dev' };
const EX_EBIN = join(EX_DIR, '_build', 'dev', 'lib', 'echo_mq', 'ebin');
const exArgs = (args: string[]) => ['-pa', EX_EBIN, '-e', 'EchoMQ.CLI.main(System.argv())', '--', ...args];

const env = useRedisServer();

describe.skipIf(!haveElixir)('the Elixir runtime with TypeScript and Go on one queue', () => {
  // emq-go is built only where Go is (the three-runtime test skips without it).
  const emqGo = haveGo ? useGoBuild() : { bin: '' };
  beforeAll(async () => {
    const made = await runProcess('mix', ['compile'], 180_000, EX_ENV, undefined, EX_DIR);
    if (made.code !== 0) throw new Error(`mix compile failed: ${made.stderr}${made.stdout}`);
  }, 240_000);

  const it = queueTest<Work, unknown>(env, 'crossex').extend<{
    start: (runtime: 'ex' | 'go', queue: string, args: string[]) => LineConsumer;
  }>({
    // biome-ignore lint/correctness/noEmptyPattern: vitest reads a fixture's dependencies from this pattern
    start: async ({}, use) => {
      const started: LineConsumer[] = [];
      try {
        await use((runtime, queue, args) => {
          const base = ['consume', '--url', env.server.url, '--queue', queue, ...args];
          const c =
            runtime === 'ex'
              ? new LineConsumer('elixir', exArgs(base), EX_DIR, EX_ENV)
              : new LineConsumer(emqGo.bin, base, GO_DIR, GO_ENV);
          started.push(c);
          return c;
        });
      } finally {
        for (const c of started) await c.kill().catch(() => {});
      }
    },
  });

  const exRun = async (args: string[], input?: string): Promise<string> => {
    const run = await runProcess('elixir', exArgs(args), 60_000, EX_ENV, input, EX_DIR);
    if (run.code !== 0) throw new Error(`EchoMQ.CLI ${args[0]} exited ${run.code}: ${run.stderr}`);
    return run.stdout;
  };

  it('replays every conformance case through the Elixir CLI', async () => {
    const report = JSON.parse(await exRun(['conformance', '--url', env.server.url])) as {
      passed: number;
      total: number;
      failures: string[];
    };
    expect(report.failures).toEqual([]);
    expect(report.passed).toBe(report.total);
    expect(report.total).toBeGreaterThan(100);
  }, 60_000);

  it.skipIf(!haveGo)(
    'producers and consumers of three runtimes at once: every job ends once, none early, retries crossing runtimes',
    async ({ mq, q, queueName: name, consumers, start }) => {
      const ex = start('ex', name, ['--concurrency', '4', '--beat-ms', '200']);
      const go = start('go', name, ['--concurrency', '4', '--beat-ms', '200']);
      await within(
        Promise.all([ex.ready.promise, go.ready.promise]),
        30_000,
        'the Elixir and Go consumers to start',
      );
      const tsCompleted = new Map<string, number>();
      const tsFailed: string[] = [];
      const tsLost: string[] = [];
      const ts = q.consume(tsHandler, { concurrency: 4, beatMs: 200 });
      consumers.push(ts);
      ts.on('completed', (job) => tsCompleted.set(job.id, (tsCompleted.get(job.id) ?? 0) + 1));
      ts.on('failed', (job) => tsFailed.push(job.id));
      ts.on('lost', (job) => tsLost.push(job.id));

      const tsSpecs = jobMix(0);
      const goSpecs = jobMix(1000);
      const exSpecs = jobMix(2000);
      const tsIds = await enqueueSpecs(q, tsSpecs);
      const [goOut, exOut] = await Promise.all([
        goRun(emqGo.bin, ['produce', '--url', env.server.url, '--queue', name], specsWire(goSpecs)),
        exRun(['produce', '--url', env.server.url, '--queue', name], specsWire(exSpecs)),
      ]);
      const goReply = JSON.parse(goOut) as { id: string; status: string }[];
      const exReply = JSON.parse(exOut) as { id: string; status: string }[];
      expect(goReply.map((r) => r.status)).toEqual(expectedStatuses(goSpecs));
      expect(exReply.map((r) => r.status)).toEqual(expectedStatuses(exSpecs));
      const all = [...tsIds, ...goReply.map((r) => r.id), ...exReply.map((r) => r.id)];
      const specs = [...tsSpecs, ...goSpecs, ...exSpecs];
      const specOf = new Map<string, Spec>(all.map((id, i) => [id, specs[i]!]));
      const expectDead = all.filter((id) => endsDead(specOf.get(id)!));

      await poll(
        () => q.counts(),
        (c) => c.completed + c.dead === all.length,
        'every job to end',
        90_000,
      );
      expect(await ex.close()).toBe(0);
      expect(await go.close()).toBe(0);
      await ts.close();

      const completedBy = new Map<string, number>();
      const add = (id: string, n = 1) => completedBy.set(id, (completedBy.get(id) ?? 0) + n);
      const exCompleted = ex.of('completed').map((l) => l.id!);
      const goCompleted = go.of('completed').map((l) => l.id!);
      for (const id of [...exCompleted, ...goCompleted]) add(id);
      for (const [id, n] of tsCompleted) add(id, n);
      const shouldComplete = all.filter((id) => !expectDead.includes(id));
      expect([...completedBy.keys()].sort()).toEqual([...shouldComplete].sort());
      expect([...completedBy.values()].every((n) => n === 1)).toBe(true);
      expect(exCompleted.length).toBeGreaterThan(0);
      expect(goCompleted.length).toBeGreaterThan(0);
      expect(tsCompleted.size).toBeGreaterThan(0);
      expect([...ex.of('lost'), ...go.of('lost')]).toEqual([]);
      expect(tsLost).toEqual([]);
      expect(await q.counts()).toMatchObject({
        completed: shouldComplete.length,
        dead: expectDead.length,
        active: 0,
        pending: 0,
        scheduled: 0,
      });

      const events: QueueEvent[] = [];
      for (const [streamId, flat] of await mq.connector.client.xrange(q.keys.key('events'), '-', '+')) {
        events.push(...eventsOf(streamId, flat));
      }
      let crossRetries = 0;
      for (const id of all) {
        const { data, delayMs } = specOf.get(id)!;
        const view = (await q.get(id))!;
        const failures = events.filter((e) => e.id === id && e.event === 'failed');
        const actives = events.filter((e) => e.id === id && e.event === 'active');
        if (data.unrecoverable) {
          expect(view).toMatchObject({ state: 'dead', attempts: 1 });
          expect(failures.map((e) => e.fields.reason)).toEqual(['unrecoverable']);
        } else if ((data.fail ?? 0) >= 9) {
          expect(view).toMatchObject({ state: 'dead', attempts: 2, maxAttempts: 2 });
        } else {
          const fails = data.fail ?? 0;
          expect(view, id).toMatchObject({ state: 'completed', attempts: fails + 1, maxAttempts: 3 });
          const result = view.result as { by: string; attempt: number; data: Work };
          expect(result.attempt).toBe(fails + 1);
          expect(result.data).toEqual(data);
          if (data.progress) expect(view.progress).toEqual({ at: fails + 1, by: result.by });
          if (fails > 0) {
            const failedBy = new Set<string>();
            if (ex.of('failed').some((l) => l.id === id)) failedBy.add('ex');
            if (go.of('failed').some((l) => l.id === id)) failedBy.add('go');
            if (tsFailed.includes(id)) failedBy.add('ts');
            if ([...failedBy].some((by) => by !== result.by)) crossRetries += 1;
          }
        }
        // None early: a delayed job's first claim is at or after its run-at (server instants).
        if (delayMs !== undefined) {
          const firstClaim = Number(actives[0]!.streamId.split('-')[0]);
          expect(firstClaim).toBeGreaterThanOrEqual(view.createdAt + delayMs);
        }
      }
      expect(crossRetries).toBeGreaterThan(0);
      console.log(
        `three runtimes: ${all.length} jobs (${tsIds.length} each from TypeScript, Go and Elixir); completed by Elixir ${exCompleted.length}, by Go ${goCompleted.length}, by TypeScript ${tsCompleted.size}; dead ${expectDead.length}; failed attempts stored by Elixir ${ex.of('failed').length}, Go ${go.of('failed').length}, TypeScript ${tsFailed.length}; ${crossRetries} jobs failed in one runtime and completed in another; lost 0, early 0`,
      );
    },
    150_000,
  );

  it('an Elixir consumer killed holding jobs: they are reaped after its lease and end once elsewhere, none early', async ({
    mq,
    q,
    queueName: name,
    consumers,
    start,
  }) => {
    const leaseMs = 1500;
    const ids: string[] = [];
    for (let n = 0; n < 6; n++) ids.push((await q.enqueue({ n, sleepMs: 400 })).id);
    const ex = start('ex', name, ['--concurrency', '6', '--beat-ms', '200', '--lease-ms', String(leaseMs)]);
    await within(ex.ready.promise, 30_000, 'the Elixir consumer to start');
    await poll(
      () => q.counts(),
      (c) => c.active === 6,
      'the Elixir consumer to hold every job',
      20_000,
    );
    await ex.kill();
    const killedAt = Date.now();
    const done = new Map<string, number>();
    const ts = q.consume(tsHandler, { concurrency: 6, beatMs: 200 });
    consumers.push(ts);
    ts.on('completed', (job) => done.set(job.id, (done.get(job.id) ?? 0) + 1));
    await poll(
      () => q.counts(),
      (c) => c.completed === 6,
      'every held job to end elsewhere',
      30_000,
    );
    await ts.close();
    expect(ex.of('completed')).toEqual([]);
    expect([...done.keys()].sort()).toEqual([...ids].sort());
    expect([...done.values()].every((n) => n === 1)).toBe(true);
    for (const id of ids) {
      const actives: number[] = [];
      for (const [streamId, flat] of await mq.connector.client.xrange(q.keys.key('events'), '-', '+')) {
        for (const e of eventsOf(streamId, flat))
          if (e.id === id && e.event === 'active') actives.push(Number(streamId.split('-')[0]));
      }
      // The second claim came only once the killed consumer's lease ran out.
      expect(actives.length).toBe(2);
      expect(actives[1]! - actives[0]!).toBeGreaterThanOrEqual(leaseMs);
    }
    console.log(
      `killed Elixir consumer: 6 jobs held, 6 completed once by TypeScript ${Date.now() - killedAt} ms after the kill; lost 0, early 0`,
    );
  }, 90_000);

  it('a job scheduler upserted by either runtime is the same record: re-upserting from the other keeps its occurrence', async ({
    q,
    queueName: name,
  }) => {
    const upsert = async (specs: unknown[]) =>
      JSON.parse(
        await exRun(['upsert', '--url', env.server.url, '--queue', name], JSON.stringify(specs)),
      ) as {
        status: string;
        nextRunAt: number | null;
        jobId: string | null;
      }[];
    const tsEvery = await q.schedulers.upsert(
      'every',
      { every: 60_000, limit: 5 },
      { name: 'e', data: { a: 1 } },
    );
    const tsCron = await q.schedulers.upsert('cron', { pattern: '0 3 * * *' }, { name: 'c' });
    const [exEvery, exCron] = await upsert([
      { id: 'every', repeat: { every: 60_000, limit: 5 }, name: 'e', data: { a: 2 } },
      { id: 'cron', repeat: { pattern: '0 3 * * *' }, name: 'c' },
    ]);
    expect(exEvery).toEqual({ status: 'updated', nextRunAt: tsEvery.nextRunAt, jobId: tsEvery.jobId });
    expect(exCron).toEqual({ status: 'updated', nextRunAt: tsCron.nextRunAt, jobId: tsCron.jobId });
    const [exMade] = await upsert([{ id: 'by-ex', repeat: { pattern: '*/5 * * * *', limit: 3 }, name: 'x' }]);
    expect(exMade!.status).toBe('created');
    const again = await q.schedulers.upsert('by-ex', { pattern: '*/5 * * * *', limit: 3 }, { name: 'x' });
    expect(again).toEqual({ status: 'updated', nextRunAt: exMade!.nextRunAt, jobId: exMade!.jobId });
    expect((await q.schedulers.get('every'))!.template.data).toEqual({ a: 2 });
  }, 60_000);
});
