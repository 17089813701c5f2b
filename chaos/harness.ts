// The chaos harness: one run per AOF profile against a real redis-server, with the producer and
// the consumers as separate processes, faults injected on a seeded schedule (chaos/faults.ts),
// and, once the faults stop and the queue has drained, the invariants checked from the job rows,
// the events stream and the processes' own record files (chaos/records.ts). See chaos/README.md.
import { type ChildProcess, spawn } from 'node:child_process';
import { closeSync, mkdtempSync, openSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Redis } from 'ioredis';
import { eventsOf } from '../src/events/reader.js';
import { EchoMQ } from '../src/queue/echomq.js';
import { Keyspace } from '../src/wire/keyspace.js';
import { RedisServer } from '../test/support/redis-server.js';
import { pause as sleep, within } from '../test/support/wait.js';
import { FAULT_KINDS, type Fault, type FaultKind, planFaults } from './faults.js';
import {
  LANES,
  QUEUE,
  REPEAT_EVERY_MS,
  REPEAT_NAME,
  type Rec,
  readRecords,
  SCHEDULER_EVERY_MS,
  SCHEDULER_ID,
} from './records.js';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..');

export type Profile = 'always' | 'everysec';

export interface ChaosOptions {
  seed: number;
  /** Length of the fault window in seconds (faults fall in its first 75 %). */
  durationS: number;
  /** Jobs the producer enqueues (recurring occurrences come on top). */
  jobs: number;
  /** Consumer processes kept running (a killed one is replaced). */
  workers: number;
  profile: Profile;
  /** Lease of each job, ms. Default 2000. */
  leaseMs?: number;
  /** The consumers' beat (recovery runs once a beat), ms. Default 500. */
  beatMs?: number;
  /** Handlers per consumer. Default 4. */
  concurrency?: number;
  /** Bound on the wait for every job to reach an end state after the faults, ms. Default 60000. */
  drainMs?: number;
  /** One extra fault per this many ms on average (beyond one of each kind). Default 5000. */
  faultEveryMs?: number;
  /** Keep the run's directory (records, logs, AOF) even when the run passed. */
  keep?: boolean;
  /** Progress lines. */
  log?: (line: string) => void;
}

export interface Percentiles {
  n: number;
  p50: number | null;
  p99: number | null;
  max: number | null;
}

export interface FaultOutcome {
  kind: FaultKind;
  /** ms after the start of the fault window. */
  at: number;
  pid?: number;
  /** stop: how long it was stopped; restart: how long the server was down, ms. */
  heldMs?: number;
  /** ms from the fault to the next completion any consumer observed (null: none came). */
  nextCompletionMs: number | null;
  /** kill/stop/slow: ms until every job the victim held was completed elsewhere. */
  victimsRedoneMs: number | null;
  note?: string;
}

export interface LaneFigure {
  limit: number;
  /** Most jobs of the lane whose completion was stored, running at one instant. */
  maxRunning: number;
  /** The same, counting zombie executions whose result was refused (may exceed the limit). */
  maxWithZombies: number;
  violations: number;
}

export interface ProfileReport {
  profile: Profile;
  seed: number;
  durationS: number;
  workers: number;
  /** Jobs the producer planned. */
  planned: number;
  /** Jobs acknowledged to the producer by enqueue. */
  enqueued: number;
  /** Sent but never acknowledged (the producer gave up): not promised, so never counted lost. */
  inDoubt: number;
  completed: number;
  dead: number;
  cancelled: number;
  /** Acknowledged but no row, or a row not in an end state. */
  lost: number;
  lostNoRow: number;
  lostNotEnded: number;
  lostIds: string[];
  /** Any row (acknowledged, in doubt or recurring) not in an end state after the drain. */
  stuck: number;
  stuckIds: string[];
  recurring: { repeatMade: number; repeatCompleted: number; schedMade: number; schedCompleted: number };
  /** Two jobs for the same scheduler id (or repeat name) and run instant. */
  schedulerDuplicates: number;
  /** Occurrences whose instant is off the cadence's grid (reported, not an invariant). */
  offGrid: number;
  executions: number;
  executedMoreThanOnce: number;
  extraExecutions: number;
  duplicateReasons: Record<string, number>;
  /** Jobs that ran again after an execution had stored their result (first 10). */
  rerunIds: string[];
  /** Jobs the server claimed more than once ('active' events). */
  claimedMoreThanOnce: number;
  stalledEvents: number;
  /** Jobs with more than one 'completed' event. */
  doubleCompletions: number;
  /** 'active' events for a job after its 'completed' event. */
  claimedAfterCompleted: number;
  /** Zombie completions refused: executions told their lease was gone (lost or aborted). */
  zombieRefused: number;
  lostEmitted: number;
  abortedLease: number;
  /** Completed rows whose result came from an execution that was told 'lost' (a misreport). */
  storedButReportedLost: number;
  /** Executions the consumer reported both 'completed' and 'lost' (a misreport). */
  lostAfterCompleted: number;
  /** Executions the consumer reported 'lost' more than once (a misreport). */
  lostTwice: number;
  laneViolations: number;
  lanes: Record<string, LaneFigure>;
  laneSamples: number;
  laneSampleViolations: number;
  laneDrift: number;
  faults: FaultOutcome[];
  recovery: {
    nextCompletion: Percentiles;
    byKind: Partial<Record<FaultKind, Percentiles>>;
    victimsRedone: Percentiles;
  };
  drainMs: number;
  drainTimedOut: boolean;
  failures: string[];
  notes: string[];
  dir?: string;
}

