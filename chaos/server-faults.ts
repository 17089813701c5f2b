// The chaos suite's server faults: what the Redis server itself does to a running queue, each
// against a steady producer and consumers on real processes (chaos/README.md):
//   failover   the replica's link cut (a TCP proxy), writes go on for a while on the primary
//              alone, the primary is killed and Sentinel promotes the replica; once with
//              durability off and once with durability { replicas: 1 }
//   cluster-failover  the same on a Redis Cluster of 3 primaries + 3 replicas: the replication
//              into the queue's shard cut, its primary killed, its replica promoted by the
//              cluster, the old primary back as a replica; durability off and on
//   clock-step the server's wall clock stepped an hour forward, then an hour back
//              (test/support/clock-shim.c, LD_PRELOADed; needs a C compiler)
//   pause      redis-server SIGSTOPped for longer than the lease, then SIGCONTed
// Each reports: acknowledged enqueues, completed, lost (acknowledged, never completed), run twice
// (a handler started more than once), superseded results refused (the consumers' `lost`) and
// superseded results accepted (a job completed twice, or the old token's completion stored).
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import type { Consumer } from '../src/consumer/consumer.js';
import { EchoMQError } from '../src/core/errors.js';
import { EchoMQ, type EchoMQOptions } from '../src/queue/echomq.js';
import type { Queue } from '../src/queue/queue.js';
import { keySlot } from '../src/wire/slot.js';
import { clockShim, ServerClock } from '../test/support/clock-shim.js';
import { RedisCluster } from '../test/support/redis-cluster.js';
import { RedisServer } from '../test/support/redis-server.js';
import { Sentinels, sentinelBinary } from '../test/support/sentinel.js';
import { TcpProxy } from '../test/support/tcp-proxy.js';
import { poll, pause as sleep } from '../test/support/wait.js';

export interface ServerFaultRow {
  fault: string;
  acknowledged: number;
  completed: number;
  lost: number;
  runTwice: number;
  refused: number;
  accepted: number;
  /** Why the fault did not run (a tool missing), if it did not. */
  skipped?: string;
}

const LEASE_MS = 2000;

/** A producer that enqueues steadily and consumers that hold each job a little, with their tallies. */
class Workload {
  readonly acked: string[] = [];
  readonly starts = new Map<string, number>();
  readonly completions = new Map<string, number>();
  refused = 0;
  private producing = true;
  private producer: Promise<void> | undefined;
  private readonly consumers: Consumer[] = [];

  constructor(
    private readonly q: Queue,
    /** Completions wait for replicas? After a failover none is left to confirm them. */
    private readonly durableCompletions = true,
  ) {}

  /** Keeps every completed row (the tally reads their states) and starts the producer and consumers. */
  async start(consumers = 2): Promise<void> {
    await this.q.configure({ retention: { completed: { count: 10_000_000, ageMs: -1 } } });
    for (let i = 0; i < consumers; i++) {
      const c = this.q.consume(
        async (job) => {
          this.starts.set(job.id, (this.starts.get(job.id) ?? 0) + 1);
          await sleep(100);
          return 'ok';
        },
        { concurrency: 20, leaseMs: LEASE_MS, ...(this.durableCompletions ? {} : { durability: false }) },
      );
      c.on('completed', (job) => this.completions.set(job.id, (this.completions.get(job.id) ?? 0) + 1));
      c.on('lost', () => {
        this.refused += 1;
      });
      c.on('error', () => {});
      c.on('degraded', () => {});
      this.consumers.push(c);
    }
    this.producer = (async () => {
      while (this.producing) {
        const batch = await Promise.allSettled(Array.from({ length: 10 }, () => this.q.enqueue({})));
        for (const r of batch) if (r.status === 'fulfilled') this.acked.push(r.value.id);
        await sleep(batch.some((r) => r.status === 'rejected') ? 100 : 40);
      }
    })();
  }

