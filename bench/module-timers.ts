// The module's timers bench (SPEC 26.1): `npm run bench:module:timers [-- --quick]`. Starts its
// own redis-server with module/build/echomq.so loaded (timers on) and measures:
//   a. no consumer: 1,000 jobs delayed 500 ms, lateness from each run-at to its `waiting` event
//   b. every consumer parked (beatMs 60 s): delayed jobs' start lateness (row `started` − runat)
//   c. a consumer SIGKILLed holding 50 jobs (lease 1 s): lease deadline to the job's next start
//   d. Redis CPU per idle queue per second (INFO cpu over 10 s, 20 queues, one consumer each),
//      timers on (consumers on the backstop) against off (consumers beating their legs)
//   e. 100,000 jobs due at one instant: firings, time to release all, PING latency meanwhile
// Every instant is the server's clock (ms), so lateness is free of the client's. Progress goes
// to stderr, results to stdout (a table, then one JSON line).
import { execFileSync, spawn } from 'node:child_process';
import { join } from 'node:path';
import type { Redis } from 'ioredis';
import { EchoMQ } from '../src/queue/echomq.js';
import { RedisServer } from '../test/support/redis-server.js';
import { percentile } from './stats.js';

const ROOT = join(import.meta.dirname, '..');
const quick = process.argv.includes('--quick');
const pause = (ms: number) => new Promise((r) => setTimeout(r, ms));

function summary(values: number[]): { n: number; p50: number; p99: number; max: number; early: number } {
  return {
    n: values.length,
    p50: percentile(values, 50),
    p99: percentile(values, 99),
    max: Math.max(...values),
    early: values.filter((v) => v < 0).length,
  };
}

async function waitFor(what: string, check: () => Promise<boolean>, ms = 120_000): Promise<void> {
  const end = performance.now() + ms;
  while (!(await check())) {
    if (performance.now() > end) throw new Error(`bench:module:timers: timed out waiting for ${what}`);
    await pause(20);
  }
}

async function rowTimes(
  raw: Redis,
  queue: string,
  ids: string[],
  field: string,
): Promise<Map<string, number>> {
  const p = raw.pipeline();
  for (const id of ids) p.hget(`emq:{${queue}}:job:${id}`, field);
  const out = (await p.exec())!;
  return new Map(ids.map((id, i) => [id, Number(out[i]![1])]));
}

/** Each job's `event` instant (ms of its stream id), expanding entries that list several `ids`. */
async function eventTimes(raw: Redis, queue: string, event: string): Promise<Map<string, number>> {
  const at = new Map<string, number>();
  for (const [sid, f] of await raw.xrange(`emq:{${queue}}:events`, '-', '+')) {
    const get = (k: string) => f[f.indexOf(k) + 1];
    if (get('event') !== event) continue;
    const ids = f.includes('ids') ? get('ids')!.split(' ') : [get('id')!];
    for (const id of ids) if (!at.has(id)) at.set(id, Number(sid.split('-')[0]));
  }
  return at;
}

async function a(url: string, raw: Redis) {
  const queue = 'bench-a';
  const n = quick ? 200 : 1000;
  const mq = await EchoMQ.connect({ url });
  const q = mq.queue(queue);
  const ids = (await Promise.all(Array.from({ length: n }, (_, i) => q.enqueueIn({ i }, 500)))).map(
    (r) => r.id,
  );
  await mq.close();
  await waitFor('a: all pending', async () => (await raw.zcard(`emq:{${queue}}:pending`)) === n);
  const runAt = await rowTimes(raw, queue, ids, 'runat');
  const waiting = await eventTimes(raw, queue, 'waiting');
  return summary(ids.map((id) => waiting.get(id)! - runAt.get(id)!));
}

async function b(url: string, raw: Redis) {
  const queue = 'bench-b';
  const n = quick ? 50 : 200;
  const mq = await EchoMQ.connect({ url });
  const q = mq.queue(queue);
  const consumers = [0, 1].map(() => q.consume(async () => {}, { beatMs: 60_000, concurrency: 8 }));
  await pause(500); // both parked on the wake stream
  const ids = (await Promise.all(Array.from({ length: n }, (_, i) => q.enqueueIn({ i }, 300 + i * 10)))).map(
    (r) => r.id,
  );
  await waitFor('b: all completed', async () => (await q.counts()).completed === n);
  await Promise.all(consumers.map((c) => c.close()));
  await mq.close();
  const runAt = await rowTimes(raw, queue, ids, 'runat');
  const started = await rowTimes(raw, queue, ids, 'started');
  return summary(ids.map((id) => started.get(id)! - runAt.get(id)!));
}

