// JobSchedulers: recurring jobs by a fixed interval, a cron pattern, or once immediately. Each
// scheduler keeps exactly one upcoming occurrence, an ordinary delayed job (state scheduled, on
// `P schedule` at its run instant, `runat` on the row) whose id is derived from the scheduler id
// and that instant, so upserts, restarts and racing consumers never duplicate a run.
//
// The hand-off: the next occurrence is made by promote, in the call that releases the current
// one (protocol/lib/recurrence.lua), so no slot waits for this runtime: for `every` and
// `immediately` options by arithmetic, for a cron pattern from the record's lookahead (`ahead`:
// the next AHEAD instants, computed here with croner, src/next-run.ts, since cron is not in Lua).
// The consumer's recurrence leg calls advance(), which does the rest: it tops up lookaheads that
// run low, and for an occurrence promote could not follow (cancelled or removed, a lookahead
// that ran out during an outage, a record without one) getJobScheduler lists the schedulers
// whose occurrence instant has come and whose occurrence no longer waits in schedule; for each,
// the next instant is computed from the occurrence's instant and updateJobScheduler makes it,
// compare-and-set on the occurrence it was computed from, so of consumers racing on one
// occurrence exactly one advances the scheduler.
//
// Keys: `P schedulers` (zset: scheduler id scored by its upcoming occurrence's instant, +inf once
// ended) and `P scheduler:<id>` (hash: repeat options, template, current occurrence, count).
import type { BackoffPolicy } from '../core/backoff.js';
import { assertName, knownKeys, wholeNumber } from '../core/check.js';
import { encodeJson, parseMaybe } from '../core/codec.js';
import { EchoMQError, optionsObject } from '../core/errors.js';
import { encodeTemplateOptions, jobName } from '../wire/admission.js';
import type { QueueWire } from '../wire/queue-wire.js';
import * as reads from '../wire/reads.js';
import * as verbs from '../wire/verbs/index.js';
import { calculateNextMillis, type RepeatOptions, validateRepeatOptions } from './next-run.js';

/** Options of the jobs a scheduler makes (as in EnqueueOptions, without an id). */
export interface SchedulerJobOptions {
  /** Lower runs first; 0 (default) runs before any prioritised job. */
  priority?: number;
  /** The lane (group) each occurrence waits in. */
  group?: string;
  /** Attempts each occurrence may make, retries included. Default 1: the next occurrence is the retry. */
  attempts?: number;
  /** The retry delay curve; default: the consumer's policy. */
  backoff?: BackoffPolicy;
}

/** What every occurrence is made from. */
export interface SchedulerTemplate<T = unknown> {
  /** The job name of each occurrence. Default: the scheduler id. */
  name?: string;
  /** The job data of each occurrence. Default {}. */
  data?: T;
  opts?: SchedulerJobOptions;
}

/** Repeat options as stored: dates as epoch ms. */
export type StoredRepeat = Omit<RepeatOptions, 'startDate' | 'endDate'> & {
  startDate?: number;
  endDate?: number;
};

/**
 * 'created': a new scheduler; 'replaced': its repeat options changed, so its waiting occurrence
 * was removed and a new one made; 'updated': same repeat options, the template is stored (and
 * written onto the waiting occurrence, which keeps its instant); 'ended': stored, but there is
 * no run left (limit reached, endDate passed).
 */
export type UpsertStatus = 'created' | 'replaced' | 'updated' | 'ended';

export interface UpsertResult {
  status: UpsertStatus;
  /** The upcoming occurrence's instant (server-clock epoch ms), or null when there is none. */
  nextRunAt: number | null;
  /** The current occurrence's job id (the upcoming one, or one already released), or null when none. */
  jobId: string | null;
}

export interface SchedulerView<T = unknown> {
  id: string;
  /** The key it is listed and removed by (removeByKey): the scheduler id itself. */
  key: string;
  /** The job name of each occurrence. */
  name: string;
  repeat: StoredRepeat;
  template: { data: T; opts: SchedulerJobOptions };
  /** The upcoming occurrence's instant, or null once the scheduler has ended. */
  nextRunAt: number | null;
  /** The current occurrence: the upcoming one, or the last one made. */
  jobId?: string;
  /** Occurrences made so far (the count `limit` is checked against). */
  iterationCount: number;
  /** Set once there is no run left: 'limit', 'endDate' or 'done' (a single run made). */
  ended?: string;
  createdAt: number;
  updatedAt: number;
}

