// Node's own cost per job of a consumer: a private redis-server, a backlog of N jobs, one
// consumer at concurrency C with an empty handler; CPU µs per job (process.cpuUsage: shifts
// with load) and, under callgrind, this process's instructions per job (holds on a loaded
// machine). The first round warms the JIT up and is not reported. Mode `add` measures a producer
// instead: N serial `q.enqueue` calls, each awaited before the next (one round trip each).
//   npx tsx bench/node-cost.ts [C=1|add] [N=5000] [rounds=3]
//   VG=<dir> valgrind --tool=callgrind --callgrind-out-file=<dir>/cg.out --smc-check=all-non-file \
//     --separate-threads=yes node --import tsx bench/node-cost.ts 1 2000 3   (the last round's)
// Under valgrind the JIT warms up slowly: 3 rounds, and the main thread's figure, compare best.
//   PROF=<file.cpuprofile> npx tsx bench/node-cost.ts 1 5000 3: a V8 CPU profile of the last round
//   only (not the backlog's enqueueMany, not the warm-up), for bench/profile-groups.ts
import { execFileSync, spawn } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { Session } from 'node:inspector/promises';
import { createServer } from 'node:net';
import { EchoMQ } from '../src/index.js';
import { instructions, warmDumps, zeroInstructions } from './self-callgrind.js';

const MODE = process.argv[2] ?? '1';
const ADD = MODE === 'add';
const C = ADD ? 0 : Number(MODE);
const N = Number(process.argv[3] ?? 5000);
const ROUNDS = Number(process.argv[4] ?? 3);
const VG = process.env.VG;
const PROF = process.env.PROF;

/** The inspector's sampling profiler on this process, around the measured round only. */
async function profiled<T>(measured: boolean, body: () => Promise<T>): Promise<T> {
  if (!PROF || !measured) return body();
  const session = new Session();
  session.connect();
  await session.post('Profiler.enable');
  await session.post('Profiler.setSamplingInterval', { interval: 100 });
  await session.post('Profiler.start');
  try {
    return await body();
  } finally {
    const { profile } = await session.post('Profiler.stop');
    writeFileSync(PROF, JSON.stringify(profile));
    session.disconnect();
  }
}

const freePort = () =>
  new Promise<number>((res) => {
    const s = createServer();
    s.listen(0, () => {
      const p = (s.address() as { port: number }).port;
      s.close(() => res(p));
    });
  });

function report(
  what: string,
  cpu: NodeJS.CpuUsage,
  ms: number,
  ir: { all: number; main?: number } | undefined,
) {
  const us = (cpu.user + cpu.system) / N;
  const k = (n: number) => `${(n / N / 1000).toFixed(1)}k`;
  const main = ir?.main === undefined ? '' : ` (${k(ir.main)} main thread)`;
  const shown = ir === undefined ? '' : `, ${k(ir.all)} instructions/job${main}`;
  const sys = `${(cpu.system / N).toFixed(1)} system`;
  console.log(
    `${what}: ${us.toFixed(1)} µs CPU/job (${sys}), ${((N / ms) * 1000).toFixed(0)} jobs/s${shown}`,
  );
}

async function main() {
  const port = await freePort();
  const server = spawn('redis-server', ['--port', String(port), '--save', '', '--appendonly', 'no'], {
    stdio: 'ignore',
  });
  for (let i = 0; ; i++) {
    try {
      execFileSync('redis-cli', ['-p', String(port), 'ping'], { stdio: 'pipe' });
      break;
    } catch {
      if (i > 100) throw new Error('redis-server did not start');
      await new Promise((r) => setTimeout(r, 50));
    }
  }
  const mq = await EchoMQ.connect({ url: `redis://127.0.0.1:${port}` });
  try {
    // One dump cycle first: the dump code's own first run (compiling it) stays out of the count.
    if (VG) await warmDumps(VG);
    for (let round = 0; round <= ROUNDS; round++) {
      const q = mq.queue<{ i: number; s: string }, void>(`cost-${round}`);
      if (ADD) {
        await q.enqueue({ i: -1, s: '' }); // hello and the first call's setup, outside the count
        const measured = round === ROUNDS;
        if (VG && measured) await zeroInstructions(VG);
        const cpu0 = process.cpuUsage();
        const t0 = performance.now();
        await profiled(measured, async () => {
          for (let i = 0; i < N; i++) await q.enqueue({ i, s: 'x'.repeat(64) });
        });
        const cpu = process.cpuUsage(cpu0);
        const ms = performance.now() - t0;
        const ir = VG && measured ? await instructions(VG) : undefined;
        if (round > 0) report('add', cpu, ms, ir);
        continue;
      }
      const items = Array.from({ length: N }, (_, i) => ({ data: { i, s: 'x'.repeat(64) } }));
      for (let i = 0; i < items.length; i += 1000) await q.enqueueMany(items.slice(i, i + 1000));
      const measured = round === ROUNDS;
      if (VG && measured) await zeroInstructions(VG);
      let done = 0;
      let resolve!: () => void;
      const all = new Promise<void>((r) => (resolve = r));
      const cpu0 = process.cpuUsage();
      const t0 = performance.now();
      const consumer = await profiled(measured, async () => {
        const consumer = q.consume(async () => {}, { concurrency: C });
        consumer.on('completed', () => {
          if (++done === N) resolve();
        });
        await all;
        return consumer;
      });
      const cpu = process.cpuUsage(cpu0);
      const ms = performance.now() - t0;
      const ir = VG && measured ? await instructions(VG) : undefined;
      await consumer.close();
      if (round > 0) report(`c${C}`, cpu, ms, ir); // round 0 is the JIT's warm-up
    }
  } finally {
    await mq.close();
    server.kill();
  }
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
