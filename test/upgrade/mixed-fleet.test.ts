// Rolling upgrades and downgrades (SPEC 22, docs/reference/upgrading.md): a fleet of an earlier
// release of this repository (checked out of git and built at test time) and today's fleet share
// one queue on one real redis-server. Producers and consumers of both sides, delayed jobs, retries,
// a lane of concurrency 1 and a scheduler; one consumer of the side that leaves is SIGKILLed
// holding jobs and another is frozen (SIGSTOP) until its jobs were recovered and completed
// elsewhere. Every job reaches one end state once, none starts before it is due, no superseded
// result is accepted, and each side reads the other's rows. After an upgrade the queue steps to
// version 2 once the old fleet is gone, and the old release is refused from then on.
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, renameSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import type { Redis } from 'ioredis';
import { afterEach, beforeAll, describe, expect } from 'vitest';
import { EchoMQError } from '../../src/core/errors.js';
import type { JobView } from '../../src/core/types.js';
import type { Queue } from '../../src/queue/queue.js';
import { queueTest, useRedisServer } from '../support/harness.js';
import { ROOT } from '../support/run-process.js';
import { deferred, poll } from '../support/wait.js';

/**
 * The earlier releases: the package as it stood after 4b21c66 (0.2's first layout) and after
 * 4caa082 (the last one before feature levels: it speaks version 1 only and beats no
 * `protocols`, so it is what a version step must wait out).
 */
const EARLIER = ['4b21c66', '4caa082'];
const MEMBER = join(import.meta.dirname, 'fleet-member.mjs');

const env = useRedisServer();
const it = queueTest<Work, Done>(env, 'fleet', { protocolVersion: 1 });

interface Work {
  holdMs: number;
  fails: number;
  from: string;
}
interface Done {
  by: string;
  attempt: number;
}

/**
 * Builds the release at `commit` once into the temp dir (`git archive`, then tsc against this
 * checkout's node_modules) and returns its directory, or a reason it cannot.
 */
function buildRelease(commit: string): { dir: string } | { why: string } {
  const dir = join(tmpdir(), `echomq-release-${commit}`);
  if (existsSync(join(dir, '.built'))) return { dir };
  if (spawnSync('git', ['cat-file', '-e', `${commit}^{commit}`], { cwd: ROOT }).status !== 0) {
    return {
      why: `commit ${commit} is not in this checkout (a shallow clone?): fetch the history to run it`,
    };
  }
  const work = `${dir}.${process.pid}`;
  rmSync(work, { recursive: true, force: true });
  mkdirSync(work, { recursive: true });
  const steps: [string, string[]][] = [
    ['sh', ['-c', `git -C "${ROOT}" archive --format=tar ${commit} | tar -x -C "${work}"`]],
    [process.execPath, [join(ROOT, 'node_modules', 'typescript', 'bin', 'tsc'), '-p', 'tsconfig.build.json']],
  ];
  symlinkSync(join(ROOT, 'node_modules'), join(work, 'node_modules'));
  for (const [command, args] of steps) {
    const run = spawnSync(command, args, { cwd: work, encoding: 'utf8' });
    if (run.status !== 0)
      throw new Error(`building ${commit} failed: ${command} ${args.join(' ')}\n${run.stdout}${run.stderr}`);
  }
  writeFileSync(join(work, '.built'), commit);
  try {
    renameSync(work, dir);
  } catch {
    rmSync(work, { recursive: true, force: true }); // another run built it first
  }
  return { dir };
}

/** How to start a member of one release. */
interface Release {
  label: 'earlier' | 'today';
  argv(url: string, queue: string, name: string): string[];
}

/** Today's release, stamping new queues 1 as a fleet beside a release that speaks 1 only must (SPEC 22.4). */
const today: Release = {
  label: 'today',
  argv: (url, queue, name) => [
    '--import',
    'tsx',
    MEMBER,
    join(ROOT, 'src', 'index.ts'),
    url,
    queue,
    name,
    '1',
  ],
};

