// The job path's verbs (SPEC 19.2-19.14): admission, promote, claim, complete, fail, lease
// extension, recovery, cancel, remove, handback and progress. See verbs/index.ts.
import type { EnqueueStatus, ScheduleStatus } from '../../core/types.js';
import { type Admission, extended } from '../admission.js';
import type { Replication } from '../durability.js';
import type { QueueWire } from '../queue-wire.js';

type Arg = string | number;

/** One admission reply entry: 1 added, 0 duplicate, or the kept id (a string) when deduplicated. */
function admitted<S extends string>(
  id: string,
  reply: unknown,
  added: S,
): { id: string; status: S | 'duplicate' | 'deduplicated' } {
  if (typeof reply === 'string') return { id: reply, status: 'deduplicated' };
  return reply === 1 ? { id, status: added } : { id, status: 'duplicate' };
}

// ── 19.2 enqueue ──────────────────────────────────────────────────────────────

/** Admits jobs into pending or their lanes; one entry per job, in order. */
export async function enqueue(
  w: QueueWire,
  jobs: readonly Admission[],
  durability?: Replication,
): Promise<{ id: string; status: EnqueueStatus }[]> {
  const argv: string[] = [w.keys.prefix];
  // Plain jobs travel as 7-field tuples, 9 when a job of the call has a dedupe key (every ARGV
  // element costs Redis a Lua string and a table slot before the script runs); a call with any
  // job of its own retention, tags or lifo announces the 13-field form with '#13', and with a
  // timeout the 14-field form ('#14').
  const wide = jobs.some(extended);
  const timed = wide && jobs.some((j) => j.timeout !== '');
  const deduped = wide || jobs.some((j) => j.dedupeKey !== '');
  if (wide) argv.push(timed ? '#14' : '#13');
  for (const j of jobs) {
    argv.push(j.id, j.payload, j.priority, j.group, j.name, j.max, j.backoff);
    if (deduped) argv.push(j.dedupeKey, j.dedupeSpec);
    if (wide) argv.push(j.retainCompleted, j.retainDead, j.tags, j.lifo);
    if (timed) argv.push(j.timeout);
  }
  // The module's EMQ.ENQUEUE takes only 7-field tuples without a group (SPEC 26): whether a call
  // is plain is its shape, known here, so any other goes by the script without a refused try.
  const plain = !deduped && jobs.every((j) => j.group === '');
  const reply = (await w.run('enqueue', argv, undefined, durability, !plain)) as (number | string)[];
  return reply.map((r, i) => admitted(jobs[i]!.id, r, 'enqueued'));
}

// ── 19.3 schedule ─────────────────────────────────────────────────────────────

/** Admits one job fenced out of pending until `at` (epoch ms) or `in` ms from the server's now. */
export async function schedule(
  w: QueueWire,
  j: Admission,
  mode: 'at' | 'in',
  value: number,
  durability?: Replication,
): Promise<{ id: string; status: ScheduleStatus }> {
  const argv: Arg[] = [j.id, j.payload, mode, value, j.priority, j.group, j.name, j.max, j.backoff];
  argv.push(j.dedupeKey, j.dedupeSpec);
  if (extended(j)) argv.push(j.retainCompleted, j.retainDead, j.tags);
  if (j.timeout !== '') argv.push(j.timeout);
  return admitted(j.id, await w.run('schedule', argv, j.id, durability), 'scheduled');
}

// ── 19.4 promote ──────────────────────────────────────────────────────────────

/** Releases due scheduled jobs; resolves with how many due members were selected. */
export async function promote(w: QueueWire, batch: number): Promise<number> {
  return (await w.run('promote', [w.keys.prefix, batch])) as number;
}

export interface PromoteNext {
  count: number;
  /** The server's clock, and the lowest score left in the schedule (-1: empty). */
  now: number;
  nextDue: number;
  /** Released scheduler occurrences this call did not hand off (the runtime's hand-off is due). */
  handoffs: number;
}

