// The `echomq` command run as a child process, the bin as built (node dist/cli/index.js; `npm
// test` builds first, and the file refuses a build older than src/), with REDIS_URL pointing at
// this file's redis-server: what each command prints (tables and --json), the state it leaves,
// and its exit code (0 ok, 1 usage or bad input, 2 not found, 3 no server).
import { type ChildProcess, spawn } from 'node:child_process';
import { readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import type { Redis } from 'ioredis';
import { beforeAll, describe, expect } from 'vitest';
import { parseDuration } from '../../src/core/duration.js';
import type { EnqueueOptions } from '../../src/core/types.js';
import { EchoMQ } from '../../src/queue/echomq.js';
import type { Queue } from '../../src/queue/queue.js';
import { queueTest, uniqueQueue, useRedisServer } from '../support/harness.js';
import { freePort } from '../support/redis-server.js';
import { ROOT } from '../support/run-process.js';

const env = useRedisServer();
/**
 * Every CLI run is a fresh node process: under a second on an idle machine, tens of seconds on
 * a loaded 2-core one (a test makes up to 11). Tests run a few at once and get time for that as
 * a guard against a hang; none of them sleeps, none measures how long a run took.
 */
const CHILD_PROCESSES = { concurrent: true, timeout: 480_000 };

/** The `echomq` bin (package.json "bin"), as `npm run build` writes it. */
const BIN = join(ROOT, 'dist', 'cli', 'index.js');

beforeAll(() => {
  // From source under tsx each run took 2-3 times as long (tsx's loader in every process).
  const built = statSync(BIN, { throwIfNoEntry: false })?.mtimeMs ?? 0;
  const src = join(ROOT, 'src');
  const newer = readdirSync(src, { recursive: true, encoding: 'utf8' }).filter(
    (f) => f.endsWith('.ts') && statSync(join(src, f)).mtimeMs > built,
  );
  if (newer.length > 0) {
    throw new Error(`${BIN} is older than src/${newer[0]} (or missing): run npm run build first`);
  }
});

/**
 * queueTest (each test its own EchoMQ, raw client and queue `q`), `newQueue()` for more queues,
 * and `live(args)`: a long-running CLI (tail, dashboard), killed after the test if still running.
 */
const it = queueTest(env, 'cli').extend<{ newQueue: () => Queue; live: typeof live }>({
  newQueue: async ({ mq }, use) => use(() => mq.queue(uniqueQueue('cli'))),
  // biome-ignore lint/correctness/noEmptyPattern: vitest reads a fixture's dependencies from this pattern
  live: async ({}, use) => {
    const started: ChildProcess[] = [];
    try {
      await use((args, extra) => {
        const l = live(args, extra);
        started.push(l.child);
        return l;
      });
    } finally {
      for (const c of started) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
    }
  },
});

// ── helpers ─────────────────────────────────────────────────────────────────────

interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
}

function childEnv(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  // The dashboard's credentials come from the test, never from the environment it runs in.
  const { ECHOMQ_BEARER: _bearer, ECHOMQ_BASIC_AUTH: _basic, ...inherited } = process.env;
  const e: NodeJS.ProcessEnv = { ...inherited, REDIS_URL: env.server.url, NO_COLOR: '1', ...extra };
  if (extra.FORCE_COLOR === undefined) delete e.FORCE_COLOR;
  return e;
}

function start(args: string[], extra: Record<string, string> = {}): ChildProcess {
  return spawn(process.execPath, [BIN, ...args], {
    cwd: ROOT,
    env: childEnv(extra),
    stdio: ['ignore', 'pipe', 'pipe'],
  });
}

/** Runs the CLI to its end (piped, so not a TTY). */
function cli(args: string[], extra: Record<string, string> = {}): Promise<Run> {
  const child = start(args, extra);
  let stdout = '';
  let stderr = '';
  child.stdout?.on('data', (d) => {
    stdout += d;
  });
  child.stderr?.on('data', (d) => {
    stderr += d;
  });
  return new Promise((resolve, reject) => {
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, stdout, stderr }));
  });
}

/** A long-running CLI (tail, dashboard): its output so far, and a wait for some of it. */
function live(args: string[], extra: Record<string, string> = {}) {
  const child = start(args, extra);
  const out = { stdout: '', stderr: '' };
  const waiters: (() => void)[] = [];
  const poke = () => {
    for (const w of waiters.splice(0)) w();
  };
  child.stdout?.on('data', (d) => {
    out.stdout += d;
    poke();
  });
  child.stderr?.on('data', (d) => {
    out.stderr += d;
    poke();
  });
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.on('close', (code, signal) => resolve({ code, signal })),
  );
  return {
    child,
    out,
    exited,
    /** Resolves once `ok` holds for the output; fails when the process ends first. */
    async until(ok: (o: typeof out) => boolean, what: string): Promise<void> {
      let ended = false;
      void exited.then(() => {
        ended = true;
        poke();
      });
      while (!ok(out)) {
        if (ended) throw new Error(`the CLI exited before ${what}: ${JSON.stringify(out)}`);
        await new Promise<void>((r) => waiters.push(r));
      }
    },
  };
}

