// The read-only inspection API (Sidekiq's api.rb): what the CLI and the dashboard show, read
// straight from a queue's keys. It never writes (no script calls, so not even the protocol
// stamp), and it pages through the sorted sets, never a scan of the keyspace. Write actions
// (retry, cancel, remove, pause ...) are the Queue's verbs; the consumer never uses this module.
// The shapes it returns, and the pure functions that build them, are in inspect-views.ts.

import { wholeNumber } from './core/check.js';
import { createdAt, jobView } from './core/codec.js';
import { EchoMQError } from './core/errors.js';
import { isJobId } from './core/ids.js';
import { JOB_STATES, type JobState, type JobView, type QueueEvent } from './core/types.js';
import type { EchoMQ } from './echomq.js';
import { eventsOf } from './events/reader.js';
import { remoteParent } from './flow-handoff.js';
import { readDependencies } from './flow-read.js';
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
  TAG_SCAN_MAX,
} from './inspect-views.js';
import type { Queue } from './queue.js';
import { QUEUES_KEY } from './wire/keyspace.js';

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
} from './inspect-views.js';
export { STALE_BEATS, TAG_SCAN_MAX } from './inspect-views.js';

/** The retention counts a queue has without configure (SPEC 6, meta keep_completed, keep_dead). */
const KEPT_COMPLETED = 1000;
const KEPT_DEAD = 10_000;
/** Jobs read per call when a tag filter reads a state's jobs in order. */
const TAG_CHUNK = 500;
const TERMINAL = new Set<JobState>(['completed', 'dead', 'cancelled']);
const MAX_LIMIT = 1000;
/** Consumers silent for longer are not listed. */
const CONSUMER_WINDOW_MS = 10 * 60_000;
/** Events read per XREVRANGE call, and the most read for one job's history. */
const HISTORY_CHUNK = 1000;
const HISTORY_MAX_SCANNED = 50_000;
/** Stream ids and row stamps may differ by a clock tick; look this far before creation. */
const HISTORY_SLACK_MS = 1000;

export class Inspector {
  constructor(private readonly mq: EchoMQ) {}

  private get client() {
    this.mq.connector.assertOpen();
    return this.mq.connector.client;
  }

  private queue(name: string): Queue {
    return this.mq.queue(name);
  }

  /** The Redis server's clock, epoch ms (the clock every score is written with). */
  private async now(): Promise<number> {
    const [s, us] = await this.client.time();
    return Number(s) * 1000 + Math.floor(Number(us) / 1000);
  }

  /** Whether a queue of this name is registered (has ever run a script). */
  async has(queue: string): Promise<boolean> {
    return (await this.client.sismember(QUEUES_KEY, queue)) === 1;
  }

  /** The names in the registry of queues, sorted. */
  async names(): Promise<string[]> {
    return (await this.client.smembers(QUEUES_KEY)).sort();
  }

  /** The queues of `among` (default: every registered one) holding a job with this id, sorted. */
  async locate(id: string, among?: readonly string[]): Promise<string[]> {
    if (!isJobId(id)) return [];
    const names: string[] = [];
    const pipeline = this.client.pipeline();
    for (const name of among ?? (await this.names())) {
      try {
        pipeline.exists(this.queue(name).keys.job(id));
        names.push(name);
      } catch {
        // not a valid queue name: someone else's member of the registry
      }
    }
    const replies = names.length === 0 ? [] : ((await pipeline.exec()) ?? []);
    return names.filter((_, i) => {
      const [err, n] = replies[i]!;
      if (err) throw err;
      return n === 1;
    });
  }

