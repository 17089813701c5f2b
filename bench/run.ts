// The bench runner: `npm run bench [-- --quick | --tiny | --large] [--only a,b] [--rounds n]`.
// Starts its own redis-server on a free port, runs every selected workload against EchoMQ
// and BullMQ alternately (FLUSHALL before each run, the order swapped every round), then
// prints medians across rounds and the EchoMQ/BullMQ ratio as a table and as JSON lines
// (one object per workload). Progress goes to stderr, results to stdout.
import { readFileSync } from 'node:fs';
import { cpus, loadavg } from 'node:os';
import { fileURLToPath } from 'node:url';
import type { Redis } from 'ioredis';
import { PROTOCOL_VERSION } from '../src/wire/keyspace.js';
import { memoryClient } from '../src/wire/memory/connection.js';
import { MemoryEngine } from '../src/wire/memory/engine.js';
import { RedisServer } from '../test/support/redis-server.js';
import type { Adapter } from './adapters/adapter.js';
import { bullmqAdapter } from './adapters/bullmq.js';
import { echomqAdapter, useProtocolVersion } from './adapters/echomq.js';
import { CEILINGS, type Ceiling } from './ceiling.js';
import { SCALING } from './scaling.js';
import { median } from './stats.js';
import { WORKLOADS as BASE, type RunContext, SIZES, type Sizes, type Workload } from './workloads.js';

/** Every workload: the base ones, then the scaling ones (bench/scaling.ts). */
const WORKLOADS: Workload[] = [...BASE, ...SCALING];

// ── command line ──────────────────────────────────────────────────────────────

interface Options {
  mode: 'full' | 'large' | 'quick' | 'tiny';
  rounds: number;
  only: string[] | undefined;
  /** redis-server's --hz (its internal tick; Redis's default 10 when unset). */
  hz: number | undefined;
  /** Load the native module (module/build/echomq.so) into the bench's redis-server. */
  module: boolean;
  /** The protocol version EchoMQ's queues are stamped with (SPEC 22.3; default the runtime's, 2). */
  protocol: 1 | 2;
}

class UsageError extends Error {}

const USAGE = `usage: tsx bench/run.ts [--quick | --tiny | --large] [--only <workload,...>] [--rounds <n>] [--hz <n>] [--module] [--protocol <1|2>]
  --quick   small N, 1 round (a smoke run, under two minutes)
  --tiny    very small N, 1 round (the test suite's run)
  --large   the full N, the scale-* workloads at issue 18's sizes (1,000,000 waiting, scheduled and
            run; 10,000 lanes x 10; 100,000 active), 1 round: long, run one with --only
  --only    workload ids or prefixes (e.g. process, ceiling, latency-500)
  --rounds  rounds per workload and library (default 3; 1 with --quick or --tiny)
  --hz      start redis-server with this --hz (default: Redis's own, 10)
  --module  load the native module (npm run build:module first): EchoMQ sweeps and completes with its commands
  --protocol  the protocol version EchoMQ's queues start at (default the runtime's, 2, which keeps no max of 3
              per row; 1 writes it, as a fleet beside a release speaking 1 only does)
workloads: ${[...WORKLOADS.map((w) => w.id), ...CEILINGS.map((c) => c.id)].join(', ')}`;

