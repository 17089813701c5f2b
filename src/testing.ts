// echomq/testing: helpers for testing an application's jobs, on a `memory://` engine (whose clock
// a test moves) or on a Redis. Functions that take the queue, not methods on Queue: the
// production class carries no test-only surface, importing 'echomq' never loads this file, and
// a test reads like Oban.Testing's drain_queue/assert_enqueued or River's rivertest.Require*:
//   - runUntilIdle(queue): run everything due with the queue's consumers until nothing is left;
//     with `advance` or `until`, also step the memory engine's clock through every instant that
//     falls due in that window (retries in backoff, delayed jobs, recurring occurrences)
//   - enqueued(queue, filter): the jobs waiting to run, as views an assertion reads

import type { ConsumeOptions, Consumer } from './consumer/consumer.js';
import { knownKeys } from './core/check.js';
import { parseDuration } from './core/duration.js';
import { EchoMQError, optionsObject } from './core/errors.js';
import type { Handler, JobState, JobView } from './core/types.js';
import type { Queue } from './queue/queue.js';
import type { MemoryClock } from './wire/memory/clock.js';
import * as reads from './wire/reads.js';

export interface RunUntilIdleOptions<D, R> {
  /** Run the queue with this handler, in a consumer of its own for the call. Default: the consumers the queue object started. */
  handler?: Handler<D, R>;
  /** Options of that consumer (concurrency, backoff …). */
  consume?: ConsumeOptions;
  /**
   * Memory engine only: move the clock through every instant that falls due in this window (ms or
   * a duration such as '10m'), running what comes due at each; the clock ends at its end.
   */
  advance?: number | string;
  /** Like `advance`, up to this instant (epoch ms, a Date or an ISO 8601 string). */
  until?: number | Date | string;
}

/** What ran during a runUntilIdle call: one count per attempt that ended. */
export interface RunSummary {
  completed: number;
  /** Attempts that failed and were scheduled to try again. */
  retried: number;
  /** Attempts that failed for good (attempts spent, or UnrecoverableError). */
  dead: number;
  cancelled: number;
  /** Attempts whose lease was lost (it expired and the job was recovered): their outcome was not stored. */
  lost: number;
}

/** Which waiting jobs `enqueued` returns; every given field must match. */
export interface EnqueuedFilter<D> {
  name?: string;
  /** Matched as a pattern: each key given must match (objects recursively; arrays and values exactly). */
  data?: DeepPartial<D>;
  /** The states to look in. Default: pending and scheduled (the jobs that have yet to run). */
  state?: JobState | readonly JobState[];
}

export type DeepPartial<T> = T extends readonly unknown[]
  ? T
  : T extends object
    ? { [K in keyof T]?: DeepPartial<T[K]> }
    : T;

const RUN_OPTIONS = ['handler', 'consume', 'advance', 'until'];
const FILTER_KEYS = ['name', 'data', 'state'];

/**
 * Runs the queue until nothing it can run is left, and tells what ran. Each round asks every
 * consumer to re-check at once (recover, promote, recurrence, claim) and waits until each is idle;
 * rounds repeat while jobs keep ending (a handler that enqueues more). With `advance`/`until` the
 * memory engine's clock then moves to the next due instant in the window and the rounds go on.
 * A handler that never returns keeps it waiting (move the clock past its lease to end that).
 */
export async function runUntilIdle<D, R>(
  queue: Queue<D, R>,
  options?: RunUntilIdleOptions<D, R>,
): Promise<RunSummary> {
  const opts = known(optionsObject(options, 'runUntilIdle options'), RUN_OPTIONS, 'runUntilIdle option');
  const clock = opts.advance !== undefined || opts.until !== undefined ? memoryClock(queue) : undefined;
  const until = clock && windowEnd(clock, opts);
  const own = opts.handler ? queue.consume(opts.handler, opts.consume) : undefined;
  const consumers = queue.consumers;
  if (consumers.length === 0) {
    throw new EchoMQError(
      'EMQINPUT',
      `no consumer runs queue ${queue.name} on this connection: start one with queue.consume(handler) ` +
        'first, or pass { handler } to runUntilIdle',
    );
  }
  const summary: RunSummary = { completed: 0, retried: 0, dead: 0, cancelled: 0, lost: 0 };
  const stop = consumers.map((c) => count(c, summary));
  try {
    let stuckAt: number | undefined;
    for (;;) {
      await quiet(consumers, summary);
      if (!clock || until === undefined) break;
      const next = await nextDue(queue);
      if (next === undefined || next > until) break;
      if (next <= clock.now()) {
        if (stuckAt === next) break; // due, yet nothing runs it (a paused queue or lane)
        stuckAt = next;
      } else clock.set(next);
    }
    if (clock && until !== undefined && until > clock.now()) {
      clock.set(until);
      await quiet(consumers, summary);
    }
  } finally {
    for (const s of stop) s();
    await own?.close();
  }
  return summary;
}