  /** `server`: where to read the rows from (a server, or a cluster: the queue's keys share a slot). */
  async stop(
    server: { client(): import('ioredis').Redis | import('ioredis').Cluster },
    drainMs = 60_000,
  ): Promise<Omit<ServerFaultRow, 'fault'> & { missing: number }> {
    this.producing = false;
    await this.producer;
    const raw = server.client();
    const state = async () => {
      const p = raw.pipeline();
      for (const id of this.acked) p.hget(this.q.keys.key('job', id), 'state');
      return ((await p.exec()) ?? []).map(([, s]) => s as string | null);
    };
    await poll(
      () => state().catch(() => []),
      (s) => s.length === this.acked.length && s.every((x) => x === 'completed' || x === null),
      'the acknowledged jobs to end',
      drainMs,
    ).catch(() => undefined);
    const states = await state();
    await Promise.all(this.consumers.map((c) => c.close({ timeoutMs: 2000 })));
    await raw.quit();
    return {
      acknowledged: this.acked.length,
      completed: states.filter((s) => s === 'completed').length,
      lost: states.filter((s) => s !== 'completed').length,
      missing: states.filter((s) => s === null).length,
      runTwice: [...this.starts.values()].filter((n) => n > 1).length,
      refused: this.refused,
      accepted: [...this.completions.values()].filter((n) => n > 1).length,
    };
  }
}

/**
 * The superseded-result probe of a failover: a job claimed on the old primary only (after its
 * replication was cut), claimed again after the failover; the old claim's token then tries to
 * complete it on the promoted primary, which must refuse it.
 */
class Probe {
  private oldToken: string | undefined;

  private constructor(
    private readonly q: Queue,
    private readonly id: string,
  ) {}

  /** Enqueued while replication still works, waiting for a replica to have it. */
  static async enqueue(q: Queue): Promise<Probe> {
    const { id } = await q.enqueue({ probe: true }, { durability: { replicas: 1, timeoutMs: 5000 } });
    return new Probe(q, id);
  }

  /** Claims it on the old primary (call once replication is cut). */
  async claim(): Promise<void> {
    const [held] = (await this.q
      .run('claim', [this.q.keys.prefix, 1, 60_000])
      .catch(() => [[]])) as unknown[][];
    this.oldToken = held?.[0] === this.id ? String(held[1]) : undefined;
  }

  /** The old token's completion on the promoted primary: refused (right) or accepted (a failure). */
  async completeOld(): Promise<{ accepted: number; refused: number }> {
    if (!this.oldToken) return { accepted: 0, refused: 0 };
    const status = await this.q
      .run('complete', [this.q.keys.prefix, 60_000, 0, this.id, this.oldToken, '"old"'])
      .then(
        (reply) => (reply as string[][])[0]![0],
        (err: unknown) => (err instanceof EchoMQError ? err.code : 'error'),
      );
    return status === 'OK' ? { accepted: 1, refused: 0 } : { accepted: 0, refused: 1 };
  }
}

/** Failover with replication lag, with and without durability. */
async function failover(durable: boolean, log: (line: string) => void): Promise<ServerFaultRow> {
  const fault = `failover with lag, durability ${durable ? 'on' : 'off'}`;
  if ('missing' in sentinelBinary) return skipped(fault, sentinelBinary.missing);
  const primary = await RedisServer.start();
  const proxy = await TcpProxy.start(primary.port);
  const replica = await RedisServer.start({ args: ['--replicaof', '127.0.0.1', String(proxy.port)] });
  let sentinels: Sentinels | undefined;
  try {
    const r = replica.client();
    await poll(
      () => r.info('replication'),
      (i) => i.includes('master_link_status:up'),
      'replica in sync',
      20_000,
    );
    await r.quit();
    sentinels = await Sentinels.start(3, primary.port, 1);
    const opts: EchoMQOptions = { redisOptions: sentinels.redisOptions };
    if (durable) opts.durability = { replicas: 1, timeoutMs: 300 };
    const mq = await EchoMQ.connect(opts);
    try {
      const q = mq.queue('chaos-failover');
      const work = new Workload(q, false);
      await work.start();
      const probe = await Probe.enqueue(q);
      await sleep(1000);
      await proxy.cut();
      await probe.claim();
      await sleep(1500);
      log(`  ${fault}: primary killed`);
      await primary.kill();
      await poll(
        () => sentinels!.primaryPort(),
        (p) => p === replica.port,
        'Sentinel to promote',
        30_000,
      );
      return await afterFailover(fault, q, probe, work, replica, 'EchoMQ on the new primary');
    } finally {
      await mq.close();
    }
  } finally {
    sentinels?.stop();
    await proxy.stop();
    await primary.stop();
    await replica.stop();
  }
}

