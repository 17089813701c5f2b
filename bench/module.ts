// The native module's bench: `npm run bench:module [-- --quick] [--rounds n]`. Starts its own
// redis-server with module/build/echomq.so loaded (built with make first) and, for each sweep
// and batch size, moves the same N due jobs once with the script (EVALSHA) and once with the
// module command, alternately, FLUSHALL before each run. Reports the Redis time per moved job
// two ways: the CPU the redis-server process used over the sweeps (INFO cpu; robust on a busy
// machine, where the process waits for a core), and the sweep command's own time (INFO
// commandstats usec, nested calls included; wall time inside the command), with the wall rate,
// medians across rounds, as a table and JSON lines. Progress goes to stderr, results to stdout.
import { execFileSync } from 'node:child_process';
import { join } from 'node:path';
import type { Redis } from 'ioredis';
import { NATIVE_COMMANDS } from '../src/wire/native-module.js';
import { script } from '../src/wire/scripts.js';
import { RedisServer } from '../test/support/redis-server.js';
import { median } from './stats.js';

type Sweep = 'promote' | 'sweep_stalled';
type Mode = 'script' | 'module';

interface Case {
  id: string;
  title: string;
  sweep: Sweep;
  /** Jobs in lanes (10 groups, no concurrency limit) rather than flat pending. */
  lanes: boolean;
  batch: number;
}

const CASES: Case[] = [100, 1000].flatMap((batch) => [
  { id: `promote-flat-b${batch}`, title: 'promote, flat jobs', sweep: 'promote', lanes: false, batch },
  { id: `promote-lanes-b${batch}`, title: 'promote, jobs in 10 lanes', sweep: 'promote', lanes: true, batch },
  {
    id: `stalled-flat-b${batch}`,
    title: 'sweep_stalled, flat jobs',
    sweep: 'sweep_stalled',
    lanes: false,
    batch,
  },
]);

const PREFIX = 'emq:{bench}:';

/** N rows due now: scheduled (promote) or active with an expired lease (sweep_stalled). */
async function seed(client: Redis, c: Case, n: number): Promise<void> {
  for (let start = 0; start < n; start += 1000) {
    const p = client.pipeline();
    const set = c.sweep === 'promote' ? 'schedule' : 'active';
    const members: (string | number)[] = [];
    for (let i = start; i < Math.min(n, start + 1000); i++) {
      const id = `JOB${String(i).padStart(8, '0')}`;
      const row = [
        'state',
        c.sweep === 'promote' ? 'scheduled' : 'active',
        'payload',
        `{"i":${i}}`,
        'created',
        '1',
      ];
      if (c.lanes) row.push('group', `g${i % 10}`);
      p.hset(`${PREFIX}job:${id}`, ...row);
      members.push(1000 + i, id);
    }
    p.zadd(`${PREFIX}${set}`, ...members);
    await p.exec();
  }
}

async function redisCpuUs(admin: Redis): Promise<number> {
  const info = await admin.info('cpu');
  const user = Number(/^used_cpu_user:([\d.]+)/m.exec(info)?.[1] ?? 0);
  const sys = Number(/^used_cpu_sys:([\d.]+)/m.exec(info)?.[1] ?? 0);
  return (user + sys) * 1e6;
}

async function usecOf(admin: Redis, command: string): Promise<number> {
  const info = await admin.info('commandstats');
  const m = new RegExp(`^cmdstat_${command.replace('.', '\\.')}:calls=\\d+,usec=(\\d+)`, 'm').exec(info);
  return Number(m?.[1] ?? 0);
}