/** promote with mode `next`: also the clock and the next due instant. */
export async function promoteNext(w: QueueWire, batch: number, elapsedMs?: number): Promise<PromoteNext> {
  const argv: Arg[] = [w.keys.prefix, batch, 'next'];
  if (elapsedMs !== undefined) argv.push(elapsedMs);
  const [count, now, nextDue, handoffs] = (await w.run('promote', argv)) as number[];
  return { count: count!, now: now!, nextDue: nextDue!, handoffs: handoffs ?? 0 };
}

// ── 19.5 claim ────────────────────────────────────────────────────────────────

/** A job a claim took, under a fresh lease: its fields as the row holds them (still encoded). */
export interface ClaimedJob {
  id: string;
  token: string;
  /** This attempt's number (1 on the first run). */
  attempts: number;
  max: number;
  payload: string;
  /** '' when the job has no name, as the backoff when it has no policy of its own. */
  name: string;
  backoff: string;
  /** The job's execution timeout per attempt in ms, when it has one (SPEC 8.1). */
  timeoutMs?: number;
}

export interface Claimed {
  jobs: ClaimedJob[];
  /** '' when the claim was not short (claim again at once); else the wake stream id to block after. */
  wakeId: string;
  /** ms until a rate limit lets more be claimed; -1 when none holds work back. */
  waitMs: number;
  /** The server's clock, and the lowest score in the schedule (-1: empty), read in the same call. */
  now: number;
  nextDue: number;
}

/** The jobs of claim's flat job list: 7 entries per job (id token attempts max payload name backoff). */
export function claimedOf(flat: readonly unknown[]): ClaimedJob[] {
  const jobs: ClaimedJob[] = [];
  for (let i = 0; i < flat.length; i += 7) {
    jobs.push({
      id: flat[i] as string,
      token: String(flat[i + 1]),
      attempts: Number(flat[i + 2]),
      max: Number(flat[i + 3]),
      payload: flat[i + 4] as string,
      name: flat[i + 5] as string,
      backoff: flat[i + 6] as string,
    });
  }
  return jobs;
}

/**
 * claim's reply (and complete's tail, from index `at`): 7 entries per job, then the wake id,
 * wait, clock, next due. Read in place: complete's reply is not copied to drop its head.
 */
function claimed(reply: unknown[], at = 0): Claimed {
  const flat = reply[at] as unknown[];
  const wakeId = reply[at + 1] as string;
  const waitMs = reply[at + 2] as number;
  const now = reply[at + 3] as number;
  const nextDue = reply[at + 4] as number;
  const timeouts = reply[at + 5] as string[] | undefined;
  const jobs = claimedOf(flat);
  // A trailing `id timeout_ms` list, only when a job taken has a timeout.
  if (timeouts && timeouts.length > 0) {
    const byId = new Map<string, number>();
    for (let i = 0; i < timeouts.length; i += 2) {
      const ms = Number(timeouts[i + 1]);
      if (Number.isSafeInteger(ms) && ms >= 1) byId.set(String(timeouts[i]), ms); // else: none of its own
    }
    for (const j of jobs) {
      const t = byId.get(j.id);
      if (t !== undefined) j.timeoutMs = t;
    }
  }
  return { jobs, wakeId, waitMs, now, nextDue };
}

/**
 * Takes up to `n` claimable jobs, each under a lease of `leaseMs`; `consumer` (optional) is
 * recorded on each taken row and its active event, so tools can say which consumer ran it.
 */
export async function claim(w: QueueWire, n: number, leaseMs: number, consumer?: string): Promise<Claimed> {
  const argv: Arg[] = [w.keys.prefix, n, leaseMs];
  if (consumer) argv.push(consumer);
  return claimed((await w.run('claim', argv)) as unknown[]);
}

// ── 19.6 complete ─────────────────────────────────────────────────────────────

/** A finished job's acknowledgement: its lease token and its encoded result ('' for none). */
export interface Ack {
  id: string;
  token: string;
  result: string;
}