/**
 * The end of a failover case: once EchoMQ answers on the promoted primary, the probe's superseded
 * completion is tried, the workload stopped and the row made. A job completed on the old primary
 * alone runs again on the new one: run twice, not a superseded result. Lost: acknowledged jobs
 * the new primary has no row of.
 */
async function afterFailover(
  fault: string,
  q: Queue,
  probe: Probe,
  work: Workload,
  at: Parameters<Workload['stop']>[0],
  what: string,
): Promise<ServerFaultRow> {
  await poll(
    () =>
      q.counts().then(
        () => true,
        () => false,
      ),
    Boolean,
    what,
    30_000,
  );
  const old = await probe.completeOld();
  await sleep(1000);
  const row = await work.stop(at);
  return { fault, ...row, lost: row.missing, refused: row.refused + old.refused, accepted: old.accepted };
}

/**
 * Failover with replication lag on a Redis Cluster, with and without durability: the queue's
 * shard loses its replication for 1.5 s, then its primary; the cluster promotes the replica.
 */
async function clusterFailover(durable: boolean, log: (line: string) => void): Promise<ServerFaultRow> {
  const fault = `cluster failover with lag, durability ${durable ? 'on' : 'off'}`;
  const cluster = await RedisCluster.start({ masters: 3, replicas: 1, replicationProxies: true });
  const client = cluster.client();
  try {
    const opts: EchoMQOptions = { redis: client };
    if (durable) opts.durability = { replicas: 1, timeoutMs: 300 };
    const mq = await EchoMQ.connect(opts);
    try {
      const q = mq.queue('chaos-cluster-failover');
      const victim = await cluster.primaryOf(keySlot(q.keys.prefix));
      const work = new Workload(q, false);
      await work.start();
      const probe = await Probe.enqueue(q);
      await sleep(1000);
      await cluster.cutReplication(victim);
      await probe.claim();
      await sleep(1500);
      log(`  ${fault}: primary killed`);
      await cluster.failover(victim);
      // Back as the promoted one's replica, so durable enqueues are confirmed again.
      await cluster.rejoin(victim);
      return await afterFailover(fault, q, probe, work, cluster, 'EchoMQ on the promoted primary');
    } finally {
      await mq.close();
    }
  } finally {
    client.disconnect();
    await cluster.stop();
  }
}

/** The server's wall clock stepped an hour forward, then back. */
async function clockStep(log: (line: string) => void): Promise<ServerFaultRow> {
  const fault = 'clock step, +1 h then -1 h';
  if (!clockShim.path) return skipped(fault, clockShim.missing ?? 'no clock shim');
  const clock = new ServerClock();
  const server = await RedisServer.start({ env: clock.env });
  const mq = await EchoMQ.connect({ url: server.url });
  try {
    const work = new Workload(mq.queue('chaos-clock'));
    await work.start();
    await sleep(2000);
    log(`  ${fault}: +1 h`);
    clock.step(3_600_000);
    await sleep(3000);
    log(`  ${fault}: -1 h`);
    clock.step(-3_600_000);
    await sleep(3000);
    return { fault, ...(await work.stop(server)) };
  } finally {
    await mq.close();
    await server.stop();
  }
}

/** redis-server SIGSTOPped for longer than the lease. */
async function serverPause(log: (line: string) => void): Promise<ServerFaultRow> {
  const fault = `server paused ${(2.5 * LEASE_MS) / 1000} s (lease ${LEASE_MS / 1000} s)`;
  const server = await RedisServer.start();
  const mq = await EchoMQ.connect({ url: server.url });
  try {
    const work = new Workload(mq.queue('chaos-pause'));
    await work.start();
    await sleep(2000);
    log(`  ${fault}: SIGSTOP`);
    server.pause();
    await sleep(2.5 * LEASE_MS);
    server.resume();
    await sleep(3000);
    return { fault, ...(await work.stop(server)) };
  } finally {
    await mq.close();
    await server.stop();
  }
}

