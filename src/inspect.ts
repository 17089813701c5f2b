// The read-only inspection API (Sidekiq's api.rb): what the CLI and the dashboard show, read
// straight from a queue's keys. It never writes (no script calls, so not even the protocol
// stamp), and it pages through the sorted sets, never a scan of the keyspace. Write actions
// (retry, cancel, remove, pause ...) are the Queue's verbs; the consumer never uses this module.

import { wholeNumber } from './core/check.js';
import { EchoMQError } from './core/errors.js';
import { isJobId } from './core/ids.js';
import type { LaneInfo } from './core/types.js';
import { JOB_STATES, type JobState, type JobView, type QueueEvent } from './core/types.js';
import type { EchoMQ } from './echomq.js';
import { eventsOf } from './events/reader.js';
import type { QueueWire } from './wire/queue-wire.js';
import * as model from './wire/read-model.js';
import * as reads from './wire/reads.js';

/** The global registry of queue names (every queue adds itself on its first script call). */

export interface QueueSummary {
  name: string;
  counts: Record<JobState, number>;
  paused: boolean;
  /** How many lanes (groups) the queue has seen. */
  lanes: number;
  /** See QueueStats.oldestWaitingMs. */
  oldestWaitingMs: number | null;
  /** See QueueStats.kept. */
  kept: { completed: number; dead: number };
}

export interface MinuteRate {
  /** The minute's start, epoch ms (server clock). */
  minute: number;
  completed: number;
  failed: number;
}

export interface QueueRates {
  /** The last 60 minutes, oldest first, the current (partial) minute last. */
  perMinute: MinuteRate[];
  completedLastHour: number;
  /** Failed attempts (retried ones included) in the last hour. */
  failedLastHour: number;
  /** failed / (completed + failed) over the last hour, 0 when nothing ran. */
  failureRate: number;
}

export interface ConsumerInfo {
  id: string;
  /** When it last beat, epoch ms (server clock). */
  lastSeen: number;
  /** How long ago that was, ms (server clock). */
  silentMs: number;
  /** Its beat, ms (from its heartbeat; 1000 when a runtime did not say). */
  beatMs: number;
  /**
   * False once it missed STALE_BEATS beats (silentMs > 3 × beatMs): the process died or hangs.
   * A consumer that closed is not listed at all (it says so on its way out).
   */
  alive: boolean;
  host: string;
  pid: number;
  concurrency: number;
  /** Jobs it was running at its last beat. */
  running: number;
}

export interface QueueStats {
  name: string;
  counts: Record<JobState, number>;
  /**
   * Active jobs whose lease deadline has passed (server clock): their consumer died or lost
   * Redis, and no running consumer of the queue has recovered them yet (`echomq recover`).
   */
  expiredLeases: number;
  /**
   * How long the job next in line has waited (Sidekiq's latency), ms: the longest over flat
   * pending and every lane, from when the job was enqueued or became due (a delay or a retry's
   * backoff ended). Null when nothing waits. A paused queue or lane keeps growing it.
   */
  oldestWaitingMs: number | null;
  /** The same per lane, for the lanes that hold waiting jobs. */
  lanesOldestWaitingMs: Record<string, number>;
  paused: boolean;
  /**
   * The queue's retention counts (meta keep_completed, keep_dead; SPEC 6): a count at its cap
   * means older ended jobs were deleted, not that no more ended.
   */
  kept: { completed: number; dead: number };
  lanes: LaneInfo[];
  rates: QueueRates;
  consumers: ConsumerInfo[];
}

/** The retention counts a queue has without configure (SPEC 6, meta keep_completed, keep_dead). */
const KEPT_COMPLETED = 1000;
const KEPT_DEAD = 10_000;

/** With a tag filter, the most jobs of one state read to find matches, and the read size. */
export const TAG_SCAN_MAX = 10_000;
const TAG_CHUNK = 500;

export interface JobsPage {
  /** Jobs to skip. Default 0. */
  offset?: number;
  /** Jobs to return, 1 to 1000. Default 50. */
  limit?: number;
  /** With state 'pending': only this lane. Other states refuse it (their sets hold every lane). */
  group?: string;
  /**
   * Only jobs with this tag. There is no index of tags: the jobs of the state are read in order,
   * at most TAG_SCAN_MAX of them, and `total` counts the matches among those read.
   */
  tag?: string;
}

export interface JobsResult {
  /** Jobs in that state (and lane) in all, for paging; with a tag, the matches found. */
  total: number;
  jobs: ListedJob[];
  /** With a tag: true when the read stopped at TAG_SCAN_MAX jobs (more matches may exist). */
  partial?: boolean;
}

