// Changing a job that has not started, its log, and emptying a queue (SPEC 19.30-19.36):
// promote_job, reschedule, reprioritize, update_data, log, drain, obliterate.
import type { QueueWire } from '../queue-wire.js';

type Arg = string | number;

// ── 19.30 promote_job .. 19.33 update_data: changing a job that has not started ─

export async function promoteJob(w: QueueWire, id: string): Promise<void> {
  await w.run('promote_job', [w.keys.prefix, id], id);
}

/** Moves a job's run-at; resolves with the new one (epoch ms, server clock). */
export async function reschedule(
  w: QueueWire,
  id: string,
  mode: 'at' | 'in',
  value: number,
): Promise<number> {
  return (await w.run('reschedule', [w.keys.prefix, id, mode, value], id)) as number;
}

export async function reprioritize(w: QueueWire, id: string, priority: number): Promise<void> {
  await w.run('reprioritize', [w.keys.prefix, id, priority], id);
}

/** Replaces a job's encoded data; with `token`, of the running job that holds that lease. */
export async function updateData(w: QueueWire, id: string, payload: string, token?: string): Promise<void> {
  const argv: Arg[] = [w.keys.prefix, id, payload];
  if (token !== undefined) argv.push(token);
  await w.run('update_data', argv, id);
}

// ── 19.34 log ─────────────────────────────────────────────────────────────────

/** Appends each job's lines (fenced by token), keeping the newest `maxLines`; per job 'OK' or 'EMQLEASE'. */
export async function log(
  w: QueueWire,
  maxLines: number,
  entries: readonly { id: string; token: string; lines: readonly string[] }[],
): Promise<string[]> {
  const argv: Arg[] = [w.keys.prefix, maxLines];
  for (const e of entries) argv.push(e.id, e.token, e.lines.length, ...e.lines);
  return (await w.run('log', argv)) as string[];
}

// ── 19.35 drain, 19.36 obliterate ─────────────────────────────────────────────

/** Deletes up to `batch` waiting jobs; `more` says whether any are left. */
export async function drain(
  w: QueueWire,
  batch: number,
  scheduled: boolean,
): Promise<{ deleted: number; more: boolean }> {
  const [deleted, more] = (await w.run('drain', [w.keys.prefix, batch, scheduled ? '1' : '0'])) as number[];
  return { deleted: deleted!, more: more !== 0 };
}

/** Deletes a SCAN batch of the queue's keys; `cursor` '0' once the scan is over. */
export async function obliterate(
  w: QueueWire,
  cursor: string,
  batch: number,
  force: boolean,
): Promise<{ deleted: number; cursor: string }> {
  const [deleted, next] = (await w.run('obliterate', [w.keys.prefix, cursor, batch, force ? '1' : '0'])) as [
    number,
    string,
  ];
  return { deleted, cursor: next };
}
