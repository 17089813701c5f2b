// Is ioredis the Node side's floor? The two hot calls of EchoMQ, sent the same way by three
// clients on the same private redis-server, and each client's Node cost per call:
//   enqueue  one serial `FCALL <library>_enqueue` per job (a producer's q.enqueue, awaited one
//            by one), minted ids and payloads built before the clock starts;
//   complete one `FCALL <library>_complete` per job, completing the job held and claiming the
//            next (a c1 consumer's call, with its consumer name), awaited one by one.
// The arguments are the connector's (src/wire/connector.ts runScript: one array, the function's
// name, the key count, KEYS, ARGV with numbers as numbers), taken from a MONITOR of the library.
// The clients:
//   ioredis     `redis.call('FCALL', args)`, as the connector sends every script call;
//   node-redis  `client.sendCommand(['FCALL', ...args as strings])`, RESP2 like ioredis (node-redis
//               takes strings and Buffers only); not a dependency: `npm install --no-save redis`
//               here, or NODE_REDIS_FROM=<a directory where it is installed>;
//   raw         bench/raw-resp.ts: one Buffer per call on a net.Socket, replies parsed in place;
//   raw-string  the same writing the RESP text as it is (Node encodes it into the write), as
//               ioredis writes a command.
// Per call: CPU µs (process.cpuUsage: all threads, moves with the machine's load; its system part
// is mostly the socket's syscalls, which no client changes) and, under callgrind, this process's
// instructions (main thread and all threads). Round 0 warms the JIT up and is not reported; each
// later round is reported, then the median (min-max) of the µs.
//   npx tsx bench/client-cost.ts [ioredis|node-redis|raw|raw-string|all|a,b] [N=5000] [rounds=3]
//   VG=<dir> valgrind --tool=callgrind --callgrind-out-file=<dir>/cg.out --smc-check=all-non-file \
//     --separate-threads=yes node --import tsx bench/client-cost.ts raw 2000 3   (the last round's)
// Under valgrind run one client per process: clients in one process share V8's profile of the
// net and stream code, and each run's JIT warm-up differs; compare the main thread's figures.
// Several clients in one process take turns within each round (the order rotated), so a loaded
// machine weighs on them alike: the way to compare their µs.
import { execFileSync, spawn } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { createServer } from 'node:net';
import { dirname, join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { Redis } from 'ioredis';
import { mintJobId } from '../src/core/ids.js';
import { library } from '../src/wire/functions.js';
import { script } from '../src/wire/scripts.js';
import { RawRespClient, type RespArg, type WriteAs } from './raw-resp.js';
import { instructions, warmDumps, zeroInstructions } from './self-callgrind.js';

const CLIENTS = ['ioredis', 'node-redis', 'raw', 'raw-string'] as const;
type ClientName = (typeof CLIENTS)[number];
const chosen = process.argv[2] ?? 'all';
const names: ClientName[] =
  chosen === 'all' ? [...CLIENTS] : (chosen.split(',') as ClientName[]).filter((c) => CLIENTS.includes(c));
if (names.length === 0) throw new Error(`clients: ${CLIENTS.join(', ')}, all or a list, got ${chosen}`);
const N = Number(process.argv[3] ?? 5000);
const ROUNDS = Number(process.argv[4] ?? 3);
const VG = process.env.VG;
const LEASE_MS = 30_000;
const CONSUMER = 'bench:1:client-cost'; // complete records it, as a consumer's call does

/** One client's way of sending a command and awaiting its reply. */
interface Sender {
  readonly name: ClientName;
  readonly version: string;
  call(command: string, args: readonly RespArg[]): Promise<unknown>;
  close(): Promise<void>;
}

const freePort = () =>
  new Promise<number>((res) => {
    const s = createServer();
    s.listen(0, () => {
      const p = (s.address() as { port: number }).port;
      s.close(() => res(p));
    });
  });

/** The version in the package.json of the package whose entry file is `entry`. */
function versionOf(entry: string, name: string): string {
  for (let dir = dirname(entry); dir !== dirname(dir); dir = dirname(dir)) {
    const file = join(dir, 'package.json');
    if (!existsSync(file)) continue;
    const pkg = JSON.parse(readFileSync(file, 'utf8')) as { name?: string; version?: string };
    if (pkg.name === name) return pkg.version ?? '?';
  }
  return '?';
}

async function openIoredis(port: number): Promise<Sender> {
  const r = new Redis({ port, host: '127.0.0.1' });
  await r.ping();
  const require = createRequire(import.meta.url);
  return {
    name: 'ioredis',
    version: versionOf(require.resolve('ioredis'), 'ioredis'),
    call: (command, args) => r.call(command, args as (string | number)[]),
    close: async () => void (await r.quit()),
  };
}

/** node-redis's surface used here (not a dependency, so typed by hand). */
interface NodeRedis {
  connect(): Promise<unknown>;
  sendCommand(args: string[]): Promise<unknown>;
  quit(): Promise<unknown>;
  on(event: 'error', fn: (err: unknown) => void): unknown;
}

async function openNodeRedis(port: number): Promise<Sender> {
  const from = process.env.NODE_REDIS_FROM ?? process.cwd();
  const require = createRequire(join(from, 'package.json'));
  let entry: string;
  try {
    entry = require.resolve('redis');
  } catch {
    throw new Error(
      `node-redis is not installed: \`npm install --no-save redis\` here, or NODE_REDIS_FROM=<dir> (looked from ${from})`,
    );
  }
  const mod = (await import(pathToFileURL(entry).href)) as {
    createClient(opts: object): NodeRedis;
    default?: { createClient(opts: object): NodeRedis };
  };
  const createClient = mod.createClient ?? mod.default!.createClient;
  const c = createClient({ socket: { port, host: '127.0.0.1' }, RESP: 2 });
  c.on('error', () => {});
  await c.connect();
  return {
    name: 'node-redis',
    version: versionOf(entry, 'redis'),
    // node-redis takes strings and Buffers only: one array per call, numbers as text, as a
    // connector on it would send.
    call: (command, args) => {
      const all = new Array<string>(args.length + 1);
      all[0] = command;
      for (let i = 0; i < args.length; i++) {
        const a = args[i]!;
        all[i + 1] = typeof a === 'string' ? a : String(a);
      }
      return c.sendCommand(all);
    },
    close: async () => void (await c.quit()),
  };
}

function openRaw(writeAs: WriteAs) {
  return async (port: number): Promise<Sender> => {
    const c = await RawRespClient.connect(port, '127.0.0.1', writeAs);
    return {
      name: writeAs === 'buffer' ? 'raw' : 'raw-string',
      version: `bench/raw-resp.ts (writing a ${writeAs} per call)`,
      call: (command, args) => c.call(command, args),
      close: async () => c.close(),
    };
  };
}

const open: Record<ClientName, (port: number) => Promise<Sender>> = {
  ioredis: openIoredis,
  'node-redis': openNodeRedis,
  raw: openRaw('buffer'),
  'raw-string': openRaw('string'),
};

/** The keys, function names and fixed arguments of the two calls on queue `queue`. */
function calls(queue: string) {
  const lib = library();
  const prefix = `emq:{${queue}}:`;
  const keysOf = (name: 'enqueue' | 'complete' | 'claim' | 'hello') =>
    script(name).keys.map((k) => prefix + k);
  const fn = (name: string) => lib.functions.get(name)!.name;
  return {
    prefix,
    hello: [fn('hello'), 1, ...keysOf('hello'), '2', '1', '2'] as RespArg[],
    enqueue: { fn: fn('enqueue'), keys: keysOf('enqueue') },
    complete: { fn: fn('complete'), keys: keysOf('complete') },
    claim: [
      fn('claim'),
      keysOf('claim').length,
      ...keysOf('claim'),
      prefix,
      1,
      LEASE_MS,
      CONSUMER,
    ] as RespArg[],
  };
}

interface Measured {
  /** CPU µs per call, user and system (the kernel's share: the socket's syscalls, the same for any client). */
  us: number;
  sysUs: number;
  /** Instructions per call under callgrind (the last round only), less an empty segment's. */
  ir?: { all: number; main?: number };
  /** What a measured part costs with nothing in it, measured just before: the callgrind_control spawns and the waits for the dump. */
  empty?: { all: number; main?: number };
}

async function measure(n: number, counted: boolean, body: () => Promise<void>): Promise<Measured> {
  let empty: { all: number; main?: number } | undefined;
  if (counted) {
    await zeroInstructions(VG!);
    empty = await instructions(VG!); // also the zeroing of the part measured next
  }
  const cpu0 = process.cpuUsage();
  await body();
  const cpu = process.cpuUsage(cpu0);
  const us = (cpu.user + cpu.system) / n;
  const sysUs = cpu.system / n;
  if (!empty) return { us, sysUs };
  const ir = await instructions(VG!);
  return {
    us,
    sysUs,
    ir: {
      all: (ir.all - empty.all) / n,
      main: ir.main === undefined ? undefined : (ir.main - (empty.main ?? 0)) / n,
    },
    empty,
  };
}

/** One round for one client on a fresh queue: N+1 serial enqueues, then N complete+claim calls. */
async function round(
  s: Sender,
  r: number,
  counted: boolean,
): Promise<{ enqueue: Measured; complete: Measured }> {
  const c = calls(`cc-${s.name}-${r}-${Date.now()}`);
  await s.call('FCALL', c.hello);
  const payload = (i: number) => JSON.stringify({ i, s: 'x'.repeat(64) });
  const ids = Array.from({ length: N + 1 }, () => mintJobId());
  const payloads = Array.from({ length: N + 1 }, (_, i) => payload(i));
  const enqueueOne = async (i: number) => {
    // As runScript builds it: the target, the key count, KEYS, then enqueue's ARGV (a 7-field tuple).
    const args: RespArg[] = [c.enqueue.fn, c.enqueue.keys.length];
    for (const k of c.enqueue.keys) args.push(k);
    args.push(c.prefix, ids[i]!, payloads[i]!, '0', '', '', '3', '');
    const reply = (await s.call('FCALL', args)) as unknown[];
    if (reply[0] !== 1) throw new Error(`${s.name}: enqueue replied ${JSON.stringify(reply)}`);
  };
  await enqueueOne(N); // one outside the count: the job the first claim takes
  const enqueue = await measure(N, counted, async () => {
    for (let i = 0; i < N; i++) await enqueueOne(i);
  });

  let held = ((await s.call('FCALL', c.claim)) as unknown[][])[0]!;
  const complete = await measure(N, counted, async () => {
    for (let i = 0; i < N; i++) {
      const args: RespArg[] = [c.complete.fn, c.complete.keys.length];
      for (const k of c.complete.keys) args.push(k);
      args.push(c.prefix, LEASE_MS, 1, held[0] as string, String(held[1]), '', CONSUMER);
      const reply = (await s.call('FCALL', args)) as unknown[][];
      if (reply[0]![0] !== 'OK') throw new Error(`${s.name}: complete replied ${JSON.stringify(reply[0])}`);
      held = reply[1]!;
    }
  });
  return { enqueue, complete };
}

const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2]! : (s[s.length / 2 - 1]! + s[s.length / 2]!) / 2;
};

