// Redis instructions per job under callgrind: a private redis-server run by valgrind (--hz 1, so
// its idle cron is ~0.1M instructions/s), EchoMQ and BullMQ driven through bench/adapters, counts
// zeroed after a warm-up (1,100 jobs for c1, so retention is at its steady state) and divided by N.
// Instruction counts hold on a loaded machine where seconds do not. Needs valgrind.
//   npx tsx bench/callgrind.ts [c1|c100|4x50|add|wire|wire100|all|idle] [N=2000] [echomq|bullmq|both]   (STATS=1: commands/job;
//   PROTOCOL=2: EchoMQ's queues at protocol version 2)
//   c100: N processed at concurrency 100 out of a backlog of WAITING (default N) jobs
//   4x50: the same with 4 consumers of 50, each on its own connection (bench's process-4x50)
//   wire: EchoMQ only, complete+claim at c1 sent by one plain client, no consumer: the scripts'
//   own cost. A consumer's timers (recovery, promote, heartbeat) run per second, and valgrind
//   stretches the run to 10-20 s by the machine's load, so c1's figure carries ~10k of them per
//   job that moves from run to run; wire's does not, so it is the one to compare script changes by.
//   wire100: the same with 100 jobs completed and 100 claimed per call (c100's batches without a
//   consumer's timers, whose share of c100's figure moves with the machine's load)
//   SCRIPTS=<dir>: wire runs the scripts of that directory (a baseline checkout's protocol/scripts)
//   SCRIPTS_VIA=eval|functions: EVALSHA or FCALL (connect's `scripts`; default functions), every row
//   MODULE=1: the native module (module/build/echomq.so, timers off) loaded into the valgrind'd
//   server, so a consumer sends complete+claim as EMQ.COMPLETE and its sweeps as module commands;
//   MODULE=<path>: another build of it. NATIVE=1 (implies MODULE=1): wire and wire100 send
//   complete+claim as EMQ.COMPLETE too (module/complete.c, complete.lua's plain case)
import { execFileSync, spawn } from 'node:child_process';
import { mkdirSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { PROTOCOL_VERSION } from '../src/wire/keyspace.js';
import { buildLibrary } from '../src/wire/library.js';
import { loadScripts } from '../src/wire/scripts.js';
import type { Adapter } from './adapters/adapter.js';
import { bullmqAdapter } from './adapters/bullmq.js';
import { echomqAdapter, scriptsVia, useProtocolVersion } from './adapters/echomq.js';
import { payloads } from './workloads.js';

const what = process.argv[2] ?? 'all';
const N = Number(process.argv[3] ?? 2000);
const libs = (process.argv[4] ?? 'both') === 'both' ? ['echomq', 'bullmq'] : [process.argv[4]!];
const OUT = join(tmpdir(), `emq-callgrind-${process.pid}`);
const native = process.env.NATIVE === '1';
const nativeCommand = 'EMQ.COMPLETE';
const moduleEnv = process.env.MODULE ?? (native ? '1' : '');
const MODULE =
  moduleEnv === '' || moduleEnv === '0'
    ? undefined
    : moduleEnv === '1'
      ? join(import.meta.dirname, '..', 'module', 'build', 'echomq.so')
      : moduleEnv;

const freePort = () =>
  new Promise<number>((res) => {
    const s = createServer();
    s.listen(0, () => {
      const p = (s.address() as { port: number }).port;
      s.close(() => res(p));
    });
  });

async function main() {
  if (process.env.PROTOCOL !== undefined && process.env.PROTOCOL !== '1' && process.env.PROTOCOL !== '2') {
    throw new Error(`PROTOCOL must be 1 or 2, got ${JSON.stringify(process.env.PROTOCOL)}`);
  }
  // PROTOCOL unset: the runtime's default version (2); PROTOCOL=1 for version 1's rows.
  useProtocolVersion(Number(process.env.PROTOCOL ?? PROTOCOL_VERSION) as 1 | 2);
  const adapters: Record<string, Adapter> = { echomq: echomqAdapter, bullmq: bullmqAdapter };
  mkdirSync(OUT, { recursive: true });
  const port = await freePort();
  const vg = spawn(
    'valgrind',
    [
      '--tool=callgrind',
      `--callgrind-out-file=${OUT}/cg.out`,
      'redis-server',
      '--port',
      String(port),
      '--save',
      '',
      '--appendonly',
      'no',
      '--hz',
      process.env.HZ ?? '1',
      ...(MODULE ? ['--loadmodule', MODULE, 'timers', 'off'] : []),
    ],
    { stdio: ['ignore', 'ignore', 'pipe'] },
  );
  let vgerr = '';
  vg.stderr.on('data', (d) => (vgerr += d));
  const url = `redis://127.0.0.1:${port}`;
  // wait for it
  for (let i = 0; ; i++) {
    try {
      execFileSync('redis-cli', ['-p', String(port), 'ping'], { stdio: 'pipe' });
      break;
    } catch {
      if (i > 300) throw new Error(`redis did not start: ${vgerr}`);
      await new Promise((r) => setTimeout(r, 100));
    }
  }
  const pid = vg.pid!;
  const cli = (...a: string[]) => execFileSync('redis-cli', ['-p', String(port), ...a], { encoding: 'utf8' });
  const zero = () => {
    cli('CONFIG', 'RESETSTAT');
    execFileSync('callgrind_control', ['-z', String(pid)], { stdio: 'pipe' });
  };
  const stats = (n: number) => {
    if (!process.env.STATS) return '';
    const out: string[] = [];
    for (const m of cli('INFO', 'commandstats').matchAll(/cmdstat_(\S+):calls=(\d+),usec=(\d+)/g))
      out.push(`${m[1]}=${(Number(m[2]) / n).toFixed(2)}`);
    return `\n   ${out.join(' ')}`;
  };
  const total = (): number => {
    execFileSync('callgrind_control', ['-d', String(pid)], { stdio: 'pipe' });
    const files = readdirSync(OUT).filter((f) => /^cg\.out\.\d+/.test(f));
    const f = files
      .map((f) => [Number(f.split('.')[2]!.split('-')[0]), f] as const)
      .sort((a, b) => b[0] - a[0])[0]![1];
    const text = readFileSync(`${OUT}/${f}`, 'utf8');
    let sum = 0;
    for (const m of text.matchAll(/^(?:summary|totals): (\d+)/gm)) sum = Math.max(sum, Number(m[1]));
    return sum;
  };
  /**
   * Processes N jobs with `consumers` consumers at `concurrency` each (each its own connection)
   * out of a backlog of `waiting` (+ the warm-up's), after a warm-up of WARM jobs (1,100:
   * retention at its steady state): instructions per job.
   */
  const processing = async (a: Adapter, lib: string, concurrency: number, waiting: number, consumers = 1) => {
    const shape = consumers === 1 ? `c${concurrency}` : `${consumers}x${concurrency}`;
    const q = `${shape}-${lib}-${Date.now()}`;
    const s = await a.open(url, q);
    const others = await Promise.all(Array.from({ length: consumers - 1 }, () => a.open(url, q)));
    const warm = Number(process.env.WARM ?? 1100);
    const items = payloads(Math.max(waiting, N) + warm);
    for (let i = 0; i < items.length; i += 1000) await s.addBulk(items.slice(i, i + 1000));
    let done = 0;
    let resolve!: () => void;
    const all = new Promise<void>((r) => (resolve = r));
    let startW!: () => void;
    const warmed = new Promise<void>((r) => (startW = r));
    const onCompleted = () => {
      done++;
      if (done === warm) startW();
      if (done === warm + N) resolve();
    };
    const runners: Awaited<ReturnType<typeof s.consume>>[] = [];
    for (const session of [s, ...others]) runners.push(await session.consume(concurrency, { onCompleted }));
    for (const r of runners) r.start();
    await warmed;
    zero();
    const t0 = performance.now();
    await all;
    const ir = total();
    const ms = performance.now() - t0;
    for (const r of runners) await r.close();
    for (const session of [s, ...others]) await session.close();
    const backlog = concurrency === 1 ? '' : `, backlog ${Math.max(waiting, N) + warm}`;
    return (
      `${lib} ${shape}: ${(ir / N / 1000).toFixed(1)}k instr/job (N=${N}${backlog}, ${ms.toFixed(0)} ms, total ${ir}${MODULE ? ', module loaded' : ''})` +
      stats(N)
    );
  };
  /**
   * complete+claim from one plain client, `batch` jobs per call (1: c1): after WARM completions,
   * per job.
   */
  const wire = async (batch: number) => {
    const q = `wire-${Date.now()}`;
    const s = await echomqAdapter.open(url, q);
    const warm = Number(process.env.WARM ?? 1100);
    const items = payloads(N + warm + batch);
    for (let i = 0; i < items.length; i += 1000) await s.addBulk(items.slice(i, i + 1000));
    await s.close();
    const scripts = loadScripts(process.env.SCRIPTS);
    const r = new Redis(url);
    const p = `emq:{${q}}:`;
    const viaEval = scriptsVia() === 'eval';
    const lib = buildLibrary(scripts.values());
    if (viaEval) for (const name of ['claim', 'complete']) await r.script('LOAD', scripts.get(name)!.body);
    else await r.call('FUNCTION', 'LOAD', 'REPLACE', lib.code);
    const run = async (name: string, argv: string[]) => {
      const sc = scripts.get(name)!;
      const keys = sc.keys.map((k) => p + k);
      if (native && name === 'complete')
        return (await r.call(nativeCommand, keys.length, ...keys, ...argv)) as unknown[];
      if (viaEval) return (await r.evalsha(sc.sha, keys.length, ...keys, ...argv)) as unknown[];
      return (await r.call(
        'FCALL',
        lib.functions.get(name)!.name,
        keys.length,
        ...keys,
        ...argv,
      )) as unknown[];
    };
    const held = (flat: unknown[]) => {
      const triples: string[] = [];
      for (let i = 0; i < flat.length; i += 7) triples.push(String(flat[i]), String(flat[i + 1]), '');
      return triples;
    };
    let jobs = held((await run('claim', [p, String(batch), '30000', 'wire']))[0] as unknown[]);
    const step = async () => {
      const reply = await run('complete', [p, '30000', String(batch), ...jobs, 'wire']);
      jobs = held(reply[1] as unknown[]);
    };
    for (let i = 0; i < warm / batch; i++) await step();
    zero();
    for (let i = 0; i < N / batch; i++) await step();
    const ir = total();
    r.disconnect();
    return `echomq wire c${batch}: ${(ir / N / 1000).toFixed(1)}k instr/job (N=${N}, complete+claim by ${native ? nativeCommand : viaEval ? 'EVALSHA' : 'FCALL'}, no consumer)${stats(N)}`;
  };
  const rows: string[] = [];
  try {
    if (what === 'wire') rows.push(await wire(1));
    if (what === 'wire100') rows.push(await wire(100));
    for (const lib of libs) {
      const a = adapters[lib];
      if (!a) throw new Error(`no library ${lib}: echomq, bullmq or both`);
      if (what === 'c1' || what === 'all') rows.push(await processing(a, lib, 1, N));
      if (what === 'c100') rows.push(await processing(a, lib, 100, Number(process.env.WAITING ?? N)));
      if (what === '4x50') rows.push(await processing(a, lib, 50, Number(process.env.WAITING ?? N), 4));
      if (what === 'idle') {
        zero();
        await new Promise((r) => setTimeout(r, 5000));
        rows.push(`idle 5 s: ${total()}`);
      }
      if (what === 'add' || what === 'all') {
        const q = `add-${lib}-${Date.now()}`;
        const s = await a.open(url, q);
        const items = payloads(N + 50);
        for (const d of items.slice(0, 50)) await s.add(d); // warm
        zero();
        const t0 = performance.now();
        for (const d of items.slice(50)) await s.add(d);
        const ir = total();
        const ms = performance.now() - t0;
        rows.push(
          `${lib} add: ${(ir / N / 1000).toFixed(1)}k instr/add (N=${N}, ${ms.toFixed(0)} ms)${stats(N)}`,
        );
        await s.close();
      }
    }
  } finally {
    vg.kill('SIGTERM');
  }
  await new Promise((r) => vg.on('exit', r));
  if (!process.env.KEEP) rmSync(OUT, { recursive: true, force: true });
  else console.log('dumps in', OUT);
  for (const r of rows) console.log(r);
  process.exit(0);
}
main().catch((e) => {
  console.error(e);
  process.exit(1);
});