export interface AdvanceResult {
  /** Ids of the occurrences made. */
  made: string[];
  /** Ids of the schedulers that ended. */
  ended: string[];
  /**
   * Ids of schedulers whose stored repeat options this runtime cannot compute (written by another
   * runtime in a dialect it does not read): left as they are, for a runtime that can.
   */
  skipped: string[];
  /** The server's now, and the next instant a scheduler becomes due (-1: none). */
  now: number;
  nextDue: number;
}

const REPEAT_KEYS = new Set(['every', 'pattern', 'tz', 'immediately', 'startDate', 'endDate', 'limit']);
const TEMPLATE_KEYS = new Set(['name', 'data', 'opts']);
/** Compare-and-set retries of one upsert racing other writers of the same scheduler. */
const UPSERT_TRIES = 10;
/**
 * Cron instants a scheduler's lookahead holds: promote makes each next occurrence from it, and
 * the recurrence leg tops it up once fewer than 4 are left (the script's AHEAD_LOW), so a busy
 * or briefly absent runtime has 12 slots of slack before a slot could wait for it.
 */
export const AHEAD = 16;

/**
 * The instants of a cron pattern's lookahead: up to `n` runs after `from`, with `made` runs made
 * (limit and endDate end it early), as the scripts' `ahead` text. '' for an `every` cadence,
 * which promote computes itself.
 */
export function lookahead(r: StoredRepeat, from: number, made: number, n = AHEAD): string {
  if (r.pattern === undefined) return '';
  const out: number[] = [];
  let prev = from;
  for (let count = made; out.length < n; count++) {
    const next = calculateNextMillis(r, prev, count);
    if (next === null || next <= prev) break;
    out.push(next);
    prev = next;
  }
  return out.join(' ');
}

function toMs(value: number | Date | string): number {
  if (typeof value === 'number') return value;
  if (value instanceof Date) return value.getTime();
  return Date.parse(value);
}

/** The repeat options in one canonical form, so an unchanged definition is the same text. */
function canonical(r: RepeatOptions): StoredRepeat {
  const out: StoredRepeat = {};
  if (r.every !== undefined) out.every = r.every;
  if (r.pattern !== undefined) out.pattern = r.pattern;
  if (r.tz !== undefined) out.tz = r.tz;
  if (r.immediately === true) out.immediately = true;
  if (r.startDate !== undefined) out.startDate = toMs(r.startDate);
  if (r.endDate !== undefined) out.endDate = toMs(r.endDate);
  if (r.limit !== undefined) out.limit = r.limit;
  return out;
}

/** Why a schedule with `count` runs made has no next run. */
function endReason(r: StoredRepeat, count: number): string {
  if (r.limit !== undefined && count >= r.limit) return 'limit';
  if (r.endDate !== undefined) return 'endDate';
  return 'done';
}

/**
 * The next occurrence after the one at `prev`, as the hand-off computes it at server time `now`:
 * - the next slot of the cadence after `prev`, when it has not passed;
 * - that slot even though it has passed, when the slot after it has not (the hand-off is late by
 *   less than a period: the run happens at once, nothing is skipped);
 * - else, with two or more slots missed (no hand-off ran for a while), the first slot after now:
 *   missed runs are not made up, so there is no burst (for `every`, on the grid prev + k * every).
 * Null when the schedule is over (`count` runs made reach `limit`, or the run would pass `endDate`).
 */
export function nextOccurrence(r: StoredRepeat, prev: number, count: number, now: number): number | null {
  const next = calculateNextMillis(r, prev, count);
  if (next === null || next >= now) return next;
  const after = calculateNextMillis(r, next, count + 1);
  if (after === null || after > now) return next;
  if (r.every !== undefined) {
    return calculateNextMillis(r, prev + Math.floor((now - prev) / r.every) * r.every, count);
  }
  return calculateNextMillis(r, now, count);
}

/** A template as addJobScheduler stores it (encoded), and a scheduler as getJobScheduler reads it. */
type Template = Omit<verbs.SchedulerDefinition, 'repeat'>;
type Read = verbs.SchedulerRecord;

function parseScore(score: string): number | null {
  return score === '' || score === 'inf' || score === '+inf' ? null : Number(score);
}

