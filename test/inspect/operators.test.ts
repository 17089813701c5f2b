// What an operator sees of a worker that was killed mid-job, and what they can do about it:
// the dead consumer is shown as dead once it missed 3 beats, its job's lease deadline is shown
// and flagged once it passed, `echomq recover` returns the job to pending; a consumer that closes
// leaves the list at once. Library through the Inspector, the CLI as a child process (no tmux).
import { type ChildProcess, spawn } from 'node:child_process';
import { describe, expect } from 'vitest';
import { Inspector } from '../../src/inspect/inspector.js';
import { queueTest, useRedisServer } from '../support/harness.js';
import { ROOT, runProcess } from '../support/run-process.js';
import { poll } from '../support/wait.js';

const env = useRedisServer();
/** queueTest, and `workerHolding`: consumers in processes of their own, SIGKILLed after the test. */
const it = queueTest(env, 'ops').extend<{
  workerHolding: (queue: string, leaseMs: number) => Promise<ChildProcess>;
}>({
  // biome-ignore lint/correctness/noEmptyPattern: vitest reads a fixture's dependencies from this pattern
  workerHolding: async ({}, use) => {
    const children: ChildProcess[] = [];
    try {
      await use((queue, leaseMs) => workerHolding(children, queue, leaseMs));
    } finally {
      for (const c of children) c.kill('SIGKILL');
    }
  },
});

function echomq(args: string[]) {
  return runProcess(process.execPath, ['--import', 'tsx', 'src/cli/index.ts', ...args], 120_000, {
    ...process.env,
    REDIS_URL: env.server.url,
    NO_COLOR: '1',
  });
}

/** A consumer in its own process (added to `children`) holding one job; resolves once it started the job. */
async function workerHolding(
  children: ChildProcess[],
  queue: string,
  leaseMs: number,
): Promise<ChildProcess> {
  const child = spawn(
    process.execPath,
    ['--import', 'tsx', 'test/support/consumer-process.ts', env.server.url, queue, String(leaseMs)],
    { cwd: ROOT, stdio: ['ignore', 'pipe', 'inherit'] },
  );
  children.push(child);
  let out = '';
  await new Promise<void>((resolve, reject) => {
    child.stdout?.on('data', (d) => {
      out += d;
      if (out.includes('started ')) resolve();
    });
    child.on('exit', () => reject(new Error(`the worker exited: ${out}`)));
  });
  return child;
}