function parseArgs(argv: string[]): Options {
  let mode: Options['mode'] = 'full';
  let rounds: number | undefined;
  let only: string[] | undefined;
  let hz: number | undefined;
  let module = false;
  let protocol = Number(PROTOCOL_VERSION) as 1 | 2;
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]!;
    if (a === '--quick' || a === '--tiny' || a === '--large') mode = a.slice(2) as Options['mode'];
    else if (a === '--only') only = (argv[++i] ?? '').split(',').filter(Boolean);
    else if (a.startsWith('--only=')) only = a.slice(7).split(',').filter(Boolean);
    else if (a === '--rounds' || a.startsWith('--rounds=')) {
      const v = a === '--rounds' ? argv[++i] : a.slice(9);
      rounds = Number(v);
      if (!Number.isInteger(rounds) || rounds < 1) throw new UsageError(`--rounds wants a whole number >= 1`);
    } else if (a === '--hz' || a.startsWith('--hz=')) {
      hz = Number(a === '--hz' ? argv[++i] : a.slice(5));
      if (!Number.isInteger(hz) || hz < 1 || hz > 500)
        throw new UsageError('--hz wants a whole number 1-500');
    } else if (a === '--module') module = true;
    else if (a === '--protocol' || a.startsWith('--protocol=')) {
      const v = a === '--protocol' ? argv[++i] : a.slice(11);
      if (v !== '1' && v !== '2') throw new UsageError('--protocol wants 1 or 2');
      protocol = Number(v) as 1 | 2;
    } else if (a === '--help' || a === '-h') {
      console.log(USAGE);
      process.exit(0);
    } else throw new UsageError(`unknown argument ${a}`);
  }
  return { mode, rounds: rounds ?? (mode === 'full' ? 3 : 1), only, hz, module, protocol };
}

function selects(only: string[] | undefined, id: string): boolean {
  return !only || only.some((t) => id === t || id.startsWith(`${t}-`));
}

// ── measuring around a run ────────────────────────────────────────────────────

/** What limited a run: CPU of both sides over the measured section and Redis work per job. */
interface Diag {
  /** Redis used_cpu (user + sys) over wall time: 1 = one core busy. */
  redisCpu: number;
  /** This Node process's CPU over wall time. */
  nodeCpu: number;
  /** CPU every other process on the host used over wall time (other sessions, the kernel). */
  otherCpu: number;
  redisUsPerJob: number;
  /** µs Redis spent in scripts and module commands (INFO commandstats usec) per job. */
  scriptUsPerJob: number;
  nodeUsPerJob: number;
  /** Top-level script calls (EVALSHA/EVAL) per job. */
  scriptsPerJob: number;
  /** Every command Redis counted (including those run inside scripts) per job. */
  cmdsPerJob: number;
  /** The three most called commands, `name×calls/job`. */
  top: string;
}

async function redisCpuSeconds(admin: Redis): Promise<number> {
  const info = await admin.info('cpu');
  const user = Number(/^used_cpu_user:([\d.]+)/m.exec(info)?.[1] ?? 0);
  const sys = Number(/^used_cpu_sys:([\d.]+)/m.exec(info)?.[1] ?? 0);
  return user + sys;
}

/** Seconds of CPU the whole host spent busy (Linux /proc/stat; 0 elsewhere). */
function hostBusySeconds(): number {
  try {
    const line = readFileSync('/proc/stat', 'utf8').split('\n', 1)[0]!;
    const [user, nice, system, , , irq, softirq, steal] = line.trim().split(/\s+/).slice(1).map(Number);
    return ((user ?? 0) + (nice ?? 0) + (system ?? 0) + (irq ?? 0) + (softirq ?? 0) + (steal ?? 0)) / 100;
  } catch {
    return 0;
  }
}

/** Top-level work: scripts and the native module's commands (the calls inside them counted apart). */
const SCRIPTED = /^(eval|evalsha|eval_ro|evalsha_ro|fcall|fcall_ro|emq\..*)$/;

/** Calls per command since RESETSTAT, and the usec Redis spent in SCRIPTED commands. */
async function commandstats(admin: Redis): Promise<{ calls: Map<string, number>; scriptUsec: number }> {
  const calls = new Map<string, number>();
  let scriptUsec = 0;
  const info = await admin.info('commandstats');
  for (const m of info.matchAll(/^cmdstat_([^:]+):calls=(\d+),usec=(\d+)/gm)) {
    if (m[1] !== 'info' && m[1] !== 'config') calls.set(m[1]!, Number(m[2]));
    if (SCRIPTED.test(m[1]!)) scriptUsec += Number(m[3]);
  }
  return { calls, scriptUsec };
}