/** A job as the tools list it: with an active job's lease deadline. */
export type ListedJob = JobView & {
  /** An active job's lease deadline, epoch ms (server clock): recovered after it passes. */
  leaseUntil?: number;
  /** The deadline has passed and no consumer recovered the job yet. */
  leaseExpired?: boolean;
};

export type JobDetail = ListedJob & {
  /** The job's entries still in the events stream, oldest first. */
  history: QueueEvent[];
  /** True when the stream was only read in part (history bound reached). */
  historyTruncated: boolean;
  /** The newest lines of the job's log (ctx.log), oldest first: at most LOG_LINES_SHOWN. */
  logs: string[];
  /** How many lines the job's log holds. */
  logCount: number;
};

/** The log lines a job's detail carries (the consumer keeps 100 by default). */
const LOG_LINES_SHOWN = 100;

export interface RepeatSummary {
  name: string;
  nextRunAt: number;
  everyMs?: number;
  runs: number;
  lastRunAt?: number;
}

export interface SchedulerSummary {
  id: string;
  /** The upcoming occurrence's instant, epoch ms; -1 once the scheduler has ended. */
  nextRunAt: number;
  pattern?: string;
  every?: number;
  tz?: string;
  /** The job name of each occurrence. */
  name?: string;
  iterationCount?: number;
  limit?: number;
  /** Why there is no run left ('limit', 'endDate', 'done', 'error: ...'). */
  ended?: string;
}

export interface SchedulersResult {
  repeats: RepeatSummary[];
  schedulers: SchedulerSummary[];
}

const TERMINAL = new Set<JobState>(['completed', 'dead', 'cancelled']);
const MAX_LIMIT = 1000;
/** Consumers silent for longer are not listed. */
const CONSUMER_WINDOW_MS = 10 * 60_000;
/** A consumer that missed this many beats in a row is shown as dead. */
export const STALE_BEATS = 3;
/** Events read per XREVRANGE call, and the most read for one job's history. */
const HISTORY_CHUNK = 1000;
const HISTORY_MAX_SCANNED = 50_000;
/** Stream ids and row stamps may differ by a clock tick; look this far before creation. */
const HISTORY_SLACK_MS = 1000;

export class Inspector {
  constructor(private readonly mq: EchoMQ) {}

  private get connector() {
    this.mq.connector.assertOpen();
    return this.mq.connector;
  }

  private queue(name: string): QueueWire {
    return this.mq.queue(name).wire;
  }

  /** The Redis server's clock, epoch ms (the clock every score is written with). */
  private now(): Promise<number> {
    return model.serverNow(this.connector);
  }

  /** Whether a queue of this name is registered (has ever run a script). */
  async has(queue: string): Promise<boolean> {
    return model.registered(this.connector, queue);
  }

  /** The names in the registry of queues, sorted. */
  async names(): Promise<string[]> {
    return model.queueNames(this.connector);
  }

  /** The queues of `among` (default: every registered one) holding a job with this id, sorted. */
  async locate(id: string, among?: readonly string[]): Promise<string[]> {
    if (!isJobId(id)) return [];
    const wires: QueueWire[] = [];
    for (const name of among ?? (await this.names())) {
      try {
        wires.push(this.queue(name));
      } catch {
        // not a valid queue name: someone else's member of the registry
      }
    }
    const held = await model.holding(this.connector, wires, id);
    return wires.filter((_, i) => held[i]).map((w) => w.name);
  }

  /** Every registered queue with its counts, by name. */
  async queues(): Promise<QueueSummary[]> {
    const names = await this.names();
    const out = await Promise.all(
      names.map(async (name): Promise<QueueSummary | null> => {
        let q: QueueWire;
        try {
          q = this.queue(name);
        } catch {
          return null; // not a valid queue name: someone else's member of the set
        }
        const [counts, paused, lanes, waiting, kept] = await Promise.all([
          reads.counts(q),
          reads.isPaused(q),
          model.laneCount(q),
          this.oldestWaiting(q),
          this.kept(q),
        ]);
        return { name, counts, paused, lanes, oldestWaitingMs: waiting.oldestMs, kept };
      }),
    );
    return out.filter((s): s is QueueSummary => s !== null);
  }

