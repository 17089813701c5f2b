// The read-only inspection API (Sidekiq's api.rb): what the CLI and the dashboard show, read
// from a queue's keys through the wire's plain reads (wire/reads.ts, wire/read-model.ts). It
// never writes (no script calls, so not even the protocol stamp; it imports no verb), and it
// pages through the sorted sets (inspect/job-pages.ts), never a scan of the keyspace. Write
// actions (retry, cancel, remove, pause ...) are the Queue's verbs; the consumer never uses this
// module. The shapes it returns, and the pure functions that build them, are in views.ts.

import { foldAttempts } from '../core/attempts.js';
import { wholeNumber } from '../core/check.js';
import { jobView } from '../core/codec.js';
import { EchoMQError } from '../core/errors.js';
import { isJobId } from '../core/ids.js';
import { JOB_STATES, type JobState, type QueueEvent } from '../core/types.js';
import { eventsOf } from '../events/reader.js';
import type { Repeat } from '../recurring/repeat.js';
import type { JobSchedulers } from '../recurring/schedulers.js';
import type { Connector } from '../wire/connector.js';
import { readDependencies } from '../wire/flow-reads.js';
import { remoteParent } from '../wire/keyspace.js';
import type { QueueWire } from '../wire/queue-wire.js';
import * as model from '../wire/read-model.js';
import * as reads from '../wire/reads.js';
import { jobsPage, TERMINAL, taggedPage, withLeases } from './job-pages.js';
import {
  type ConsumerInfo,
  consumerInfo,
  type FindFilter,
  FLOW_CHILDREN_SHOWN,
  hourRates,
  type JobDetail,
  type JobsPage,
  type JobsResult,
  jobMatches,
  type ListedJob,
  LOG_LINES_SHOWN,
  oldestWaits,
  type QueueRates,
  type QueueStats,
  type QueueSummary,
  repeatSummary,
  type SchedulersResult,
  schedulerSummary,
} from './views.js';

export type {
  ConsumerInfo,
  FindFilter,
  JobDetail,
  JobsPage,
  JobsResult,
  ListedJob,
  MinuteRate,
  QueueRates,
  QueueStats,
  QueueSummary,
  RepeatSummary,
  SchedulerSummary,
  SchedulersResult,
} from './views.js';
export { STALE_BEATS, TAG_SCAN_MAX } from './views.js';

const MAX_LIMIT = 1000;
/** Consumers silent for longer are not listed. */
const CONSUMER_WINDOW_MS = 10 * 60_000;
/** Events read per XREVRANGE call, and the most read for one job's history. */
const HISTORY_CHUNK = 1000;
const HISTORY_MAX_SCANNED = 50_000;
/** Stream ids and row stamps may differ by a clock tick; look this far before creation. */
const HISTORY_SLACK_MS = 1000;

/**
 * What the Inspector reads through: the connection, and per queue its wire and the recurrence
 * rooms' lists. An EchoMQ is one; taking it by shape keeps the read model below the facade.
 */
export interface InspectedQueues {
  readonly connector: Connector;
  queue(name: string): {
    readonly wire: QueueWire;
    readonly repeat: Pick<Repeat, 'list'>;
    readonly schedulers: Pick<JobSchedulers, 'list'>;
  };
}

export class Inspector {
  constructor(private readonly mq: InspectedQueues) {}

  /** The connection, checked open (a closed one fails with EMQCLOSED, as every read does). */
  private get connector() {
    this.mq.connector.assertOpen();
    return this.mq.connector;
  }

  /** The queue as the wire sees it: what the reads take. */
  private wire(name: string): QueueWire {
    this.mq.connector.assertOpen();
    return this.mq.queue(name).wire;
  }

  private now(): Promise<number> {
    return model.serverNow(this.connector);
  }

  /** Whether a queue of this name is registered (has ever run a script). */
  has(queue: string): Promise<boolean> {
    return model.isRegistered(this.connector, queue);
  }

  /** The names in the registry of queues, sorted. */
  names(): Promise<string[]> {
    return model.registeredNames(this.connector);
  }

  /** The queues of `among` (default: every registered one) holding a job with this id, sorted. */
  async locate(id: string, among?: readonly string[]): Promise<string[]> {
    if (!isJobId(id)) return [];
    const wires: QueueWire[] = [];
    for (const name of among ?? (await this.names())) {
      try {
        wires.push(this.wire(name));
      } catch (err) {
        if (!(err instanceof EchoMQError && err.code === 'EMQINPUT')) throw err;
        // not a valid queue name: someone else's member of the registry
      }
    }
    const found = await model.haveRow(this.connector, wires, id);
    return wires.filter((_, i) => found[i]).map((w) => w.name);
  }

  /** Every registered queue with its counts, by name. */
  async queues(): Promise<QueueSummary[]> {
    const names = await this.names();
    const out = await Promise.all(
      names.map(async (name): Promise<QueueSummary | null> => {
        let w: QueueWire;
        try {
          w = this.wire(name);
        } catch (err) {
          if (!(err instanceof EchoMQError && err.code === 'EMQINPUT')) throw err;
          return null; // not a valid queue name: someone else's member of the set
        }
        const [counts, paused, lanes, waiting, kept] = await Promise.all([
          reads.counts(w),
          reads.isPaused(w),
          model.laneCount(w),
          this.oldestWaiting(w),
          model.kept(w),
        ]);
        return { name, counts, paused, lanes, oldestWaitingMs: waiting.oldestMs, kept };
      }),
    );
    return out.filter((s): s is QueueSummary => s !== null);
  }

