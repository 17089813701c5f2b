// The queue's verbs (SPEC 19.15-19.22): retry, clean, flow_add, pause, resume, configure,
// configure_lane and heartbeat. See verbs/index.ts.
import type { Admission } from '../admission.js';
import type { QueueWire } from '../queue-wire.js';

type Arg = string | number;

// ── 19.15 retry, 19.16 clean, 19.17 flow_add ──────────────────────────────────

/** Returns ended jobs to pending; per id 'OK', 'EMQNOJOB', 'EMQSTATE' or 'EMQDATA'. */
export async function retry(w: QueueWire, ids: readonly string[]): Promise<string[]> {
  return (await w.run('retry', [w.keys.prefix, ...ids])) as string[];
}

/** Deletes up to `limit` jobs of an ended state that ended `olderThanMs` ago; resolves with how many. */
export async function clean(
  w: QueueWire,
  state: 'completed' | 'dead' | 'cancelled',
  olderThanMs: number,
  limit: number,
): Promise<number> {
  return (await w.run('clean', [w.keys.prefix, state, olderThanMs, limit])) as number;
}

/**
 * One job of a flow_add call (a #15 tuple): a job the call admits, or a ref (`job` absent), a
 * child admitted by its own queue's call, only counted in its parent and indexed in its deps.
 */
export interface FlowTuple {
  /** '' for a job of the call's queue, else its queue's prefix. */
  prefix: string;
  id: string;
  /** '' for the root, the id of an earlier tuple, or (first tuple only) '<its prefix><its id>'. */
  parent: string;
  /** The job encoded; absent for a ref. */
  job?: Admission;
  /** '1' runs even when a child fails, 'ignore' also records the failure, '' otherwise. */
  cont?: '' | '1' | 'ignore';
}

/** Admits a flow (or one queue's part of it), parents before their children; 'duplicate' writes nothing. */
export async function flowAdd(w: QueueWire, tuples: readonly FlowTuple[]): Promise<'added' | 'duplicate'> {
  const argv: string[] = [w.keys.prefix, '#15'];
  for (const t of tuples) {
    const a = t.job;
    if (!a) argv.push(t.prefix, t.id, '', '0', '', '', '', '', t.parent, '', '', '', '', '', '1');
    else {
      argv.push(t.prefix, t.id, a.payload, a.priority, a.group, a.name, a.max, a.backoff, t.parent);
      argv.push(t.cont ?? '', a.retainCompleted, a.retainDead, a.tags, a.lifo, '');
    }
  }
  return (await w.run('flow_add', argv)) === 1 ? 'added' : 'duplicate';
}

// ── 19.18 pause, 19.19 resume, 19.20 configure, 19.21 configure_lane ──────────

/** Pauses the queue, or one lane; true when it was running. */
export async function pause(w: QueueWire, group?: string): Promise<boolean> {
  const argv: Arg[] = group === undefined ? [w.keys.prefix] : [w.keys.prefix, group];
  return (await w.run('pause', argv)) === 1;
}

/** Resumes the queue, or one lane; true when it was paused. */
export async function resume(w: QueueWire, group?: string): Promise<boolean> {
  const argv: Arg[] = group === undefined ? [w.keys.prefix] : [w.keys.prefix, group];
  return (await w.run('resume', argv)) === 1;
}

/** The queue settings configure writes into meta ('-' clears a rate field). */
export type SettingField =
  | 'rate_max'
  | 'rate_ms'
  | 'keep_completed'
  | 'keep_completed_ms'
  | 'keep_dead'
  | 'keep_dead_ms'
  | 'events_max'
  | 'keep_ids_ms'
  | 'concurrency'
  | 'recovery'
  | 'max_stalled';

/** Writes queue settings; fields not given stay. */
export async function configure(w: QueueWire, fields: readonly [SettingField, string][]): Promise<void> {
  if (fields.length > 0) await w.run('configure', fields.flat());
}

/** Sets a lane's (or '*', the default's) concurrency and rate ('' keeps one, '-' clears the rate). */
export async function configureLane(
  w: QueueWire,
  group: string,
  concurrency: string,
  rate: string,
): Promise<void> {
  await w.run('configure_lane', [w.keys.prefix, group, concurrency, rate]);
}

// ── 19.22 heartbeat ───────────────────────────────────────────────────────────

/** A consumer's beat with its info (JSON), or '' when it leaves; resolves with the live count. */
export async function heartbeat(
  w: QueueWire,
  consumerId: string,
  info: string,
): Promise<{ seen: number; notices: number }> {
  const [seen, notices] = (await w.run('heartbeat', [w.keys.prefix, consumerId, info])) as [number, number];
  return { seen, notices };
}

// ── 19.41 migrate ─────────────────────────────────────────────────────────────

/**
 * Steps the queue's protocol version from `from` to `from + 1` once every consumer alive
 * within `windowMs` (or three of its beats) speaks it; resolves with the version now stored
 * and how many alive consumers were checked. EMQFLEET names a consumer that does not speak it.
 */
export async function migrate(
  w: QueueWire,
  from: number,
  windowMs: number,
): Promise<{ version: number; alive: number }> {
  const [version, alive] = (await w.run('migrate', [w.keys.prefix, from, from + 1, windowMs])) as unknown[];
  return { version: Number(version), alive: Number(alive) };
}