  /** One queue's counts, lanes, completion and failure rates of the last hour, and consumers. */
  async stats(queue: string): Promise<QueueStats> {
    const q = this.queue(queue);
    const [counts, paused, lanes, rates, consumers, expiredLeases, waiting, kept] = await Promise.all([
      reads.counts(q),
      reads.isPaused(q),
      reads.lanes(q),
      this.rates(q),
      this.consumers(queue),
      this.now().then((now) => model.expiredLeases(q, now)),
      this.oldestWaiting(q),
      this.kept(q),
    ]);
    return {
      name: queue,
      counts,
      paused,
      kept,
      lanes,
      rates,
      consumers,
      expiredLeases,
      oldestWaitingMs: waiting.oldestMs,
      lanesOldestWaitingMs: waiting.lanes,
    };
  }

  /** The queue's retention counts (QueueStats.kept). */
  private async kept(q: QueueWire): Promise<{ completed: number; dead: number }> {
    const [completed, dead] = await model.meta(q, 'keep_completed', 'keep_dead');
    return { completed: Number(completed ?? KEPT_COMPLETED), dead: Number(dead ?? KEPT_DEAD) };
  }

  /**
   * The wait of the job next in line in flat pending and in each lane (the head of each set):
   * now minus the later of its creation and its run-at. Two round trips whatever the backlog.
   */
  private async oldestWaiting(
    q: QueueWire,
  ): Promise<{ oldestMs: number | null; lanes: Record<string, number> }> {
    const groups = await reads.laneNames(q);
    const ids = await model.firstOf(q, [q.keys.key('pending'), ...groups.map((g) => q.keys.lane(g))]);
    const heads = ids.filter((id): id is string => id !== undefined);
    const [now, stamps] = await Promise.all([
      this.now(),
      heads.length > 0 ? reads.fieldsOf(q, heads, 'created', 'runat') : Promise.resolve([]),
    ]);
    const lanes: Record<string, number> = {};
    let oldestMs: number | null = null;
    let r = 0;
    ids.forEach((id, i) => {
      if (id === undefined) return;
      const [created, runAt] = (stamps[r++] ?? []).map((v) => Number(v ?? 0));
      const waited = Math.max(0, now - Math.max(created ?? 0, runAt ?? 0));
      if (i > 0) lanes[groups[i - 1]!] = waited;
      oldestMs = Math.max(oldestMs ?? 0, waited);
    });
    return { oldestMs, lanes };
  }

  private async rates(q: QueueWire): Promise<QueueRates> {
    const current = Math.floor((await this.now()) / 60_000);
    const perMinute = (await model.minuteStats(q, current - 59, current)).map(
      ([completed, failed], i): MinuteRate => ({ minute: (current - 59 + i) * 60_000, completed, failed }),
    );
    const completedLastHour = perMinute.reduce((a, m) => a + m.completed, 0);
    const failedLastHour = perMinute.reduce((a, m) => a + m.failed, 0);
    const ran = completedLastHour + failedLastHour;
    return {
      perMinute,
      completedLastHour,
      failedLastHour,
      failureRate: ran === 0 ? 0 : failedLastHour / ran,
    };
  }

  /**
   * A page of the jobs in `state`: newest end first for completed, dead and cancelled; in run
   * order otherwise (scheduled by run-at, pending by priority then age, active by lease
   * deadline). Pending without `group` pages through flat pending, then each lane by name.
   */
  async jobs(queue: string, state: JobState, page: JobsPage = {}): Promise<JobsResult> {
    if (!JOB_STATES.includes(state)) {
      throw new EchoMQError(
        'EMQINPUT',
        `state must be one of ${JOB_STATES.join(', ')}, got ${String(state)}`,
      );
    }
    const offset = wholeNumber(page.offset ?? 0, 'offset', 0, Number.MAX_SAFE_INTEGER);
    const limit = wholeNumber(page.limit ?? 50, 'limit', 1, MAX_LIMIT);
    const q = this.queue(queue);
    let sets: string[];
    if (page.group !== undefined) {
      if (state !== 'pending') {
        throw new EchoMQError(
          'EMQINPUT',
          `group applies to state pending only (a lane holds waiting jobs), got ${state}`,
        );
      }
      sets = [q.keys.lane(page.group)];
    } else {
      sets = await reads.setsOf(q, state);
    }
    if (page.tag !== undefined) return this.tagged(q, state, sets, page.tag, offset, limit);
    const sizes = await model.sizes(q, sets);
    const total = sizes.reduce((a, b) => a + b, 0);
    // Map the page onto the sets laid end to end; each read is one ZRANGE of a slice.
    const ids: string[] = [];
    let skip = offset;
    for (const [i, set] of sets.entries()) {
      const size = sizes[i]!;
      if (ids.length >= limit) break;
      if (skip >= size) {
        skip -= size;
        continue;
      }
      const stop = skip + (limit - ids.length) - 1;
      const part = await model.slice(q, set, skip, stop, TERMINAL.has(state));
      ids.push(...part);
      skip = 0;
    }
    const jobs: ListedJob[] = await this.rows(q, ids);
    if (state === 'active') await this.withLeases(q, jobs);
    return { total, jobs };
  }