  /** One queue's counts, lanes, completion and failure rates of the last hour, and consumers. */
  async stats(queue: string): Promise<QueueStats> {
    const w = this.wire(queue);
    const [counts, paused, lanes, rates, consumers, expiredLeases, waiting, kept] = await Promise.all([
      reads.counts(w),
      reads.isPaused(w),
      reads.lanes(w),
      this.rates(w),
      this.consumers(queue),
      this.now().then((now) => model.expiredLeases(w, now)),
      this.oldestWaiting(w),
      model.kept(w),
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

  /**
   * The wait of the job next in line in flat pending and in each lane (the head of each set):
   * now minus the later of its creation and its run-at. Two round trips whatever the backlog.
   */
  private async oldestWaiting(
    w: QueueWire,
  ): Promise<{ oldestMs: number | null; lanes: Record<string, number> }> {
    const [{ groups, heads }, now] = await Promise.all([model.lineHeads(w), this.now()]);
    return oldestWaits(now, groups, heads);
  }

  private async rates(w: QueueWire): Promise<QueueRates> {
    const current = Math.floor((await this.now()) / 60_000);
    return hourRates(current - 59, await model.minuteStats(w, current - 59, current));
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
    const w = this.wire(queue);
    let sets: string[];
    if (page.group !== undefined) {
      if (state !== 'pending') {
        throw new EchoMQError(
          'EMQINPUT',
          `group applies to state pending only (a lane holds waiting jobs), got ${state}`,
        );
      }
      sets = [w.keys.lane(page.group)];
    } else {
      sets = await reads.setsOf(w, state);
    }
    if (page.tag !== undefined) return taggedPage(w, state, sets, page.tag, offset, limit);
    return jobsPage(w, state, sets, offset, limit);
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
    filter: FindFilter,
  ): Promise<{ total: number; scanned: number; jobs: ListedJob[] }> {
    const limit = wholeNumber(filter.limit ?? 50, 'limit', 1, MAX_LIMIT);
    const scan = wholeNumber(filter.scan ?? 10_000, 'scan', 1, 100_000);
    const matches = jobMatches(filter);
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
    const w = this.wire(queue);
    if (!TERMINAL.has(state)) {
      throw new EchoMQError('EMQINPUT', `state must be completed, dead or cancelled, got ${String(state)}`);
    }
    wholeNumber(olderThanMs, 'olderThanMs', 0, Number.MAX_SAFE_INTEGER);
    return model.endedBefore(w, state, (await this.now()) - olderThanMs);
  }

  /**
   * One job with its history: its entries still in the events stream (capped by the queue's
   * eventsMaxLen), oldest first. Reads the stream newest first in chunks, back to the job's
   * creation, at most 50,000 entries. Null when there is no such job.
   */
  async job(queue: string, id: string): Promise<JobDetail | null> {
    const w = this.wire(queue);
    if (!isJobId(id)) return null; // no row can have it
    const { row, version } = await model.rowFields(w, id);
    if (!row.state) return null;
    const view = jobView(id, row, version);
    const since = Math.max(0, view.createdAt - HISTORY_SLACK_MS);
    // The stream newest first back to the job's creation, keeping this job's entries.
    const history: QueueEvent[] = [];
    const truncated = await model.eventsSince(
      w,
      String(since),
      HISTORY_CHUNK,
      HISTORY_MAX_SCANNED,
      (sid, flat) => {
        for (const e of eventsOf(sid, flat)) if (e.id === id) history.push(e);
      },
    );
    history.reverse();
    const [{ logs, count: logCount }, now] = await Promise.all([
      reads.logPage(w, id, -LOG_LINES_SHOWN, LOG_LINES_SHOWN),
      this.now(),
    ]);
    const listed: ListedJob = view;
    if (view.state === 'active') await withLeases(w, [listed]);
    const { runs, partial } = foldAttempts(view, history, now, truncated);
    const detail: JobDetail = {
      ...listed,
      ...{ history, historyTruncated: truncated, logs, logCount, runs, runsPartial: partial },
    };
    if (row.parent !== undefined || row.children !== undefined) {
      detail.flow = {
        children: await readDependencies(this.connector, queue, id, { count: FLOW_CHILDREN_SHOWN }),
      };
      if (row.parent !== undefined)
        detail.flow.parent = remoteParent(row.parent) ?? { queue, id: row.parent };
    }
    return detail;
  }

  /** The queue's fixed cadences (Repeat) and job schedulers, soonest next run first. */
  async schedulers(queue: string): Promise<SchedulersResult> {
    const q = this.mq.queue(queue);
    const [repeats, schedulers] = await Promise.all([q.repeat.list(), q.schedulers.list()]);
    return { repeats: repeats.map(repeatSummary), schedulers: schedulers.map(schedulerSummary) };
  }

  /**
   * Consumers that beat in the last 10 minutes, most recently seen first; one that missed
   * STALE_BEATS beats is listed with alive false.
   */
  async consumers(queue: string): Promise<ConsumerInfo[]> {
    const w = this.wire(queue);
    const now = await this.now();
    const seen = await model.consumersSince(w, now - CONSUMER_WINDOW_MS);
    return seen.map((c) => consumerInfo(c.id, c.lastSeen, c.info, now));
  }
}