async function c(url: string, raw: Redis) {
  const queue = 'bench-c';
  const n = 50;
  const mq = await EchoMQ.connect({ url });
  const q = mq.queue(queue);
  await Promise.all(Array.from({ length: n }, (_, i) => q.enqueue({ i })));
  const child = spawn(
    process.execPath,
    ['--import', 'tsx', join(ROOT, 'test/support/consumer-process.ts'), url, queue, '1000', String(n)],
    { cwd: ROOT, stdio: ['ignore', 'pipe', 'inherit'] },
  );
  let out = '';
  await new Promise<void>((resolve) => {
    child.stdout.on('data', (d) => {
      out += d;
      if ((out.match(/started /g) ?? []).length >= n) resolve();
    });
  });
  await new Promise<void>((resolve) => {
    child.once('exit', () => resolve());
    child.kill('SIGKILL');
  });
  const flat = await raw.zrange(`emq:{${queue}}:active`, 0, -1, 'WITHSCORES');
  const deadline = new Map<string, number>();
  for (let i = 0; i < flat.length; i += 2) deadline.set(flat[i]!, Number(flat[i + 1]));
  // The next holder is parked, beatMs 60 s: only the server's recovery and its wake move it.
  const next = q.consume(async () => {}, { beatMs: 60_000, concurrency: n });
  await waitFor('c: all completed', async () => (await q.counts()).completed === n);
  await next.close();
  await mq.close();
  const ids = [...deadline.keys()];
  const started = await rowTimes(raw, queue, ids, 'started');
  return summary(ids.map((id) => started.get(id)! - deadline.get(id)!));
}

async function cpuSeconds(raw: Redis): Promise<number> {
  const info = await raw.info('cpu');
  const get = (k: string) => Number(new RegExp(`${k}:([\\d.]+)`).exec(info)![1]);
  return get('used_cpu_sys') + get('used_cpu_user');
}

async function d(url: string, raw: Redis) {
  const queues = 20;
  const seconds = quick ? 4 : 10;
  const measure = async (timers: 'ON' | 'OFF', withConsumers: boolean) => {
    await raw.call('EMQ.TIMERS', timers);
    const mq = await EchoMQ.connect({ url });
    const cs = withConsumers
      ? Array.from({ length: queues }, (_, i) =>
          mq.queue(`bench-d${i}`).consume(async () => {}, { beatMs: 1000 }),
        )
      : [];
    for (let i = 0; i < queues; i++) await mq.queue(`bench-d${i}`).counts(); // hello: registered
    await pause(3000); // past the first beats (hello, first legs)
    const before = await cpuSeconds(raw);
    await pause(seconds * 1000);
    const used = (await cpuSeconds(raw)) - before;
    await Promise.all(cs.map((x) => x.close()));
    await mq.close();
    return (used * 1e6) / queues / seconds; // µs of Redis CPU per queue per second
  };
  const off = await measure('OFF', true);
  const on = await measure('ON', true);
  const timersOnly = await measure('ON', false);
  await raw.call('EMQ.TIMERS', 'ON');
  return {
    usPerQueueSecond: {
      timersOffConsumerBeating: off,
      timersOnConsumerBackstop: on,
      timersOnNoConsumer: timersOnly,
    },
  };
}