function shown(m: Measured): string {
  const k = (n: number) => `${(n / 1000).toFixed(1)}k`;
  const cpu = `${m.us.toFixed(1)} µs (${m.sysUs.toFixed(1)} system)`;
  if (!m.ir) return cpu;
  const main = m.ir.main === undefined ? '' : `, ${k(m.ir.main)} main thread`;
  const empty = `${(m.empty!.all / 1e6).toFixed(1)}M, ${((m.empty!.main ?? 0) / 1e6).toFixed(1)}M main thread`;
  return `${cpu}, ${k(m.ir.all)} instructions${main} (less an empty segment's ${empty})`;
}

async function main() {
  const port = await freePort();
  const server = spawn('redis-server', ['--port', String(port), '--save', '', '--appendonly', 'no'], {
    stdio: 'ignore',
  });
  const senders: Sender[] = [];
  try {
    for (let i = 0; ; i++) {
      try {
        execFileSync('redis-cli', ['-p', String(port), 'ping'], { stdio: 'pipe' });
        break;
      } catch {
        if (i > 100) throw new Error('redis-server did not start');
        await new Promise((r) => setTimeout(r, 50));
      }
    }
    const admin = new Redis({ port, host: '127.0.0.1' });
    await admin.call('FUNCTION', 'LOAD', 'REPLACE', library().code);
    await admin.quit();
    for (const name of names) senders.push(await open[name](port));
    console.log(
      `N=${N} calls per phase, ${ROUNDS} rounds after a warm-up; ${senders.map((s) => `${s.name} ${s.version}`).join(', ')}; node ${process.version}`,
    );
    // One dump cycle first: the dump code's own first run (compiling it) stays out of the count.
    if (VG) await warmDumps(VG);
    const us = new Map<string, { all: number[]; sys: number[] }>();
    for (let r = 0; r <= ROUNDS; r++) {
      // Rotated each round, so no client always runs first (or last) on a loaded machine.
      const order = senders.map((_, i) => senders[(i + r) % senders.length]!);
      for (const s of order) {
        const m = await round(s, r, VG !== undefined && r === ROUNDS);
        if (r === 0) continue; // the JIT's warm-up
        console.log(`round ${r} ${s.name}: enqueue ${shown(m.enqueue)}; complete ${shown(m.complete)}`);
        for (const [phase, x] of [
          ['enqueue', m.enqueue],
          ['complete', m.complete],
        ] as const) {
          const key = `${s.name} ${phase}`;
          const seen = us.get(key) ?? { all: [], sys: [] };
          seen.all.push(x.us);
          seen.sys.push(x.sysUs);
          us.set(key, seen);
        }
      }
    }
    for (const [key, { all, sys }] of us)
      console.log(
        `${key}: ${median(all).toFixed(1)} µs CPU/call (median of ${all.length}, ${Math.min(...all).toFixed(1)}-${Math.max(...all).toFixed(1)}), of which system ${median(sys).toFixed(1)}`,
      );
  } finally {
    for (const s of senders) await s.close().catch(() => {});
    server.kill();
  }
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
