// Observing the native module's timers (SPEC 26.1) from a test: its counters, each job's events
// with the server instant they were written at, the lease deadlines in `active`, and the one
// check every timer test makes (each job moved once, never before its instant).
import type { Redis } from 'ioredis';
import { expect } from 'vitest';
import { EchoMQ } from '../../src/queue/echomq.js';
import { RedisServer } from './redis-server.js';
import { poll } from './wait.js';

/** EMQ.TIMERS by name (its reply is positional, section 26.1 point 8). */
export interface TimerCounters {
  running: number;
  queues: number;
  armed: number;
  firings: number;
  released: number;
  leaseArmed: number;
  leaseFirings: number;
  recovered: number;
  jumps: number;
}

export async function timerCounters(raw: Redis): Promise<TimerCounters> {
  const r = (await raw.call('EMQ.TIMERS')) as number[];
  const [running, queues, armed, firings, released, leaseArmed, leaseFirings, recovered, jumps] = r;
  return {
    running,
    queues,
    armed,
    firings,
    released,
    leaseArmed,
    leaseFirings,
    recovered,
    jumps,
  } as TimerCounters;
}

/** EMQ.TIMERS LIST's queue prefixes (`emq:{<queue>}:`). */
export async function listedQueues(raw: Redis): Promise<string[]> {
  return ((await raw.call('EMQ.TIMERS', 'LIST')) as [string][]).map((e) => String(e[0]));
}

/** Each job's events as [name, ms of the stream id] (an entry for several jobs lists them in `ids`). */
export async function eventsOf(raw: Redis, queue: string): Promise<Map<string, [string, number][]>> {
  const by = new Map<string, [string, number][]>();
  for (const [sid, f] of await raw.xrange(`emq:{${queue}}:events`, '-', '+')) {
    const field = (name: string) => {
      for (let i = 0; i < f.length; i += 2) if (f[i] === name) return f[i + 1];
      return undefined;
    };
    for (const id of (field('ids') ?? field('id')!).split(' ')) {
      if (!by.has(id)) by.set(id, []);
      by.get(id)!.push([field('event')!, Number(sid.split('-')[0])]);
    }
  }
  return by;
}

/** The members of a queue's zset with their scores: `active` gives the lease deadlines. */
export async function scoresOf(
  raw: Redis,
  queue: string,
  set: 'active' | 'schedule',
): Promise<Map<string, number>> {
  const flat = await raw.zrange(`emq:{${queue}}:${set}`, 0, -1, 'WITHSCORES');
  const m = new Map<string, number>();
  for (let i = 0; i < flat.length; i += 2) m.set(flat[i]!, Number(flat[i + 1]));
  return m;
}

/**
 * Every job of `due` got exactly one `event` (`waiting`: released, `stalled`: recovered,
 * `failed`: dead-lettered), written at or after its instant.
 */
export async function expectOnceOnTime(
  raw: Redis,
  queue: string,
  due: Map<string, number>,
  event: 'waiting' | 'stalled' | 'failed',
): Promise<void> {
  const events = await eventsOf(raw, queue);
  for (const [id, at] of due) {
    const hits = (events.get(id) ?? []).filter(([e]) => e === event);
    expect(hits.length, `job ${id}: one ${event}`).toBe(1);
    expect(hits[0]![1], `job ${id}: ${event} not before its instant`).toBeGreaterThanOrEqual(at);
  }
}

/** Delayed jobs on `queue` at `url`, each `delays[i]` ms from now; returns id → run-at. */
export async function delayedJobs(
  url: string,
  queue: string,
  delays: number[],
): Promise<Map<string, number>> {
  const mq = await EchoMQ.connect({ url });
  try {
    const q = mq.queue(queue);
    const ids = await Promise.all(delays.map(async (ms, n) => (await q.enqueueIn({ n }, ms)).id));
    const runAt = new Map<string, number>();
    for (const id of ids) runAt.set(id, (await q.get(id))!.runAt!);
    return runAt;
  } finally {
    await mq.close();
  }
}

/** Claims `n` new jobs of `queue` by hand under `leaseMs` leases, held by no one: they run out. */
export async function claimedJobs(url: string, queue: string, n: number, leaseMs: number): Promise<void> {
  const mq = await EchoMQ.connect({ url });
  try {
    const q = mq.queue(queue);
    await Promise.all(Array.from({ length: n }, (_, i) => q.enqueue({ i })));
    expect((await q.claim(n, { leaseMs })).length).toBe(n);
  } finally {
    await mq.close();
  }
}

/** The jobs waiting in `queue`'s flat pending set. */
export const pendingOf = (raw: Redis, queue: string): Promise<number> => raw.zcard(`emq:{${queue}}:pending`);

/**
 * One job claimed under a 50 ms lease and recovered by the lease timer, so the queue has the
 * `clock_lease` a later stop or clock step is measured against.
 */
export async function firstLeasePass(url: string, raw: Redis, queue: string): Promise<void> {
  await claimedJobs(url, queue, 1, 50);
  await poll(
    () => pendingOf(raw, queue),
    (c) => c === 1,
    'the first lease recovered',
    20_000,
  );
}

/**
 * A primary and its replica, both started with `args`, once the replica is in sync; `p` ignores
 * its connection's errors, since these tests kill the primary.
 */
export async function startReplicated(
  args: string[],
): Promise<{ primary: RedisServer; replica: RedisServer; p: Redis; r: Redis }> {
  const primary = await RedisServer.start({ args });
  const replica = await RedisServer.start({
    args: [...args, '--replicaof', '127.0.0.1', String(primary.port)],
  });
  const p = primary.client();
  p.on('error', () => {});
  const r = replica.client();
  await poll(
    () => r.info('replication'),
    (info) => info.includes('master_link_status:up'),
    'the replica in sync',
    30_000,
  );
  return { primary, replica, p, r };
}
