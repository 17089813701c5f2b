// The reads only the read model makes (src/inspect/inspector.ts: what the CLI and the dashboard show):
// the registry of queues, the heads of the waiting lines, the minute stats, pages of a state's
// set, lease deadlines, a job's stretch of the events stream, the consumers' beats. Plain reads,
// no script: the Inspector imports this file and reads.ts, never a verb, so it cannot write.
import { createdAt } from '../core/codec.js';
import type { Connector } from './connector.js';
import { QUEUES_KEY } from './keyspace.js';
import type { QueueWire } from './queue-wire.js';
import { fieldsOf, replies } from './reads.js';

/** The retention counts a queue has without configure (SPEC 6, meta keep_completed, keep_dead). */
const KEPT_COMPLETED = 1000;
const KEPT_DEAD = 10_000;

/** The Redis server's clock, epoch ms (the clock every score is written with). */
export async function serverNow(c: Connector): Promise<number> {
  const [s, us] = await c.client.time();
  return Number(s) * 1000 + Math.floor(Number(us) / 1000);
}

/** Whether a queue of this name is in the registry (has ever run a script). */
export async function isRegistered(c: Connector, queue: string): Promise<boolean> {
  return (await c.client.sismember(QUEUES_KEY, queue)) === 1;
}

/** The names in the registry of queues, sorted. */
export async function registeredNames(c: Connector): Promise<string[]> {
  return (await c.client.smembers(QUEUES_KEY)).sort();
}

/** For each queue, whether it holds a job with this id (one pipeline). */
export async function haveRow(c: Connector, queues: readonly QueueWire[], id: string): Promise<boolean[]> {
  if (queues.length === 0) return [];
  const pipeline = c.client.pipeline();
  for (const w of queues) pipeline.exists(w.keys.job(id));
  return (await replies<number>(pipeline)).map((n) => n === 1);
}

/** How many lanes (groups) the queue has seen. */
export function laneCount(w: QueueWire): Promise<number> {
  return w.connector.client.scard(w.keys.key('lanes'));
}

/** How many active jobs' leases ended before `now` (server clock). */
export function expiredLeases(w: QueueWire, now: number): Promise<number> {
  return w.connector.client.zcount(w.keys.key('active'), '-inf', `(${now}`);
}

/** The queue's retention counts (meta keep_completed, keep_dead, else the protocol's defaults). */
export async function kept(w: QueueWire): Promise<{ completed: number; dead: number }> {
  const [completed, dead] = await w.connector.client.hmget(w.keys.key('meta'), 'keep_completed', 'keep_dead');
  return { completed: Number(completed ?? KEPT_COMPLETED), dead: Number(dead ?? KEPT_DEAD) };
}

/**
 * The job next in line in flat pending and in each lane (the head of each set), as
 * [created, runAt] (undefined for an empty set), with the lanes' names. Two round trips
 * whatever the backlog.
 */
export async function lineHeads(
  w: QueueWire,
): Promise<{ groups: string[]; heads: ([string, string | null] | undefined)[] }> {
  const c = w.connector.client;
  const groups = await c.smembers(w.keys.key('lanes'));
  const sets = [w.keys.key('pending'), ...groups.map((g) => w.keys.lane(g))];
  const first = c.pipeline();
  for (const set of sets) first.zrange(set, 0, 0);
  const ids = (await replies<string[]>(first)).map((reply) => reply[0]);
  const rows = c.pipeline();
  for (const id of ids) if (id !== undefined) rows.hmget(w.keys.job(id), 'created', 'runat');
  const found = rows.length > 0 ? await replies<(string | null)[]>(rows) : [];
  let r = 0;
  const heads = ids.map((id): [string, string | null] | undefined => {
    if (id === undefined) return undefined;
    const [created, runAt] = found[r++] ?? [];
    return [String(createdAt(id, created)), runAt ?? null]; // a minted id's row may have no created
  });
  return { groups, heads };
}

/** Each minute's completed and failed counts, minutes `from` to `to` (epoch minutes) in order. */
export function minuteStats(w: QueueWire, from: number, to: number): Promise<(string | null)[][]> {
  const pipeline = w.connector.client.pipeline();
  for (let m = from; m <= to; m++) pipeline.hmget(w.keys.stats(m), 'completed', 'failed');
  return replies<(string | null)[]>(pipeline);
}

