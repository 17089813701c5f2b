// Emptying a queue: clean deletes ended jobs of one state, drain deletes the waiting jobs (pending and every lane, scheduled ones too
// when asked), obliterate deletes every key of the queue. Both go in bounded batches, one script
// call each, so Redis is never blocked for long, and report progress after every batch.
import { knownKeys, wholeNumber } from '../core/check.js';
import { EchoMQError, optionsObject, showValue } from '../core/errors.js';
import type { CleanOptions } from '../core/types.js';
import type { QueueWire } from '../wire/queue-wire.js';
import { counts as stateCounts } from '../wire/reads.js';
import * as verbs from '../wire/verbs/index.js';

export interface DrainOptions {
  /** Also delete scheduled jobs (delayed ones, retries in backoff). Default false. */
  scheduled?: boolean;
  /** Jobs per script call (1-100,000). Default 1000. */
  batch?: number;
  /** Called after every batch with the jobs deleted so far. */
  onProgress?: (progress: { deleted: number }) => void;
}

export interface ObliterateOptions {
  /** Go on while jobs are active (their consumers then find their jobs gone). Default false. */
  force?: boolean;
  /** Keys looked at per script call (SCAN COUNT, 1-100,000). Default 1000. */
  batch?: number;
  /** Called after every batch: keys deleted so far, of about `total` (the job count at the start). */
  onProgress?: (progress: { deleted: number; total: number }) => void;
}

const DRAIN_OPTIONS = new Set(['scheduled', 'batch', 'onProgress']);
const OBLITERATE_OPTIONS = new Set(['force', 'batch', 'onProgress']);

/** The options when every key is known and onProgress, if given, is a function. */
function known<T extends { onProgress?: unknown }>(opts: T, what: string, keys: ReadonlySet<string>): T {
  knownKeys(opts, keys, `${what} option`);
  if (opts.onProgress !== undefined && typeof opts.onProgress !== 'function') {
    throw new EchoMQError('EMQINPUT', `${what} onProgress must be a function`);
  }
  return opts;
}

/** Deletes every waiting job; resolves with how many were deleted. */
export async function drain(q: QueueWire, options?: DrainOptions): Promise<number> {
  const opts = known(optionsObject(options, 'drain options'), 'drain', DRAIN_OPTIONS);
  if (opts.scheduled !== undefined && typeof opts.scheduled !== 'boolean') {
    throw new EchoMQError('EMQINPUT', 'drain scheduled must be true or false');
  }
  const batch = wholeNumber(opts.batch ?? 1000, 'batch', 1, 100_000);
  let deleted = 0;
  for (;;) {
    const { deleted: n, more } = await verbs.drain(q, batch, opts.scheduled === true);
    deleted += n;
    opts.onProgress?.({ deleted });
    if (!more) return deleted;
  }
}

/**
 * Deletes every key of the queue (jobs, logs, lanes, schedulers, events, settings). EMQSTATE
 * while jobs are active, unless `force`. Resolves with how many keys were deleted.
 */
export async function obliterate(q: QueueWire, options?: ObliterateOptions): Promise<number> {
  const opts = known(optionsObject(options, 'obliterate options'), 'obliterate', OBLITERATE_OPTIONS);
  if (opts.force !== undefined && typeof opts.force !== 'boolean') {
    throw new EchoMQError('EMQINPUT', 'obliterate force must be true or false');
  }
  const batch = wholeNumber(opts.batch ?? 1000, 'batch', 1, 100_000);
  q.connector.assertOpen();
  const counts = await stateCounts(q);
  const total = Object.values(counts).reduce((a, b) => a + b, 0);
  let deleted = 0;
  let cursor = '0';
  do {
    const step = await verbs.obliterate(q, cursor, batch, opts.force === true);
    deleted += step.deleted;
    cursor = step.cursor;
    opts.onProgress?.({ deleted, total: Math.max(total, deleted) });
  } while (cursor !== '0');
  await q.unlist();
  return deleted;
}

/** Deletes ended jobs of one state, oldest first (see Queue.clean); resolves with how many. */
export async function clean(w: QueueWire, opts: CleanOptions): Promise<number> {
  const state = opts?.state;
  if (state !== 'completed' && state !== 'dead' && state !== 'cancelled') {
    throw new EchoMQError(
      'EMQINPUT',
      `clean state must be 'completed', 'dead' or 'cancelled', got ${showValue(state)}`,
    );
  }
  return verbs.clean(
    w,
    state,
    wholeNumber(opts.olderThanMs ?? 0, 'olderThanMs', 0),
    wholeNumber(opts.limit ?? 1000, 'limit', 1, 100_000),
  );
}