function earlier(dir: string): Release {
  return {
    label: 'earlier',
    argv: (url, queue, name) => [MEMBER, join(dir, 'dist', 'index.js'), url, queue, name],
  };
}

const RESPONSE = /^(ready|ok|added|view|error|closed)\b/;

/** A fleet member process: send it commands, watch which jobs it started, ended and completed. */
class Member {
  readonly started = new Map<string, number>();
  readonly ended = new Set<string>();
  readonly completed = new Set<string>();
  readonly stderr: string[] = [];
  private readonly replies: ((line: string) => void)[] = [];
  private readonly exited = deferred<number | null>();

  private constructor(
    readonly name: string,
    readonly release: Release,
    private readonly child: ChildProcess,
  ) {
    createInterface({ input: child.stdout! }).on('line', (line) => this.read(line));
    child.stderr!.on('data', (d) => this.stderr.push(String(d)));
    child.on('exit', (code) => {
      this.exited.resolve(code);
      for (const reply of this.replies.splice(0)) reply(`error EXIT the member exited (${code})`);
    });
  }

  static async start(release: Release, url: string, queue: string, name: string): Promise<Member> {
    const child = spawn(process.execPath, release.argv(url, queue, name), { cwd: ROOT, stdio: 'pipe' });
    const member = new Member(name, release, child);
    const ready = await member.reply();
    if (ready !== 'ready')
      throw new Error(`member ${name} did not start: ${ready}\n${member.stderr.join('')}`);
    return member;
  }

  /** Job ids it started and has not ended: what it holds right now. */
  held(): string[] {
    return [...this.started.keys()].filter((id) => !this.ended.has(id));
  }

  async send(command: string): Promise<string> {
    const line = await this.request(command);
    if (line.startsWith('error'))
      throw new Error(`${this.name} (${this.release.label}): ${command}: ${line}`);
    return line;
  }

  /** Sends `command` and returns its `error ...` reply (throws when it succeeded). */
  async refused(command: string): Promise<string> {
    const line = await this.request(command);
    if (!line.startsWith('error')) throw new Error(`${this.name}: ${command} was not refused: ${line}`);
    return line;
  }

  /** Writes one command and resolves with its reply line, whatever it says. */
  private request(command: string): Promise<string> {
    const reply = this.reply();
    this.child.stdin!.write(`${command}\n`);
    return reply;
  }

  async add(tag: string, spec: Record<string, unknown>): Promise<string[]> {
    const line = await this.send(`add ${tag} ${JSON.stringify(spec)}`);
    return line.split(' ')[2]!.split(',');
  }

  async close(): Promise<void> {
    await this.send('close');
    await this.exited.promise;
  }

  signal(sig: NodeJS.Signals): void {
    this.child.kill(sig);
  }

  async killed(): Promise<void> {
    this.child.kill('SIGKILL');
    await this.exited.promise;
  }

  private reply(): Promise<string> {
    return new Promise((resolve) => this.replies.push(resolve));
  }

  private read(line: string): void {
    if (RESPONSE.test(line)) {
      this.replies.shift()?.(line);
      return;
    }
    const [what, id, attempt] = line.split(' ');
    if (what === 'start') {
      this.started.set(id!, Number(attempt));
      this.ended.delete(id!);
    } else if (what === 'end') this.ended.add(id!);
    else if (what === 'completed') this.completed.add(id!);
  }
}

const members: Member[] = [];
afterEach(async () => {
  for (const m of members.splice(0)) {
    m.signal('SIGCONT');
    await m.killed();
  }
});

async function member(release: Release, queue: string, name: string): Promise<Member> {
  const m = await Member.start(release, env.server.url, queue, name);
  members.push(m);
  return m;
}

