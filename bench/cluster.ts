// Redis Cluster figures (docs/guide/scaling-out.md), on a local cluster this script starts and
// stops:
//
//   npx tsx bench/cluster.ts delay [--jobs 600] [--single]
//     delayed jobs on queues spread over every shard of 3 primaries + 3 replicas: how late each
//     started after its instant (server ms: startedAt - runAt), p50/p99/max, and how many early.
//     --single runs the same on one redis-server, for comparison.
//   npx tsx bench/cluster.ts scale [--jobs 20000]
//     throughput (jobs/s, enqueue then process) of 6 queues on 1, 2 and then 3 shards of one
//     3-primary cluster (all on one machine: the shards share its cores, so this shows what the
//     client side and the servers' single threads allow, not a fleet of hosts).
//
// Delays are random in 50–1500 ms, so instants fall on every phase of the server's cron tick.
import { EchoMQ } from '../src/queue/echomq.js';
import type { Queue } from '../src/queue/queue.js';
import { keySlot } from '../src/wire/slot.js';
import { RedisCluster } from '../test/support/redis-cluster.js';
import { RedisServer } from '../test/support/redis-server.js';

const args = process.argv.slice(2);
const mode = args[0] ?? 'delay';
const flag = (name: string, fallback: number) => {
  const i = args.indexOf(`--${name}`);
  return i >= 0 ? Number(args[i + 1]) : fallback;
};

/** `n` queue names spread evenly over the first `shards` primaries (all of them by default), by hash tag. */
async function spreadNames(
  cluster: RedisCluster | undefined,
  n: number,
  base: string,
  shards?: number,
): Promise<string[]> {
  if (!cluster) return Array.from({ length: n }, (_, i) => `${base}-${i}`);
  const primaries = (await cluster.primaries()).slice(0, shards);
  const per = Math.ceil(n / primaries.length);
  const owners = new Map<number, string[]>(primaries.map((p) => [p.port, []]));
  for (let i = 0; [...owners.values()].some((l) => l.length < per); i++) {
    const name = `${base}-${i}`;
    const list = owners.get((await cluster.primaryOf(keySlot(`emq:{${name}}:`))).port);
    if (list && list.length < per) list.push(name);
  }
  return [...owners.values()].flat().slice(0, n);
}

async function open(single: boolean, masters: number, replicas: number) {
  if (single) {
    const server = await RedisServer.start();
    const mq = await EchoMQ.connect({ url: server.url });
    return {
      mq,
      cluster: undefined,
      stop: async () => {
        await mq.close();
        await server.stop();
      },
    };
  }
  const cluster = await RedisCluster.start({ masters, replicas });
  const client = cluster.client();
  const mq = await EchoMQ.connect({ redis: client });
  return {
    mq,
    cluster,
    stop: async () => {
      await mq.close();
      client.disconnect();
      await cluster.stop();
    },
  };
}

const pct = (sorted: number[], p: number) =>
  sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * p))]!;

async function delay(): Promise<void> {
  const single = args.includes('--single');
  const jobs = flag('jobs', 600);
  const { mq, cluster, stop } = await open(single, 3, 1);
  try {
    const names = await spreadNames(cluster, 6, 'late');
    const queues = names.map((n) => mq.queue<number>(n));
    // --busy: handlers that take 40 ms on 2 slots, so a consumer is often parked with every slot taken.
    const busy = args.includes('--busy');
    const consumers = queues.map((q) =>
      q.consume(busy ? () => new Promise((r) => setTimeout(r, 40)) : async () => {}, {
        concurrency: busy ? 2 : 8,
      }),
    );
    await new Promise((r) => setTimeout(r, 500)); // consumers parked on their wake streams
    const ids: [Queue<number>, string][] = [];
    const deadlineAt = Date.now() + 1500;
    for (let i = 0; i < jobs; i++) {
      const q = queues[i % queues.length]!;
      const { id } = await q.enqueueIn(i, 50 + Math.floor(Math.random() * 1450));
      ids.push([q, id]);
      // Spread the enqueues over the window, so some land while consumers are parked long.
      await new Promise((r) => setTimeout(r, Math.max(0, (deadlineAt - Date.now()) / (jobs - i))));
    }
    for (const q of queues) {
      for (let t = 0; ; t++) {
        const c = await q.counts();
        if (c.completed >= ids.filter(([qq]) => qq === q).length) break;
        if (t > 600) throw new Error(`queue ${q.name} did not finish`);
        await new Promise((r) => setTimeout(r, 100));
      }
    }
    const late: number[] = [];
    let early = 0;
    for (const [q, id] of ids) {
      const v = (await q.get(id))!;
      const d = v.startedAt! - v.runAt!;
      if (d < 0) early += 1;
      late.push(d);
    }
    late.sort((a, b) => a - b);
    console.log(
      `${single ? 'one redis-server' : `cluster 3+3 (${new Set(names).size} queues)`}: ${jobs} delayed jobs, late ms p50 ${pct(late, 0.5)} p90 ${pct(late, 0.9)} p95 ${pct(late, 0.95)} p99 ${pct(late, 0.99)} max ${late[late.length - 1]}, early ${early}`,
    );
    await Promise.all(consumers.map((c) => c.close({ timeoutMs: 1000 })));
  } finally {
    await stop();
  }
}

async function scale(): Promise<void> {
  const jobs = flag('jobs', 20_000);
  const rows: string[] = [];
  // One cluster of 3 primaries; the same 6 queues' worth of work on 1, 2 and then 3 of its shards.
  const { mq, cluster, stop } = await open(false, 3, 0);
  try {
    for (const shards of [1, 2, 3]) {
      const names = await spreadNames(cluster, 6, `scale${shards}`, shards);
      const queues = names.map((n) => mq.queue<number>(n));
      const per = Math.floor(jobs / queues.length);
      let started = performance.now();
      await Promise.all(
        queues.map(async (q) => {
          for (let i = 0; i < per; i += 500)
            await q.enqueueMany(Array.from({ length: Math.min(500, per - i) }, (_, k) => ({ data: i + k })));
        }),
      );
      const enqueueS = (performance.now() - started) / 1000;
      started = performance.now();
      let done = 0;
      const consumers: { close(o: { timeoutMs: number }): Promise<void> }[] = [];
      await new Promise<void>((resolve) => {
        for (const q of queues) {
          const c = q.consume(async () => {}, { concurrency: 50 });
          c.on('completed', () => {
            done += 1;
            if (done === per * queues.length) resolve();
          });
          consumers.push(c);
        }
      });
      const processS = (performance.now() - started) / 1000;
      await Promise.all(consumers.map((c) => c.close({ timeoutMs: 1000 })));
      rows.push(
        `| ${shards} | ${queues.length} | ${Math.round((per * queues.length) / enqueueS)} | ${Math.round((per * queues.length) / processS)} |`,
      );
      console.log(rows[rows.length - 1]);
    }
  } finally {
    await stop();
  }
  console.log('| shards used | queues | enqueue jobs/s | process jobs/s |\n| --- | --- | --- | --- |');
  for (const r of rows) console.log(r);
}

await (mode === 'scale' ? scale() : delay());
process.exit(0);