function skipped(fault: string, why: string): ServerFaultRow {
  return {
    fault,
    acknowledged: 0,
    completed: 0,
    lost: 0,
    runTwice: 0,
    refused: 0,
    accepted: 0,
    skipped: why,
  };
}

/** Every server fault once, in order. */
export const SERVER_FAULTS = [
  'failover-off',
  'failover-on',
  'cluster-failover-off',
  'cluster-failover-on',
  'clock-step',
  'pause',
] as const;
export type ServerFault = (typeof SERVER_FAULTS)[number];

function runOne(name: ServerFault, log: (line: string) => void): Promise<ServerFaultRow> {
  if (name === 'failover-off') return failover(false, log);
  if (name === 'failover-on') return failover(true, log);
  if (name === 'cluster-failover-off') return clusterFailover(false, log);
  if (name === 'cluster-failover-on') return clusterFailover(true, log);
  if (name === 'clock-step') return clockStep(log);
  return serverPause(log);
}

/**
 * The server faults, each in a process of its own (`tsx chaos/server-faults.ts <fault>`, one JSON
 * row on stdout), so no connection or timer of one carries into the next.
 */
export async function runServerFaults(
  log: (line: string) => void = () => {},
  only: readonly ServerFault[] = SERVER_FAULTS,
): Promise<ServerFaultRow[]> {
  const rows: ServerFaultRow[] = [];
  for (const name of only) {
    const child = spawn(process.execPath, ['--import', 'tsx', fileURLToPath(import.meta.url), name], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    child.stdout.on('data', (d) => {
      out += d;
    });
    child.stderr.on('data', (d) => {
      for (const line of String(d).split('\n')) if (line.startsWith('  ')) log(line);
    });
    const code = await new Promise<number | null>((resolve) => child.once('exit', resolve));
    const last = out.trim().split('\n').pop() ?? '';
    rows.push(
      code === 0 && last.startsWith('{')
        ? (JSON.parse(last) as ServerFaultRow)
        : skipped(name, `exit ${code}`),
    );
  }
  return rows;
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const name = process.argv[2] as ServerFault;
  if (!SERVER_FAULTS.includes(name)) {
    process.stderr.write(`usage: tsx chaos/server-faults.ts ${SERVER_FAULTS.join('|')}\n`);
    process.exit(2);
  }
  const row = await runOne(name, (line) => process.stderr.write(`${line}\n`));
  process.stdout.write(`${JSON.stringify(row)}\n`);
  process.exit(0);
}

/** The invariants: nothing acknowledged lost (but with durability off across a failover, which
 * is the documented window), and no superseded result ever accepted. */
export function serverFaultFailures(rows: ServerFaultRow[]): string[] {
  const out: string[] = [];
  for (const r of rows) {
    if (r.skipped) continue;
    if (r.accepted > 0) out.push(`${r.fault}: ${r.accepted} superseded results accepted`);
    if (r.lost > 0 && !r.fault.includes('durability off')) out.push(`${r.fault}: ${r.lost} lost`);
  }
  return out;
}

export function formatServerFaults(rows: ServerFaultRow[]): string {
  const head = [
    'server fault',
    'acknowledged',
    'completed',
    'lost',
    'run twice',
    'superseded refused',
    'accepted',
  ];
  const body = rows.map((r) =>
    r.skipped
      ? [r.fault, `skipped: ${r.skipped}`, '', '', '', '', '']
      : [r.fault, r.acknowledged, r.completed, r.lost, r.runTwice, r.refused, r.accepted].map(String),
  );
  const widths = head.map((h, i) => Math.max(h.length, ...body.map((b) => b[i]!.length)));
  const line = (cells: string[]) => cells.map((c, i) => c.padEnd(widths[i]!)).join('  ');
  return [line(head), ...body.map(line)].join('\n');
}