  /** Adds each active job's lease deadline (its score in active) and whether it has passed. */
  private async withLeases(q: QueueWire, jobs: ListedJob[]): Promise<void> {
    if (jobs.length === 0) return;
    const [now, scores] = await Promise.all([
      this.now(),
      model.leaseDeadlines(
        q,
        jobs.map((j) => j.id),
      ),
    ]);
    jobs.forEach((job, i) => {
      const score = scores[i];
      if (score === null || score === undefined) return;
      job.leaseUntil = score;
      job.leaseExpired = job.leaseUntil < now;
    });
  }

  /**
   * Jobs in `state` (and lane) whose name is `name`, that carry `tag`, whose error message
   * contains `error` (as retryAll's error filter matches: case-sensitive), and whose data or error
   * message contains `grep` (case-insensitive), reading at most `scan` jobs (default 10,000, at most 100,000) in
   * the order jobs() lists them; up to `limit` (default 50) are returned. A bounded search:
   * `scanned` says how far it read of `total`.
   */
  async find(
    queue: string,
    state: JobState,
    filter: {
      name?: string;
      grep?: string;
      tag?: string;
      error?: string;
      group?: string;
      limit?: number;
      scan?: number;
    },
  ): Promise<{ total: number; scanned: number; jobs: ListedJob[] }> {
    const limit = wholeNumber(filter.limit ?? 50, 'limit', 1, MAX_LIMIT);
    const scan = wholeNumber(filter.scan ?? 10_000, 'scan', 1, 100_000);
    const needle = filter.grep?.toLowerCase();
    const matches = (j: JobView): boolean =>
      (filter.name === undefined || j.name === filter.name) &&
      (filter.tag === undefined || (j.tags ?? []).includes(filter.tag)) &&
      (filter.error === undefined || (j.error?.message ?? '').includes(filter.error)) &&
      (needle === undefined ||
        (JSON.stringify(j.data) ?? '').toLowerCase().includes(needle) ||
        (j.error?.message ?? '').toLowerCase().includes(needle) ||
        (j.lastError?.message ?? '').toLowerCase().includes(needle));
    const jobs: ListedJob[] = [];
    let scanned = 0;
    let total = 0;
    while (scanned < scan && jobs.length < limit) {
      const page = await this.jobs(queue, state, {
        offset: scanned,
        limit: Math.min(MAX_LIMIT, scan - scanned),
        ...(filter.group === undefined ? {} : { group: filter.group }),
      });
      total = page.total;
      if (page.jobs.length === 0) break;
      scanned += page.jobs.length;
      for (const j of page.jobs) if (matches(j) && jobs.length < limit) jobs.push(j);
      if (scanned >= total) break;
    }
    return { total, scanned: Math.min(scanned, total), jobs };
  }

  /**
   * How many jobs of an ended state finished at least `olderThanMs` ago (server clock; 0 = all):
   * what `queue.clean()` with the same arguments would delete, for progress totals.
   */
  async countEnded(
    queue: string,
    state: 'completed' | 'dead' | 'cancelled',
    olderThanMs = 0,
  ): Promise<number> {
    const q = this.queue(queue);
    if (!TERMINAL.has(state)) {
      throw new EchoMQError('EMQINPUT', `state must be completed, dead or cancelled, got ${String(state)}`);
    }
    wholeNumber(olderThanMs, 'olderThanMs', 0, Number.MAX_SAFE_INTEGER);
    return model.endedBefore(q, state, (await this.now()) - olderThanMs);
  }

  /** The rows of `ids`, in order; ids whose row is gone (removed meanwhile) are left out. */
  /** A page of the jobs of `sets` that carry `tag`, read in order in chunks, bounded. */
  private async tagged(
    q: QueueWire,
    state: JobState,
    sets: string[],
    tag: string,
    offset: number,
    limit: number,
  ): Promise<JobsResult> {
    if (typeof tag !== 'string' || tag.length === 0) {
      throw new EchoMQError('EMQINPUT', 'tag must be a non-empty string');
    }
    const matches: string[] = [];
    let total = 0;
    let scanned = 0;
    for (const set of sets) {
      for (let start = 0; scanned < TAG_SCAN_MAX; start += TAG_CHUNK) {
        const stop = start + Math.min(TAG_CHUNK, TAG_SCAN_MAX - scanned) - 1;
        const ids = await model.slice(q, set, start, stop, TERMINAL.has(state));
        if (ids.length === 0) break;
        scanned += ids.length;
        const tags = (await reads.fieldsOf(q, ids, 'tags')).map(([t]) => t ?? '');
        for (const [i, id] of ids.entries()) {
          if (!tags[i]!.split(',').includes(tag)) continue;
          if (total >= offset && matches.length < limit) matches.push(id);
          total += 1;
        }
      }
    }
    return { total, jobs: await this.rows(q, matches), partial: scanned >= TAG_SCAN_MAX };
  }

