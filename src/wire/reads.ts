// Plain reads: what EchoMQ reads without running a script (a row, the state counts, a log page).
// They read keys the scripts write, so their shapes live here beside the verbs (src/wire/verbs),
// and nothing above the wire builds a key or touches the client for them.
import { jobView } from '../core/codec.js';
import { JOB_STATES, type JobState, type JobView, type LaneInfo, type RateLimit } from '../core/types.js';
import type { QueueWire } from './queue-wire.js';

/** The job's row as a view, or null when no job has that id. */
export async function row<D, R>(w: QueueWire, id: string): Promise<JobView<D, R> | null> {
  const [fields, version] = await replies<unknown>(
    w.connector.client.pipeline().hgetall(w.keys.job(id)).hget(w.keys.key('meta'), 'version'),
  );
  const f = fields as Record<string, string>;
  if (!f.state) return null;
  return jobView<D, R>(id, f, version as string | null);
}

/** Replies of a pipeline, the first error thrown. */
export async function replies<T>(pipeline: {
  exec(): Promise<[Error | null, unknown][] | null>;
}): Promise<T[]> {
  return ((await pipeline.exec()) ?? []).map(([err, value]) => {
    if (err) throw err;
    return value as T;
  });
}

/** How many jobs are in each state (pending counts flat pending and every lane). */
export async function counts(w: QueueWire): Promise<Record<JobState, number>> {
  const c = w.connector.client;
  const k = w.keys;
  const groups = await c.smembers(k.key('lanes'));
  const pipeline = c.pipeline();
  for (const state of JOB_STATES) pipeline.zcard(k.stateSet(state));
  for (const g of groups) pipeline.zcard(k.lane(g));
  const [scheduled, pending, active, completed, dead, cancelled, waitingChildren, ...lanes] =
    await replies<number>(pipeline);
  return {
    scheduled: scheduled!,
    pending: pending! + lanes.reduce((a, b) => a + b, 0),
    active: active!,
    completed: completed!,
    dead: dead!,
    cancelled: cancelled!,
    waiting_children: waitingChildren!,
  };
}

/** `count` lines of a job's log from index `from`, and how many it holds. */
export async function logPage(
  w: QueueWire,
  id: string,
  from: number,
  count: number,
): Promise<{ logs: string[]; count: number }> {
  const key = w.keys.logs(id);
  const [logs, total] = await replies<unknown>(
    w.connector.client
      .pipeline()
      .lrange(key, from, from + count - 1)
      .llen(key),
  );
  return { logs: logs as string[], count: total as number };
}

/** A job's state, or null when it has no row. */
export function jobState(w: QueueWire, id: string): Promise<string | null> {
  return w.connector.client.hget(w.keys.job(id), 'state');
}

/** One field of the queue's meta, or null when it has none. */
export function metaField(w: QueueWire, field: string): Promise<string | null> {
  return w.connector.client.hget(w.keys.key('meta'), field);
}

/** Several fields of the queue's meta in one read (one moment's values), null where absent. */
export function metaFields(w: QueueWire, ...fields: string[]): Promise<(string | null)[]> {
  return w.connector.client.hmget(w.keys.key('meta'), ...fields);
}

/** Whether the whole queue is paused (meta `paused`). */
export async function isPaused(w: QueueWire): Promise<boolean> {
  return (await w.connector.client.hget(w.keys.key('meta'), 'paused')) === '1';
}

/** The lanes (groups) the queue has seen, sorted. */
export async function laneNames(w: QueueWire): Promise<string[]> {
  return (await w.connector.client.smembers(w.keys.key('lanes'))).sort();
}

/** The sorted sets that hold `state`'s jobs: pending is flat pending, then each lane by name. */
export async function setsOf(w: QueueWire, state: JobState): Promise<string[]> {
  if (state !== 'pending') return [w.keys.stateSet(state)];
  return [w.keys.key('pending'), ...(await laneNames(w)).map((g) => w.keys.lane(g))];
}

/** The rows of `ids` as views, in order; ids whose row is gone (removed meanwhile) are left out. */
export async function rows<D, R>(w: QueueWire, ids: readonly string[]): Promise<JobView<D, R>[]> {
  if (ids.length === 0) return [];
  const pipeline = w.connector.client.pipeline().hget(w.keys.key('meta'), 'version');
  for (const id of ids) pipeline.hgetall(w.keys.job(id));
  const [version, ...found] = await replies<unknown>(pipeline);
  const out: JobView<D, R>[] = [];
  for (const [i, fields] of (found as Record<string, string>[]).entries()) {
    if (fields.state) out.push(jobView<D, R>(ids[i]!, fields, version as string | null));
  }
  return out;
}