// ── child processes ──────────────────────────────────────────────────────────

const children = new Set<ChildProcess>();
let exitHook = false;

interface Proc {
  n: number;
  pid: number;
  proc: ChildProcess;
  records: string;
  alive: boolean;
  ready: boolean;
  stopped: boolean;
  readyP: Promise<void>;
  exited: Promise<void>;
}

function startProc(file: string, n: number, dir: string, env: Record<string, string>): Proc {
  if (!exitHook) {
    exitHook = true;
    process.on('exit', () => {
      for (const c of children) c.kill('SIGKILL');
    });
  }
  const records = join(dir, `${n}.records`);
  const err = openSync(join(dir, `${n}.stderr`), 'a');
  const proc = spawn(process.execPath, ['--import', 'tsx', join(ROOT, file)], {
    cwd: ROOT,
    env: { ...process.env, ...env, CHAOS_RECORDS: records },
    stdio: ['ignore', 'pipe', err],
  });
  closeSync(err);
  children.add(proc);
  const p: Proc = {
    n,
    pid: proc.pid ?? -1,
    proc,
    records,
    alive: true,
    ready: false,
    stopped: false,
    readyP: Promise.resolve(),
    exited: Promise.resolve(),
  };
  p.exited = new Promise((resolve) => {
    proc.once('exit', () => {
      p.alive = false;
      children.delete(proc);
      resolve();
    });
  });
  p.readyP = new Promise((resolve, reject) => {
    let out = '';
    proc.stdout?.on('data', (d) => {
      out += d;
      if (!p.ready && out.includes('ready\n')) {
        p.ready = true;
        resolve();
      }
    });
    void p.exited.then(() => {
      if (!p.ready) reject(new Error(`${file} (#${n}) exited before it was ready; see ${dir}/${n}.stderr`));
    });
  });
  p.readyP.catch(() => {});
  return p;
}

// ── one run ──────────────────────────────────────────────────────────────────

/** Reads, in one atomic call, how many jobs of each lane are active, and the lanes:running hash. */
const SAMPLE_LANES = `
local p = ARGV[1]
local actual, out = {}, {}
for _, id in ipairs(redis.call('ZRANGE', KEYS[1], 0, -1)) do
  local r = redis.call('HMGET', p .. 'job:' .. id, 'state', 'group')
  if r[1] == 'active' and r[2] then actual[r[2]] = (actual[r[2]] or 0) + 1 end
end
for g, n in pairs(actual) do out[#out + 1] = g; out[#out + 1] = n end
return { out, redis.call('HGETALL', p .. 'lanes:running') }
`;

interface FaultRecord {
  kind: FaultKind;
  t: number;
  pid?: number;
  until?: number;
  note?: string;
}

interface Collected {
  t0: number;
  workerPids: Map<number, number>;
  workerRecords: Map<number, Rec[]>;
  producer: Rec[];
  rows: Map<string, Record<string, string>>;
  events: { id: string; event: string; t: number; fields: Record<string, string> }[];
  faults: FaultRecord[];
  laneSamples: number;
  laneSampleViolations: number;
  laneDrift: number;
  laneNotes: string[];
  drainMs: number;
  drainTimedOut: boolean;
}

