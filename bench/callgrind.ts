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
//   native-add: EMQ.ENQUEUE (module/enqueue.c, enqueue.lua's plain case) against FCALL
//   enqueue, all sent by one plain client with the runtime's tuples (7 fields, default options):
//   N serial single-job calls and BULK (default 10000) jobs in calls of 1000, per job, on one
//   module-loaded server (timers off), then a check that both leave the same keyspace.
import { execFileSync, spawn } from 'node:child_process';
import { mkdirSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { encodeJob } from '../src/wire/admission.js';
import { PROTOCOL_VERSION } from '../src/wire/keyspace.js';
import { buildLibrary } from '../src/wire/library.js';
import { queueLimits } from '../src/wire/queue-wire.js';
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
const moduleEnv = process.env.MODULE ?? (native || what === 'native-add' ? '1' : '');
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
  /**
   * The plain enqueue by FCALL and by the module command EMQ.ENQUEUE, one plain client, the
   * runtime's 7-field tuples: serial single-job calls, then calls of 1000. Instructions per job.
   */
  const nativeAdd = async (): Promise<string[]> => {
    const r = new Redis(url);
    // SCRIPTS=<dir>: the FCALL rows run that directory's scripts (the runtime's rows its own).
    const lib = buildLibrary(loadScripts(process.env.SCRIPTS).values());
    const fname = lib.functions.get('enqueue')!.name;
    const limits = queueLimits({});
    const KEYS = ['pending', 'events', 'wake', 'meta', 'ring'];
    const paths: [string, string[]][] = [
      ['FCALL enqueue', ['FCALL', fname]],
      ['EMQ.ENQUEUE', ['EMQ.ENQUEUE']],
    ];
    const send = (how: string[], p: string, tuples: string[]) =>
      r.call(how[0]!, ...how.slice(1), KEYS.length, ...KEYS.map((k) => p + k), p, ...tuples);
    /** The runtime's tuples for `q.enqueue(data)`, each id minted when its call is made. */
    const tuples = (items: unknown[]) =>
      items.flatMap((d) => {
        const j = encodeJob(d, undefined, limits);
        return [j.id, j.payload, j.priority, j.group, j.name, j.max, j.backoff];
      });
    const out: string[] = [];
    const BULK = Number(process.env.BULK ?? 10000);
    // The references: the runtime itself (q.enqueue, q.enqueueMany), as `add` measures it, and
    // BullMQ (add, addBulk) on the same server (BULLMQ=0 leaves it out).
    const references: [string, Adapter][] = [['runtime (q.enqueue, enqueueMany)', echomqAdapter]];
    if (process.env.BULLMQ !== '0') references.push(['bullmq (add, addBulk)', bullmqAdapter]);
    for (const [label, a] of references) {
      const s = await a.open(url, `nadd-${a.name}-${Date.now()}`);
      const items = payloads(N + 50);
      for (const d of items.slice(0, 50)) await s.add(d);
      zero();
      for (const d of items.slice(50)) await s.add(d);
      out.push(`${label} serial: ${(total() / N / 1000).toFixed(1)}k instr/job (N=${N})${stats(N)}`);
      const bulkItems = payloads(BULK + 1000);
      await s.addBulk(bulkItems.slice(0, 1000));
      zero();
      for (let i = 1000; i < bulkItems.length; i += 1000) await s.addBulk(bulkItems.slice(i, i + 1000));
      out.push(`${label} bulk 1000: ${(total() / BULK / 1000).toFixed(1)}k instr/job (${BULK} jobs)`);
      await s.close();
    }
    await r.call('FUNCTION', 'LOAD', 'REPLACE', lib.code);
    for (const [label, how] of paths) {
      const p = `emq:{nadd-${how[0]}-${Date.now()}}:`;
      await r.hset(`${p}meta`, 'version', '2'); // what the runtime's first call leaves
      const items = payloads(N + 50);
      for (const d of items.slice(0, 50)) await send(how, p, tuples([d]));
      zero();
      for (const d of items.slice(50)) await send(how, p, tuples([d]));
      out.push(`${label} serial: ${(total() / N / 1000).toFixed(1)}k instr/job (N=${N})${stats(N)}`);
      const bp = `emq:{nbulk-${how[0]}-${Date.now()}}:`;
      await r.hset(`${bp}meta`, 'version', '2');
      const bulk = payloads(BULK + 1000);
      await send(how, bp, tuples(bulk.slice(0, 1000)));
      zero();
      for (let i = 1000; i < bulk.length; i += 1000) await send(how, bp, tuples(bulk.slice(i, i + 1000)));
      out.push(
        `${label} bulk 1000: ${(total() / BULK / 1000).toFixed(1)}k instr/job (${BULK} jobs)${stats(BULK)}`,
      );
    }
    out.push(await sameKeyspace(r, paths, send, tuples));
    r.disconnect();
    return out;
  };
  const rows: string[] = [];
  try {
    if (what === 'native-add') rows.push(...(await nativeAdd()));
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
/**
 * The same calls sent to one queue per path, in step: the replies and what each queue holds
 * (rows, pending, events and wake entries without their stream ids, `created` as present or
 * not) must agree. Covers serial and bulk calls, a caller's id (created written), priority,
 * name, max and backoff, an id named twice in a call, existing ids, ids in the idempotency
 * window, names that differ (one entry a job), a call of duplicates only, a 9-field call, and
 * a non-plain call (refused by the module, nothing written).
 */
async function sameKeyspace(
  r: Redis,
  paths: [string, string[]][],
  send: (how: string[], p: string, tuples: string[]) => Promise<unknown>,
  tuples: (items: unknown[]) => string[],
): Promise<string> {
  const stamp = Date.now();
  const prefixes = paths.map(([, how]) => `emq:{same-${how[0]}-${stamp}}:`);
  for (const p of prefixes) {
    await r.hset(`${p}meta`, 'version', '2');
    await r.zadd(`${p}ids:ended`, stamp, 'JOBended', stamp - 2 * 86400000, 'JOBlongago');
  }
  const own = (id: string, fields: string[]) => [id, ...fields];
  const calls: string[][] = [];
  for (let i = 0; i < 20; i++) calls.push(tuples([{ i }]));
  calls.push(own('JOBcustom1', ['{"c":1}', '5', '', 'n', '5', '{"type":"fixed","delay":10}']));
  const big = tuples(payloads(1000));
  big.splice(500 * 7, 7, ...big.slice(10 * 7, 11 * 7)); // an id named twice
  big.splice(900 * 7, 7, ...calls[3]!); // an id that exists
  calls.push(big);
  calls.push(
    tuples(payloads(50)).map((v, i) => (i % 7 === 4 ? `name${Math.floor(i / 7) % 3}` : v)), // names differ
  );
  calls.push([...own('JOBended', ['{}', '0', '', '', '3', '']), ...tuples([{ e: 1 }])]);
  calls.push([...own('JOBlongago', ['{}', '0', '', '', '3', ''])]);
  calls.push([...calls[0]!, ...calls[1]!]); // duplicates only
  calls.push([...tuples([{ nine: 1 }]), '', '', ...tuples([{ nine: 2 }]), '', '']);
  const refused = [...tuples([{ g: 1 }])];
  refused[3] = 'a-group';
  const problems: string[] = [];
  for (const [n, c] of calls.entries()) {
    const replies: string[] = [];
    for (const [i, [, how]] of paths.entries())
      replies.push(JSON.stringify(await send(how, prefixes[i]!, c).catch((e: Error) => e.message)));
    if (new Set(replies).size !== 1) problems.push(`call ${n}: replies ${replies.join(' / ')}`);
  }
  const states = [];
  for (const p of prefixes) states.push(await plainState(r, p));
  for (const [i, [, how]] of paths.entries()) {
    if (i === 0) continue;
    const before = JSON.stringify(states[i]);
    const reply = await send(how, prefixes[i]!, refused).catch((e: Error) => e.message);
    if (!String(reply).startsWith('EMQNATIVE not plain'))
      problems.push(`${how[0]} non-plain replied ${reply}`);
    if (JSON.stringify(await plainState(r, prefixes[i]!)) !== before)
      problems.push(`${how[0]} non-plain wrote`);
    if (JSON.stringify(states[i]) !== JSON.stringify(states[0]))
      problems.push(`${how[0]} keyspace differs from the script's: ${diff(states[0]!, states[i]!)}`);
  }
  const keys = Object.keys(states[0]!).length;
  return problems.length === 0
    ? `same keyspace: ${calls.length} calls, ${keys} keys, every path alike (replies, rows, pending, events, wake)`
    : `DIFFERENT:\n  ${problems.join('\n  ')}`;
}

/** A queue's keys under `p` by their name after it, stream entries without ids, `created` as 'T'. */
async function plainState(r: Redis, p: string): Promise<Record<string, unknown>> {
  const keys = ((await r.keys(`${p}*`)) as string[]).sort();
  const out: Record<string, unknown> = {};
  for (const k of keys) {
    const type = await r.type(k);
    let v: unknown;
    if (type === 'hash') {
      const h = await r.hgetall(k);
      if (h.created !== undefined) h.created = 'T';
      v = Object.entries(h).sort();
    } else if (type === 'zset') v = await r.zrange(k, 0, -1, 'WITHSCORES');
    else if (type === 'stream') v = ((await r.xrange(k, '-', '+')) as [string, string[]][]).map(([, f]) => f);
    else v = type;
    out[k.slice(p.length)] = v;
  }
  return out;
}

function diff(a: Record<string, unknown>, b: Record<string, unknown>): string {
  const names = new Set([...Object.keys(a), ...Object.keys(b)]);
  const out: string[] = [];
  for (const n of names) {
    const x = JSON.stringify(a[n]);
    const y = JSON.stringify(b[n]);
    if (x !== y) out.push(`${n}: ${x?.slice(0, 200)} vs ${y?.slice(0, 200)}`);
  }
  return out.slice(0, 5).join('; ');
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