function makeContext(url: string, admin: Redis, sizes: Sizes, sink: { diag?: Diag }): RunContext {
  return {
    url,
    admin,
    sizes,
    queue: 'bench',
    async timed(jobs, fn) {
      await admin.config('RESETSTAT');
      const r0 = await redisCpuSeconds(admin);
      const h0 = hostBusySeconds();
      const c0 = process.cpuUsage();
      const t0 = performance.now();
      const value = await fn();
      const ms = performance.now() - t0;
      const c = process.cpuUsage(c0);
      const hostSec = hostBusySeconds() - h0;
      const redisSec = (await redisCpuSeconds(admin)) - r0;
      const { calls, scriptUsec } = await commandstats(admin);
      const total = [...calls.values()].reduce((a, b) => a + b, 0);
      let scripts = 0; // script calls of any transport (EVALSHA, EVAL, FCALL) and module commands
      for (const [name, n] of calls) if (SCRIPTED.test(name)) scripts += n;
      const nodeSec = (c.user + c.system) / 1e6;
      sink.diag = {
        redisCpu: redisSec / (ms / 1000),
        nodeCpu: nodeSec / (ms / 1000),
        otherCpu: hostSec === 0 ? 0 : Math.max(0, hostSec - redisSec - nodeSec) / (ms / 1000),
        redisUsPerJob: (redisSec * 1e6) / jobs,
        scriptUsPerJob: scriptUsec / jobs,
        nodeUsPerJob: (nodeSec * 1e6) / jobs,
        scriptsPerJob: scripts / jobs,
        cmdsPerJob: total / jobs,
        top: [...calls.entries()]
          .sort((a, b) => b[1] - a[1])
          .slice(0, 3)
          .map(([name, n]) => `${name}×${fmt(n / jobs, 2)}`)
          .join(' '),
      };
      return { ms, value, redisUs: (redisSec * 1e6) / jobs, scriptUs: scriptUsec / jobs };
    },
  };
}

/** Waits (up to 3 s) for every connection but the admin's to go; reports the ones left. */
async function leftoverClients(admin: Redis): Promise<number> {
  let extra = 0;
  for (let i = 0; i < 30; i++) {
    const info = await admin.info('clients');
    extra = Number(/^connected_clients:(\d+)/m.exec(info)?.[1] ?? 1) - 1;
    if (extra <= 0) return 0;
    await new Promise((r) => setTimeout(r, 100));
  }
  return extra;
}

// ── results ───────────────────────────────────────────────────────────────────

type Lib = 'echomq' | 'memory' | 'bullmq';

/**
 * Workloads EchoMQ also runs on its in-process memory engine (memory://, docs/guide/testing.md):
 * a column of their own, to show what a test or a demo on it can expect.
 */
const ON_MEMORY = new Set(['add-serial', 'add-100-in-flight', 'bulk-add-1000', 'process-c10']);
interface Sample {
  metrics: Record<string, number>;
  diag: Diag | undefined;
}

class Results {
  readonly samples = new Map<string, Record<Lib, Sample[]>>();
  readonly errors: string[] = [];

  add(id: string, lib: Lib, s: Sample): void {
    let r = this.samples.get(id);
    if (!r) {
      r = { echomq: [], memory: [], bullmq: [] };
      this.samples.set(id, r);
    }
    r[lib].push(s);
  }

  median(id: string, lib: Lib, key: string): number {
    return median((this.samples.get(id)?.[lib] ?? []).map((s) => s.metrics[key] ?? Number.NaN));
  }

  diag(id: string, lib: Lib): Diag | undefined {
    const ds = (this.samples.get(id)?.[lib] ?? []).map((s) => s.diag).filter((d): d is Diag => !!d);
    if (ds.length === 0) return undefined;
    const m = (f: (d: Diag) => number) => median(ds.map(f));
    return {
      redisCpu: m((d) => d.redisCpu),
      nodeCpu: m((d) => d.nodeCpu),
      otherCpu: m((d) => d.otherCpu),
      redisUsPerJob: m((d) => d.redisUsPerJob),
      scriptUsPerJob: m((d) => d.scriptUsPerJob),
      nodeUsPerJob: m((d) => d.nodeUsPerJob),
      scriptsPerJob: m((d) => d.scriptsPerJob),
      cmdsPerJob: m((d) => d.cmdsPerJob),
      top: ds[ds.length - 1]!.top,
    };
  }
}