/** Completes jobs (fenced by token) and claims `claimN` more in the same call (recording `consumer`, as claim). */
export async function complete(
  w: QueueWire,
  leaseMs: number,
  claimN: number,
  acks: readonly Ack[],
  durability?: Replication,
  consumer?: string,
): Promise<{ statuses: ('OK' | 'EMQLEASE')[]; claimed: Claimed }> {
  const argv: Arg[] = [w.keys.prefix, leaseMs, claimN];
  for (const a of acks) argv.push(a.id, a.token, a.result);
  if (consumer) argv.push(consumer); // after the last triple: the script tells it apart by the count
  const reply = (await w.run('complete', argv, undefined, durability)) as unknown[];
  return { statuses: reply[0] as ('OK' | 'EMQLEASE')[], claimed: claimed(reply, 1) };
}

// ── 19.7 fail ─────────────────────────────────────────────────────────────────

/** Records a failed attempt: a retry after `delayMs` (-1: none left), dead, or cancelled; `reason` for its event. */
export async function fail(
  w: QueueWire,
  id: string,
  token: string,
  message: string,
  stack: string,
  delayMs: number,
  reason?: 'error' | 'timeout',
): Promise<'retry' | 'dead' | 'cancelled'> {
  const argv: Arg[] = [w.keys.prefix, id, token, message, stack, delayMs];
  if (reason !== undefined) argv.push(reason);
  return (await w.run('fail', argv, id)) as 'retry' | 'dead' | 'cancelled';
}

// ── 19.8 extend_lock ──────────────────────────────────────────────────────────

/** A held job's lease. */
export interface Lease {
  id: string;
  token: string;
}

/** Extends leases to now + leaseMs; per lease 'ok', 'cancel' (cancel requested) or 'lost'. */
export async function extendLock(w: QueueWire, leaseMs: number, leases: readonly Lease[]): Promise<string[]> {
  const argv: Arg[] = [w.keys.prefix, leaseMs];
  for (const l of leases) argv.push(l.id, l.token);
  return (await w.run('extend_lock', argv)) as string[];
}

// ── 19.9 reap, 19.10 sweep_stalled ────────────────────────────────────────────

/** Returns expired leases to claimable work; resolves with their ids. */
export async function reap(w: QueueWire, batch: number, expectedMs?: number): Promise<string[]> {
  const argv: Arg[] = [w.keys.prefix, batch];
  if (expectedMs !== undefined) argv.push(expectedMs);
  return (await w.run('reap', argv)) as string[];
}

/** Recovers expired leases, dead-lettering jobs that stalled more than `maxStalled` times. */
export async function sweepStalled(
  w: QueueWire,
  maxStalled: number,
  batch: number,
  expectedMs?: number,
): Promise<{ recovered: string[]; dead: string[] }> {
  const argv: Arg[] = [w.keys.prefix, maxStalled, batch];
  if (expectedMs !== undefined) argv.push(expectedMs);
  const [recovered, dead] = (await w.run('sweep_stalled', argv)) as string[][];
  return { recovered: recovered!, dead: dead! };
}

// ── 19.11 cancel, 19.12 remove, 19.13 handback, 19.14 progress ────────────────

export async function cancel(w: QueueWire, id: string): Promise<'cancelled' | 'requested'> {
  return (await w.run('cancel', [w.keys.prefix, id], id)) as 'cancelled' | 'requested';
}

/** True when the job existed. */
export async function remove(w: QueueWire, id: string): Promise<boolean> {
  return (await w.run('remove', [w.keys.prefix, id], id)) === 1;
}

/** Returns held jobs to claimable work; per lease 'OK', 'EMQLEASE' or 'EMQDATA'. */
export async function handback(w: QueueWire, leases: readonly Lease[]): Promise<string[]> {
  const argv: Arg[] = [w.keys.prefix];
  for (const l of leases) argv.push(l.id, l.token);
  return (await w.run('handback', argv)) as string[];
}

/** Stores a running job's encoded progress, fenced by its token. */
export async function progress(w: QueueWire, id: string, token: string, encoded: string): Promise<void> {
  await w.run('progress', [id, token, encoded], id);
}
