// Where a job's producer trace context is kept (telemetry/tracing.ts): a key of its own beside
// the row, `P trace:<id>`, written before the job can be claimed and expiring after `ttlMs`.
import type { QueueWire } from './queue-wire.js';

/** The context kept for a job, or null (none written, or expired). */
export function readTrace(w: QueueWire, id: string): Promise<string | null> {
  return w.connector.client.get(w.keys.trace(id));
}

/** Keeps each job's context unless one is kept already (NX: a duplicate keeps the first producer's). */
export async function keepTraces(
  w: QueueWire,
  contexts: readonly [id: string, context: string][],
  ttlMs: number,
) {
  if (contexts.length === 0) return;
  const pipeline = w.connector.client.pipeline();
  for (const [id, context] of contexts) pipeline.set(w.keys.trace(id), context, 'PX', ttlMs, 'NX');
  await pipeline.exec();
}

/** Keeps one job's context (NX); true when this call wrote it. */
export async function keepTrace(w: QueueWire, id: string, context: string, ttlMs: number): Promise<boolean> {
  return (await w.connector.client.set(w.keys.trace(id), context, 'PX', ttlMs, 'NX')) === 'OK';
}

/** Drops a context this call wrote for an admission that failed. */
export async function dropTrace(w: QueueWire, id: string): Promise<void> {
  await w.connector.client.del(w.keys.trace(id));
}
