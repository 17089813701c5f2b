// Retrying ended jobs: one job (retry), or every job of an ended state in batches, oldest first,
// optionally filtered by name and error (retryAll). The retry verb checks each job's state
// itself, so jobs that end again while retryAll runs are not taken twice.
import { knownKeys, wholeNumber } from '../core/check.js';
import { EchoMQError, optionsObject, showValue } from '../core/errors.js';
import type { QueueWire } from '../wire/queue-wire.js';
import * as reads from '../wire/reads.js';
import * as verbs from '../wire/verbs/index.js';

const RETRY_ALL_OPTIONS = new Set(['state', 'name', 'error', 'batch', 'onProgress']);

export interface RetryAllOptions {
  state?: 'dead' | 'cancelled' | 'completed';
  name?: string;
  error?: string | RegExp;
  batch?: number;
  /** Called after every batch: jobs retried so far, of `total` found at the start. */
  onProgress?: (progress: { retried: number; total: number }) => void;
}

/** Returns one ended job to pending (see Queue.retry for the errors). */
export async function retryOne(w: QueueWire, id: string): Promise<void> {
  const [status] = await verbs.retry(w, [id]);
  if (status === 'EMQNOJOB') throw new EchoMQError('EMQNOJOB', `no job ${id} in queue ${w.name}`);
  if (status === 'EMQSTATE') {
    const state = await reads.jobState(w, id);
    throw new EchoMQError('EMQSTATE', `job ${id} is ${state}: only a job that ended can be retried`);
  }
  if (status === 'EMQDATA') {
    throw new EchoMQError(
      'EMQDATA',
      `job ${id} has a prio, token or max that is not a whole number: correct or remove the field (see its error), then retry it`,
    );
  }
}

/** Retries every job that ended `state` before the call; resolves with how many. */
export async function retryAll(w: QueueWire, opts: RetryAllOptions): Promise<number> {
  w.connector.assertOpen();
  knownKeys(optionsObject(opts, 'retryAll options'), RETRY_ALL_OPTIONS, 'retryAll option');
  const state = opts.state ?? 'dead';
  if (state !== 'dead' && state !== 'cancelled' && state !== 'completed') {
    throw new EchoMQError(
      'EMQINPUT',
      `retryAll state must be 'dead', 'cancelled' or 'completed', got ${showValue(state)}`,
    );
  }
  if (opts.name !== undefined && typeof opts.name !== 'string') {
    throw new EchoMQError('EMQINPUT', `retryAll name must be a string, got ${showValue(opts.name)}`);
  }
  const error = opts.error;
  if (error !== undefined && typeof error !== 'string' && !(error instanceof RegExp)) {
    throw new EchoMQError('EMQINPUT', `retryAll error must be a string or a RegExp, got ${showValue(error)}`);
  }
  const filtered = opts.name !== undefined || error !== undefined;
  const matches = (name: string | null, message: string | null) =>
    (opts.name === undefined || name === opts.name) &&
    (error === undefined ||
      (message !== null && (typeof error === 'string' ? message.includes(error) : error.test(message))));
  const batch = wholeNumber(opts.batch ?? 500, 'batch', 1, 10_000);
  // The newest end at the start bounds the run: a job that ends again later scores above it.
  const upTo = await reads.endedUpTo(w, state);
  if (upTo === null) return 0;
  const { cutoff, total } = upTo;
  let retried = 0;
  let skip = 0; // members left in the set (another state, or filtered out); page past them
  for (;;) {
    let ids = await reads.endedPage(w, state, cutoff, skip, batch);
    if (ids.length === 0) break;
    if (filtered) {
      // The filter reads name and error beside the ids; retry still checks each state itself.
      const rows = await reads.fieldsOf(w, ids, 'name', 'error');
      const kept = ids.filter((_, i) => matches(rows[i]![0]!, rows[i]![1]!));
      skip += ids.length - kept.length;
      ids = kept;
      if (ids.length === 0) continue;
    }
    const statuses = await verbs.retry(w, ids);
    for (const s of statuses) {
      if (s === 'OK') retried += 1;
      else if (s === 'EMQSTATE' || s === 'EMQDATA') skip += 1;
    }
    opts.onProgress?.({ retried, total });
  }
  return retried;
}