/** The mix of work each producer adds: plain, delayed, retried and laned jobs. */
async function addWork(producer: Member, tag: string): Promise<string[]> {
  const ids: string[] = [];
  ids.push(...(await producer.add(`${tag}-plain`, { count: 40, holdMs: 20, attempts: 3 })));
  ids.push(
    ...(await producer.add(`${tag}-delayed`, { count: 20, delayMs: 300, spreadMs: 100, attempts: 3 })),
  );
  ids.push(...(await producer.add(`${tag}-retried`, { count: 15, fails: 1, attempts: 3, backoffMs: 200 })));
  ids.push(...(await producer.add(`${tag}-lane1`, { count: 15, group: 'g0', holdMs: 20, attempts: 3 })));
  ids.push(...(await producer.add(`${tag}-lane`, { count: 10, group: 'g1', holdMs: 10, attempts: 3 })));
  return ids;
}

/**
 * Adds long jobs through `producer` until `consumer` holds at least one of them, and returns
 * the long ones it holds. Who claims a job is up to the fleet, so this asks again until it is
 * this consumer. Only the long jobs count: a short one it printed as started may already be
 * acknowledged by the time a signal reaches it, so it is not known to be held.
 */
async function untilHolding(
  consumer: Member,
  producer: Member,
  tag: string,
  all: string[],
): Promise<string[]> {
  const longs: string[] = [];
  for (let round = 0; round < 30; round++) {
    const held = consumer.held().filter((id) => longs.includes(id));
    if (held.length > 0) return held;
    const more = await producer.add(`${tag}-${round}`, { count: 4, holdMs: 2500, attempts: 3 });
    longs.push(...more);
    all.push(...more);
    await poll(
      async () => more.filter((id) => members.some((m) => m.started.has(id))).length,
      (n) => n === more.length,
      `the long jobs ${tag}-${round} started`,
      30_000,
    );
  }
  throw new Error(`${consumer.name} never held a job`);
}

/**
 * Adds short jobs through `producer` until one of `consumers` completed one of its jobs. Which
 * consumer claims a job is up to the fleet (the others may drain a batch before a consumer that
 * started late asks), so this asks again, a batch at a time, until it is one of these.
 */
async function untilCompletedBy(
  consumers: Member[],
  producer: Member,
  tag: string,
  all: string[],
): Promise<void> {
  const ranOne = () => consumers.some((c) => all.some((id) => c.completed.has(id)));
  for (let round = 0; round < 30 && !ranOne(); round++) {
    const more = await producer.add(`${tag}-${round}`, { count: 12, holdMs: 20, attempts: 3 });
    all.push(...more);
    await poll(
      async () => more.filter((id) => members.some((m) => m.completed.has(id))).length,
      (n) => n === more.length || ranOne(),
      `the jobs ${tag}-${round} completed`,
      30_000,
    );
  }
  if (!ranOne())
    throw new Error(`none of ${consumers.map((c) => c.name).join(', ')} ran a job of ${producer.name}`);
}

interface Outcome {
  jobs: number;
  occurrences: number;
  completedOnce: number;
  early: number;
  superseded: number;
  crossed: { earlierRanToday: number; todayRanEarlier: number };
}

/**
 * `first` runs the queue, `second` joins; then first's consumers go (one SIGKILLed holding jobs,
 * one frozen past its leases, then closed) and its producer leaves; second finishes the work.
 */
