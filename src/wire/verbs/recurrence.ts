// The recurrence verbs (SPEC 19.23-19.29): Repeat cadences (register, unregister, pump) and job
// schedulers (getJobScheduler, addJobScheduler, updateJobScheduler, removeJobScheduler).
import type { QueueWire } from '../queue-wire.js';

type Arg = string | number;

// ── 19.23 register, 19.24 unregister, 19.25 pump ──────────────────────────────

/** Registers a Repeat cadence; `first` 'next' (server now + everyMs) or an epoch ms instant. */
export async function register(
  w: QueueWire,
  name: string,
  everyMs: number,
  template: string,
  first: number | 'next',
  catchUp: 'once' | 'all',
  max: number | '',
): Promise<'registered' | 'exists'> {
  const reply = await w.run('register', [name, everyMs, template, first, w.keys.prefix, catchUp, max]);
  return reply === 1 ? 'registered' : 'exists';
}

/** Removes a cadence; true when it existed. */
export async function unregister(w: QueueWire, name: string): Promise<boolean> {
  return (await w.run('unregister', [w.keys.prefix, name])) === 1;
}

/** A pump call's outcome: ids released (`minted`, the seeds' word), the server's now, and the next due instant (-1: none). */
export interface PumpResult {
  minted: string[];
  now: number;
  nextDue: number;
}

/** Releases due Repeat slots nothing released (at most `batch`). */
export async function pump(w: QueueWire, batch: number): Promise<PumpResult> {
  const [minted, now, nextDue] = (await w.run('pump', [w.keys.prefix, batch])) as [string[], number, number];
  return { minted, now, nextDue };
}

// ── 19.26 getJobScheduler ─────────────────────────────────────────────────────

/** A scheduler's record as getJobScheduler reads it (mode `one`). */
export interface SchedulerRecord {
  now: number;
  /** Its score in `schedulers` ('' when it has none). */
  score: string;
  fields: Record<string, string>;
  /** The state of its current occurrence's row ('' when none). */
  jobState: string;
  /** Whether that occurrence still waits in the schedule. */
  waiting: boolean;
}

export async function getJobScheduler(w: QueueWire, id: string): Promise<SchedulerRecord> {
  const [now, score, flat, jobState, waiting] = (await w.run('getJobScheduler', [
    w.keys.prefix,
    'one',
    id,
  ])) as [number, string, string[], string, number];
  const fields: Record<string, string> = {};
  for (let i = 0; i < flat.length; i += 2) fields[flat[i]!] = flat[i + 1]!;
  return { now, score, fields, jobState, waiting: waiting === 1 };
}

/** A scheduler whose occurrence was released: what the next instant is computed from. */
export interface DueScheduler {
  id: string;
  /** The occurrence's id, its instant, the occurrences made so far and the stored repeat options. */
  job: string;
  at: number;
  count: number;
  repeat: string;
}

/** A cron scheduler whose lookahead runs low: what its top-up is computed from. */
export interface LowScheduler {
  id: string;
  job: string;
  /** The lookahead's last instant, the occurrences made so far, the stored repeat options. */
  last: number;
  count: number;
  repeat: string;
  /** How many instants the lookahead still holds. */
  left: number;
}

/**
 * getJobScheduler mode `due`: up to `batch` schedulers to hand off, those whose lookahead runs
 * low, the clock and the next due instant.
 */
export async function getDueSchedulers(
  w: QueueWire,
  batch: number,
): Promise<{ now: number; nextDue: number; due: DueScheduler[]; low: LowScheduler[] }> {
  const [now, nextDue, flat, topups] = (await w.run('getJobScheduler', [w.keys.prefix, 'due', batch])) as [
    number,
    number,
    string[],
    string[] | undefined,
  ];
  const due: DueScheduler[] = [];
  for (let i = 0; i < flat.length; i += 5) {
    const [id, job, at, count, repeat] = flat.slice(i, i + 5) as [string, string, string, string, string];
    due.push({ id, job, at: Number(at), count: Number(count), repeat });
  }
  const low: LowScheduler[] = [];
  const t = topups ?? [];
  for (let i = 0; i < t.length; i += 6) {
    const [id, job, last, count, repeat, left] = t.slice(i, i + 6) as [
      string,
      string,
      string,
      string,
      string,
      string,
    ];
    low.push({ id, job, last: Number(last), count: Number(count), repeat, left: Number(left) });
  }
  return { now, nextDue, due, low };
}

// ── 19.27 addJobScheduler, 19.28 updateJobScheduler, 19.29 removeJobScheduler ─

/** The reply of add/updateJobScheduler: status, the next instant (null: none) and the occurrence id ('' none). */
export interface SchedulerWrite {
  status: string;
  next: number | null;
  jobId: string;
}

function schedulerWrite(reply: unknown): SchedulerWrite {
  const [status, next, jobId] = reply as [string, number | string, string];
  return { status, next: next === '' ? null : Number(next), jobId };
}

/** What addJobScheduler stores: the scheduler's definition and its template, encoded. */
export interface SchedulerDefinition {
  repeat: string;
  name: string;
  data: string;
  prio: string;
  group: string;
  max: string;
  backoff: string;
}

/**
 * Creates or changes a scheduler, compare-and-set on the occurrence `expectedJob` it was read
 * with ('stale' when another writer came first); `next` the next instant (null: ended), `ahead`
 * a cron pattern's lookahead, the instants after it ('' none).
 */
export async function addJobScheduler(
  w: QueueWire,
  id: string,
  d: SchedulerDefinition,
  next: number | null,
  expectedJob: string,
  count: number,
  ended: string,
  ahead: string,
): Promise<SchedulerWrite> {
  const argv: Arg[] = [w.keys.prefix, id, d.repeat, d.name, d.data, d.prio, d.group, d.max, d.backoff];
  argv.push(next ?? '', expectedJob, count, ended, ahead);
  return schedulerWrite(await w.run('addJobScheduler', argv));
}

/**
 * Makes a scheduler's next occurrence (or ends it, `next` null), compare-and-set on
 * `expectedJob`, with `ahead` the cron lookahead after it; `next` 'more' only appends `ahead`
 * to the record's lookahead (a top-up).
 */
export async function updateJobScheduler(
  w: QueueWire,
  id: string,
  expectedJob: string,
  next: number | null | 'more',
  ended: string,
  ahead: string,
): Promise<SchedulerWrite> {
  return schedulerWrite(
    await w.run('updateJobScheduler', [w.keys.prefix, id, expectedJob, next ?? '', ended, ahead]),
  );
}

/** True when the scheduler existed. */
export async function removeJobScheduler(w: QueueWire, id: string): Promise<boolean> {
  return (await w.run('removeJobScheduler', [w.keys.prefix, id])) === 1;
}