function view(id: string, score: string, row: Record<string, string>): SchedulerView {
  const opts: SchedulerJobOptions = {};
  if (row.prio !== undefined) opts.priority = Number(row.prio);
  if (row.group !== undefined) opts.group = row.group;
  if (row.max !== undefined) opts.attempts = Number(row.max);
  if (row.backoff !== undefined) opts.backoff = JSON.parse(row.backoff) as BackoffPolicy;
  const out: SchedulerView = {
    id,
    key: id,
    name: row.name ?? '',
    repeat: JSON.parse(row.repeat ?? '{}') as StoredRepeat,
    template: { data: parseMaybe(row.data), opts },
    nextRunAt: row.ended !== undefined ? null : parseScore(score),
    iterationCount: Number(row.count ?? 0),
    createdAt: Number(row.created ?? 0),
    updatedAt: Number(row.updated ?? 0),
  };
  if (row.job) out.jobId = row.job;
  if (row.ended !== undefined) out.ended = row.ended;
  return out;
}

export class JobSchedulers {
  constructor(private readonly queue: QueueWire) {}

  /**
   * Creates or changes the scheduler `id`. Re-upserting the same repeat options keeps the
   * upcoming occurrence (its id and instant; the template is refreshed), so calling upsert on
   * every start neither duplicates nor postpones a run. New repeat options replace the upcoming
   * occurrence if it has not started. Throws EMQCRON for a bad pattern or time zone and EMQINPUT
   * for other bad options, before anything is stored.
   */
  async upsert(id: string, repeat: RepeatOptions, template: SchedulerTemplate = {}): Promise<UpsertResult> {
    this.queue.connector.assertOpen();
    assertName('scheduler id', id);
    if (typeof repeat === 'object' && repeat !== null) knownKeys(repeat, REPEAT_KEYS, 'repeat option');
    validateRepeatOptions(repeat);
    const stored = canonical(repeat);
    const json = JSON.stringify(stored);
    const t = this.template(id, template);
    for (let i = 0; i < UPSERT_TRIES; i++) {
      const read = await this.read(id);
      const exists = read.fields.repeat !== undefined;
      let count = Number(read.fields.count ?? 0);
      let next: number | null = null;
      let ended = '';
      if (!exists || read.fields.repeat !== json) {
        if (read.waiting) count -= 1; // the waiting occurrence is replaced, not run
        next = calculateNextMillis(stored, read.now, count);
        if (next === null) ended = endReason(stored, count);
      }
      const {
        status,
        next: nextAt,
        jobId,
      } = await verbs.addJobScheduler(
        this.queue,
        id,
        { repeat: json, ...t },
        next,
        read.fields.job ?? '',
        count,
        ended,
        next === null ? '' : lookahead(stored, next, count + 1),
      );
      if (status !== 'stale') {
        return {
          status: status as UpsertStatus,
          nextRunAt: nextAt,
          jobId: status === 'ended' || jobId === '' ? null : jobId,
        };
      }
    }
    throw new EchoMQError('EMQSTATE', `scheduler ${id} kept changing while it was upserted; try again`);
  }

  /** The scheduler, or null when there is none with that id. */
  async get(id: string): Promise<SchedulerView | null> {
    assertName('scheduler id', id);
    const read = await this.read(id);
    if (read.fields.repeat === undefined) return null;
    return view(id, read.score, read.fields);
  }

  /** Schedulers by upcoming run, soonest first (ended ones last), by rank: start..end inclusive. */
  async list(range: { start?: number; end?: number } = {}): Promise<SchedulerView[]> {
    this.queue.connector.assertOpen();
    optionsObject(range, 'list range');
    const start = wholeNumber(range.start ?? 0, 'start', Number.MIN_SAFE_INTEGER);
    const end = wholeNumber(range.end ?? -1, 'end', Number.MIN_SAFE_INTEGER);
    const found = await reads.schedulerRecords(this.queue, start, end);
    return found.filter((r) => r.fields.repeat !== undefined).map((r) => view(r.id, r.score, r.fields));
  }

  /** How many schedulers the queue has (ended ones included). */
  async count(): Promise<number> {
    this.queue.connector.assertOpen();
    return reads.schedulerCount(this.queue);
  }

  /**
   * Removes the scheduler and its upcoming occurrence if that has not started (one already
   * released runs on as an ordinary job). True when it existed.
   */
  async remove(id: string): Promise<boolean> {
    assertName('scheduler id', id);
    return verbs.removeJobScheduler(this.queue, id);
  }