async function e(url: string, raw: Redis) {
  const queue = 'bench-e';
  const n = quick ? 20_000 : 100_000;
  await raw.call('EMQ.TIMERS', 'OFF');
  const mq = await EchoMQ.connect({ url });
  const q = mq.queue(queue);
  for (let i = 0; i < n; i += 5000) {
    await q.enqueueMany(Array.from({ length: Math.min(5000, n - i) }, (_, j) => ({ data: { j } })));
  }
  await mq.close();
  // Moved to the schedule at one past instant, as scheduled rows: all due at once.
  const at = Date.now() - 1000;
  const move = `local p = ARGV[1]
local ids = redis.call('ZRANGE', p .. 'pending', 0, 4999)
for _, id in ipairs(ids) do
  redis.call('ZREM', p .. 'pending', id)
  redis.call('HSET', p .. 'job:' .. id, 'state', 'scheduled', 'runat', ARGV[2])
  redis.call('ZADD', p .. 'schedule', ARGV[2], id)
end
return #ids`;
  while (((await raw.eval(move, 0, `emq:{${queue}}:`, String(at))) as number) > 0) {}
  await raw.config('SET', 'latency-monitor-threshold', '1');
  await raw.call('LATENCY', 'RESET');
  const firings0 = ((await raw.call('EMQ.TIMERS')) as number[])[3]!;
  const ping = raw.duplicate();
  const pings: number[] = [];
  let done = false;
  const pinger = (async () => {
    while (!done) {
      const t = performance.now();
      await ping.ping();
      pings.push(performance.now() - t);
    }
  })();
  const t0 = performance.now();
  await raw.call('EMQ.TIMERS', 'ON');
  await waitFor('e: all released', async () => (await raw.zcard(`emq:{${queue}}:schedule`)) === 0, 300_000);
  const releaseMs = performance.now() - t0;
  done = true;
  await pinger;
  await ping.quit();
  const firings = ((await raw.call('EMQ.TIMERS')) as number[])[3]! - firings0;
  const latest = (await raw.call('LATENCY', 'LATEST')) as unknown[];
  return { jobs: n, firings, releaseMs, ping: summary(pings), latencyLatest: latest };
}

async function main(): Promise<number> {
  execFileSync('make', ['-s', '-C', join(ROOT, 'module')], { stdio: 'inherit' });
  const server = await RedisServer.start({
    args: ['--loadmodule', join(ROOT, 'module', 'build', 'echomq.so'), 'timers', 'on'],
  });
  const raw = server.client();
  const results: Record<string, unknown> = {};
  try {
    const version = /^redis_version:(\S+)/m.exec(await raw.info('server'))?.[1] ?? '?';
    console.error(`bench:module:timers: redis-server ${version}${quick ? ' (quick)' : ''}`);
    for (const [name, run] of Object.entries({ a, b, c, d, e })) {
      console.error(`  ${name} …`);
      results[name] = await run(server.url, raw);
      console.error(`  ${name}: ${JSON.stringify(results[name])}`);
    }
  } finally {
    await raw.quit();
    await server.stop();
  }
  const f = (s: { p50: number; p99: number; max: number; early?: number }) =>
    `p50 ${s.p50.toFixed(1)} / p99 ${s.p99.toFixed(1)} / max ${s.max.toFixed(1)} ms${s.early === undefined ? '' : `, ${s.early} early`}`;
  type S = ReturnType<typeof summary>;
  const r = results as {
    a: S;
    b: S;
    c: S;
    d: Awaited<ReturnType<typeof d>>;
    e: Awaited<ReturnType<typeof e>>;
  };
  const u = r.d.usPerQueueSecond;
  console.log(`a. no consumer, ${r.a.n} delayed 500 ms, run-at → pending: ${f(r.a)}`);
  console.log(`b. consumers parked (beatMs 60 s), ${r.b.n} delayed, run-at → start: ${f(r.b)}`);
  console.log(`c. SIGKILL holding ${r.c.n} (lease 1 s), deadline → next start: ${f(r.c)}`);
  console.log(
    `d. Redis CPU per idle queue per s: timers off + consumer beating ${u.timersOffConsumerBeating.toFixed(0)} µs; ` +
      `timers on + consumer on backstop ${u.timersOnConsumerBackstop.toFixed(0)} µs; timers on, no consumer ${u.timersOnNoConsumer.toFixed(0)} µs`,
  );
  console.log(
    `e. ${r.e.jobs} due at once: ${r.e.firings} firings, all released in ${r.e.releaseMs.toFixed(0)} ms; PING during it ${f(r.e.ping)}; LATENCY LATEST ${JSON.stringify(r.e.latencyLatest)}`,
  );
  console.log(JSON.stringify(results));
  return 0;
}

process.exitCode = await main();
