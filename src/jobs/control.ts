// Changing a job that has not started: run it now (promote), move its run-at (reschedule),
// change its priority (reprioritize) or replace its data (update). Each is one protocol script,
// fenced on the job's state inside the call: a job that started in between is refused with
// EMQSTATE and nothing changes. A running job's data is changed only by its own handler
// (ctx.update, fenced by its lease token).
import { PRIORITY_MAX, wholeNumber } from '../core/check.js';
import { encodeJson } from '../core/codec.js';
import { EchoMQError, optionsObject, showValue } from '../core/errors.js';
import { assertJobId } from '../core/ids.js';
import type { QueueWire } from '../wire/queue-wire.js';
import * as verbs from '../wire/verbs/index.js';

/** When a rescheduled job should run: `at` an epoch ms instant, or `in` ms from now (server clock). */
export type RunWhen = { at: number; in?: never } | { in: number; at?: never };

/** A scheduled job runs now: it moves to pending (its lane when it has a group). */
export async function promoteJob(q: QueueWire, id: string): Promise<void> {
  assertJobId(id);
  await verbs.promoteJob(q, id);
}

/**
 * A scheduled or pending job runs at a new instant, judged on the Redis server's clock.
 * Resolves with the new run-at (epoch ms, server clock).
 */
export async function reschedule(q: QueueWire, id: string, when: RunWhen): Promise<number> {
  assertJobId(id);
  const w = optionsObject(when, 'reschedule needs { at } or { in }, and it') as Record<string, unknown>;
  const keys = Object.keys(w);
  if (keys.length !== 1 || (keys[0] !== 'at' && keys[0] !== 'in')) {
    throw new EchoMQError(
      'EMQINPUT',
      `reschedule takes exactly one of { at: epoch ms } or { in: ms from now }, got keys ${showValue(keys.join(', ') || 'none')}`,
    );
  }
  const mode = keys[0] as 'at' | 'in';
  const value = wholeNumber(w[mode], mode === 'at' ? 'at' : 'in', 0);
  return verbs.reschedule(q, id, mode, value);
}

/** A job that has not started gets a new priority (lower runs first; 0 = none). */
export async function reprioritize(q: QueueWire, id: string, priority: number): Promise<void> {
  assertJobId(id);
  const prio = wholeNumber(priority, 'priority', 0, PRIORITY_MAX);
  await verbs.reprioritize(q, id, prio);
}

/**
 * Replaces the data of a job that has not started (scheduled, pending or waiting for its
 * children). With `token` (a running job's own lease, from ctx.update), of that running job.
 */
export async function updateData(q: QueueWire, id: string, data: unknown, token?: string): Promise<void> {
  assertJobId(id);
  const payload = encodeJson(data, 'job data', q.limits.maxPayloadBytes);
  await verbs.updateData(q, id, payload, token);
}