/**
 * The jobs waiting to run (pending and scheduled, or the states given) that match `filter`, as
 * job views: `expect(await enqueued(emails, { name: 'welcome' })).toHaveLength(1)`.
 */
export async function enqueued<D, R>(
  queue: Queue<D, R>,
  filter?: EnqueuedFilter<D>,
): Promise<JobView<D, R>[]> {
  const f = known(optionsObject(filter, 'enqueued filter'), FILTER_KEYS, 'enqueued filter field');
  const states: readonly JobState[] =
    f.state === undefined ? ['pending', 'scheduled'] : typeof f.state === 'string' ? [f.state] : f.state;
  const sets = (await Promise.all(states.map((state) => reads.setsOf(queue.wire, state)))).flat();
  const jobs = await reads.rows<D, R>(queue.wire, await reads.members(queue.wire, sets));
  return jobs
    .filter((job) => f.name === undefined || job.name === f.name)
    .filter((job) => f.data === undefined || matches(job.data, f.data));
}

// ── helpers ─────────────────────────────────────────────────────────────────────

/** Rounds of recheck-then-idle until one ends no job. */
async function quiet<D, R>(consumers: readonly Consumer<D, R>[], summary: RunSummary): Promise<void> {
  for (;;) {
    const before = ended(summary);
    for (const c of consumers) c.recheck();
    await Promise.all(consumers.map((c) => c.idle()));
    if (ended(summary) === before) return;
  }
}

function ended(s: RunSummary): number {
  return s.completed + s.retried + s.dead + s.cancelled + s.lost;
}

/** Counts the consumer's outcomes into `summary` until the returned function is called. */
function count<D, R>(consumer: Consumer<D, R>, summary: RunSummary): () => void {
  const completed = () => {
    summary.completed += 1;
  };
  const failed = (_job: unknown, _error: unknown, outcome: 'retry' | 'dead' | 'cancelled') => {
    summary[outcome === 'retry' ? 'retried' : outcome] += 1;
  };
  const lost = () => {
    summary.lost += 1;
  };
  consumer.on('completed', completed).on('failed', failed).on('lost', lost);
  return () => {
    consumer.off('completed', completed).off('failed', failed).off('lost', lost);
  };
}

/** The earliest instant something of the queue falls due: a scheduled job or a repeat's slot. */
async function nextDue<D, R>(queue: Queue<D, R>): Promise<number | undefined> {
  const scores = await reads.heads(queue.wire, ['schedule', 'repeat']);
  return scores.length === 0 ? undefined : Math.min(...scores);
}

function memoryClock<D, R>(queue: Queue<D, R>): MemoryClock {
  const clock = queue.connector.memory?.clock;
  if (!clock) {
    throw new EchoMQError(
      'EMQINPUT',
      "runUntilIdle's advance and until move a memory engine's clock, and this queue is on Redis, " +
        "whose clock only real time moves: connect with url 'memory://' to move time in tests",
    );
  }
  return clock;
}

function windowEnd(clock: MemoryClock, opts: { advance?: number | string; until?: number | Date | string }) {
  if (opts.advance !== undefined && opts.until !== undefined) {
    throw new EchoMQError('EMQINPUT', 'runUntilIdle takes advance or until, not both');
  }
  if (opts.advance !== undefined) {
    const ms = typeof opts.advance === 'string' ? parseDuration(opts.advance) : opts.advance;
    if (typeof ms !== 'number' || !Number.isFinite(ms) || ms < 0) {
      throw new EchoMQError(
        'EMQINPUT',
        `advance takes ms >= 0 or a duration such as '10m', got ${String(opts.advance)}`,
      );
    }
    return clock.now() + ms;
  }
  const u = opts.until!;
  const at = u instanceof Date ? u.getTime() : typeof u === 'string' ? Date.parse(u) : u;
  if (typeof at !== 'number' || !Number.isFinite(at)) {
    throw new EchoMQError('EMQINPUT', `until takes epoch ms, a Date or an ISO 8601 string, got ${String(u)}`);
  }
  return at;
}

/** Refuses a key that is not an option (a typo would otherwise match everything). */
function known<T extends object>(value: T, names: readonly string[], what: string): T {
  knownKeys(value, new Set(names), what);
  return value;
}

/** Whether `actual` matches the pattern `expected`: objects by the keys given, the rest exactly. */
function matches(actual: unknown, expected: unknown): boolean {
  if (Array.isArray(expected)) {
    return (
      Array.isArray(actual) &&
      actual.length === expected.length &&
      expected.every((e, i) => matches(actual[i], e))
    );
  }
  if (typeof expected === 'object' && expected !== null) {
    if (typeof actual !== 'object' || actual === null || Array.isArray(actual)) return false;
    const a = actual as Record<string, unknown>;
    return Object.entries(expected).every(([k, e]) => Object.hasOwn(a, k) && matches(a[k], e));
  }
  return Object.is(actual, expected);
}