export async function runProfile(opts: ChaosOptions): Promise<ProfileReport> {
  const log = opts.log ?? (() => {});
  const leaseMs = opts.leaseMs ?? 2000;
  const beatMs = opts.beatMs ?? 500;
  const concurrency = opts.concurrency ?? 4;
  const durationMs = Math.round(opts.durationS * 1000);
  const fillMs = Math.round(durationMs * 0.7);
  const tag = `[${opts.profile}]`;
  const dir = mkdtempSync(join(tmpdir(), `echomq-chaos-${opts.profile}-`));
  const server = await RedisServer.start({
    args: ['--appendonly', 'yes', '--appendfsync', opts.profile],
  });
  const keys = new Keyspace(QUEUE);
  const admin = new Redis(server.port, '127.0.0.1', {
    maxRetriesPerRequest: 1,
    retryStrategy: () => 100,
  });
  admin.on('error', () => {});
  const mq = await EchoMQ.connect({ url: server.url, redisOptions: { retryStrategy: () => 100 } });
  mq.connector.client.on('error', () => {});
  const q = mq.queue(QUEUE);
  const workers: Proc[] = [];
  let producer: Proc | undefined;
  let nextN = 0;
  let passed = false;
  try {
    await q.configure({
      retention: {
        completed: { count: 1_000_000_000, ageMs: -1 },
        dead: { count: 1_000_000_000, ageMs: -1 },
      },
      eventsMaxLen: 5_000_000,
    });
    for (const [g, limit] of Object.entries(LANES)) await q.lanes.configure(g, { concurrency: limit });

    const workerEnv = {
      REDIS_URL: server.url,
      CHAOS_QUEUE: QUEUE,
      CHAOS_LEASE_MS: String(leaseMs),
      CHAOS_BEAT_MS: String(beatMs),
      CHAOS_CONCURRENCY: String(concurrency),
      CHAOS_SLOW_MS: String(Math.round(leaseMs * 1.5 + 2 * beatMs)),
    };
    const startWorker = () => {
      const w = startProc('chaos/worker.ts', nextN++, dir, workerEnv);
      workers.push(w);
      return w;
    };
    for (let i = 0; i < opts.workers; i++) startWorker();
    await within(Promise.all(workers.map((w) => w.readyP)), 90_000, 'the consumers to start');
    producer = startProc('chaos/producer.ts', nextN++, dir, {
      REDIS_URL: server.url,
      CHAOS_QUEUE: QUEUE,
      CHAOS_SEED: String(opts.seed),
      CHAOS_JOBS: String(opts.jobs),
      CHAOS_FILL_MS: String(fillMs),
      CHAOS_GIVE_UP_MS: String(fillMs + 30_000),
    });
    await within(producer.readyP, 90_000, 'the producer to start');
    const t0 = Date.now();
    log(
      `${tag} redis on :${server.port} (appendfsync ${opts.profile}), ${opts.workers} consumers, dir ${dir}`,
    );

    // The lane sampler: atomically compares each lane's active jobs with its limit and with the
    // lanes:running counter the claim script trusts.
    let sampling = true;
    const lane = { samples: 0, violations: 0, drift: 0, notes: [] as string[] };
    const sampler = (async () => {
      while (sampling) {
        try {
          const [actualFlat, runningFlat] = (await admin.eval(
            SAMPLE_LANES,
            1,
            keys.key('active'),
            keys.prefix,
          )) as [(string | number)[], string[]];
          const actual = new Map<string, number>();
          for (let i = 0; i < actualFlat.length; i += 2)
            actual.set(String(actualFlat[i]), Number(actualFlat[i + 1]));
          const running = new Map<string, number>();
          for (let i = 0; i < runningFlat.length; i += 2)
            running.set(runningFlat[i]!, Number(runningFlat[i + 1]));
          lane.samples += 1;
          for (const g of new Set([...actual.keys(), ...running.keys()])) {
            const a = actual.get(g) ?? 0;
            const r = running.get(g) ?? 0;
            const limit = LANES[g] ?? 0;
            if (limit > 0 && a > limit) {
              lane.violations += 1;
              if (lane.notes.length < 5) lane.notes.push(`lane ${g}: ${a} active > limit ${limit}`);
            }
            if (a !== r) {
              lane.drift += 1;
              if (lane.notes.length < 5) lane.notes.push(`lane ${g}: lanes:running ${r} but ${a} active`);
            }
          }
        } catch {
          // the server is restarting or the connection was killed: skip this sample
        }
        await sleep(100);
      }
    })();

    // The faults, on the seeded schedule.
    const plan: Fault[] = planFaults({
      seed: opts.seed,
      durationMs,
      leaseMs,
      beatMs,
      everyMs: opts.faultEveryMs ?? 5000,
    });
    const faults: FaultRecord[] = [];
    const conts: Promise<void>[] = [];
    const pick = (target: number): Proc | undefined => {
      const live = workers.filter((w) => w.alive && w.ready && !w.stopped);
      return live.length > 0 ? live[target % live.length] : undefined;
    };
    for (const f of plan) {
      await sleep(t0 + f.at - Date.now());
      let t = Date.now();
      let rel = ((t - t0) / 1000).toFixed(1);
      if (f.kind === 'kill' || f.kind === 'stop' || f.kind === 'slow') {
        let w = pick(f.target);
        // Every consumer stopped, dead or still starting: wait a little for one to act on.
        for (let i = 0; !w && i < 100; i++) {
          await sleep(100);
          w = pick(f.target);
        }
        t = Date.now();
        rel = ((t - t0) / 1000).toFixed(1);
        if (!w) {
          faults.push({ kind: f.kind, t, note: 'skipped: no running consumer' });
          continue;
        }
        if (f.kind === 'kill') {
          w.proc.kill('SIGKILL');
          w.alive = false;
          faults.push({ kind: 'kill', t, pid: w.pid });
          const r = startWorker();
          log(`${tag} t+${rel}s SIGKILL consumer ${w.pid}; replacement ${r.pid}`);
        } else if (f.kind === 'stop') {
          w.proc.kill('SIGSTOP');
          w.stopped = true;
          const rec: FaultRecord = { kind: 'stop', t, pid: w.pid };
          faults.push(rec);
          log(`${tag} t+${rel}s SIGSTOP consumer ${w.pid} for ${f.holdMs} ms`);
          conts.push(
            sleep(f.holdMs).then(() => {
              if (w.alive) w.proc.kill('SIGCONT');
              w.stopped = false;
              rec.until = Date.now();
            }),
          );
        } else {
          w.proc.kill('SIGUSR2');
          faults.push({ kind: 'slow', t, pid: w.pid });
          log(`${tag} t+${rel}s slow handler on consumer ${w.pid}`);
        }
      } else if (f.kind === 'client') {
        try {
          const n = await admin.call('CLIENT', 'KILL', 'TYPE', 'normal', 'SKIPME', 'yes');
          faults.push({ kind: 'client', t, note: `${n} connections` });
          log(`${tag} t+${rel}s CLIENT KILL TYPE normal: ${n} connections`);
        } catch (err) {
          faults.push({ kind: 'client', t, note: `skipped: ${(err as Error).message}` });
        }
      } else {
        const rec: FaultRecord = { kind: 'restart', t };
        faults.push(rec);
        await server.restart();
        rec.until = Date.now();
        log(`${tag} t+${rel}s redis-server SIGKILLed and restarted (${rec.until - t} ms)`);
      }
    }
    await sleep(t0 + durationMs - Date.now());
    await Promise.all(conts);

    // The faults have stopped: the producer finishes, the recurring ones are removed, and every
    // job must reach an end state.
    await within(producer.exited, 60_000, 'the producer to finish').catch(() => {
      producer?.proc.kill('SIGKILL');
    });
    for (let i = 0; i < 50; i++) {
      try {
        await q.schedulers.remove(SCHEDULER_ID);
        await q.repeat.unregister(REPEAT_NAME);
        break;
      } catch {
        await sleep(200);
      }
    }
    const drainStart = Date.now();
    const drainBound = drainStart + (opts.drainMs ?? 60_000);
    let emptySince: number | undefined;
    let drainTimedOut = true;
    while (Date.now() < drainBound) {
      try {
        const c = await q.counts();
        const open = c.scheduled + c.pending + c.active + c.waiting_children;
        if (open === 0) {
          emptySince ??= Date.now();
          if (Date.now() - emptySince >= 1000) {
            drainTimedOut = false;
            break;
          }
        } else emptySince = undefined;
      } catch {
        emptySince = undefined;
      }
      await sleep(250);
    }
    const drainMs = Date.now() - drainStart;
    log(`${tag} drained in ${drainMs} ms${drainTimedOut ? ' (bound reached: jobs left open)' : ''}`);
    sampling = false;
    await sampler;

    // Close the consumers gracefully (they hand back nothing: the queue is drained).
    for (const w of workers) {
      if (!w.alive) continue;
      w.proc.kill('SIGCONT');
      w.proc.kill('SIGTERM');
    }
    for (const w of workers) {
      await within(w.exited, 15_000, `consumer ${w.pid} to exit`).catch(() => w.proc.kill('SIGKILL'));
    }

    // Read everything back.
    const rows = new Map<string, Record<string, string>>();
    const jobKeys: string[] = [];
    let cursor = '0';
    do {
      const [next, found] = await admin.scan(cursor, 'MATCH', `${keys.prefix}job:*`, 'COUNT', 1000);
      cursor = next;
      for (const k of found) if (!k.endsWith(':results')) jobKeys.push(k);
    } while (cursor !== '0');
    for (let i = 0; i < jobKeys.length; i += 500) {
      const pipe = admin.pipeline();
      for (const k of jobKeys.slice(i, i + 500)) pipe.hgetall(k);
      const replies = (await pipe.exec()) ?? [];
      replies.forEach(([err, row], j) => {
        if (err) throw err;
        rows.set(jobKeys[i + j]!.slice(`${keys.prefix}job:`.length), row as Record<string, string>);
      });
    }
    const events: Collected['events'] = [];
    let from = '-';
    for (;;) {
      const batch = (await admin.xrange(keys.key('events'), from, '+', 'COUNT', 5000)) as [
        string,
        string[],
      ][];
      for (const [sid, flat] of batch) {
        for (const e of eventsOf(sid, flat)) {
          events.push({ id: e.id, event: e.event, t: Number(sid.split('-')[0]), fields: e.fields });
        }
      }
      if (batch.length < 5000) break;
      from = `(${batch[batch.length - 1]![0]}`;
    }
    const workerRecords = new Map<number, Rec[]>();
    const workerPids = new Map<number, number>();
    for (const w of workers) {
      workerRecords.set(w.n, readRecords(w.records));
      workerPids.set(w.n, w.pid);
    }
    // For a post-mortem of a kept run: when each fault struck, and which process was which.
    writeFileSync(
      join(dir, 'run.json'),
      JSON.stringify({ opts: { ...opts, log: undefined }, t0, faults, workers: [...workerPids] }),
    );
    const report = analyze(opts, {
      t0,
      workerPids,
      workerRecords,
      producer: readRecords(producer.records),
      rows,
      events,
      faults,
      laneSamples: lane.samples,
      laneSampleViolations: lane.violations,
      laneDrift: lane.drift,
      laneNotes: lane.notes,
      drainMs,
      drainTimedOut,
    });
    passed = report.failures.length === 0;
    if (!passed || opts.keep) report.dir = dir;
    return report;
  } finally {
    for (const p of [...workers, ...(producer ? [producer] : [])]) {
      if (p.alive) {
        p.proc.kill('SIGCONT');
        p.proc.kill('SIGKILL');
        await p.exited;
      }
    }
    await mq.close().catch(() => {});
    admin.disconnect();
    if (passed && !opts.keep) {
      await server.stop();
      rmSync(dir, { recursive: true, force: true });
    } else {
      await server.kill(); // keep its dir (the AOF) for a post-mortem
      log(`${tag} kept ${dir} and the server's dir ${server.dir}`);
    }
  }
}