function fmt(v: number | undefined, decimals: number): string {
  if (v === undefined || Number.isNaN(v)) return '-';
  return v.toLocaleString('en-US', { minimumFractionDigits: decimals, maximumFractionDigits: decimals });
}

function ratioOf(e: number, b: number): number | null {
  if (Number.isNaN(e) || Number.isNaN(b)) return null;
  if (b === 0) return e === 0 ? 1 : null;
  return e / b;
}

/** What the CPU figures say limited a run. */
function limitOf(d: Diag | undefined, paced: boolean): string {
  if (!d) return '-';
  const cpu = `R${fmt(d.redisCpu * 100, 0)} N${fmt(d.nodeCpu * 100, 0)} O${fmt(d.otherCpu * 100, 0)}`;
  if (paced) return `${cpu} paced`;
  const redis = d.redisCpu >= 0.8;
  const node = d.nodeCpu >= 0.8;
  // With 2 cores, other processes taking most of one leave Redis and Node contending for the other.
  const contended = d.otherCpu >= 0.5 && !redis && !node;
  return `${cpu} ${redis && node ? 'both' : redis ? 'redis' : node ? 'node' : contended ? 'host' : 'rtt'}`;
}

function table(rows: string[][]): string {
  const widths = rows[0]!.map((_, c) => Math.max(...rows.map((r) => (r[c] ?? '').length)));
  const line = (r: string[]) =>
    r
      .map((cell, c) => (c < 3 ? cell.padEnd(widths[c]!) : cell.padStart(widths[c]!)))
      .join('  ')
      .trimEnd();
  return [line(rows[0]!), widths.map((w) => '-'.repeat(w)).join('  '), ...rows.slice(1).map(line)].join('\n');
}

const PACED = new Set(['latency-500', 'delayed-1000ms', 'memory-waiting', 'memory-completed']);