describe('a worker killed mid-job', () => {
  it('is shown dead after 3 beats, its job flagged lease expired, and echomq recover returns the job', async ({
    mq,
    q,
    queueName: name,
    workerHolding,
  }) => {
    const inspector = new Inspector(mq);
    const { id } = await q.enqueue({ to: 'a@example.com' }, { name: 'send-email' });
    const worker = await workerHolding(name, 500);
    const alive = await inspector.stats(name);
    expect(alive.consumers).toHaveLength(1);
    expect(alive.consumers[0]!.alive).toBe(true);
    expect(alive.expiredLeases).toBe(0);
    const [running] = (await inspector.jobs(name, 'active')).jobs;
    expect(running!.leaseExpired).toBe(false);
    expect(running!.leaseUntil).toBeGreaterThan(running!.startedAt ?? 0);

    worker.kill('SIGKILL');
    // Nobody else consumes this queue: the job stays active, its lease runs out, the beats stop.
    const stats = await poll(
      () => inspector.stats(name),
      (s) => s.expiredLeases === 1 && s.consumers[0]?.alive === false,
      'the lease expired and the consumer missed 3 beats',
      15_000,
    );
    expect(stats.consumers[0]!.silentMs).toBeGreaterThan(3 * stats.consumers[0]!.beatMs);
    const [stuck] = (await inspector.jobs(name, 'active')).jobs;
    expect(stuck).toMatchObject({ id, leaseExpired: true });
    expect((await inspector.job(name, id))?.leaseExpired).toBe(true);

    const shown = await echomq(['stats', name]);
    expect(shown.code).toBe(0);
    expect(shown.stdout).toContain('expired leases: 1 active job(s) past their lease deadline');
    expect(shown.stdout).toContain(`echomq recover ${name}`);
    expect(shown.stdout).toMatch(/0 alive, 1 dead \(no beat for 3 beats\)/);
    expect(shown.stdout).toMatch(/dead \(silent \d/);
    const listed = await echomq(['jobs', name, '--state', 'active']);
    expect(listed.stdout).toMatch(/LEASE/);
    expect(listed.stdout).toMatch(new RegExp(`${id}.*EXPIRED .* ago`));
    const detail = await echomq(['job', name, id]);
    expect(detail.stdout).toMatch(/lease\s+EXPIRED/);

    const recovered = await echomq(['recover', name]);
    expect(recovered.code).toBe(0);
    expect(recovered.stdout).toContain(`recovered 1 job(s) whose lease had expired: pending again`);
    expect(recovered.stdout).toContain(id);
    expect(await q.get(id)).toMatchObject({ state: 'pending' });
    const again = await echomq(['recover', name, '--json']);
    expect(JSON.parse(again.stdout)).toEqual({ recovered: 0, ids: [] });
  }, 180_000);
});

describe('a consumer that closes', () => {
  it('leaves the list at once (not after 10 minutes)', async ({ mq, q, queueName: name }) => {
    const inspector = new Inspector(mq);
    const c = q.consume(async () => 'ok', { beatMs: 50 });
    await poll(
      () => inspector.consumers(name),
      (list) => list.length === 1,
      'the consumer beat',
    );
    await c.close();
    expect(await inspector.consumers(name)).toEqual([]);
  });
});

describe('echomq cancel of a running job', () => {
  it('says what really happens: the signal aborts, a handler that ignores it completes the job', async ({
    q,
    queueName: name,
  }) => {
    let started!: () => void;
    const running = new Promise<void>((r) => {
      started = r;
    });
    const c = q.consume(async () => {
      started();
      await new Promise(() => {});
    });
    const { id } = await q.enqueue({});
    await running;
    const r = await echomq(['cancel', name, id]);
    await c.close({ timeoutMs: 0 });
    expect(r.code).toBe(0);
    expect(r.stdout).toContain('ctx.signal aborts at the next lease extension or ctx.checkpoint()');
    expect(r.stdout).toContain('a handler that ignores the signal completes it');
  }, 120_000);
});

describe('the oldest waiting job', () => {
  it('per queue and per lane: in stats, the CLI, and the Prometheus gauges; a dead-letter counter', async ({
    mq,
    q,
    queueName: name,
    raw,
  }) => {
    const { Registry } = await import('prom-client');
    const { registerMetrics } = await import('../../src/telemetry/metrics.js');
    const inspector = new Inspector(mq);
    expect((await inspector.stats(name)).oldestWaitingMs).toBeNull();
    // A paused lane holds a job enqueued 15 minutes ago (its row says so); a flat job is fresh.
    await q.lanes.pause('tenant-a');
    const { id: old } = await q.enqueue({ n: 1 }, { group: 'tenant-a' });
    const [s, us] = await raw.time();
    const now = Number(s) * 1000 + Math.floor(Number(us) / 1000);
    await raw.hset(q.keys.job(old), 'created', String(now - 15 * 60_000));
    await q.enqueue({ n: 2 }, { attempts: 1 });
    const stats = await inspector.stats(name);
    expect(stats.lanesOldestWaitingMs['tenant-a']).toBeGreaterThanOrEqual(15 * 60_000);
    expect(stats.oldestWaitingMs).toBe(stats.lanesOldestWaitingMs['tenant-a']);
    expect((await inspector.queues()).find((x) => x.name === name)?.oldestWaitingMs).toBeGreaterThanOrEqual(
      15 * 60_000,
    );

    const registry = new Registry();
    const metrics = registerMetrics(registry, { mq, queues: [name] });
    await metrics.ready();
    const c = q.consume(
      () => {
        throw new Error('bounced');
      },
      { beatMs: 50 },
    );
    await q.enqueue({ n: 3 }, { attempts: 1 });
    await poll(
      async () => (await q.counts()).dead,
      (n) => n === 2,
      'both flat jobs dead',
    );
    await c.close();
    const text = await poll(
      () => registry.metrics(),
      (t) => t.includes(`echomq_jobs_dead_lettered_total{queue="${name}"} 2`),
      'the dead-letter counter',
    );
    const gauge = (metric: string) => Number(new RegExp(`${metric}\\{[^}]*\\} ([\\d.]+)`).exec(text)?.[1]);
    expect(gauge('echomq_oldest_waiting_seconds')).toBeGreaterThanOrEqual(900);
    expect(text).toMatch(
      new RegExp(`echomq_lane_oldest_waiting_seconds\\{queue="${name}",lane="tenant-a"\\} 9\\d\\d`),
    );
    await metrics.close();

    const shown = await echomq(['stats', name]);
    expect(shown.stdout).toMatch(/oldest waiting job: waited 15m/);
    expect(shown.stdout).toMatch(/tenant-a\s+1\s+15m/);
    const listed = await echomq(['queues']);
    expect(listed.stdout).toContain('OLDEST WAIT');
    expect(listed.stdout).toMatch(new RegExp(`${name}\\s.*15m`));
  }, 120_000);
});

describe('finding jobs from the CLI', () => {
  it('jobs --name, --grep, --lane and BullMQ state names; | head exits quietly', async ({
    q,
    queueName: name,
  }) => {
    await q.enqueue({ to: 'ada@example.com' }, { name: 'welcome' });
    await q.enqueue({ to: 'bob@example.com' }, { name: 'welcome' });
    await q.enqueue({ to: 'ada@example.com' }, { name: 'receipt', group: 'tenant-a' });
    await q.enqueueIn({ to: 'cy@example.com' }, 60_000, { name: 'reminder' });

    const byName = await echomq(['jobs', name, '--name', 'welcome', '--json']);
    expect(byName.code).toBe(0);
    const named = JSON.parse(byName.stdout) as { total: number; scanned: number; jobs: { name: string }[] };
    expect(named.jobs.map((j) => j.name)).toEqual(['welcome', 'welcome']);
    expect(named.scanned).toBe(3);

    const byText = await echomq(['jobs', name, '--grep', 'ADA@']);
    expect(byText.stdout).toMatch(/pending jobs with containing "ADA@": 2 found in 3 read of 3/);
    const inLane = await echomq(['jobs', name, '--lane', 'tenant-a', '--grep', 'ada']);
    expect(inLane.stdout).toContain('1 found in 1 read of 1');
    expect(inLane.stdout).toContain('receipt');

    // BullMQ's names: delayed is scheduled, waiting is pending, failed is dead.
    const delayed = await echomq(['jobs', name, '--state', 'delayed']);
    expect(delayed.stdout).toMatch(/^scheduled: 1-1 of 1/);
    const waiting = await echomq(['jobs', name, '--state', 'waiting', '--json']);
    expect((JSON.parse(waiting.stdout) as { total: number }).total).toBe(3);
    const failed = await echomq(['jobs', name, '--state', 'failed']);
    expect(failed.stdout).toContain(`no dead jobs in queue ${name}`);

    // A reader that goes away (| head -1): exit 0, no EPIPE stack.
    const piped = await runProcess(
      'bash',
      ['-c', `node --import tsx src/cli/index.ts stats ${name} --watch 1 | head -1`],
      60_000,
      { ...process.env, REDIS_URL: env.server.url, NO_COLOR: '1' },
    );
    expect(piped.stdout.trim()).toBe(`queue ${name}`);
    expect(piped.stderr).not.toMatch(/EPIPE|Error/);
    expect(piped.code).toBe(0);
  }, 180_000);

  it('tail --event and --name keep only those events', async ({ q, queueName: name }) => {
    await q.enqueue({}, { name: 'welcome' });
    await q.enqueue({}, { name: 'receipt' });
    const c = q.consume(async () => 'ok', { beatMs: 50 });
    await poll(
      async () => (await q.counts()).completed,
      (n) => n === 2,
      'both completed',
    );
    await c.close();
    const r = await echomq([
      'tail',
      name,
      '--from',
      '0',
      '--event',
      'completed,added',
      '--name',
      'receipt',
      '--count',
      '2',
      '--json',
    ]);
    expect(r.code).toBe(0);
    const events = r.stdout
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as { event: string });
    expect(events.map((e) => e.event)).toEqual(['added', 'completed']);
  }, 120_000);
});