  private rows(q: QueueWire, ids: string[]): Promise<JobView[]> {
    return reads.rows(q, ids);
  }

  /**
   * One job with its history: its entries still in the events stream (capped by the queue's
   * eventsMaxLen), oldest first. Reads the stream newest first in chunks, back to the job's
   * creation, at most 50,000 entries. Null when there is no such job.
   */
  async job(queue: string, id: string): Promise<JobDetail | null> {
    const q = this.queue(queue);
    if (!isJobId(id)) return null; // no row can have it
    const view = await reads.row(q, id);
    if (!view) return null;
    const since = Math.max(0, view.createdAt - HISTORY_SLACK_MS);
    const history: QueueEvent[] = [];
    let end = '+';
    let scanned = 0;
    let truncated = false;
    for (;;) {
      if (scanned >= HISTORY_MAX_SCANNED) {
        truncated = true;
        break;
      }
      const chunk = await model.eventsBack(q, end, since, HISTORY_CHUNK);
      scanned += chunk.length;
      for (const [streamId, flat] of chunk) {
        for (const e of eventsOf(streamId, flat)) if (e.id === id) history.push(e);
      }
      if (chunk.length < HISTORY_CHUNK) break;
      end = `(${chunk[chunk.length - 1]![0]}`;
    }
    history.reverse();
    const { logs, count: logCount } = await reads.logPage(q, id, -LOG_LINES_SHOWN, LOG_LINES_SHOWN);
    const listed: ListedJob = view;
    if (view.state === 'active') await this.withLeases(q, [listed]);
    return { ...listed, history, historyTruncated: truncated, logs, logCount };
  }

  /** The queue's fixed cadences (Repeat) and job schedulers, soonest next run first. */
  async schedulers(queue: string): Promise<SchedulersResult> {
    const q = this.mq.queue(queue);
    const [repeats, schedulers] = await Promise.all([q.repeat.list(), q.schedulers.list()]);
    return {
      repeats: repeats.map((r) => {
        const out: RepeatSummary = { name: r.name, nextRunAt: r.nextRunAt, everyMs: r.everyMs, runs: r.runs };
        if (r.lastRunAt !== undefined) out.lastRunAt = r.lastRunAt;
        return out;
      }),
      schedulers: schedulers.map((s) => {
        const out: SchedulerSummary = {
          id: s.id,
          nextRunAt: s.nextRunAt ?? -1,
          name: s.name,
          iterationCount: s.iterationCount,
        };
        if (s.repeat.pattern !== undefined) out.pattern = s.repeat.pattern;
        if (s.repeat.every !== undefined) out.every = s.repeat.every;
        if (s.repeat.tz !== undefined) out.tz = s.repeat.tz;
        if (s.repeat.limit !== undefined) out.limit = s.repeat.limit;
        if (s.ended !== undefined) out.ended = s.ended;
        return out;
      }),
    };
  }

  /**
   * Consumers that beat in the last 10 minutes, most recently seen first; one that missed
   * STALE_BEATS beats is listed with alive false.
   */
  async consumers(queue: string): Promise<ConsumerInfo[]> {
    const q = this.queue(queue);
    const now = await this.now();
    return (await model.consumerBeats(q, now - CONSUMER_WINDOW_MS)).map(({ id, lastSeen, info: raw }) => {
      let info: Record<string, unknown> = {};
      try {
        info = (JSON.parse(raw ?? '{}') as Record<string, unknown>) ?? {};
      } catch {
        // a runtime that wrote something else: show the id and time only
      }
      const beatMs = Number(info.beatMs) > 0 ? Number(info.beatMs) : 1000;
      const silentMs = Math.max(0, now - lastSeen);
      return {
        id,
        lastSeen,
        silentMs,
        beatMs,
        alive: silentMs <= STALE_BEATS * beatMs,
        host: typeof info.host === 'string' ? info.host : '',
        pid: Number(info.pid ?? 0),
        concurrency: Number(info.concurrency ?? 0),
        running: Number(info.running ?? 0),
      };
    });
  }
}