// ── the checks ───────────────────────────────────────────────────────────────

interface Exec {
  worker: number;
  pid: number;
  seq: string;
  job: string;
  group: string;
  /** The attempt number the claim gave it: claims of one job are numbered in server order. */
  attempt: number;
  /** When the server claimed it (its 'active' event), else when the handler started. */
  claimed: number;
  start: number;
  slow?: number;
  end?: number;
  abort?: string;
  ok?: number;
  lost?: number;
  /** 'lost' emissions for this execution (more than one is a consumer misreport). */
  losts: number;
}

const END_STATES = new Set(['completed', 'dead', 'cancelled']);

export function percentiles(values: number[]): Percentiles {
  const s = [...values].sort((a, b) => a - b);
  const rank = (p: number) => (s.length === 0 ? null : s[Math.max(0, Math.ceil(p * s.length) - 1)]!);
  return { n: s.length, p50: rank(0.5), p99: rank(0.99), max: s.length ? s[s.length - 1]! : null };
}

/** The instant encoded in an occurrence id (JOB + 10 Crockford base32 characters). */
function occurrenceInstant(id: string): number {
  const B32 = '0123456789ABCDEFGHJKMNPQRSTVWXYZ';
  let v = 0;
  for (const ch of id.slice(3, 13)) v = v * 32 + B32.indexOf(ch);
  return v;
}

