// Plain reads: what EchoMQ reads without running a script (a row, the state counts, a log page).
// They read keys the scripts write, so their shapes live here beside the verbs (src/wire/verbs),
// and nothing above the wire builds a key or touches the client for them.
import { jobView } from '../core/codec.js';
import { JOB_STATES, type JobState, type JobView } from '../core/types.js';
import type { QueueWire } from './queue-wire.js';

/** The job's row as a view, or null when no job has that id. */
export async function row<D, R>(w: QueueWire, id: string): Promise<JobView<D, R> | null> {
  const fields = (await w.connector.client.hgetall(w.keys.job(id))) as Record<string, string>;
  if (!fields.state) return null;
  return jobView<D, R>(id, fields);
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
