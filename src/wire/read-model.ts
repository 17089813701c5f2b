// The reads the Inspector's pages need beyond wire/reads.ts: the server clock, the registry of
// queue names, set sizes and slices, heads, lease deadlines, minute stats, the events stream
// read backwards and the consumers' heartbeats. None runs a script or writes.

import type { StreamEntry } from './blocking-read.js';
import type { Connector } from './connector.js';
import { QUEUES_KEY } from './keyspace.js';
import type { QueueWire } from './queue-wire.js';
import { replies } from './reads.js';

/** The Redis server's clock, epoch ms (the clock every score is written with). */
export async function serverNow(connector: Connector): Promise<number> {
  const [s, us] = await connector.client.time();
  return Number(s) * 1000 + Math.floor(Number(us) / 1000);
}

/** Whether a queue of this name is in the registry (has ever run a script). */
export async function registered(connector: Connector, queue: string): Promise<boolean> {
  return (await connector.client.sismember(QUEUES_KEY, queue)) === 1;
}

/** The names in the registry of queues, sorted. */
export async function queueNames(connector: Connector): Promise<string[]> {
  return (await connector.client.smembers(QUEUES_KEY)).sort();
}

/** For each queue, whether it holds a job with this id (one pipeline for all of them). */
export async function holding(
  connector: Connector,
  wires: readonly QueueWire[],
  id: string,
): Promise<boolean[]> {
  if (wires.length === 0) return [];
  const pipeline = connector.client.pipeline();
  for (const w of wires) pipeline.exists(w.keys.job(id));
  return (await replies<number>(pipeline)).map((n) => n === 1);
}

/** Fields of the queue's meta (settings), null where unset. */
export function meta(w: QueueWire, ...fields: string[]): Promise<(string | null)[]> {
  return w.connector.client.hmget(w.keys.key('meta'), ...fields);
}

/** How many lanes (groups) the queue has seen. */
export function laneCount(w: QueueWire): Promise<number> {
  return w.connector.client.scard(w.keys.key('lanes'));
}

/** Active jobs whose lease deadline is before `now`. */
export function expiredLeases(w: QueueWire, now: number): Promise<number> {
  return w.connector.client.zcount(w.keys.key('active'), '-inf', `(${now}`);
}

/** Each active job's lease deadline (its score in active), null where it is not active. */
export async function leaseDeadlines(w: QueueWire, ids: readonly string[]): Promise<(number | null)[]> {
  const scores = await w.connector.client.zmscore(w.keys.key('active'), ...ids);
  return scores.map((s) => (s === null || s === undefined ? null : Number(s)));
}

/** How many members each set holds. */
export function sizes(w: QueueWire, sets: readonly string[]): Promise<number[]> {
  return Promise.all(sets.map((s) => w.connector.client.zcard(s)));
}

/** Members of `set` by rank start..stop, lowest score first or (newestFirst) highest first. */
export function slice(w: QueueWire, set: string, start: number, stop: number, newestFirst: boolean) {
  const c = w.connector.client;
  return newestFirst ? c.zrevrange(set, start, stop) : c.zrange(set, start, stop);
}

/** The first member of each set (undefined where it is empty), in one pipeline. */
export async function firstOf(w: QueueWire, sets: readonly string[]): Promise<(string | undefined)[]> {
  const pipeline = w.connector.client.pipeline();
  for (const set of sets) pipeline.zrange(set, 0, 0);
  return (await replies<string[]>(pipeline)).map((r) => r[0]);
}

/** Members of an ended state's set that ended at or before `at`. */
export function endedBefore(w: QueueWire, state: 'completed' | 'dead' | 'cancelled', at: number) {
  return w.connector.client.zcount(w.keys.stateSet(state), '-inf', at);
}

/** Completed and failed counts of each minute from..to (epoch minutes), in order. */
export async function minuteStats(w: QueueWire, from: number, to: number): Promise<[number, number][]> {
  const pipeline = w.connector.client.pipeline();
  for (let m = from; m <= to; m++) pipeline.hmget(w.keys.stats(m), 'completed', 'failed');
  return (await replies<(string | null)[]>(pipeline)).map(([c, f]) => [Number(c ?? 0), Number(f ?? 0)]);
}

/** Up to `count` entries of the events stream from `end` back to `since` (ms), newest first. */
export async function eventsBack(
  w: QueueWire,
  end: string,
  since: number,
  count: number,
): Promise<StreamEntry[]> {
  return (await w.connector.client.xrevrange(
    w.keys.key('events'),
    end,
    String(since),
    'COUNT',
    count,
  )) as StreamEntry[];
}

/** Consumers that beat since `since` (ms), most recent first, with the info their runtime reported. */
export async function consumerBeats(
  w: QueueWire,
  since: number,
): Promise<{ id: string; lastSeen: number; info: string | null }[]> {
  const c = w.connector.client;
  const flat = await c.zrevrangebyscore(w.keys.key('consumers'), '+inf', since, 'WITHSCORES');
  if (flat.length === 0) return [];
  const ids = flat.filter((_, i) => i % 2 === 0);
  const infos = await c.hmget(w.keys.key('consumers:info'), ...ids);
  return ids.map((id, i) => ({ id, lastSeen: Number(flat[i * 2 + 1]), info: infos[i] ?? null }));
}