function analyze(opts: ChaosOptions, c: Collected): ProfileReport {
  const failures: string[] = [];
  const notes: string[] = [...c.laneNotes];

  // What the producer was told.
  const acked = new Set<string>();
  const sent = new Set<string>();
  for (const r of c.producer) {
    if (r.ev === 'ack') acked.add(r.job);
    else if (r.ev === 'sent') sent.add(r.job);
  }
  const inDoubt = [...sent].filter((id) => !acked.has(id)).length;

  // The rows.
  let completed = 0;
  let dead = 0;
  let cancelled = 0;
  const lostIds: string[] = [];
  let lostNoRow = 0;
  let lostNotEnded = 0;
  for (const id of acked) {
    const row = c.rows.get(id);
    if (!row?.state) {
      lostNoRow += 1;
      lostIds.push(id);
    } else if (!END_STATES.has(row.state)) {
      lostNotEnded += 1;
      lostIds.push(`${id} (${row.state})`);
    } else if (row.state === 'completed') completed += 1;
    else if (row.state === 'dead') dead += 1;
    else cancelled += 1;
  }
  const stuckIds = [...c.rows]
    .filter(([, row]) => !END_STATES.has(row.state ?? ''))
    .map(([id, r]) => `${id} (${r.state})`);

  // Recurring occurrences: one job per (scheduler or repeat, instant).
  const recurring = { repeatMade: 0, repeatCompleted: 0, schedMade: 0, schedCompleted: 0 };
  let schedulerDuplicates = 0;
  let offGrid = 0;
  for (const [marker, every, made, done] of [
    [`:r:${REPEAT_NAME}`, REPEAT_EVERY_MS, 'repeatMade', 'repeatCompleted'],
    [`:s:${SCHEDULER_ID}`, SCHEDULER_EVERY_MS, 'schedMade', 'schedCompleted'],
  ] as const) {
    const byInstant = new Map<number, number>();
    const instants: number[] = [];
    for (const [id, row] of c.rows) {
      if (!id.endsWith(marker)) continue;
      recurring[made] += 1;
      if (row.state === 'completed') recurring[done] += 1;
      const at = Number(row.runat ?? occurrenceInstant(id));
      if (at !== occurrenceInstant(id)) {
        schedulerDuplicates += 1;
        notes.push(`occurrence ${id} has runat ${row.runat}, not its id's instant`);
      }
      byInstant.set(at, (byInstant.get(at) ?? 0) + 1);
      instants.push(at);
    }
    for (const [at, n] of byInstant) {
      if (n > 1) {
        schedulerDuplicates += n - 1;
        notes.push(`${marker.slice(3)}: ${n} jobs for the run at ${at}`);
      }
    }
    const first = Math.min(...instants);
    for (const at of instants) if ((at - first) % every !== 0) offGrid += 1;
  }

  // Executions, from the consumers' own records.
  const execs = new Map<string, Exec>();
  const claimedAt = new Map<string, number>();
  for (const ev of c.events) {
    const key = `${ev.id}:${ev.fields.attempt}`;
    if (ev.event === 'active' && !claimedAt.has(key)) claimedAt.set(key, ev.t);
  }
  for (const [n, recs] of c.workerRecords) {
    const pid = c.workerPids.get(n) ?? -1;
    for (const r of recs) {
      if (!r.b) continue;
      const key = `${n}:${r.b}`;
      if (r.ev === 'start') {
        const attempt = Number(r.a);
        const claimed = Math.min(r.t, claimedAt.get(`${r.job}:${attempt}`) ?? r.t);
        execs.set(key, {
          worker: n,
          pid,
          seq: r.b,
          job: r.job,
          group: r.c,
          attempt,
          claimed,
          start: r.t,
          losts: 0,
        });
      }
      const e = execs.get(key);
      if (!e) continue;
      if (r.ev === 'slow') e.slow = r.t;
      else if (r.ev === 'end') {
        e.end = r.t;
        if (r.d) e.abort = r.d;
      } else if (r.ev === 'ok') e.ok = r.t;
      else if (r.ev === 'lost') {
        e.lost ??= r.t;
        e.losts += 1;
      }
    }
  }
  const byJob = new Map<string, Exec[]>();
  for (const e of execs.values()) {
    const list = byJob.get(e.job) ?? [];
    list.push(e);
    byJob.set(e.job, list);
  }
  const okTimes = [...execs.values()]
    .filter((e) => e.ok !== undefined)
    .map((e) => e.ok!)
    .sort((a, b) => a - b);

  // Why a job ran more than once: the cause of each run that did not store its result.
  const killedAt = new Map<number, number>();
  for (const f of c.faults) if (f.kind === 'kill' && f.pid !== undefined) killedAt.set(f.pid, f.t);
  const stops = c.faults.filter((f) => f.kind === 'stop');
  const slowAt = (pid: number) =>
    [...execs.values()].filter((e) => e.pid === pid && e.slow !== undefined).map((e) => e.slow!);
  // From its claim: a consumer blocked or stopped between the claim and the handler's start
  // holds the job all the same.
  const inFlight = (e: Exec, t: number) =>
    e.claimed <= t && (e.end ?? e.ok ?? e.lost ?? Number.POSITIVE_INFINITY) >= t;
  const reasons: Record<string, number> = {};
  const rerunIds: string[] = [];
  let executedMoreThanOnce = 0;
  let extraExecutions = 0;
  for (const list of byJob.values()) {
    if (list.length < 2) continue;
    executedMoreThanOnce += 1;
    extraExecutions += list.length - 1;
    list.sort((a, b) => a.attempt - b.attempt || a.start - b.start);
    for (let i = 0; i < list.length - 1; i++) {
      const e = list[i]!;
      const next = list[i + 1]!;
      // The earliest fault that struck this run while it was in flight is its cause.
      const causes: [number, string][] = [];
      const killed = killedAt.get(e.pid);
      if (killed !== undefined && e.end === undefined && killed >= e.claimed) {
        causes.push([killed, 'consumer SIGKILLed']);
      }
      for (const t of slowAt(e.pid)) if (inFlight(e, t)) causes.push([t, 'slow handler outlived its lease']);
      for (const s of stops) {
        if (s.pid === e.pid && inFlight(e, s.t)) causes.push([s.t, 'consumer stopped: zombie refused']);
      }
      for (const f of c.faults) {
        if ((f.kind === 'restart' || f.kind === 'client') && f.t >= e.claimed - 50 && f.t <= next.claimed) {
          causes.push([f.t, f.kind === 'restart' ? 'redis restart' : 'connection killed']);
        }
      }
      causes.sort((a, b) => a[0] - b[0]);
      let why: string;
      if (e.ok !== undefined) why = 'ran again after its result was stored';
      else if (causes.length > 0) why = causes[0]![1];
      else if (e.abort === 'EMQCLOSED') why = 'handed back at shutdown';
      else if (e.lost !== undefined || e.abort === 'EMQLEASE') why = 'lease expired under load';
      else why = 'other';
      reasons[why] = (reasons[why] ?? 0) + 1;
      if (why === 'ran again after its result was stored' && rerunIds.length < 10) rerunIds.push(e.job);
    }
  }

  // The events stream: claims, completions, recoveries.
  const claims = new Map<string, number>();
  const completions = new Map<string, number>();
  let stalledEvents = 0;
  let claimedAfterCompleted = 0;
  for (const ev of c.events) {
    if (ev.event === 'active') {
      claims.set(ev.id, (claims.get(ev.id) ?? 0) + 1);
      if (completions.has(ev.id)) claimedAfterCompleted += 1;
    } else if (ev.event === 'completed') completions.set(ev.id, (completions.get(ev.id) ?? 0) + 1);
    else if (ev.event === 'stalled') stalledEvents += 1;
  }
  const doubleCompletions = [...completions.values()].filter((n) => n > 1).length;
  const claimedMoreThanOnce = [...claims.values()].filter((n) => n > 1).length;

  // Zombies: executions told their lease was gone, and results stored from such an execution.
  let lostEmitted = 0;
  let abortedLease = 0;
  let zombieRefused = 0;
  let lostAfterCompleted = 0;
  let lostTwice = 0;
  for (const e of execs.values()) {
    if (e.lost !== undefined) lostEmitted += 1;
    if (e.abort === 'EMQLEASE') abortedLease += 1;
    if (e.ok === undefined && (e.lost !== undefined || e.abort === 'EMQLEASE')) zombieRefused += 1;
    if (e.ok !== undefined && e.lost !== undefined) lostAfterCompleted += 1;
    if (e.losts > 1) lostTwice += 1;
  }
  const pidToWorker = new Map([...c.workerPids].map(([n, pid]) => [pid, n]));
  let storedButReportedLost = 0;
  for (const row of c.rows.values()) {
    if (row.state !== 'completed' || !row.result) continue;
    try {
      const r = JSON.parse(row.result) as { p: number; s: number };
      const e = execs.get(`${pidToWorker.get(r.p)}:${r.s}`);
      if (e?.lost !== undefined && e.ok === undefined) storedButReportedLost += 1;
    } catch {
      // not a chaos result
    }
  }

  // Lanes: executions whose result was stored held their lane slot on the server from claim to
  // completion, so more of them running at one instant than the limit is a violation.
  const lanes: Record<string, LaneFigure> = {};
  let laneViolations = 0;
  for (const [g, limit] of Object.entries(LANES)) {
    const sweep = (list: Exec[]) => {
      const points: [number, number][] = [];
      for (const e of list) {
        const end = e.end ?? e.ok ?? e.lost ?? killedAt.get(e.pid) ?? e.start;
        points.push([e.start, 1], [end, -1]);
      }
      points.sort((a, b) => a[0] - b[0] || a[1] - b[1]); // an end before a start at one instant
      let cur = 0;
      let max = 0;
      let over = 0;
      for (const [, d] of points) {
        cur += d;
        if (d > 0 && cur > limit) over += 1;
        max = Math.max(max, cur);
      }
      return { max, over };
    };
    const all = [...execs.values()].filter((e) => e.group === g);
    const stored = sweep(all.filter((e) => e.ok !== undefined));
    lanes[g] = { limit, maxRunning: stored.max, maxWithZombies: sweep(all).max, violations: stored.over };
    laneViolations += stored.over;
  }

  // Recovery after each fault: the next completion, and (kill/stop/slow) the victim's jobs redone.
  const nextOk = (t: number) => {
    let lo = 0;
    let hi = okTimes.length;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (okTimes[mid]! <= t) lo = mid + 1;
      else hi = mid;
    }
    return lo < okTimes.length ? okTimes[lo]! - t : null;
  };
  const firstOkAfter = (job: string, t: number) => {
    const oks = (byJob.get(job) ?? []).filter((e) => e.ok !== undefined && e.ok > t).map((e) => e.ok!);
    return oks.length ? Math.min(...oks) : null;
  };
  const outcomes: FaultOutcome[] = c.faults.map((f) => {
    const o: FaultOutcome = {
      kind: f.kind,
      at: f.t - c.t0,
      nextCompletionMs: nextOk(f.t),
      victimsRedoneMs: null,
    };
    if (f.pid !== undefined) o.pid = f.pid;
    if (f.until !== undefined) o.heldMs = f.until - f.t;
    if (f.note) o.note = f.note;
    if (f.pid !== undefined) {
      let at = f.t;
      if (f.kind === 'slow') at = slowAt(f.pid).find((t) => t >= f.t) ?? Number.NaN;
      const victims = [...execs.values()].filter(
        (e) => e.pid === f.pid && inFlight(e, at) && e.ok === undefined,
      );
      const redone = victims.map((e) => firstOkAfter(e.job, at)).filter((t): t is number => t !== null);
      if (redone.length > 0) o.victimsRedoneMs = Math.max(...redone) - f.t;
    }
    return o;
  });
  const byKind: Partial<Record<FaultKind, Percentiles>> = {};
  for (const kind of FAULT_KINDS) {
    const v = outcomes
      .filter((o) => o.kind === kind && o.nextCompletionMs !== null)
      .map((o) => o.nextCompletionMs!);
    if (v.length > 0) byKind[kind] = percentiles(v);
  }

  const lost = lostNoRow + lostNotEnded;
  const restarts = c.faults.filter((f) => f.kind === 'restart').length;
  const rollbackExcuse = opts.profile === 'everysec' && restarts > 0;
  if (lost > 0) {
    if (opts.profile === 'always') failures.push(`${lost} acknowledged jobs lost with appendfsync always`);
    else
      notes.push(
        `${lost} acknowledged jobs lost with appendfsync everysec: Redis replied to their enqueue before ` +
          'the AOF write reached the file (with everysec a write waits while a background fsync is ' +
          `running, up to 2 s), and a SIGKILL of redis-server (${restarts} restarts) dropped it. ` +
          'appendfsync always writes and fsyncs before it replies.',
      );
  } else if (opts.profile === 'everysec') {
    notes.push(
      `0 acknowledged jobs lost with appendfsync everysec over ${restarts} redis-server SIGKILLs: a process ` +
        'crash loses only what Redis had not yet written to the AOF file (the kernel keeps what it was ' +
        'given); everysec risks up to a second of writes (two while an fsync stalls) on an OS crash or ' +
        'power loss, which this suite cannot inject.',
    );
  }
  if (stuckIds.length > 0) failures.push(`${stuckIds.length} jobs not in an end state after the drain`);
  if (c.drainTimedOut) failures.push('the queue did not drain within the bound');
  if (schedulerDuplicates > 0) failures.push(`${schedulerDuplicates} duplicated recurring occurrences`);
  if (c.laneSampleViolations > 0) failures.push(`${c.laneSampleViolations} lane samples over the limit`);
  if (c.laneDrift > 0) failures.push(`${c.laneDrift} lane samples where lanes:running disagreed with active`);
  const fenced: [number, string][] = [
    [laneViolations, 'lane concurrency violations by stored executions'],
    [doubleCompletions, 'jobs completed twice (events)'],
    [claimedAfterCompleted, 'claims of a job after it completed (events)'],
  ];
  for (const [n, what] of fenced) {
    if (n === 0) continue;
    if (rollbackExcuse)
      notes.push(`${n} ${what}: with everysec a restart may roll back leases and completions`);
    else failures.push(`${n} ${what}`);
  }
  if (dead > 0) notes.push(`${dead} acknowledged jobs ended dead (the handler never throws)`);
  if (lostAfterCompleted + lostTwice > 0) {
    notes.push(
      `the consumer emitted 'lost' for ${lostAfterCompleted} executions it had reported 'completed', and ` +
        `twice for ${lostTwice}: an extend_lock call in flight when the job's complete call lands finds the ` +
        'job no longer active, and lose() does not know the job already finished (src/consumer.ts extend, lose)',
    );
  }
  if (storedButReportedLost > 0) {
    notes.push(
      `${storedButReportedLost} completions were stored but their consumer emitted 'lost': a complete ` +
        'call whose reply was cut by a connection kill is re-sent by ioredis after the reconnect, and ' +
        'the second run answers EMQLEASE for the job the first one completed',
    );
  }
  for (const o of outcomes)
    if (o.note?.startsWith('skipped')) notes.push(`${o.kind} at ${o.at} ms ${o.note}`);

  return {
    profile: opts.profile,
    seed: opts.seed,
    durationS: opts.durationS,
    workers: opts.workers,
    planned: opts.jobs,
    enqueued: acked.size,
    inDoubt,
    completed,
    dead,
    cancelled,
    lost,
    lostNoRow,
    lostNotEnded,
    lostIds: lostIds.slice(0, 10),
    stuck: stuckIds.length,
    stuckIds: stuckIds.slice(0, 10),
    recurring,
    schedulerDuplicates,
    offGrid,
    executions: execs.size,
    executedMoreThanOnce,
    extraExecutions,
    duplicateReasons: reasons,
    rerunIds,
    claimedMoreThanOnce,
    stalledEvents,
    doubleCompletions,
    claimedAfterCompleted,
    zombieRefused,
    lostEmitted,
    abortedLease,
    storedButReportedLost,
    lostAfterCompleted,
    lostTwice,
    laneViolations,
    lanes,
    laneSamples: c.laneSamples,
    laneSampleViolations: c.laneSampleViolations,
    laneDrift: c.laneDrift,
    faults: outcomes,
    recovery: {
      nextCompletion: percentiles(
        outcomes.filter((o) => o.nextCompletionMs !== null).map((o) => o.nextCompletionMs!),
      ),
      byKind,
      victimsRedone: percentiles(
        outcomes.filter((o) => o.victimsRedoneMs !== null).map((o) => o.victimsRedoneMs!),
      ),
    },
    drainMs: c.drainMs,
    drainTimedOut: c.drainTimedOut,
    failures,
    notes,
  };
}