interface Claimed {
  id: string;
  token: number;
}

async function claim(q: Queue, n: number): Promise<Claimed[]> {
  const [flat] = (await q.run('claim', [q.keys.prefix, n, 60_000])) as [(string | number)[], string];
  const out: Claimed[] = [];
  for (let i = 0; i < flat.length; i += 7) out.push({ id: String(flat[i]), token: Number(flat[i + 1]) });
  return out;
}

async function deadJobs(q: Queue, n: number, opts: EnqueueOptions = {}): Promise<string[]> {
  const made = await q.enqueueMany(
    Array.from({ length: n }, (_, i) => ({ data: { i }, opts: { attempts: 1, ...opts } })),
  );
  const jobs = await claim(q, n);
  await Promise.all(
    jobs.map((j) => q.run('fail', [q.keys.prefix, j.id, j.token, `boom ${j.id}`, '', 0], j.id)),
  );
  return made.map((m) => m.id);
}

async function completedJobs(q: Queue, n: number): Promise<string[]> {
  const made = await q.enqueueMany(Array.from({ length: n }, (_, i) => ({ data: { i } })));
  for (const j of await claim(q, n))
    await q.run('complete', [q.keys.prefix, 60_000, 0, j.id, j.token, '"ok"']);
  return made.map((m) => m.id);
}

/** The server's clock, in ms. */
async function serverNow(raw: Redis): Promise<number> {
  const [s, us] = await raw.time();
  return Number(s) * 1000 + Math.floor(Number(us) / 1000);
}

// ── durations ───────────────────────────────────────────────────────────────────

describe('parseDuration', () => {
  it('reads ms, s, m, h and d, and bare numbers as ms', () => {
    expect(['500ms', '5s', '10m', '1h', '2d', '250'].map(parseDuration)).toEqual([
      500, 5000, 600_000, 3_600_000, 172_800_000, 250,
    ]);
  });

  it('refuses fractions, negatives and unknown units with an example of what works', () => {
    for (const bad of ['1.5h', '-5s', '5x', '', 'h']) {
      expect(() => parseDuration(bad)).toThrow(/e\.g\. 500ms, 5s, 10m, 1h/);
    }
  });
});

// ── usage ───────────────────────────────────────────────────────────────────────

describe('usage', CHILD_PROCESSES, () => {
  it('lists every command in --help and exits 0', async () => {
    const r = await cli(['--help']);
    expect(r.code).toBe(0);
    for (const c of [
      'queues',
      'stats',
      'jobs',
      'job',
      'retry',
      'cancel',
      'remove',
      'pause',
      'resume',
      'clean',
      'migrate',
    ]) {
      expect(r.stdout).toContain(c);
    }
    for (const c of ['schedulers', 'tail', 'enqueue', 'dashboard', 'bench', '--url', '--json']) {
      expect(r.stdout).toContain(c);
    }
  });

  it('exits 1 on an unknown command or a bad option value, saying what is wrong', async () => {
    const unknown = await cli(['frobnicate']);
    expect(unknown.code).toBe(1);
    expect(unknown.stderr).toContain("unknown command 'frobnicate'");
    const badState = await cli(['jobs', 'q', '--state', 'bogus']);
    expect(badState.code).toBe(1);
    expect(badState.stderr).toContain('expected one of scheduled, pending');
    expect(badState.stderr).toContain('failed, delayed, waiting');
    const badLimit = await cli(['jobs', 'q', '--limit', '0']);
    expect(badLimit.code).toBe(1);
    expect(badLimit.stderr).toContain('expected a whole number from 1 to 1000');
  });

  it('exits 3 when no server answers, saying to start redis-server or pass --url', async () => {
    const port = await freePort();
    const r = await cli(['--url', `redis://127.0.0.1:${port}`, 'queues']);
    expect(r.code).toBe(3);
    expect(r.stderr).toContain(`cannot reach Redis at redis://127.0.0.1:${port}`);
    expect(r.stderr).toContain('start redis-server, or pass --url');
    const viaEnv = await cli(['stats', 'q'], { REDIS_URL: `redis://user:secret@127.0.0.1:${port}` });
    expect(viaEnv.code).toBe(3);
    expect(viaEnv.stderr).toContain(`redis://user:***@127.0.0.1:${port}`);
    expect(viaEnv.stderr).not.toContain('secret');
  });
});

// ── reading ─────────────────────────────────────────────────────────────────────