/** The newest end in an ended state's set (its score) and how many ended up to it; null when empty. */
export async function endedUpTo(
  w: QueueWire,
  state: 'completed' | 'dead' | 'cancelled',
): Promise<{ cutoff: string; total: number } | null> {
  const set = w.keys.stateSet(state);
  const newest = await w.connector.client.zrange(set, -1, -1, 'WITHSCORES');
  if (newest.length === 0) return null;
  return { cutoff: newest[1]!, total: await w.connector.client.zcount(set, '-inf', newest[1]!) };
}

/** Up to `count` ids that ended in `state` up to `cutoff`, oldest first, after skipping `skip`. */
export function endedPage(
  w: QueueWire,
  state: 'completed' | 'dead' | 'cancelled',
  cutoff: string,
  skip: number,
  count: number,
): Promise<string[]> {
  return w.connector.client.zrangebyscore(w.keys.stateSet(state), '-inf', cutoff, 'LIMIT', skip, count);
}

/** The given fields of each job's row, in order (null where a field or row is missing). */
export async function fieldsOf(
  w: QueueWire,
  ids: readonly string[],
  ...fields: string[]
): Promise<(string | null)[][]> {
  const pipeline = w.connector.client.pipeline();
  for (const id of ids) pipeline.hmget(w.keys.job(id), ...fields);
  return replies<(string | null)[]>(pipeline);
}

/** Every lane with its counts and settings, by name. */
export async function lanes(w: QueueWire): Promise<LaneInfo[]> {
  const c = w.connector.client;
  const k = w.keys;
  const groups = await laneNames(w);
  const [running, conc, rate, paused] = await Promise.all([
    c.hgetall(k.key('lanes:running')),
    c.hgetall(k.key('lanes:concurrency')),
    c.hgetall(k.key('lanes:rate')),
    c.smembers(k.key('lanes:paused')),
  ]);
  const pending = await Promise.all(groups.map((g) => c.zcard(k.lane(g))));
  return groups.map((group, i) => ({
    group,
    pending: pending[i] ?? 0,
    running: Number(running[group] ?? 0),
    paused: paused.includes(group),
    concurrency: Number(conc[group] ?? conc['*'] ?? 0),
    rateLimit: parseRate(rate[group] ?? rate['*']),
  }));
}

function parseRate(spec: string | null | undefined): RateLimit | null {
  const m = spec ? /^(\d+):(\d+)$/.exec(spec) : null;
  return m ? { max: Number(m[1]), perMs: Number(m[2]) } : null;
}

/** A member of `repeat` or `schedulers` with its score and its record's fields. */
export interface StoredRecord {
  id: string;
  score: string;
  fields: Record<string, string>;
}

/** The members of a zset of records (ranks start..end) with their records, read in one pipeline. */
async function records(
  w: QueueWire,
  set: 'repeat' | 'schedulers',
  record: (id: string) => string,
  start: number,
  end: number,
): Promise<StoredRecord[]> {
  const c = w.connector.client;
  const flat = await c.zrange(w.keys.key(set), start, end, 'WITHSCORES');
  if (flat.length === 0) return [];
  const pipeline = c.pipeline();
  for (let i = 0; i < flat.length; i += 2) pipeline.hgetall(record(flat[i]!));
  return (await replies<Record<string, string>>(pipeline)).map((fields, j) => ({
    id: flat[j * 2]!,
    score: flat[j * 2 + 1]!,
    fields,
  }));
}

/** Every Repeat registration, soonest slot first ('fields' empty when unregistered meanwhile). */
export function repeatRecords(w: QueueWire): Promise<StoredRecord[]> {
  return records(w, 'repeat', (name) => w.keys.repeat(name), 0, -1);
}

/** Job schedulers by upcoming run (ended ones last), ranks start..end inclusive. */
export function schedulerRecords(w: QueueWire, start: number, end: number): Promise<StoredRecord[]> {
  return records(w, 'schedulers', (id) => w.keys.scheduler(id), start, end);
}

export function schedulerCount(w: QueueWire): Promise<number> {
  return w.connector.client.zcard(w.keys.key('schedulers'));
}

/** A flow parent's children's results (child id -> encoded result) or failures (child id -> error). */
export function children(
  w: QueueWire,
  id: string,
  which: 'results' | 'failures',
): Promise<Record<string, string>> {
  return w.connector.client.hgetall(which === 'results' ? w.keys.results(id) : w.keys.failures(id));
}

/** The lowest score of each of the given sets ('schedule', 'repeat'), where they have members. */
export async function heads(w: QueueWire, sets: readonly ('schedule' | 'repeat')[]): Promise<number[]> {
  const c = w.connector.client;
  const found = await Promise.all(sets.map((set) => c.zrange(w.keys.key(set), 0, 0, 'WITHSCORES')));
  return found.filter((h) => h.length === 2).map((h) => Number(h[1]));
}

/** Every member of each set, in set order. */
export async function members(w: QueueWire, sets: readonly string[]): Promise<string[]> {
  return (await Promise.all(sets.map((s) => w.connector.client.zrange(s, 0, -1)))).flat();
}