/** Sweeps until nothing is left; returns Redis µs per job and jobs per second of wall time. */
async function run(client: Redis, admin: Redis, c: Case, mode: Mode, n: number) {
  await admin.flushall('SYNC');
  await seed(client, c, n);
  const s = script(c.sweep);
  const keys = s.keys.map((k) => PREFIX + k);
  const argv = c.sweep === 'promote' ? [PREFIX, String(c.batch)] : [PREFIX, '5', String(c.batch)];
  const command = NATIVE_COMMANDS[c.sweep];
  await client.script('LOAD', s.body);
  await admin.config('RESETSTAT');
  let moved = 0;
  const cpu0 = await redisCpuUs(admin);
  const t0 = performance.now();
  for (;;) {
    const reply =
      mode === 'script'
        ? await client.evalsha(s.sha, keys.length, ...keys, ...argv)
        : await client.call(command, keys.length, ...keys, ...argv);
    const count = c.sweep === 'promote' ? (reply as number) : (reply as string[][])[0]!.length;
    moved += count;
    if (count < c.batch) break;
  }
  const ms = performance.now() - t0;
  const cpuUs = (await redisCpuUs(admin)) - cpu0;
  if (moved !== n) throw new Error(`${c.id} ${mode}: moved ${moved} of ${n}`);
  const usec = await usecOf(admin, mode === 'script' ? 'evalsha' : command.toLowerCase());
  return { cpuPerJob: cpuUs / n, usPerJob: usec / n, jobsPerSec: (n * 1000) / ms };
}

function fmt(v: number, decimals: number): string {
  return v.toLocaleString('en-US', { minimumFractionDigits: decimals, maximumFractionDigits: decimals });
}

async function main(): Promise<number> {
  const args = process.argv.slice(2);
  const quick = args.includes('--quick');
  const roundsAt = args.indexOf('--rounds');
  const rounds = roundsAt >= 0 ? Number(args[roundsAt + 1]) : quick ? 1 : 3;
  const n = quick ? 2000 : 20_000;
  execFileSync('make', ['-s', '-C', join(import.meta.dirname, '..', 'module')], { stdio: 'inherit' });
  const server = await RedisServer.start({
    // Timers off: each case times one sweep of a state it built, which a timer would take first.
    args: ['--loadmodule', join(import.meta.dirname, '..', 'module', 'build', 'echomq.so'), 'timers', 'off'],
  });
  const client = server.client();
  const admin = server.client();
  try {
    const version = /^redis_version:(\S+)/m.exec(await admin.info('server'))?.[1] ?? '?';
    console.error(`bench:module: ${n} jobs per run, ${rounds} round(s), redis-server ${version}`);
    const rows: string[] = [];
    for (const c of CASES) {
      type Sample = Awaited<ReturnType<typeof run>>;
      const samples: Record<Mode, Sample[]> = { script: [], module: [] };
      for (let r = 0; r < rounds; r++) {
        const order: Mode[] = r % 2 === 0 ? ['script', 'module'] : ['module', 'script'];
        for (const mode of order) {
          const result = await run(client, admin, c, mode, n);
          samples[mode].push(result);
          console.error(
            `  ${c.id.padEnd(20)} ${mode.padEnd(6)} cpu ${fmt(result.cpuPerJob, 2)} µs/job, command ${fmt(result.usPerJob, 2)} µs/job`,
          );
        }
      }
      const med = (mode: Mode, k: keyof Sample) => median(samples[mode].map((x) => x[k]));
      const row = {
        id: c.id,
        title: `${c.title}, batch ${c.batch}`,
        script_cpu_us_per_job: med('script', 'cpuPerJob'),
        module_cpu_us_per_job: med('module', 'cpuPerJob'),
        script_us_per_job: med('script', 'usPerJob'),
        module_us_per_job: med('module', 'usPerJob'),
        script_jobs_per_s: med('script', 'jobsPerSec'),
        module_jobs_per_s: med('module', 'jobsPerSec'),
      };
      rows.push(JSON.stringify(row));
      console.log(
        `| ${row.title} | ${fmt(row.script_cpu_us_per_job, 2)} | ${fmt(row.module_cpu_us_per_job, 2)} | ` +
          `${fmt(row.script_cpu_us_per_job / row.module_cpu_us_per_job, 2)}x | ${fmt(row.script_us_per_job, 2)} | ` +
          `${fmt(row.module_us_per_job, 2)} | ${fmt(row.script_jobs_per_s, 0)} | ${fmt(row.module_jobs_per_s, 0)} |`,
      );
    }
    console.log(rows.join('\n'));
    return 0;
  } finally {
    await client.quit();
    await admin.quit();
    await server.stop();
  }
}

console.log(
  '| sweep | script: Redis CPU µs/job | module: Redis CPU µs/job | script/module | script: command µs/job | module: command µs/job | script jobs/s | module jobs/s |\n|---|---|---|---|---|---|---|---|',
);
process.exitCode = await main();
