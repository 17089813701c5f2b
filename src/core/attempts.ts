// A job's runs, folded from what is stored already: its entries in the events stream (each
// stamped by the server: the entry id's ms) and its row. No script writes anything for this.
// A run is one claim: it starts at an `active` entry and ends at the first `completed`,
// `failed`, `stalled` (its lease ran out and recovery took it), or `waiting`/`delayed` while it
// is open (a handback, a snooze or a handler's rate limit gave the attempt back: the next run
// keeps its number). Its wait is from when the job became claimable (added, released, a
// retry's or a snooze's run-at) to its start. The stream is capped by count, so the oldest runs
// of a long-lived job may be gone: the row then stands in for its latest run (SPEC 5, 16).
import type { JobView, QueueEvent } from './types.js';

/** How a run ended. */
export type RunOutcome = 'running' | 'completed' | 'failed' | 'stalled' | 'returned' | 'unknown';

/** One run of a job: a claim and how it ended. Times are server-clock epoch ms. */
export interface AttemptRun {
  /** The attempt's number, from 1 (a run that gave its attempt back shares it with the next). */
  attempt: number;
  /** The consumer that claimed it, when its claim recorded one. */
  consumer?: string;
  /** When the job became claimable before this run (undefined: those events are gone). */
  readyAt?: number;
  startedAt: number;
  endedAt?: number;
  /** startedAt − readyAt: time spent waiting for a consumer. */
  waitMs?: number;
  /** endedAt − startedAt (a running run: until `now`). */
  runMs?: number;
  outcome: RunOutcome;
  /** failed: the event's reason (error, timeout, unrecoverable, cancelled); returned: handback, snooze or rate_limit. */
  reason?: string;
  /** The attempt's error: the failed event's bounded copy, else the row's for the latest failure. */
  error?: string;
}

export interface AttemptRuns {
  /** Oldest first. */
  runs: AttemptRun[];
  /** True when earlier runs are not in the stream any more (trimmed, or read only in part). */
  partial: boolean;
}

/** The server-clock ms of a stream entry id (`<ms>-<seq>`). */
export function streamMs(streamId: string): number {
  return Number(streamId.slice(0, streamId.indexOf('-')));
}

/** The view's row as JobView and the consumer field (JobView.consumer). */
type RowFacts = Pick<
  JobView,
  'state' | 'attempts' | 'createdAt' | 'runAt' | 'startedAt' | 'finishedAt' | 'error' | 'consumer'
>;

/**
 * Folds a job's events (its own, oldest first, as Inspector.job reads them) and its row into
 * runs. `now` (server ms) measures a running run; `truncated`: the history was read in part.
 */
export function foldAttempts(
  job: RowFacts,
  history: readonly QueueEvent[],
  now: number,
  truncated = false,
): AttemptRuns {
  const runs: AttemptRun[] = [];
  let open: AttemptRun | undefined;
  let ready: number | undefined;
  const close = (at: number, outcome: RunOutcome, reason?: string) => {
    if (!open) return;
    open.endedAt = at;
    open.runMs = Math.max(0, at - open.startedAt);
    open.outcome = outcome;
    if (reason) open.reason = reason;
    open = undefined;
  };
  for (const e of history) {
    const at = streamMs(e.streamId);
    const f = e.fields;
    switch (e.event) {
      case 'added':
        ready = at;
        break;
      case 'delayed':
        if (open) close(at, 'returned', f.reason ?? 'snooze');
        ready = f.at === undefined ? undefined : Number(f.at);
        break;
      case 'waiting':
        if (open) {
          close(at, 'returned', f.reason ?? 'handback');
          ready = f.until === undefined ? at : Number(f.until);
        } else if (ready === undefined) ready = at; // promoted or released: due since a run-at kept
        break;
      case 'waiting_children':
        ready = undefined; // claimable once its last child releases it (waiting)
        break;
      case 'active': {
        close(at, 'unknown'); // a second claim without an end between: the end was not recorded
        const attempt = Number(f.attempt);
        open = { attempt: Number.isFinite(attempt) ? attempt : 0, startedAt: at, outcome: 'running' };
        if (f.consumer) open.consumer = f.consumer;
        if (ready !== undefined) {
          open.readyAt = ready;
          open.waitMs = Math.max(0, at - ready);
        }
        runs.push(open);
        ready = undefined;
        break;
      }
      case 'completed':
        close(at, 'completed');
        break;
      case 'failed':
        if (open) {
          if (f.error !== undefined) open.error = f.error;
          close(at, 'failed', f.reason);
        }
        break;
      case 'stalled':
        close(at, 'stalled');
        ready = at; // recovery returned it to claimable work
        break;
    }
  }
  let partial = truncated;
  if (runs.length === 0 && job.attempts > 0 && job.startedAt !== undefined) {
    runs.push(fromRow(job)); // the stream no longer holds its runs: the row's latest stands in
    partial = true;
  }
  const first = runs[0];
  if (first && first.attempt > 1) partial = true;
  if (first && first.readyAt === undefined && first.attempt === 1 && job.runAt === undefined && !partial) {
    first.readyAt = job.createdAt;
    first.waitMs = Math.max(0, first.startedAt - job.createdAt);
  }
  const last = runs[runs.length - 1];
  // The latest claim always writes an active entry, so the last run is the row's latest claim.
  if (last?.outcome === 'running') {
    if (job.state === 'active') last.runMs = Math.max(0, now - last.startedAt);
    else last.outcome = 'unknown';
  }
  // The row keeps the latest failure's message whole: it belongs to the latest failed run.
  const failed = runs.filter((r) => r.outcome === 'failed');
  const latest = failed[failed.length - 1];
  if (latest && latest.error === undefined && job.error) latest.error = job.error.message;
  return { runs, partial };
}

/** The latest run as the row tells it, when the stream holds none of its events. */
function fromRow(job: RowFacts): AttemptRun {
  const run: AttemptRun = { attempt: job.attempts, startedAt: job.startedAt!, outcome: 'unknown' };
  if (job.consumer) run.consumer = job.consumer;
  const ended = job.state === 'completed' || job.state === 'dead' || job.state === 'cancelled';
  if (job.state === 'active') run.outcome = 'running';
  if (ended && job.finishedAt !== undefined && job.finishedAt >= run.startedAt) {
    run.endedAt = job.finishedAt;
    run.runMs = job.finishedAt - run.startedAt;
    run.outcome = job.state === 'completed' ? 'completed' : 'failed';
    if (run.outcome === 'failed' && job.error) run.error = job.error.message;
  }
  return run;
}
