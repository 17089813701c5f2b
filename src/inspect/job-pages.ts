// A page of one state's jobs, as Inspector.jobs lists them: the state's sorted sets laid end to
// end (flat pending, then each lane), each read one ZRANGE of a slice; a tag's page, a bounded
// scan in the same order; and an active job's lease deadline beside it. Reads only, as the
// Inspector's room requires.

import { EchoMQError } from '../core/errors.js';
import type { JobState } from '../core/types.js';
import type { QueueWire } from '../wire/queue-wire.js';
import * as model from '../wire/read-model.js';
import * as reads from '../wire/reads.js';
import { type JobsResult, type ListedJob, TAG_SCAN_MAX } from './views.js';

/** The ended states: their sets are listed newest end first. */
export const TERMINAL: ReadonlySet<JobState> = new Set<JobState>(['completed', 'dead', 'cancelled']);

/** `limit` jobs from `offset` of `sets` in order (`total` counts all of them). */
export async function jobsPage(
  w: QueueWire,
  state: JobState,
  sets: readonly string[],
  offset: number,
  limit: number,
): Promise<JobsResult> {
  const sizes = await model.sizes(w, sets);
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
    ids.push(...(await model.slice(w, set, skip, stop, TERMINAL.has(state))));
    skip = 0;
  }
  const jobs: ListedJob[] = await reads.rows(w, ids);
  if (state === 'active') await withLeases(w, jobs);
  return { total, jobs };
}

/** A page of the jobs of `sets` that carry `tag`, read in order in chunks, bounded. */
export async function taggedPage(
  w: QueueWire,
  state: JobState,
  sets: readonly string[],
  tag: string,
  offset: number,
  limit: number,
): Promise<JobsResult> {
  if (typeof tag !== 'string' || tag.length === 0) {
    throw new EchoMQError('EMQINPUT', 'tag must be a non-empty string');
  }
  const {
    total,
    ids: matches,
    scanned,
  } = await model.tagged(w, sets, tag, {
    offset,
    limit,
    newestFirst: TERMINAL.has(state),
    scanMax: TAG_SCAN_MAX,
  });
  return { total, jobs: await reads.rows(w, matches), partial: scanned >= TAG_SCAN_MAX };
}

/** Adds each active job's lease deadline (its score in active) and whether it has passed. */
export async function withLeases(w: QueueWire, jobs: ListedJob[]): Promise<void> {
  if (jobs.length === 0) return;
  const [now, deadlines] = await Promise.all([
    model.serverNow(w.connector),
    model.leaseDeadlines(
      w,
      jobs.map((j) => j.id),
    ),
  ]);
  jobs.forEach((job, i) => {
    const deadline = deadlines[i];
    if (deadline === null || deadline === undefined) return;
    job.leaseUntil = deadline;
    job.leaseExpired = deadline < now;
  });
}