// ── the report ───────────────────────────────────────────────────────────────

function ms(p: Percentiles): string {
  return p.n === 0 ? '-' : `${p.p50} / ${p.p99} ms (n=${p.n})`;
}

/** The figures of one or more profiles as a text table, one column per profile. */
export function formatTable(reports: ProfileReport[]): string {
  const rows: [string, (r: ProfileReport) => string][] = [
    ['jobs enqueued (acknowledged)', (r) => `${r.enqueued} of ${r.planned}`],
    ['  in doubt (never acknowledged)', (r) => String(r.inDoubt)],
    ['completed', (r) => String(r.completed)],
    ['lost (must be 0 with always)', (r) => `${r.lost}${r.lost ? ` (${r.lostNoRow} no row)` : ''}`],
    ['dead / cancelled', (r) => `${r.dead} / ${r.cancelled}`],
    ['stuck (not ended after drain)', (r) => String(r.stuck)],
    [
      'recurring made / completed',
      (r) => {
        const x = r.recurring;
        return `repeat ${x.repeatMade}/${x.repeatCompleted}, sched ${x.schedMade}/${x.schedCompleted}`;
      },
    ],
    ['scheduler occurrences duplicated', (r) => String(r.schedulerDuplicates)],
    ['executions (handler runs)', (r) => String(r.executions)],
    ['executed more than once', (r) => `${r.executedMoreThanOnce} jobs (+${r.extraExecutions} runs)`],
    ...[
      'consumer SIGKILLed',
      'consumer stopped: zombie refused',
      'slow handler outlived its lease',
      'redis restart',
      'connection killed',
      'lease expired under load',
      'handed back at shutdown',
      'ran again after its result was stored',
      'other',
    ].map((why): [string, (r: ProfileReport) => string] => [
      `  why: ${why}`,
      (r) => String(r.duplicateReasons[why] ?? 0),
    ]),
    ['claimed more than once (events)', (r) => String(r.claimedMoreThanOnce)],
    ['stalled recoveries (events)', (r) => String(r.stalledEvents)],
    [
      'zombie completions refused',
      (r) => `${r.zombieRefused} (lost ${r.lostEmitted}, aborted ${r.abortedLease})`,
    ],
    ['  stored but reported lost', (r) => String(r.storedButReportedLost)],
    ["  'lost' after 'completed' / twice", (r) => `${r.lostAfterCompleted} / ${r.lostTwice}`],
    ['double completions (events)', (r) => String(r.doubleCompletions)],
    ['claimed after completed (events)', (r) => String(r.claimedAfterCompleted)],
    ['lane concurrency violations', (r) => String(r.laneViolations)],
    [
      '  max running per lane (limit)',
      (r) =>
        Object.entries(r.lanes)
          .map(([g, l]) => `${g} ${l.maxRunning}(${l.limit})`)
          .join(' '),
    ],
    ['  lane samples over / drift', (r) => `${r.laneSampleViolations} / ${r.laneDrift} of ${r.laneSamples}`],
    [
      'faults',
      (r) => {
        const n: Record<string, number> = {};
        for (const f of r.faults) n[f.kind] = (n[f.kind] ?? 0) + 1;
        return FAULT_KINDS.map((k) => `${k} ${n[k] ?? 0}`).join(', ');
      },
    ],
    ['recovery to next completion p50/p99', (r) => ms(r.recovery.nextCompletion)],
    ...FAULT_KINDS.map((k): [string, (r: ProfileReport) => string] => [
      `  after ${k}`,
      (r) => {
        const p = r.recovery.byKind[k];
        return p ? ms(p) : '-';
      },
    ]),
    ["victim's jobs redone p50/p99", (r) => ms(r.recovery.victimsRedone)],
    ['drain after faults', (r) => `${r.drainMs} ms${r.drainTimedOut ? ' (timed out)' : ''}`],
    ['verdict', (r) => (r.failures.length === 0 ? 'PASS' : 'FAIL')],
  ];
  const header = ['figure', ...reports.map((r) => `appendfsync ${r.profile}`)];
  const table = [header, ...rows.map(([name, f]) => [name, ...reports.map(f)])];
  const widths = header.map((_, i) => Math.max(...table.map((row) => row[i]!.length)));
  const line = (row: string[]) =>
    row
      .map((cell, i) => cell.padEnd(widths[i]!))
      .join(' | ')
      .trimEnd();
  const out = [line(header), widths.map((w) => '-'.repeat(w)).join('-|-'), ...table.slice(1).map(line)];
  for (const r of reports) {
    for (const f of r.failures) out.push(`FAIL [${r.profile}] ${f}`);
    for (const n of r.notes) out.push(`note [${r.profile}] ${n}`);
    if (r.lostIds.length) out.push(`lost [${r.profile}] ${r.lostIds.join(', ')}`);
    if (r.stuckIds.length) out.push(`stuck [${r.profile}] ${r.stuckIds.join(', ')}`);
    if (r.rerunIds.length) out.push(`ran again after stored [${r.profile}] ${r.rerunIds.join(', ')}`);
    if (r.dir) out.push(`kept [${r.profile}] ${r.dir}`);
  }
  return out.join('\n');
}