describe('queues, stats, jobs, job, schedulers', CHILD_PROCESSES, () => {
  it('queues prints a table of every queue with its counts, and --json the summaries', async ({ q }) => {
    await deadJobs(q, 2);
    await q.enqueue({}, { group: 'g1' });

    const text = await cli(['queues']);
    expect(text.code).toBe(0);
    expect(text.stdout).toMatch(/^QUEUE\s+SCHEDULED\s+PENDING\s+ACTIVE\s+COMPLETED\s+DEAD\s+CANCELLED/);
    expect(text.stdout).toMatch(new RegExp(`^${q.name}\\s+0\\s+1\\s+0\\s+0\\s+2\\s+0`, 'm'));

    const json = await cli(['queues', '--json']);
    expect(json.code).toBe(0);
    const mine = (JSON.parse(json.stdout) as { name: string }[]).find((s) => s.name === q.name);
    expect(mine).toMatchObject({ counts: { pending: 1, dead: 2 }, paused: false, lanes: 1 });
  });

  it('stats prints counts per state and lane, rates and consumers; --json the QueueStats', async ({ q }) => {
    await completedJobs(q, 3);
    await deadJobs(q, 1);
    await q.enqueue({}, { group: 'emails' });
    await q.lanes.configure('emails', { concurrency: 2, rateLimit: { max: 5, perMs: 1000 } });
    await q.run('heartbeat', [
      q.keys.prefix,
      'box:42:abc',
      JSON.stringify({ host: 'box', pid: 42, concurrency: 8, running: 3 }),
    ]);

    const text = await cli(['stats', q.name]);
    expect(text.code).toBe(0);
    expect(text.stdout).toMatch(/^completed\s+3$/m);
    expect(text.stdout).toMatch(/^dead\s+1$/m);
    // The lane's row: pending, how long its next job has waited, running, concurrency, rate.
    expect(text.stdout).toMatch(/^emails\s+1\s+\d+(ms|s|m)\s+0\s+2\s+5\/1s/m);
    expect(text.stdout).toContain('completed 3  failed 1  failure rate 25.0%');
    expect(text.stdout).toMatch(/^box:42:abc\s+box\s+42\s+3\/8/m);

    const json = await cli(['stats', q.name, '--json']);
    const st = JSON.parse(json.stdout);
    expect(st).toMatchObject({ name: q.name, counts: { completed: 3, dead: 1, pending: 1 }, paused: false });
    expect(st.rates.perMinute).toHaveLength(60);
    expect(st.rates).toMatchObject({ completedLastHour: 3, failedLastHour: 1, failureRate: 0.25 });
    expect(st.consumers).toEqual([expect.objectContaining({ id: 'box:42:abc', running: 3 })]);
  });

  it('stats of an unknown queue exits 2 and names the queues there are', async ({ q }) => {
    await q.enqueue({});
    const r = await cli(['stats', 'no-such-queue']);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('no queue "no-such-queue"');
    expect(r.stderr).toContain(q.name);
    expect(r.stderr).toContain('`echomq queues` lists them');
  });

  it('jobs pages through a state newest first with --limit and --offset, and --json gives total and rows', async ({
    raw,
    q,
    key,
  }) => {
    const ids = await deadJobs(q, 3);
    const now = await serverNow(raw);
    await raw.zadd(key('dead'), now - 3, ids[0]!, now - 2, ids[1]!, now - 1, ids[2]!);

    const first = await cli(['jobs', q.name, '--state', 'dead', '--limit', '2']);
    expect(first.code).toBe(0);
    expect(first.stdout).toContain('dead: 1-2 of 3');
    expect(first.stdout).toMatch(/^ID\s+NAME\s+GROUP\s+ATTEMPTS\s+FINISHED\s+ERROR/m);
    expect(first.stdout.indexOf(ids[2]!)).toBeLessThan(first.stdout.indexOf(ids[1]!));
    expect(first.stdout).not.toContain(ids[0]!);
    expect(first.stdout).toContain(`boom ${ids[2]}`);
    expect(first.stdout).toContain('next page: --offset 2');

    const json = await cli(['jobs', q.name, '--state', 'dead', '--offset', '2', '--json']);
    const page = JSON.parse(json.stdout);
    expect(page.total).toBe(3);
    expect(page.jobs.map((j: { id: string }) => j.id)).toEqual([ids[0]]);
  });

  it('jobs --group lists one lane of pending, and refuses --group with another state (exit 1)', async ({
    q,
  }) => {
    await q.enqueue({}, { id: 'JOBflat' });
    await q.enqueue({}, { id: 'JOBlane', group: 'g1' });
    const lane = await cli(['jobs', q.name, '--group', 'g1', '--json']);
    expect(JSON.parse(lane.stdout)).toMatchObject({ total: 1, jobs: [{ id: 'JOBlane', group: 'g1' }] });
    const all = await cli(['jobs', q.name]);
    expect(all.stdout).toContain('pending: 1-2 of 2');
    const bad = await cli(['jobs', q.name, '--state', 'dead', '--group', 'g1']);
    expect(bad.code).toBe(1);
    expect(bad.stderr).toContain('--group applies to --state pending only');
  });

  it('job prints the row and its history; an unknown or malformed id exits 2', async ({ q }) => {
    const [id] = await deadJobs(q, 1);
    const text = await cli(['job', q.name, id!]);
    expect(text.code).toBe(0);
    expect(text.stdout).toContain(`${id}  dead`);
    expect(text.stdout).toMatch(/attempts\s+1\/1/);
    expect(text.stdout).toContain(`error       boom ${id}`);
    expect(text.stdout).toMatch(/history \(4 events/);
    expect(text.stdout).toMatch(/added[\s\S]*active[\s\S]*failed[\s\S]*retries_exhausted/);

    const json = JSON.parse((await cli(['job', q.name, id!, '--json'])).stdout);
    expect(json).toMatchObject({ id, state: 'dead', data: { i: 0 } });
    expect(json.history.map((e: { event: string }) => e.event)).toEqual([
      'added',
      'active',
      'failed',
      'retries_exhausted',
    ]);

    const missing = await cli(['job', q.name, 'JOBnope']);
    expect(missing.code).toBe(2);
    expect(missing.stderr).toContain(`no job JOBnope in queue ${q.name}`);
    const malformed = await cli(['job', q.name, 'nope']);
    expect(malformed.code).toBe(2);
    expect(malformed.stderr).toContain('job ids start with JOB');
  });

  it('schedulers lists fixed cadences and job schedulers, and --json both lists', async ({ q }) => {
    await q.repeat.register('heartbeat', 30_000, {});
    await q.schedulers.upsert('nightly-report', { pattern: '0 3 * * *', tz: 'UTC' });
    const text = await cli(['schedulers', q.name]);
    expect(text.code).toBe(0);
    expect(text.stdout).toMatch(/^heartbeat\s+30s\s+/m);
    expect(text.stdout).toMatch(/^nightly-report\s+0 3 \* \* \* \(UTC\)\s+/m);
    const json = JSON.parse((await cli(['schedulers', q.name, '--json'])).stdout);
    expect(json.repeats).toEqual([expect.objectContaining({ name: 'heartbeat', everyMs: 30_000 })]);
    expect(json.schedulers).toEqual([
      expect.objectContaining({ id: 'nightly-report', pattern: '0 3 * * *' }),
    ]);
  });
});

// ── writing ─────────────────────────────────────────────────────────────────────

describe('retry, cancel, remove, pause, resume, clean, enqueue', CHILD_PROCESSES, () => {
  it('retry returns one dead job to pending; a pending one exits 1, an unknown one 2', async ({ q }) => {
    const [id] = await deadJobs(q, 1);
    const ok = await cli(['retry', q.name, id!]);
    expect(ok.code).toBe(0);
    expect(ok.stdout).toContain(`retried ${id}`);
    expect(await q.get(id!)).toMatchObject({
      state: 'pending',
      attempts: 0,
      lastError: { message: `boom ${id}` },
    });

    const again = await cli(['retry', q.name, id!]);
    expect(again.code).toBe(1);
    expect(again.stderr).toContain(`job ${id} is pending: only a job that ended can be retried`);
    expect((await cli(['retry', q.name, 'JOBnope'])).code).toBe(2);
    const neither = await cli(['retry', q.name]);
    expect(neither.code).toBe(1);
    expect(neither.stderr).toContain('give a job id or one of --all-dead, --all-cancelled');
  });

  it('promote runs a scheduled job now; reschedule moves it; logs and job show its log lines', async ({
    raw,
    q,
  }) => {
    const { id } = await q.enqueueIn({}, 3_600_000);
    const moved = await cli(['reschedule', q.name, id, '--in', '2h']);
    expect(moved.code).toBe(0);
    expect(moved.stdout).toContain(`rescheduled ${id} to run at`);
    const runAt = (await q.get(id))!.runAt!;
    const [s] = await raw.time();
    expect(runAt).toBeGreaterThan(Number(s) * 1000 + 3_600_000);
    expect((await cli(['reschedule', q.name, id])).code).toBe(1);
    const ok = await cli(['promote', q.name, id]);
    expect(ok.code).toBe(0);
    expect(ok.stdout).toContain(`promoted ${id}: it is pending now`);
    const again = await cli(['promote', q.name, id]);
    expect(again.code).toBe(1);
    expect(again.stderr).toContain(`job ${id} is pending: only a scheduled job can be promoted`);
    expect((await cli(['promote', q.name, 'JOBnope'])).code).toBe(2);

    const c = q.consume((_job, ctx) => {
      for (let i = 1; i <= 3; i++) ctx.log(`line ${i}`);
    });
    await q.waitFor(id, { timeoutMs: 10_000 });
    await c.close();
    const logs = await cli(['logs', q.name, id, '--from', '1']);
    expect(logs.code).toBe(0);
    expect(logs.stdout.trimEnd().split('\n')).toEqual([`${id}: lines 2-3 of 3`, 'line 2', 'line 3']);
    const json = await cli(['--json', 'logs', q.name, id, '--count', '1']);
    expect(JSON.parse(json.stdout)).toEqual({ id, from: 0, logs: ['line 1'], count: 3 });
    const job = await cli(['job', q.name, id]);
    expect(job.stdout).toContain('logs (3 lines; all of them: echomq logs)\n  line 1\n  line 2\n  line 3');
    expect((await cli(['logs', q.name, 'JOBnope'])).code).toBe(2);
    const vip = await q.enqueue({}, { tags: ['vip'] });
    await q.enqueue({});
    const tagged = await cli(['jobs', q.name, '--state', 'pending', '--tag', 'vip']);
    expect(tagged.stdout).toContain('pending tagged vip: 1-1 of 1');
    expect(tagged.stdout).toContain(vip.id);
  });

  it('jobs --tag combines with --name, --grep, --error and --lane', async ({ q }) => {
    const hit = await q.enqueue({ to: 'ada@example.com' }, { name: 'mail', tags: ['vip'], group: 'acme' });
    await q.enqueue({ to: 'ada@example.com' }, { name: 'mail', group: 'acme' }); // no tag
    await q.enqueue({ to: 'bob@example.com' }, { name: 'mail', tags: ['vip'], group: 'acme' }); // no ada
    await q.enqueue({ to: 'ada@example.com' }, { name: 'sms', tags: ['vip'], group: 'acme' }); // other name
    await q.enqueue({ to: 'ada@example.com' }, { name: 'mail', tags: ['vip'], group: 'other' }); // other lane
    const found = await cli([
      'jobs',
      q.name,
      '--tag',
      'vip',
      '--name',
      'mail',
      '--grep',
      'ADA',
      '--lane',
      'acme',
    ]);
    expect(found.code).toBe(0);
    expect(found.stdout).toContain(
      'pending in lane acme jobs with name mail, tag vip, containing "ADA": 1 found in 4 read of 4',
    );
    expect(found.stdout).toContain(hit.id);
    const json = JSON.parse((await cli(['--json', 'jobs', q.name, '--tag', 'vip', '--grep', 'ada'])).stdout);
    expect(json.jobs.map((j: { name: string }) => j.name).sort()).toEqual(['mail', 'mail', 'sms']);
    const laneTag = await cli(['jobs', q.name, '--tag', 'vip', '--lane', 'acme']);
    expect(laneTag.stdout).toContain('pending in lane acme tagged vip: 1-3 of 3');
    const noLane = await cli(['jobs', q.name, '--state', 'dead', '--lane', 'acme', '--name', 'mail']);
    expect(noLane.code).toBe(1);
    expect(noLane.stderr).toContain('--group applies to --state pending only');
  });

  it('drain and obliterate ask first (refusing without --yes off a terminal), then empty the queue', async ({
    raw,
    q,
    key,
  }) => {
    await q.enqueueMany(Array.from({ length: 30 }, (_, i) => ({ data: i })));
    await q.enqueueIn({}, 60_000);
    const asked = await cli(['drain', q.name]);
    expect(asked.code).toBe(1);
    expect(asked.stderr).toContain(`Delete the 30 waiting jobs of queue ${q.name}? Pass --yes to confirm`);
    expect((await q.counts()).pending).toBe(30);
    const drained = await cli(['drain', q.name, '--yes', '--batch', '10']);
    expect(drained.code).toBe(0);
    expect(drained.stdout).toContain(`deleted 30 waiting jobs of queue ${q.name}`);
    expect(drained.stderr).toContain(`draining ${q.name} 30/30 (100%)`);
    expect(await q.counts()).toMatchObject({ pending: 0, scheduled: 1 });

    expect((await cli(['obliterate', q.name])).code).toBe(1);
    const gone = await cli(['--json', 'obliterate', q.name, '-y', '--batch', '5']);
    expect(gone.code).toBe(0);
    expect(JSON.parse(gone.stdout)).toMatchObject({ queue: q.name });
    expect(await raw.keys(key('*'))).toEqual([]);
    expect((await cli(['obliterate', q.name, '--yes'])).code).toBe(2); // no such queue any more
  });

  it('retry --all-dead of 1,200 dead jobs, piped, prints a plain progress line per batch of 500', async ({
    q,
  }) => {
    await deadJobs(q, 1200);
    const r = await cli(['retry', q.name, '--all-dead']);
    expect(r.code).toBe(0);
    expect(r.stderr.split('\n').filter(Boolean)).toEqual([
      'retrying dead jobs 500/1200 (41%)',
      'retrying dead jobs 1000/1200 (83%)',
      'retrying dead jobs 1200/1200 (100%)',
    ]);
    expect(r.stderr).not.toContain('\r');
    expect(r.stdout).toBe(`retried 1200 dead jobs in queue ${q.name}\n`);
    expect(await q.counts()).toMatchObject({ dead: 0, pending: 1200 });

    const json = await cli(['retry', q.name, '--all-dead', '--json']);
    expect(JSON.parse(json.stdout)).toEqual({ state: 'dead', retried: 0, total: 0 });
  });

  it('cancel ends a waiting job; an ended one exits 1 and an unknown one 2', async ({ q }) => {
    const { id } = await q.enqueue({});
    const r = await cli(['cancel', q.name, id, '--json']);
    expect(r.code).toBe(0);
    expect(JSON.parse(r.stdout)).toEqual({ id, status: 'cancelled' });
    expect((await q.get(id))?.state).toBe('cancelled');
    const ended = await cli(['cancel', q.name, id]);
    expect(ended.code).toBe(1);
    expect(ended.stderr).toContain('already ended cancelled');
    expect((await cli(['cancel', q.name, 'JOBnope'])).code).toBe(2);
  });

  it('remove deletes a job, and exits 2 for one that is not there', async ({ q }) => {
    const { id } = await q.enqueue({});
    const r = await cli(['remove', q.name, id]);
    expect(r.code).toBe(0);
    expect(r.stdout).toBe(`removed ${id}\n`);
    expect(await q.get(id)).toBeNull();
    const again = await cli(['remove', q.name, id]);
    expect(again.code).toBe(2);
    expect(again.stderr).toContain(`no job ${id} in queue ${q.name}`);
  });

  it('migrate --check names the consumers that hold a step back; migrate steps up once none is alive', async ({
    raw,
    q,
    key,
    others,
  }) => {
    // The queue is stamped 1, as a fleet beside a release that speaks 1 only stamps it.
    const v1 = await EchoMQ.connect({ url: env.server.url, protocolVersion: 1 });
    others.push(v1);
    await v1.queue(q.name).enqueue({});
    const now = Number((await raw.time())[0]) * 1000;
    // A consumer of the previous release: its heartbeat info lists no protocols (version 1 only).
    await raw.zadd(key('consumers'), now, 'old-1');
    await raw.hset(key('consumers:info'), 'old-1', JSON.stringify({ host: 'box', pid: 7, beatMs: 1000 }));
    const check = await cli(['migrate', q.name, '--check']);
    expect(check.code).toBe(0);
    expect(check.stdout).toContain(`queue ${q.name}: protocol 1; 1 consumer(s) alive`);
    expect(check.stdout).toMatch(/old-1 \(box pid 7\) speaks 1, beat \d+ ms ago/);
    expect(check.stdout).toContain('1 alive consumer(s) speak no 2: upgrade or stop them first');
    const refused = await cli(['migrate', q.name]);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toMatch(/EMQFLEET.*consumer old-1 \(box pid 7\) speaks protocol 1, not 2/);
    expect(await raw.hget(key('meta'), 'version')).toBe('1');
    await raw.zadd(key('consumers'), now - 120_000, 'old-1'); // silent for two minutes: gone
    const stepped = await cli(['migrate', q.name, '--json']);
    expect(JSON.parse(stepped.stdout)).toEqual({ queue: q.name, from: 1, version: 2, consumers: 0 });
    expect(await raw.hget(key('meta'), 'version')).toBe('2');
    expect((await cli(['migrate', q.name])).stdout).toBe(
      `queue ${q.name} is at protocol 2 already: nothing to do\n`,
    );
  });

  it('pause and resume the whole queue, or one lane with --group', async ({ raw, q, key }) => {
    await q.enqueue({}, { group: 'g1' });
    expect((await cli(['pause', q.name])).stdout).toBe(`paused queue ${q.name}\n`);
    expect(await q.isPaused()).toBe(true);
    const lane = await cli(['pause', q.name, '--group', 'g1', '--json']);
    expect(JSON.parse(lane.stdout)).toEqual({ queue: q.name, group: 'g1', status: 'paused', changed: true });
    expect(await raw.sismember(key('lanes:paused'), 'g1')).toBe(1);
    expect((await cli(['resume', q.name])).code).toBe(0);
    expect((await cli(['resume', q.name, '--group', 'g1'])).code).toBe(0);
    expect(await q.isPaused()).toBe(false);
    expect(await raw.sismember(key('lanes:paused'), 'g1')).toBe(0);
  });

  it('clean deletes ended jobs older than --older-than, up to --limit, in batches with progress', async ({
    q,
  }) => {
    await completedJobs(q, 5);
    const young = await cli(['clean', q.name, '--state', 'completed', '--older-than', '1h']);
    expect(young.code).toBe(0);
    expect(young.stdout).toBe(`no completed jobs that ended over 1h ago in queue ${q.name}\n`);

    const some = await cli(['clean', q.name, '--limit', '3', '--batch', '2', '--json']);
    expect(some.code).toBe(0);
    expect(JSON.parse(some.stdout)).toEqual({ state: 'completed', deleted: 3 });
    expect(some.stderr.split('\n').filter(Boolean)).toEqual([
      'cleaning completed jobs 2/3 (66%)',
      'cleaning completed jobs 3/3 (100%)',
    ]);
    expect((await q.counts()).completed).toBe(2);
    const bad = await cli(['clean', q.name, '--older-than', '1.5h']);
    expect(bad.code).toBe(1);
    expect(bad.stderr).toContain('cannot read duration "1.5h"');
  });

  it('enqueue adds a job now, --in a delay on the server clock, or --at an instant', async ({ raw, q }) => {
    const now = await cli([
      'enqueue',
      q.name,
      '--data',
      '{"to":"a@b.c"}',
      '--name',
      'email',
      '--group',
      'g1',
      '--priority',
      '2',
      '--json',
    ]);
    expect(now.code).toBe(0);
    const added = JSON.parse(now.stdout);
    expect(added.status).toBe('enqueued');
    expect(await q.get(added.id)).toMatchObject({
      state: 'pending',
      data: { to: 'a@b.c' },
      name: 'email',
      group: 'g1',
      priority: 2,
    });

    // The run-at is the server's clock when the CLI enqueued, + 5 s: between the server's clock
    // before the CLI started and after it ended, + 5 s, however long the process took to start.
    const before = await serverNow(raw);
    const later = await cli(['enqueue', q.name, '--in', '5s']);
    const after = await serverNow(raw);
    expect(later.stdout).toMatch(/^scheduled JOB\S+ in queue \S+ to run in 5s\n$/);
    const laterJob = await q.get(later.stdout.split(' ')[1]!);
    expect(laterJob?.state).toBe('scheduled');
    expect(laterJob?.runAt).toBeGreaterThanOrEqual(before + 5000);
    expect(laterJob?.runAt).toBeLessThanOrEqual(after + 5000);

    const at = await cli(['enqueue', q.name, '--at', '2030-01-01T09:00:00Z', '--id', 'JOBat', '--json']);
    expect(JSON.parse(at.stdout)).toEqual({ id: 'JOBat', status: 'scheduled' });
    expect((await q.get('JOBat'))?.runAt).toBe(Date.parse('2030-01-01T09:00:00Z'));
  });

  it('flow prints the tree under a job, each job with its state and its queue when not the root’s', async ({
    mq,
    q,
    newQueue,
  }) => {
    const other = newQueue();
    const flow = await mq.flow({
      queue: q.name,
      name: 'ship',
      data: {},
      children: [
        { queue: q.name, data: {} },
        { queue: other.name, data: {}, children: [{ queue: other.name, data: {} }] },
      ],
    });
    const [a, b] = flow.children;
    const r = await cli(['flow', q.name, flow.id]);
    expect(r.code).toBe(0);
    expect(r.stdout.trimEnd().split('\n')).toEqual([
      `${flow.id}  waiting_children  ship`,
      `  └ ${a!.id}  pending`,
      `  └ ${b!.id}  waiting_children  in ${other.name}`,
      `    └ ${b!.children[0]!.id}  pending  in ${other.name}`,
    ]);
    const json = JSON.parse((await cli(['--json', 'flow', q.name, flow.id])).stdout);
    expect(json.children[1]).toMatchObject({ id: b!.id, queue: other.name, state: 'waiting_children' });
    expect((await cli(['flow', q.name, 'JOBnope'])).code).toBe(2);
  });

  it('enqueue refuses data that is not JSON, both --in and --at, and a bad duration (exit 1)', async ({
    q,
  }) => {
    const notJson = await cli(['enqueue', q.name, '--data', '{to:1}']);
    expect(notJson.code).toBe(1);
    expect(notJson.stderr).toContain('--data is not JSON');
    const both = await cli(['enqueue', q.name, '--in', '5s', '--at', '0']);
    expect(both.code).toBe(1);
    expect(both.stderr).toContain('give --in or --at, not both');
    const badIn = await cli(['enqueue', q.name, '--in', 'soon']);
    expect(badIn.code).toBe(1);
    expect(badIn.stderr).toContain('cannot read duration "soon"');
    expect(await q.counts()).toMatchObject({ pending: 0, scheduled: 0 });
  });
});

// ── live commands ───────────────────────────────────────────────────────────────

describe('tail, dashboard, bench', CHILD_PROCESSES, () => {
  it('tail --json --from 0 --count n replays n events as JSON lines and exits 0', async ({ q }) => {
    const { id } = await q.enqueue({}, { name: 'first' });
    await q.cancel(id);
    await q.enqueue({});
    const r = await cli(['tail', q.name, '--json', '--from', '0', '--count', '2']);
    expect(r.code).toBe(0);
    const lines = r.stdout
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l));
    expect(lines).toEqual([
      expect.objectContaining({ event: 'added', id, fields: { name: 'first' } }),
      expect.objectContaining({ event: 'failed', id, fields: { reason: 'cancelled' } }),
    ]);
    expect(lines[0].time).toBe(Number(lines[0].streamId.split('-')[0]));
  });

  it('tail follows new events live until it is sent SIGTERM, then exits 0', async ({ q, live }) => {
    await q.enqueue({}, { id: 'JOBbefore' });
    const t = live(['tail', q.name, '--json']);
    await t.until((o) => o.stderr.includes('following queue'), 'it started following');
    await q.enqueue({}, { id: 'JOBafter' });
    await t.until((o) => o.stdout.includes('JOBafter'), 'the new event arrived');
    t.child.kill('SIGTERM');
    expect(await t.exited).toEqual({ code: 0, signal: null });
    const events = t.out.stdout
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l));
    expect(events).toEqual([expect.objectContaining({ event: 'added', id: 'JOBafter' })]);
  });

  it('tail colours event names on request (FORCE_COLOR) and prints plain text otherwise', async ({ q }) => {
    await q.enqueue({});
    const coloured = await cli(['tail', q.name, '--from', '0', '--count', '1'], { FORCE_COLOR: '1' });
    expect(coloured.stdout).toContain('\u001b[34madded');
    const plain = await cli(['tail', q.name, '--from', '0', '--count', '1']);
    expect(plain.stdout).not.toContain('\u001b[');
    expect(plain.stdout).toMatch(/^\d\d:\d\d:\d\d\.\d{3}\s+added\s+JOB/);
  });

  it('dashboard serves on the port it prints until SIGINT, then exits 0', async ({ live }) => {
    const d = live(['dashboard', '--port', '0', '--no-auth']);
    await d.until((o) => /dashboard on http:\S+/.test(o.stdout), 'it printed its url');
    const url = /dashboard on (http:\S+)/.exec(d.out.stdout)![1]!;
    const res = await fetch(url);
    expect(res.status).toBe(200);
    await res.text();
    d.child.kill('SIGINT');
    expect((await d.exited).code).toBe(0);
  });

  it('dashboard refuses to start without a usable credential, naming the flag, and listens nowhere', async () => {
    const port = String(await freePort());
    const refusals: [args: string[], extra: Record<string, string>, said: RegExp][] = [
      [[], {}, /needs a credential: --bearer <token> \(or \$ECHOMQ_BEARER\).*--no-auth/],
      [[], { ECHOMQ_BEARER: '' }, /--bearer \(or \$ECHOMQ_BEARER\) is empty/],
      [['--bearer', 'short'], {}, /--bearer \(or \$ECHOMQ_BEARER\) is 5 characters: .* at least 16/],
      [[], { ECHOMQ_BASIC_AUTH: 'ops:' }, /the password of --basic-auth \(or \$ECHOMQ_BASIC_AUTH\) is empty/],
      [['--basic-auth', 'nocolon'], {}, /takes user:password/],
      [['--no-auth'], { ECHOMQ_BEARER: 'x'.repeat(32) }, /--no-auth cannot go with/],
    ];
    for (const [args, extra, said] of refusals) {
      const r = await cli(['dashboard', '--port', port, ...args], extra);
      expect(r.code, `${args.join(' ')} ${JSON.stringify(extra)}`).toBe(1);
      expect(r.stderr).toMatch(said);
      expect(r.stdout).not.toContain('dashboard on');
    }
    const reached = await fetch(`http://127.0.0.1:${port}/`).then(
      (res) => res.status,
      (err: Error & { cause?: { code?: string } }) => err.cause?.code ?? err.message,
    );
    expect(reached).toBe('ECONNREFUSED');
  });

  it('dashboard with $ECHOMQ_BEARER answers 401 without the token and 200 with it', async ({ live }) => {
    const token = 'cli-token-0123456789abcdef';
    const d = live(['dashboard', '--port', '0'], { ECHOMQ_BEARER: token });
    await d.until((o) => /dashboard on http:\S+/.test(o.stdout), 'it printed its url');
    const url = /dashboard on (http:\S+)/.exec(d.out.stdout)![1]!;
    expect((await fetch(url)).status).toBe(401);
    const res = await fetch(url, { headers: { authorization: `Bearer ${token}` } });
    expect(res.status).toBe(200);
    await res.text();
    d.child.kill('SIGINT');
    expect((await d.exited).code).toBe(0);
  });

  it('bench passes its arguments through to bench/run.ts', async () => {
    const r = await cli(['bench', '--help']);
    expect(r.code).toBe(0);
    expect(r.stdout).toContain('usage: tsx bench/run.ts');
  });
});