/** How many members each set has, in order. */
export function sizes(w: QueueWire, sets: readonly string[]): Promise<number[]> {
  return Promise.all(sets.map((s) => w.connector.client.zcard(s)));
}

/** Members `start` to `stop` (ranks, inclusive) of a set, lowest score first or, `newestFirst`, highest. */
export function slice(
  w: QueueWire,
  set: string,
  start: number,
  stop: number,
  newestFirst: boolean,
): Promise<string[]> {
  const c = w.connector.client;
  return newestFirst ? c.zrevrange(set, start, stop) : c.zrange(set, start, stop);
}

/** Jobs read per call when a tag filter reads a state's jobs in order. */
const TAG_CHUNK = 500;

/**
 * The ids in `sets` (read in order, in chunks, at most `scanMax`) whose row carries `tag`: the
 * page from `offset` (at most `limit`), how many match in all that was read, and how many were read.
 */
export async function tagged(
  w: QueueWire,
  sets: readonly string[],
  tag: string,
  page: { offset: number; limit: number; newestFirst: boolean; scanMax: number },
): Promise<{ total: number; ids: string[]; scanned: number }> {
  const ids: string[] = [];
  let total = 0;
  let scanned = 0;
  for (const set of sets) {
    for (let start = 0; scanned < page.scanMax; start += TAG_CHUNK) {
      const stop = start + Math.min(TAG_CHUNK, page.scanMax - scanned) - 1;
      const chunk = await slice(w, set, start, stop, page.newestFirst);
      if (chunk.length === 0) break;
      scanned += chunk.length;
      const tags = await fieldsOf(w, chunk, 'tags');
      for (const [i, id] of chunk.entries()) {
        if (!(tags[i]![0] ?? '').split(',').includes(tag)) continue;
        if (total >= page.offset && ids.length < page.limit) ids.push(id);
        total += 1;
      }
    }
  }
  return { total, ids, scanned };
}

/** Each active job's lease deadline (its score in active), null where it is not active. */
export async function leaseDeadlines(w: QueueWire, ids: readonly string[]): Promise<(number | null)[]> {
  const scores = await w.connector.client.zmscore(w.keys.key('active'), ...ids);
  return scores.map((s) => (s === null || s === undefined ? null : Number(s)));
}

/** How many jobs in an ended state's set ended at or before `before` (epoch ms). */
export function endedBefore(
  w: QueueWire,
  state: 'completed' | 'dead' | 'cancelled',
  before: number,
): Promise<number> {
  return w.connector.client.zcount(w.keys.stateSet(state), '-inf', before);
}

/** The raw fields of a job's row (empty when no job has that id) and the queue's protocol version. */
export async function rowFields(
  w: QueueWire,
  id: string,
): Promise<{ row: Record<string, string>; version: string | null }> {
  const [row, version] = await replies<unknown>(
    w.connector.client.pipeline().hgetall(w.keys.job(id)).hget(w.keys.key('meta'), 'version'),
  );
  return { row: row as Record<string, string>, version: version as string | null };
}

/** Up to `count` entries of the events stream, newest first, from `end` back to `since` (stream ids). */
export async function eventsBack(
  w: QueueWire,
  end: string,
  since: string,
  count: number,
): Promise<[string, string[]][]> {
  return (await w.connector.client.xrevrange(w.keys.key('events'), end, since, 'COUNT', count)) as [
    string,
    string[],
  ][];
}

/**
 * Reads the events stream newest first from its end back to `since` (a stream id), in calls of
 * `chunk` entries, handing each entry to `visit`; true when it stopped at `max` read.
 */
export async function eventsSince(
  w: QueueWire,
  since: string,
  chunk: number,
  max: number,
  visit: (streamId: string, flat: string[]) => void,
): Promise<boolean> {
  let end = '+';
  for (let scanned = 0; ; ) {
    if (scanned >= max) return true;
    const part = await eventsBack(w, end, since, chunk);
    scanned += part.length;
    for (const [streamId, flat] of part) visit(streamId, flat);
    if (part.length < chunk) return false;
    end = `(${part[part.length - 1]![0]}`;
  }
}

/** The consumers that beat at or after `since` (server clock), most recent first, with their info. */
export async function consumersSince(
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