  /** Every registered queue with its counts, by name. */
  async queues(): Promise<QueueSummary[]> {
    const names = await this.names();
    const out = await Promise.all(
      names.map(async (name): Promise<QueueSummary | null> => {
        let q: Queue;
        try {
          q = this.queue(name);
        } catch {
          return null; // not a valid queue name: someone else's member of the set
        }
        const [counts, paused, lanes, waiting, kept] = await Promise.all([
          q.counts(),
          q.isPaused(),
          this.client.scard(q.keys.key('lanes')),
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
      q.counts(),
      q.isPaused(),
      q.lanes.list(),
      this.rates(q),
      this.consumers(queue),
      this.now().then((now) => this.client.zcount(q.keys.key('active'), '-inf', `(${now}`)),
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
  private async kept(q: Queue): Promise<{ completed: number; dead: number }> {
    const [completed, dead] = await this.client.hmget(q.keys.key('meta'), 'keep_completed', 'keep_dead');
    return { completed: Number(completed ?? KEPT_COMPLETED), dead: Number(dead ?? KEPT_DEAD) };
  }

  /**
   * The wait of the job next in line in flat pending and in each lane (the head of each set):
   * now minus the later of its creation and its run-at. Two round trips whatever the backlog.
   */
  private async oldestWaiting(q: Queue): Promise<{ oldestMs: number | null; lanes: Record<string, number> }> {
    const groups = await this.client.smembers(q.keys.key('lanes'));
    const sets = [q.keys.key('pending'), ...groups.map((g) => q.keys.lane(g))];
    const heads = this.client.pipeline();
    for (const set of sets) heads.zrange(set, 0, 0);
    const ids = ((await heads.exec()) ?? []).map(([err, reply]) => {
      if (err) throw err;
      return (reply as string[])[0];
    });
    const rows = this.client.pipeline();
    for (const id of ids) if (id !== undefined) rows.hmget(q.keys.job(id), 'created', 'runat');
    const [now, replies] = await Promise.all([
      this.now(),
      rows.length > 0 ? rows.exec() : Promise.resolve([]),
    ]);
    let r = 0;
    const lineHeads = ids.map((id) => {
      if (id === undefined) return undefined;
      const [err, reply] = (replies ?? [])[r++] ?? [null, []];
      if (err) throw err;
      const [created, runAt] = reply as (string | null)[];
      return [String(createdAt(id, created)), runAt ?? null]; // a minted id's row may have no created
    });
    return oldestWaits(now, groups, lineHeads);
  }

  private async rates(q: Queue): Promise<QueueRates> {
    const current = Math.floor((await this.now()) / 60_000);
    const pipeline = this.client.pipeline();
    for (let m = current - 59; m <= current; m++) pipeline.hmget(q.keys.stats(m), 'completed', 'failed');
    const buckets = ((await pipeline.exec()) ?? []).map(([err, reply]) => {
      if (err) throw err;
      return reply as (string | null)[];
    });
    return hourRates(current - 59, buckets);
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
    const c = this.client;
    let sets: string[];
    if (page.group !== undefined) {
      if (state !== 'pending') {
        throw new EchoMQError(
          'EMQINPUT',
          `group applies to state pending only (a lane holds waiting jobs), got ${state}`,
        );
      }
      sets = [q.keys.lane(page.group)];
    } else if (state === 'pending') {
      const groups = (await c.smembers(q.keys.key('lanes'))).sort();
      sets = [q.keys.key('pending'), ...groups.map((g) => q.keys.lane(g))];
    } else {
      sets = [q.keys.stateSet(state)];
    }
    if (page.tag !== undefined) return this.tagged(q, state, sets, page.tag, offset, limit);
    const sizes = await Promise.all(sets.map((s) => c.zcard(s)));
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
      const part = TERMINAL.has(state) ? await c.zrevrange(set, skip, stop) : await c.zrange(set, skip, stop);
      ids.push(...part);
      skip = 0;
    }
    const jobs: ListedJob[] = await this.rows(q, ids);
    if (state === 'active') await this.withLeases(q, jobs);
    return { total, jobs };
  }

  /** Adds each active job's lease deadline (its score in active) and whether it has passed. */
  private async withLeases(q: Queue, jobs: ListedJob[]): Promise<void> {
    if (jobs.length === 0) return;
    const [now, scores] = await Promise.all([
      this.now(),
      this.client.zmscore(q.keys.key('active'), ...jobs.map((j) => j.id)),
    ]);
    jobs.forEach((job, i) => {
      const score = scores[i];
      if (score === null || score === undefined) return;
      job.leaseUntil = Number(score);
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
    const q = this.queue(queue);
    if (!TERMINAL.has(state)) {
      throw new EchoMQError('EMQINPUT', `state must be completed, dead or cancelled, got ${String(state)}`);
    }
    wholeNumber(olderThanMs, 'olderThanMs', 0, Number.MAX_SAFE_INTEGER);
    return this.client.zcount(q.keys.key(state), '-inf', (await this.now()) - olderThanMs);
  }

  /** The rows of `ids`, in order; ids whose row is gone (removed meanwhile) are left out. */
  /** A page of the jobs of `sets` that carry `tag`, read in order in chunks, bounded. */
  private async tagged(
    q: Queue,
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
        const ids = TERMINAL.has(state)
          ? await this.client.zrevrange(set, start, stop)
          : await this.client.zrange(set, start, stop);
        if (ids.length === 0) break;
        scanned += ids.length;
        const pipeline = this.client.pipeline();
        for (const id of ids) pipeline.hget(q.keys.job(id), 'tags');
        const tags = ((await pipeline.exec()) ?? []).map(([err, v]) => {
          if (err) throw err;
          return (v as string | null) ?? '';
        });
        for (const [i, id] of ids.entries()) {
          if (!tags[i]!.split(',').includes(tag)) continue;
          if (total >= offset && matches.length < limit) matches.push(id);
          total += 1;
        }
      }
    }
    return { total, jobs: await this.rows(q, matches), partial: scanned >= TAG_SCAN_MAX };
  }

  private async rows(q: Queue, ids: string[]): Promise<JobView[]> {
    if (ids.length === 0) return [];
    const pipeline = this.client.pipeline();
    for (const id of ids) pipeline.hgetall(q.keys.job(id));
    const replies = (await pipeline.exec()) ?? [];
    const out: JobView[] = [];
    replies.forEach(([err, row], i) => {
      if (err) throw err;
      const r = row as Record<string, string>;
      if (r.state) out.push(jobView(ids[i]!, r));
    });
    return out;
  }

  /**
   * One job with its history: its entries still in the events stream (capped by the queue's
   * eventsMaxLen), oldest first. Reads the stream newest first in chunks, back to the job's
   * creation, at most 50,000 entries. Null when there is no such job.
   */
  async job(queue: string, id: string): Promise<JobDetail | null> {
    const q = this.queue(queue);
    if (!isJobId(id)) return null; // no row can have it
    const row = (await this.client.hgetall(q.keys.job(id))) as Record<string, string>;
    if (!row.state) return null;
    const view = jobView(id, row);
    const since = Math.max(0, view.createdAt - HISTORY_SLACK_MS);
    const key = q.keys.key('events');
    const history: QueueEvent[] = [];
    let end = '+';
    let scanned = 0;
    let truncated = false;
    for (;;) {
      if (scanned >= HISTORY_MAX_SCANNED) {
        truncated = true;
        break;
      }
      const chunk = (await this.client.xrevrange(key, end, String(since), 'COUNT', HISTORY_CHUNK)) as [
        string,
        string[],
      ][];
      scanned += chunk.length;
      for (const [streamId, flat] of chunk) {
        for (const e of eventsOf(streamId, flat)) if (e.id === id) history.push(e);
      }
      if (chunk.length < HISTORY_CHUNK) break;
      end = `(${chunk[chunk.length - 1]![0]}`;
    }
    history.reverse();
    const logKey = `${q.keys.job(id)}:logs`;
    const [logs, logCount] = await Promise.all([
      this.client.lrange(logKey, -LOG_LINES_SHOWN, -1),
      this.client.llen(logKey),
    ]);
    const listed: ListedJob = view;
    if (view.state === 'active') await this.withLeases(q, [listed]);
    const detail: JobDetail = { ...listed, history, historyTruncated: truncated, logs, logCount };
    if (row.parent !== undefined || row.children !== undefined) {
      detail.flow = {
        children: await readDependencies(this.client, queue, id, { count: FLOW_CHILDREN_SHOWN }),
      };
      if (row.parent !== undefined)
        detail.flow.parent = remoteParent(row.parent) ?? { queue, id: row.parent };
    }
    return detail;
  }

  /** The queue's fixed cadences (Repeat) and job schedulers, soonest next run first. */
  async schedulers(queue: string): Promise<SchedulersResult> {
    const q = this.queue(queue);
    const [repeats, schedulers] = await Promise.all([q.repeat.list(), q.schedulers.list()]);
    return { repeats: repeats.map(repeatSummary), schedulers: schedulers.map(schedulerSummary) };
  }

  /**
   * Consumers that beat in the last 10 minutes, most recently seen first; one that missed
   * STALE_BEATS beats is listed with alive false.
   */
  async consumers(queue: string): Promise<ConsumerInfo[]> {
    const q = this.queue(queue);
    const c = this.client;
    const now = await this.now();
    const flat = await c.zrevrangebyscore(
      q.keys.key('consumers'),
      '+inf',
      now - CONSUMER_WINDOW_MS,
      'WITHSCORES',
    );
    if (flat.length === 0) return [];
    const ids = flat.filter((_, i) => i % 2 === 0);
    const infos = await c.hmget(q.keys.key('consumers:info'), ...ids);
    return ids.map((id, i) => consumerInfo(id, Number(flat[i * 2 + 1]), infos[i] ?? null, now));
  }
}
