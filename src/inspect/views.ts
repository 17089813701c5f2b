// What the read model hands out: the shapes the CLI and the dashboard render, and the pure
// functions that build them from raw replies. Nothing here reads Redis (the Inspector does); a
// view can be built and tested from plain values.

import type { AttemptRun } from '../core/attempts.js';
import type { JobState, JobView, LaneInfo, QueueEvent } from '../core/types.js';
import type { RepeatView } from '../recurring/repeat.js';
import type { SchedulerView } from '../recurring/schedulers.js';
import type { DependencyPage } from '../wire/flow-reads.js';

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
  /** The protocol versions it speaks ([1] when its runtime did not say: SPEC 22.4). */
  protocols: number[];
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

/** With a tag filter, the most jobs of one state read to find matches. */
export const TAG_SCAN_MAX = 10_000;

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
  /** Its runs (claims), oldest first, folded from history and the row (core/attempts.ts). */
  runs: AttemptRun[];
  /** True when earlier runs are gone from the events stream (trimmed) or were not read. */
  runsPartial: boolean;
  /** A flow job's place: its parent (when a child), the first page of its children (a parent). */
  flow?: { parent?: { queue: string; id: string }; children: DependencyPage };
};

/** The log lines a job's detail carries (the consumer keeps 100 by default). */
export const LOG_LINES_SHOWN = 100;

/** The children of a flow parent a job's detail lists (the rest: queue.dependencies). */
export const FLOW_CHILDREN_SHOWN = 50;

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

/** A consumer that missed this many beats in a row is shown as dead. */
export const STALE_BEATS = 3;

/** The last hour's rates from 60 minute buckets (completed, failed), oldest first; `first`: its minute number. */
export function hourRates(first: number, buckets: (string | null)[][]): QueueRates {
  const perMinute = buckets.map(
    ([completed, failed], i): MinuteRate => ({
      minute: (first + i) * 60_000,
      completed: Number(completed ?? 0),
      failed: Number(failed ?? 0),
    }),
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
 * The wait of each head of line (flat pending first, then each lane of `groups`): now minus the
 * later of its creation and its run-at; `heads[i]` is the head's [created, runat], or undefined
 * for an empty set.
 */
export function oldestWaits(
  now: number,
  groups: string[],
  heads: ((string | null)[] | undefined)[],
): { oldestMs: number | null; lanes: Record<string, number> } {
  const lanes: Record<string, number> = {};
  let oldestMs: number | null = null;
  heads.forEach((head, i) => {
    if (head === undefined) return;
    const [created, runAt] = head.map((v) => Number(v ?? 0));
    const waited = Math.max(0, now - Math.max(created ?? 0, runAt ?? 0));
    if (i > 0) lanes[groups[i - 1]!] = waited;
    oldestMs = Math.max(oldestMs ?? 0, waited);
  });
  return { oldestMs, lanes };
}

/** A consumer as listed from its last beat (`lastSeen`) and heartbeat body (JSON, or anything). */
export function consumerInfo(
  id: string,
  lastSeen: number,
  heartbeat: string | null,
  now: number,
): ConsumerInfo {
  let info: Record<string, unknown> = {};
  try {
    info = (JSON.parse(heartbeat ?? '{}') as Record<string, unknown>) ?? {};
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
    protocols: Array.isArray(info.protocols) ? info.protocols.map(Number) : [1],
  };
}

export function repeatSummary(r: RepeatView): RepeatSummary {
  const out: RepeatSummary = { name: r.name, nextRunAt: r.nextRunAt, everyMs: r.everyMs, runs: r.runs };
  if (r.lastRunAt !== undefined) out.lastRunAt = r.lastRunAt;
  return out;
}

export function schedulerSummary(s: SchedulerView): SchedulerSummary {
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
}

/** What find() looks for, and how far it reads. */
export interface FindFilter {
  name?: string;
  grep?: string;
  tag?: string;
  error?: string;
  group?: string;
  limit?: number;
  scan?: number;
}

/** find()'s test of a listed job against its filter (all given parts must hold). */
export function jobMatches(filter: FindFilter): (j: JobView) => boolean {
  const needle = filter.grep?.toLowerCase();
  return (j: JobView): boolean =>
    (filter.name === undefined || j.name === filter.name) &&
    (filter.tag === undefined || (j.tags ?? []).includes(filter.tag)) &&
    (filter.error === undefined || (j.error?.message ?? '').includes(filter.error)) &&
    (needle === undefined ||
      (JSON.stringify(j.data) ?? '').toLowerCase().includes(needle) ||
      (j.error?.message ?? '').toLowerCase().includes(needle) ||
      (j.lastError?.message ?? '').toLowerCase().includes(needle));
}