function report(results: Results, workloads: Workload[], ceilings: Ceiling[], opts: Options, sizes: Sizes) {
  const rows: string[][] = [
    [
      'workload',
      'metric',
      'unit',
      'n',
      'EchoMQ',
      'memory://',
      'BullMQ',
      'E/B',
      'better',
      'EchoMQ cpu/limit',
      'BullMQ cpu/limit',
    ],
  ];
  const json: object[] = [];
  for (const w of workloads) {
    if (!results.samples.has(w.id)) continue;
    const ed = results.diag(w.id, 'echomq');
    const bd = results.diag(w.id, 'bullmq');
    const onMemory = results.samples.get(w.id)!.memory.length > 0;
    const out: Record<string, Record<string, number | null>> = {
      echomq: {},
      ...(onMemory ? { memory: {} } : {}),
      bullmq: {},
      ratio: {},
    };
    for (const [i, m] of w.metrics.entries()) {
      const e = results.median(w.id, 'echomq', m.key);
      const b = results.median(w.id, 'bullmq', m.key);
      const mem = results.median(w.id, 'memory', m.key);
      const r = ratioOf(e, b);
      out.echomq![m.key] = Number.isNaN(e) ? null : e;
      if (onMemory) out.memory![m.key] = Number.isNaN(mem) ? null : mem;
      out.bullmq![m.key] = Number.isNaN(b) ? null : b;
      out.ratio![m.key] = r;
      rows.push([
        i === 0 ? w.id : '',
        m.key,
        m.unit,
        i === 0 ? fmt(w.n(sizes), 0) : '',
        fmt(e, m.decimals),
        fmt(mem, m.decimals),
        fmt(b, m.decimals),
        r === null ? '-' : `${fmt(r, 2)}x`,
        m.better,
        i === 0 ? limitOf(ed, PACED.has(w.id)) : '',
        i === 0 ? limitOf(bd, PACED.has(w.id)) : '',
      ]);
    }
    json.push({
      workload: w.id,
      n: w.n(sizes),
      rounds: opts.rounds,
      ...out,
      units: Object.fromEntries(w.metrics.map((m) => [m.key, m.unit])),
      better: Object.fromEntries(w.metrics.map((m) => [m.key, m.better])),
      diag: { echomq: ed ?? null, bullmq: bd ?? null },
    });
  }
  console.log(`\nEchoMQ vs BullMQ: medians of ${opts.rounds} round(s), E/B = EchoMQ / BullMQ\n`);
  console.log(table(rows));

  const crow: string[][] = [
    [
      'ceiling',
      'n',
      'ceiling jobs/s',
      'redis µs/job',
      'redis-bound',
      'compared with',
      'EchoMQ jobs/s',
      'redis µs/job',
      'of ceiling',
      'ceiling cpu/limit',
    ],
  ];
  for (const c of ceilings) {
    if (!results.samples.has(c.id)) continue;
    const v = results.median(c.id, 'echomq', 'jobs_per_s');
    const d = results.diag(c.id, 'echomq');
    const ran = results.samples.has(c.compare);
    const lib = ran ? results.median(c.compare, 'echomq', 'jobs_per_s') : Number.NaN;
    const ld = ran ? results.diag(c.compare, 'echomq') : undefined;
    const frac = Number.isNaN(lib) ? null : lib / v;
    // What Redis would sustain with one core fully busy on this script mix: robust to a busy host.
    const bound = d ? 1e6 / d.redisUsPerJob : Number.NaN;
    crow.push([
      c.id,
      fmt(c.n(sizes), 0),
      fmt(v, 0),
      fmt(d?.redisUsPerJob, 1),
      fmt(bound, 0),
      c.compare,
      fmt(lib, 0),
      fmt(ld?.redisUsPerJob, 1),
      frac === null ? '-' : `${fmt(frac * 100, 0)}%`,
      limitOf(d, false),
    ]);
    json.push({
      workload: c.id,
      n: c.n(sizes),
      rounds: opts.rounds,
      echomq: { jobs_per_s: v, redis_us_per_job: d?.redisUsPerJob ?? null, redis_bound_jobs_per_s: bound },
      library: {
        workload: c.compare,
        jobs_per_s: Number.isNaN(lib) ? null : lib,
        redis_us_per_job: ld?.redisUsPerJob ?? null,
      },
      fraction: frac,
      diag: { echomq: d ?? null },
    });
  }
  if (crow.length > 1) {
    console.log(
      '\nCeiling: EchoMQ scripts driven by a bare pipelined client on the same Redis; redis-bound = 1e6 /' +
        ' redis µs per job, the rate with one Redis core fully busy; of ceiling = EchoMQ jobs/s / ceiling jobs/s\n',
    );
    console.log(table(crow));
  }

  console.log('\nLegend:');
  for (const w of workloads) if (results.samples.has(w.id)) console.log(`  ${w.id}: ${w.title}`);
  for (const c of ceilings) if (results.samples.has(c.id)) console.log(`  ${c.id}: ${c.title}`);
  console.log(
    '  cpu/limit: % of one core used by Redis (R), this Node process (N) and every other process (O) over\n' +
      '    the measured section; redis / node: that side was saturated (>= 80%); host: other processes took\n' +
      '    the CPU (a busy machine, figures are low); rtt: nothing saturated, waiting on round trips;\n' +
      '    paced: timer-driven',
  );
  const drows: string[][] = [
    [
      'workload',
      'lib',
      '',
      'redis µs/job',
      'script µs/job',
      'node µs/job',
      'scripts/job',
      'cmds/job',
      'of ceiling',
      'top commands per job',
    ],
  ];
  for (const id of [...workloads.map((w) => w.id), ...ceilings.map((c) => c.id)]) {
    const bound = workloads.find((w) => w.id === id)?.ceiling;
    const cd = bound ? results.diag(bound, 'echomq') : undefined;
    for (const lib of ['echomq', 'memory', 'bullmq'] as const) {
      const d = results.diag(id, lib);
      if (!d) continue;
      const of = lib === 'echomq' && cd ? `${fmt((cd.redisUsPerJob / d.redisUsPerJob) * 100, 0)}%` : '';
      drows.push([
        id,
        lib,
        '',
        fmt(d.redisUsPerJob, 1),
        fmt(d.scriptUsPerJob, 1),
        fmt(d.nodeUsPerJob, 1),
        fmt(d.scriptsPerJob, 2),
        fmt(d.cmdsPerJob, 1),
        of,
        d.top,
      ]);
    }
  }
  if (drows.length > 1) {
    console.log(
      '\nDiagnostics (medians): µs of CPU per job, µs Redis spent in scripts and module commands per job' +
        ' (INFO commandstats usec: no network I/O), and Redis commands per job (script-internal included);' +
        " of ceiling: the ceiling's Redis µs per job / the workload's (EchoMQ; 100% = as lean as the bare" +
        ' scripts; a scaling workload: its last, large case)',
    );
    console.log(table(drows));
  }
  console.log('\nJSON lines:');
  for (const j of json) console.log(JSON.stringify(j));
}