async function roll(
  first: Release,
  second: Release,
  { q, raw, key }: { q: Queue<Work, Done>; raw: Redis; key: (suffix: string) => string },
): Promise<Outcome> {
  const a1 = await member(first, q.name, 'a1');
  const a2 = await member(first, q.name, 'a2');
  const ap = await member(first, q.name, 'ap');
  await ap.send('lane g0 1');
  await ap.send('scheduler tick 300');
  await a1.send('consume 4 1500 200');
  await a2.send('consume 4 1500 200');
  const fromA = await addWork(ap, 'a');

  const b1 = await member(second, q.name, 'b1');
  const bp = await member(second, q.name, 'bp');
  await b1.send('consume 4 1500 200');
  const fromB = await addWork(bp, 'b');

  // Each side runs the other's jobs and reads the other's rows.
  await untilCompletedBy([b1], ap, 'a-more', fromA);
  await untilCompletedBy([a1, a2], bp, 'b-more', fromB);
  const viewOf = async (m: Member, id: string) =>
    JSON.parse((await m.send(`get ${id}`)).slice(5)) as JobView<Work>;
  expect((await viewOf(ap, fromB[0]!)).data.from).toBe('bp');
  expect((await viewOf(bp, fromA[0]!)).data.from).toBe('ap');

  const longs: string[] = [];
  // a1 dies holding jobs: they are recovered once their leases expire and run again.
  const killedHeld = await untilHolding(a1, bp, 'kill', longs);
  await a1.killed();
  // a2 freezes holding jobs past their leases: recovered and completed by the others, its own
  // acknowledgements after it thaws are superseded and must be refused.
  const frozenHeld = await untilHolding(a2, bp, 'freeze', longs);
  a2.signal('SIGSTOP');

  // While a consumer of the earlier release is alive, the queue cannot step to version 2.
  const refused = await q.migrate({ windowMs: 60_000 }).catch((err: unknown) => err);
  expect(refused).toBeInstanceOf(EchoMQError);
  expect((refused as EchoMQError).code).toBe('EMQFLEET');

  await poll(
    async () => Promise.all(frozenHeld.map((id) => q.get(id))),
    (views) => views.every((v) => v?.state === 'completed'),
    "the frozen consumer's jobs were recovered and completed elsewhere",
    60_000,
  );
  a2.signal('SIGCONT');
  await poll(
    async () => frozenHeld.every((id) => a2.ended.has(id)),
    Boolean,
    'the thawed consumer finished its stale runs',
    30_000,
  );
  await a2.close();
  await ap.close();
  for (const id of frozenHeld) expect(a2.completed.has(id)).toBe(false);

  // Enough scheduler occurrences served by now; stop it and let the work drain.
  await poll(
    async () => (await q.schedulers.get('tick'))?.iterationCount ?? 0,
    (n) => n >= 3,
    'three occurrences of the scheduler',
    30_000,
  );
  await q.schedulers.remove('tick');
  const known = [...fromA, ...fromB, ...longs];
  await poll(
    async () => q.counts(),
    (c) => c.pending + c.scheduled + c.active === 0,
    'every job ended',
    90_000,
  );

  // Every row of the queue, the scheduler's occurrences included.
  const all = await raw.zrange(key('completed'), 0, -1);
  const rows = (await Promise.all(all.map((id) => q.get(id)))).map((v) => v!);
  expect(all.length).toBeGreaterThanOrEqual(known.length + 3);
  for (const id of known) expect(all).toContain(id);
  const counts = await q.counts();
  expect(counts).toMatchObject({ dead: 0, cancelled: 0, pending: 0, scheduled: 0, active: 0 });

  // One end state, once: exactly one completed event per job.
  const completedEvents = new Map<string, number>();
  for (const [, fields] of await raw.xrange(key('events'), '-', '+')) {
    if (fields[1] === 'completed')
      completedEvents.set(fields[3]!, (completedEvents.get(fields[3]!) ?? 0) + 1);
  }
  let early = 0;
  let superseded = 0;
  for (const v of rows) {
    expect(completedEvents.get(v.id), `completed events of ${v.id}`).toBe(1);
    if (v.runAt !== undefined && v.startedAt! < v.runAt) early++;
    // The result stored is the newest attempt's: a late acknowledgement never overwrote it.
    if (v.result?.attempt !== v.attempts) superseded++;
  }
  for (const id of killedHeld) expect(rows.find((v) => v.id === id)!.result!.by).not.toBe('a1');
  for (const id of frozenHeld) expect(rows.find((v) => v.id === id)!.result!.by).not.toBe('a2');
  expect(early).toBe(0);
  expect(superseded).toBe(0);

  // The lane of concurrency 1 never ran two at once, whichever release claimed.
  const lane = rows.filter((v) => v.group === 'g0').sort((x, y) => x.startedAt! - y.startedAt!);
  expect(lane.length).toBe(30);
  for (let i = 1; i < lane.length; i++)
    expect(lane[i]!.startedAt!).toBeGreaterThanOrEqual(lane[i - 1]!.finishedAt!);

  const by = (names: string[], from: string[]) =>
    rows.filter((v) => names.includes(v.result!.by) && from.includes(v.data.from)).length;
  return {
    jobs: known.length,
    occurrences: all.length - known.length,
    completedOnce: rows.length,
    early,
    superseded,
    crossed:
      first.label === 'earlier'
        ? { earlierRanToday: by(['a1', 'a2'], ['bp']), todayRanEarlier: by(['b1'], ['ap']) }
        : { earlierRanToday: by(['b1'], ['ap']), todayRanEarlier: by(['a1', 'a2'], ['bp']) },
  };
}

