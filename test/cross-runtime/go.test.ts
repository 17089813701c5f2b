// Two runtimes on one queue: the TypeScript runtime and the Go runtime (runtimes/go, driven
// through its emq-go binary), each producing and consuming at once. Every job must complete
// exactly once whichever runtime ran it, none early, with its retries counted right whichever
// runtime retried it, and each side must read the other's rows and events field for field. A
// TypeScript migrate steps a queue to protocol version 2 past an alive Go consumer (SPEC 22.4).
// Without Go (Debian's golang-go and golang-github-gomodule-redigo-dev) the file skips, saying so.
import { describe, expect } from 'vitest';
import type { JobView, QueueEvent } from '../../src/core/types.js';
import { eventsOf } from '../../src/events/reader.js';
import { EchoMQ } from '../../src/queue/echomq.js';
import { queueTest, useRedisServer } from '../support/harness.js';
import { poll, within } from '../support/wait.js';
import { GoConsumer, type GoLine, goRun, haveGo, useGoBuild } from './go-runtime.js';
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

const env = useRedisServer();

describe.skipIf(!haveGo)('the Go runtime and the TypeScript runtime on one queue', () => {
  const emqGo = useGoBuild();
  const goRunner = (args: string[], input?: string) => goRun(emqGo.bin, args, input);
  /** queueTest, and `goConsumer(queue, concurrency)`: an `emq-go consume`, killed after the test. */
  const it = queueTest<Work, unknown>(env, 'cross').extend<{
    goConsumer: (queue: string, concurrency: number) => GoConsumer;
  }>({
    // biome-ignore lint/correctness/noEmptyPattern: vitest reads a fixture's dependencies from this pattern
    goConsumer: async ({}, use) => {
      const started: GoConsumer[] = [];
      try {
        await use((queue, concurrency) => {
          const g = new GoConsumer(emqGo.bin, env.server.url, queue, concurrency);
          started.push(g);
          return g;
        });
      } finally {
        for (const g of started) await g.kill();
      }
    },
  });

  it('replays every conformance case with the Go runtime', async () => {
    const out = await goRunner(['conformance', '--url', env.server.url, '--flush']);
    const report = JSON.parse(out) as { passed: number; total: number; failures: string[] | null };
    expect(report.failures ?? []).toEqual([]);
    expect(report.passed).toBe(report.total);
    expect(report.total).toBeGreaterThan(100);
  }, 60_000);

  it('producers and consumers of both runtimes at once: every job ends once, none early, retries counted by whoever retried', async ({
    mq,
    q,
    queueName: name,
    consumers,
    goConsumer,
  }) => {
    const go = goConsumer(name, 4);
    await within(go.ready.promise, 20_000, 'the Go consumer to start');
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
    const tsIds = await enqueueSpecs(q, tsSpecs);
    const goReply = JSON.parse(
      await goRunner(['produce', '--url', env.server.url, '--queue', name], specsWire(goSpecs)),
    ) as { id: string; status: string }[];
    expect(goReply.map((r) => r.status)).toEqual(expectedStatuses(goSpecs));
    const goIds = goReply.map((r) => r.id);
    const all = [...tsIds, ...goIds];
    const specOf = new Map<string, Spec>(all.map((id, i) => [id, [...tsSpecs, ...goSpecs][i]!]));
    const expectDead = all.filter((id) => endsDead(specOf.get(id)!));

    await poll(
      () => q.counts(),
      (c) => c.completed + c.dead === all.length,
      'every job to end',
      60_000,
    );
    expect(await go.close()).toBe(0);
    await ts.close();

    // Every job that should complete completed exactly once, and each runtime did some.
    const goCompleted = go.of('completed').map((l) => l.id!);
    const completedBy = new Map<string, number>();
    for (const id of goCompleted) completedBy.set(id, (completedBy.get(id) ?? 0) + 1);
    for (const [id, n] of tsCompleted) completedBy.set(id, (completedBy.get(id) ?? 0) + n);
    const shouldComplete = all.filter((id) => !expectDead.includes(id));
    expect([...completedBy.keys()].sort()).toEqual([...shouldComplete].sort());
    expect([...completedBy.values()].every((n) => n === 1)).toBe(true);
    expect(goCompleted.length).toBeGreaterThan(0);
    expect(tsCompleted.size).toBeGreaterThan(0);
    expect(go.of('lost')).toEqual([]);
    expect(tsLost).toEqual([]);
    expect(await q.counts()).toMatchObject({
      completed: shouldComplete.length,
      dead: expectDead.length,
      active: 0,
      pending: 0,
      scheduled: 0,
    });

    // Rows: attempts and failures counted right whichever runtime ran each attempt.
    const views = new Map<string, JobView<Work, unknown>>();
    for (const id of all) views.set(id, (await q.get(id))!);
    const events: QueueEvent[] = [];
    for (const [streamId, flat] of await mq.connector.client.xrange(q.keys.key('events'), '-', '+')) {
      events.push(...eventsOf(streamId, flat));
    }
    let crossRetries = 0;
    for (const id of all) {
      const { data } = specOf.get(id)!;
      const view = views.get(id)!;
      const failures = events.filter((e) => e.id === id && e.event === 'failed');
      const actives = events.filter((e) => e.id === id && e.event === 'active');
      if (data.unrecoverable) {
        expect(view).toMatchObject({ state: 'dead', attempts: 1 });
        expect(failures.map((e) => e.fields.reason)).toEqual(['unrecoverable']);
      } else if ((data.fail ?? 0) >= 9) {
        expect(view).toMatchObject({ state: 'dead', attempts: 2, maxAttempts: 2 });
        expect(failures.map((e) => e.fields.attempt)).toEqual(['1', '2']);
      } else {
        const fails = data.fail ?? 0;
        expect(view, id).toMatchObject({ state: 'completed', attempts: fails + 1, maxAttempts: 3 });
        expect(failures.map((e) => e.fields.attempt)).toEqual(
          Array.from({ length: fails }, (_, i) => String(i + 1)),
        );
        expect(actives.map((e) => e.fields.attempt)).toEqual(
          Array.from({ length: fails + 1 }, (_, i) => String(i + 1)),
        );
        expect((view.result as { attempt: number; data: Work }).attempt).toBe(fails + 1);
        expect((view.result as { data: Work }).data).toEqual(data);
        // Progress as the last attempt stored it, read back whoever wrote it.
        if (data.progress) {
          expect(view.progress).toEqual({ at: fails + 1, by: (view.result as { by: string }).by });
        }
        if (fails > 0) {
          const failedInGo = go.of('failed').some((l) => l.id === id);
          const failedInTs = tsFailed.includes(id);
          const doneBy = (view.result as { by: string }).by;
          if ((failedInGo && doneBy === 'ts') || (failedInTs && doneBy === 'go')) crossRetries += 1;
        }
      }
      // None early: a delayed job's first claim (its active entry's server instant) is at or after its run-at.
      const delay = specOf.get(id)!.delayMs;
      if (delay !== undefined) {
        const firstClaim = Number(actives[0]!.streamId.split('-')[0]);
        expect(firstClaim).toBeGreaterThanOrEqual(view.createdAt + delay);
        if (!data.fail) expect(view.runAt).toBe(view.createdAt + delay); // a retry moves runat on
      }
    }
    expect(go.of('failed').length + tsFailed.length).toBe(
      all.reduce((sum, id) => {
        const d = specOf.get(id)!.data;
        return sum + (d.unrecoverable ? 1 : (d.fail ?? 0) >= 9 ? 2 : (d.fail ?? 0));
      }, 0),
    );
    console.log(
      `cross-runtime: ${all.length} jobs (${tsIds.length} from TypeScript, ${goIds.length} from Go); completed by Go ${goCompleted.length}, by TypeScript ${tsCompleted.size}; failed attempts stored by Go ${go.of('failed').length}, by TypeScript ${tsFailed.length}; ${crossRetries} jobs failed in one runtime and completed in the other; lost 0`,
    );

    // queue.get on either side reads the other's rows, field for field.
    const goViews = (await goRunner(['get', '--url', env.server.url, '--queue', name, ...all]))
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as JobView);
    expect(goViews).toEqual(all.map((id) => JSON.parse(JSON.stringify(views.get(id)))));

    // The Go events reader expands the stream exactly as the TypeScript one does.
    const goEvents = (await goRunner(['events', '--url', env.server.url, '--queue', name, '--from', '0']))
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as QueueEvent);
    expect(goEvents).toEqual(events);
  }, 120_000);

  it('rows admitted by either runtime with the same options hold the same fields', async ({
    mq,
    queueName: name,
    raw,
  }) => {
    const q = mq.queue(name);
    const opts = {
      name: 'mail',
      group: 'tenant-7',
      priority: 5,
      attempts: 4,
      backoff: { kind: 'jitter', inner: { kind: 'exponential', base: 200, cap: 9000 } },
    } as const;
    const data = { to: 'a@example.com', tags: ['x', 'ü'], n: 1.5, none: null };
    const ts = await q.enqueue(data, opts);
    const tsLater = await q.enqueueIn(data, 60_000, opts);
    const [goNow, goLater] = JSON.parse(
      await goRunner(
        ['produce', '--url', env.server.url, '--queue', name],
        JSON.stringify([
          { data, ...opts },
          { data, ...opts, delayMs: 60_000 },
        ]),
      ),
    ) as { id: string }[];
    const row = async (id: string) => {
      const r = await raw.hgetall(q.keys.job(id));
      delete r.created;
      delete r.runat;
      return r;
    };
    expect(await row(goNow!.id)).toEqual(await row(ts.id));
    expect(await row(goLater!.id)).toEqual(await row(tsLater.id));
    expect(await row(ts.id)).toMatchObject({
      state: 'pending',
      payload: JSON.stringify(data),
      max: '4',
      prio: '5',
      group: 'tenant-7',
      name: 'mail',
      backoff: JSON.stringify(opts.backoff),
    });
    const tsView = JSON.parse(JSON.stringify(await q.get(goNow!.id)));
    const [goView] = (await goRunner(['get', '--url', env.server.url, '--queue', name, ts.id]))
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l));
    expect({ ...goView, id: '', createdAt: 0 }).toEqual({ ...tsView, id: '', createdAt: 0 });

    // A dedupe key taken by one runtime holds against the other.
    const kept = await q.enqueue({ first: 'ts' }, { dedupe: { key: 'by-ts', mode: 'throttle' } });
    const [fromGo, goKept] = JSON.parse(
      await goRunner(
        ['produce', '--url', env.server.url, '--queue', name],
        JSON.stringify([
          { data: { second: 'go' }, dedupe: { key: 'by-ts', mode: 'throttle' } },
          { data: { first: 'go' }, dedupe: { key: 'by-go', mode: 'throttle', ttlMs: 60_000 } },
        ]),
      ),
    ) as { id: string; status: string }[];
    expect(fromGo).toEqual({ id: kept.id, status: 'deduplicated' });
    expect(await q.enqueue({ second: 'ts' }, { dedupe: { key: 'by-go', mode: 'throttle' } })).toEqual({
      id: goKept!.id,
      status: 'deduplicated',
    });
    expect(await raw.hget(q.keys.job(kept.id), 'dedupe')).toBe('by-ts');
    expect(await raw.pttl(q.keys.dedupe('by-go'))).toBeGreaterThan(0);
  }, 60_000);

  it('a TypeScript migrate steps the queue to version 2 past an alive Go consumer, which then runs a version-2 row without max to 3 attempts', async ({
    q,
    raw,
    key,
    queueName: name,
    goConsumer,
    others,
  }) => {
    // The queue is stamped 1 first (a fleet beside a release that speaks 1 only): Go keeps it.
    const v1 = await EchoMQ.connect({ url: env.server.url, protocolVersion: 1 });
    others.push(v1);
    expect(await v1.queue(name).protocolVersion()).toBe(1);
    const go = goConsumer(name, 2);
    await within(go.ready.promise, 20_000, 'the Go consumer to start');
    const goId = (go.lines.find((l) => l.kind === 'ready') as GoLine & { consumer: string }).consumer;
    // Its heartbeat says it speaks 1 and 2 (SPEC 22.4): migrate counts it alive and lets the step pass.
    const info = await poll(
      () => raw.hget(key('consumers:info'), goId),
      (text) => text !== null,
      'the Go consumer to beat',
      20_000,
    );
    expect(JSON.parse(info!)).toMatchObject({ protocols: [1, 2], beatMs: 200 });
    expect(await q.migrate()).toEqual({ from: 1, version: 2, consumers: 1 });

    const { id } = await q.enqueue({ n: 1, fail: 9 }, { backoff: { kind: 'fixed', ms: 30 } });
    expect(await raw.hget(key(`job:${id}`), 'max')).toBeNull(); // version 2: 3 attempts, unwritten
    await poll(
      () => go.of('failed').filter((l) => l.id === id).length,
      (n) => n === 3,
      'the Go consumer to fail the job 3 times',
      30_000,
    );
    expect(
      go
        .of('failed')
        .filter((l) => l.id === id)
        .map((l) => l.outcome),
    ).toEqual(['retry', 'retry', 'dead']);
    const [view] = (await goRunner(['get', '--url', env.server.url, '--queue', name, id]))
      .trim()
      .split('\n')
      .map((line) => JSON.parse(line) as JobView);
    expect(view).toMatchObject({ state: 'dead', attempts: 3, maxAttempts: 3 });
    expect(await go.close()).toBe(0);
    // Its last heartbeat took it off the list of consumers.
    expect(await raw.hget(key('consumers:info'), goId)).toBeNull();
  }, 120_000);
});