// ── main ──────────────────────────────────────────────────────────────────────

const LIBS: [Lib, Adapter][] = [
  ['echomq', echomqAdapter],
  ['bullmq', bullmqAdapter],
];

function withTimeout<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  return Promise.race([
    p,
    new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`${what} timed out after ${ms} ms`)), ms);
    }),
  ]).finally(() => clearTimeout(timer));
}

async function main(): Promise<number> {
  let opts: Options;
  try {
    opts = parseArgs(process.argv.slice(2));
  } catch (err) {
    if (!(err instanceof UsageError)) throw err;
    console.error(`${err.message}\n${USAGE}`);
    return 2;
  }
  const known = [...WORKLOADS.map((w) => w.id), ...CEILINGS.map((c) => c.id)];
  const unknown = (opts.only ?? []).filter((t) => !known.some((id) => selects([t], id)));
  if (unknown.length > 0) {
    console.error(`unknown workload ${unknown.join(', ')}\n${USAGE}`);
    return 2;
  }
  const sizes = SIZES[opts.mode];
  const workloads = WORKLOADS.filter((w) => selects(opts.only, w.id));
  const ceilings = CEILINGS.filter((c) => selects(opts.only, c.id));
  const runTimeout = { full: 300_000, large: 3_600_000, quick: 120_000, tiny: 120_000 }[opts.mode];

  const server = await RedisServer.start({
    args: [
      ...(opts.hz === undefined ? [] : ['--hz', String(opts.hz)]),
      ...(opts.module
        ? ['--loadmodule', fileURLToPath(new URL('../module/build/echomq.so', import.meta.url))]
        : []),
    ],
  });
  useProtocolVersion(opts.protocol);
  const loadBefore = loadavg()[0]!;
  const admin = server.client();
  // The memory engine of the memory:// column; its admin client is a client on it.
  const memory = { url: 'memory://bench', admin: memoryClient(MemoryEngine.forUrl('memory://bench')) };
  const results = new Results();
  const began = performance.now();
  try {
    const info = await admin.info('server');
    const redisVersion = /^redis_version:(\S+)/m.exec(info)?.[1] ?? '?';
    const hz = `${/^hz:(\d+)/m.exec(info)?.[1] ?? '?'}${opts.module ? ', the native module loaded' : ''}${
      opts.protocol !== Number(PROTOCOL_VERSION) ? `, EchoMQ queues at protocol version ${opts.protocol}` : ''
    }`;
    const bullVersion = (
      JSON.parse(readFileSync(new URL('../node_modules/bullmq/package.json', import.meta.url), 'utf8')) as {
        version: string;
      }
    ).version;
    const t0 = Date.now();
    const [sec, usec] = (await admin.time()) as unknown as [string | number, string | number];
    const t1 = Date.now();
    const clockOffset = Number(sec) * 1000 + Number(usec) / 1000 - (t0 + t1) / 2;
    console.error(
      `bench: ${opts.mode}, ${opts.rounds} round(s), redis-server ${redisVersion} (hz ${hz}) on :${server.port}, ` +
        `BullMQ ${bullVersion}, Node ${process.version}, ${cpus().length} CPUs`,
    );

    const onRedis = { url: server.url, admin };
    const runOne = async (
      id: string,
      lib: Lib,
      fn: (ctx: RunContext) => Promise<Record<string, number>>,
      target = onRedis,
    ) => {
      const admin = target.admin;
      await admin.flushall('SYNC');
      const sink: { diag?: Diag } = {};
      const ctx = makeContext(target.url, admin, sizes, sink);
      const t = performance.now();
      try {
        const metrics = await withTimeout(fn(ctx), runTimeout, `${id} ${lib}`);
        results.add(id, lib, { metrics, diag: sink.diag });
        const shown = Object.entries(metrics)
          .map(([k, v]) => `${k}=${fmt(v, v >= 100 ? 0 : 2)}`)
          .join(' ');
        console.error(
          `  ${id.padEnd(22)} ${lib.padEnd(6)} ${shown}  (${fmt((performance.now() - t) / 1000, 1)} s)`,
        );
      } catch (err) {
        results.errors.push(`${id} ${lib}: ${(err as Error).stack ?? String(err)}`);
        console.error(`  ${id.padEnd(22)} ${lib.padEnd(6)} FAILED: ${(err as Error).message}`);
      }
      const left = await leftoverClients(admin);
      if (left > 0) {
        results.errors.push(`${id} ${lib}: ${left} connection(s) left open after the run`);
        console.error(`  ${id} ${lib}: ${left} connection(s) still open after the run`);
      }
    };

    for (let round = 0; round < opts.rounds; round++) {
      console.error(`round ${round + 1}/${opts.rounds}`);
      const order = round % 2 === 0 ? LIBS : [...LIBS].reverse();
      for (const w of workloads) {
        for (const [lib, adapter] of order) await runOne(w.id, lib, (ctx) => w.run(adapter, ctx));
        if (ON_MEMORY.has(w.id)) await runOne(w.id, 'memory', (ctx) => w.run(echomqAdapter, ctx), memory);
      }
      for (const c of ceilings) {
        await runOne(c.id, 'echomq', async (ctx) => ({ jobs_per_s: await c.run(ctx) }));
      }
    }

    report(results, workloads, ceilings, opts, sizes);
    console.log('\nNotes:');
    console.log(
      `  redis-server ${redisVersion} (own instance, hz ${hz}, FLUSHALL SYNC before every run), BullMQ ` +
        `${bullVersion}, EchoMQ (this tree), Node ${process.version}, ${cpus().length} CPUs; every client in this ` +
        `one Node process. Host load average (1 min) ${fmt(loadBefore, 2)} at start, ${fmt(loadavg()[0], 2)} at end.`,
    );
    console.log(
      '  memory://: EchoMQ on its in-process memory engine (the scripts in an embedded Lua VM, no Redis, no' +
        ' network), in this Node process; its cpu/limit N is the engine and the library together.',
    );
    console.log(
      '  process-4x50: four consumer objects in one Node process, each with its own connections ' +
        '(EchoMQ: four EchoMQ.connect(); BullMQ: four Workers), so they share one Node core.',
    );
    console.log(
      '  latency-500: start − enqueue on the client monotonic clock (performance.now() carried in the payload).',
    );
    console.log(
      '  delayed-1000ms: start = Date.now() in the handler; EchoMQ intended instant = the row runat (server TIME' +
        ' + delay), BullMQ = job.timestamp + delay (client clock). Redis and Node share this host clock; ' +
        `measured offset Redis TIME − Date.now(): ${fmt(clockOffset, 2)} ms.`,
    );
    console.log(
      `  memory-*: used_memory delta / N with N = ${fmt(sizes.memory, 0)}, after a warm-up job on a side queue` +
        ' (scripts loaded); events streams included. EchoMQ trims completed jobs to 1,000, so its completed' +
        ' figure falls as N grows; BullMQ keeps every completed job.',
    );
    console.log(`  total bench time ${fmt((performance.now() - began) / 1000, 1)} s`);
  } finally {
    admin.disconnect();
    memory.admin.disconnect();
    MemoryEngine.drop('bench');
    await server.stop();
  }
  if (results.errors.length > 0) {
    console.error(`\n${results.errors.length} run(s) failed:`);
    for (const e of results.errors) console.error(`- ${e}`);
    return 1;
  }
  return 0;
}

main().then(
  (code) => process.exit(code),
  (err) => {
    console.error(err);
    process.exit(1);
  },
);