describe.each(EARLIER)("a fleet of the release at %s beside today's", (commit) => {
  let release: Release | undefined;
  let why = '';
  beforeAll(() => {
    const built = buildRelease(commit);
    if ('dir' in built) release = earlier(built.dir);
    else why = built.why;
  }, 120_000);

  it('upgrades: today joins, the earlier fleet leaves, then the queue steps to version 2', async ({
    q,
    raw,
    key,
    skip,
  }) => {
    if (!release) return skip(why);
    const outcome = await roll(release, today, { q, raw, key });
    console.info(`upgrade from ${commit}: ${JSON.stringify(outcome)}`);
    expect(outcome.crossed.earlierRanToday).toBeGreaterThan(0);
    expect(outcome.crossed.todayRanEarlier).toBeGreaterThan(0);

    // The earlier consumers have gone quiet: the step is taken, and today's fleet runs on.
    const step = await poll(
      async () => q.migrate({ windowMs: 1000 }).catch((err: EchoMQError) => err.code),
      (r) => typeof r === 'object',
      'the earlier fleet aged out of the window',
      30_000,
    );
    expect(step).toMatchObject({ from: 1, version: 2 });
    const b = members.find((m) => m.name === 'bp')!;
    const b1 = members.find((m) => m.name === 'b1')!;
    const v2 = await b.add('v2', { count: 10, fails: 2, backoffMs: 10 });
    for (const id of v2) expect(await raw.hexists(key(`job:${id}`), 'max')).toBe(0);
    // b1, the one consumer left, says it completed each (its line may follow the row's change).
    await poll(
      async () => v2.every((id) => b1.completed.has(id)),
      Boolean,
      "today's consumer completed the version 2 jobs",
      60_000,
    );
    for (const v of await Promise.all(v2.map((id) => q.get(id))))
      expect(v).toMatchObject({ state: 'completed', attempts: 3 });

    // The earlier release is refused by hello from now on, and writes nothing.
    const rowsBefore = (await q.counts()).completed;
    const late = await member(release, q.name, 'late');
    expect(await late.refused('add late {"count":1}')).toMatch(/^error EMQPROTOCOL/);
    expect((await q.counts()).completed).toBe(rowsBefore);
    expect((await q.counts()).pending).toBe(0);
  }, 240_000);

  it("downgrades: the earlier release joins, today's fleet leaves, and the queue stays at version 1", async ({
    q,
    raw,
    key,
    skip,
  }) => {
    if (!release) return skip(why);
    const outcome = await roll(today, release, { q, raw, key });
    console.info(`downgrade to ${commit}: ${JSON.stringify(outcome)}`);
    expect(outcome.crossed.earlierRanToday).toBeGreaterThan(0);
    expect(outcome.crossed.todayRanEarlier).toBeGreaterThan(0);
    expect(await q.protocolVersion()).toBe(1);
  }, 240_000);
});
