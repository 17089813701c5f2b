// How values cross the wire: JSON text in the job row (payload, result, progress), refused
// before the wire when it cannot round-trip or is over the size limit.
import type { BackoffPolicy } from './backoff.js';
import { EchoMQError } from './errors.js';
import { mintedAt } from './ids.js';
import type { JobState, JobView } from './types.js';

/** Encodes a value as JSON for the wire, refusing what cannot round-trip or is too big. */
export function encodeJson(value: unknown, what: string, limit: number): string {
  let text: string | undefined;
  try {
    text = JSON.stringify(value);
  } catch (err) {
    throw new EchoMQError('EMQINPUT', `${what} cannot be encoded as JSON: ${(err as Error).message}`);
  }
  if (text === undefined) {
    throw new EchoMQError(
      'EMQINPUT',
      `${what} cannot be encoded as JSON (got ${typeof value}); pass null instead`,
    );
  }
  const size = Buffer.byteLength(text);
  if (size > limit) {
    throw new EchoMQError(
      'EMQTOOBIG',
      `${what} is ${size} bytes encoded, over the ${limit}-byte limit; store large data elsewhere and enqueue a reference, or raise maxPayloadBytes`,
    );
  }
  return text;
}

/** Decodes a JSON field; text another runtime stored as plain text comes back as is. */
export function parseMaybe(v: string | undefined): unknown {
  if (v === undefined) return undefined;
  try {
    return JSON.parse(v);
  } catch {
    return v; // a runtime in another language may store plain text
  }
}

/** A row's creation instant: its `created`, else the mint instant its minted id holds (SPEC 3). */
export function createdAt(id: string, created: string | null | undefined): number {
  return created != null ? Number(created) : (mintedAt(id) ?? 0);
}

function num(v: string | undefined): number | undefined {
  return v === undefined ? undefined : Number(v);
}

/**
 * The attempts a row without `max` allows on a queue of this protocol version (meta `version`):
 * 1 under version 1, 3 from version 2 (SPEC 5), as the scripts apply it.
 */
export function attemptsWithoutMax(version: string | number | null | undefined): number {
  return Number(version ?? 1) >= 2 ? 3 : 1;
}

/** Decodes a job row (HGETALL) into its view; `version` is the queue's meta `version`. */
export function jobView<D, R>(
  id: string,
  row: Record<string, string>,
  version?: string | null,
): JobView<D, R> {
  const view: JobView<D, R> = {
    id,
    state: row.state as JobState,
    data: parseMaybe(row.payload) as D,
    attempts: Number(row.attempts ?? 0),
    maxAttempts: row.max === undefined ? attemptsWithoutMax(version) : Number(row.max),
    stalled: Number(row.stalled ?? 0),
    cancelRequested: row.cancel === '1',
    createdAt: createdAt(id, row.created),
  };
  if (row.name) view.name = row.name;
  if (row.group) view.group = row.group;
  if (row.prio) view.priority = Number(row.prio);
  if (row.backoff) {
    const policy = parseMaybe(row.backoff); // malformed text (bad data) is shown as no policy
    if (typeof policy === 'object' && policy !== null) view.backoff = policy as BackoffPolicy;
  }
  if (row.result !== undefined) view.result = parseMaybe(row.result) as R;
  if (row.error !== undefined)
    view.error = row.stack ? { message: row.error, stack: row.stack } : { message: row.error };
  if (row.last_error !== undefined) {
    view.lastError = row.last_stack
      ? { message: row.last_error, stack: row.last_stack }
      : { message: row.last_error };
  }
  if (row.progress !== undefined) view.progress = parseMaybe(row.progress);
  if (row.tags) view.tags = row.tags.split(',');
  const runAt = num(row.runat);
  if (runAt !== undefined) view.runAt = runAt;
  const started = num(row.started);
  if (started !== undefined) view.startedAt = started;
  const finished = num(row.finished);
  if (finished !== undefined) view.finishedAt = finished;
  if (row.consumer) view.consumer = row.consumer;
  return view;
}