  /**
   * Runs the scheduler's upcoming occurrence now, ahead of its instant (promote_job: pending,
   * in its lane when it has one); resolves with that job's id. The cadence keeps its grid: the
   * occurrence after it is made at the instant this one had (the hand-off, advance()), so a run
   * brought forward is not run twice and counts once toward `limit`. EMQNOJOB when there is no
   * such scheduler; EMQSTATE when no occurrence waits (ended, or already released and running).
   */
  async runNow(id: string): Promise<string> {
    assertName('scheduler id', id);
    const read = await this.read(id);
    if (read.fields.repeat === undefined) throw new EchoMQError('EMQNOJOB', `no scheduler ${id}`);
    const job = read.fields.job;
    if (!read.waiting || !job) {
      throw new EchoMQError(
        'EMQSTATE',
        read.fields.ended !== undefined
          ? `scheduler ${id} has ended (${read.fields.ended}): no occurrence is left to run`
          : `scheduler ${id} has no occurrence waiting (${job ? `${job} is ${read.jobState || 'gone'}` : 'none made'}): the next one is made at ${new Date(Number(read.score)).toISOString()}`,
      );
    }
    await verbs.promoteJob(this.queue, job);
    return job;
  }

  /** remove() by the key a scheduler is listed under (its id; the repeatable-jobs era name). */
  removeByKey(key: string): Promise<boolean> {
    return this.remove(key);
  }

  /**
   * The hand-off (a leg of the consumer's beat): makes the next occurrence of every scheduler
   * whose occurrence was released without one (at most `batch`), or ends it when its schedule is
   * over; and tops up the lookahead of cron schedulers that run low.
   */
  async advance(batch = 100): Promise<AdvanceResult> {
    const { now, nextDue, due, low } = await verbs.getDueSchedulers(
      this.queue,
      wholeNumber(batch, 'batch', 1),
    );
    const calls: Promise<verbs.SchedulerWrite>[] = [];
    const ids: string[] = [];
    const out: AdvanceResult = { made: [], ended: [], skipped: [], now, nextDue };
    for (const { id, job, at, count, repeat } of due) {
      let next: number | null;
      let ended = '';
      let ahead = '';
      try {
        const r = JSON.parse(repeat) as StoredRepeat;
        next = nextOccurrence(r, at, count, now);
        if (next === null) ended = endReason(r, count);
        else ahead = lookahead(r, next, count + 1);
      } catch {
        // Options written by another runtime in a dialect this one does not read (a cron
        // extension, say): ending the scheduler would destroy it for everyone; leave it.
        out.skipped.push(id);
        continue;
      }
      ids.push(id);
      calls.push(verbs.updateJobScheduler(this.queue, id, job, next, ended, ahead));
    }
    const topups: Promise<unknown>[] = [];
    for (const { id, job, last, count, repeat, left } of low) {
      let more: string;
      try {
        const r = JSON.parse(repeat) as StoredRepeat;
        more = lookahead(r, last, count + left, AHEAD - left);
      } catch {
        out.skipped.push(id);
        continue;
      }
      topups.push(verbs.updateJobScheduler(this.queue, id, job, 'more', '', more));
    }
    for (const [j, { status, next: when, jobId }] of (await Promise.all(calls)).entries()) {
      if (status === 'created' || status === 'exists') {
        if (status === 'created') out.made.push(jobId);
        if (when !== null && (out.nextDue < 0 || when < out.nextDue)) out.nextDue = when;
      } else if (status === 'ended') {
        out.ended.push(ids[j]!);
      }
    }
    await Promise.all(topups);
    return out;
  }

  // ── helpers ─────────────────────────────────────────────────────────────────

  private async read(id: string): Promise<Read> {
    return verbs.getJobScheduler(this.queue, id);
  }

  private template(id: string, template: SchedulerTemplate): Template {
    if (typeof template !== 'object' || template === null) {
      throw new EchoMQError('EMQINPUT', 'the scheduler template must be an object { name, data, opts }');
    }
    knownKeys(template, TEMPLATE_KEYS, 'template field');
    const name = jobName(template.name ?? id);
    const options = encodeTemplateOptions(template.opts ?? {});
    const data = encodeJson(
      template.data === undefined ? {} : template.data,
      'job data',
      this.queue.limits.maxPayloadBytes,
    );
    return { name, data, ...options };
  }
}
