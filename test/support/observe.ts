// Observing a queue from a test without sleeping: bounded waits and polls, the events stream
// and job rows read raw, and a fixture of consumers on their own connections (as separate
// processes would have) that afterEach closes.
import type { Redis } from 'ioredis';
import { expect } from 'vitest';
import type { ConsumeOptions, Consumer } from '../../src/consumer/consumer.js';
import { EchoMQError, type ErrorCode } from '../../src/core/errors.js';
import type { Handler } from '../../src/core/types.js';
import { eventsOf } from '../../src/events/reader.js';
import { EchoMQ } from '../../src/queue/echomq.js';
import type { Queue } from '../../src/queue/queue.js';

import { deferred, within } from './wait.js';

export { type Deferred, deferred, pause, poll, within } from './wait.js';

export type Entry = { streamId: string } & Record<string, string>;

/** Every entry of the queue's events stream, oldest first (only `event` ones when given). */
export async function streamEvents(raw: Redis, queue: Queue, event?: string): Promise<Entry[]> {
  const entries = await raw.xrange(queue.keys.key('events'), '-', '+');
  const out: Entry[] = [];
  for (const [streamId, fields] of entries) {
    const entry = fieldsOf(fields, { streamId } as Entry);
    if (event === undefined || entry.event === event) out.push(entry);
  }
  return out;
}

/** The fields of every entry of stream `key` (e.g. a queue's events), oldest first. */
export async function streamFields(raw: Redis, key: string): Promise<Record<string, string>[]> {
  const out: Record<string, string>[] = [];
  for (const [streamId, flat] of await raw.xrange(key, '-', '+')) {
    const entry = fieldsOf(flat, {} as Record<string, string>);
    // An entry for several jobs at once (claim's active, complete's completed): one per job.
    if (entry.ids === undefined) out.push(entry);
    else for (const e of eventsOf(streamId, flat)) out.push({ event: e.event, id: e.id, ...e.fields });
  }
  return out;
}

/** A stream entry's flat `[field, value, …]` list set on `into`. */
export function fieldsOf<E extends Record<string, string>>(fields: string[], into: E): E {
  const entry = into as Record<string, string>;
  for (let i = 0; i < fields.length; i += 2) entry[fields[i]!] = fields[i + 1]!;
  return into;
}

/** The EchoMQError a call was refused with, whether it threw synchronously or rejected. */
export async function refusal(call: () => unknown): Promise<EchoMQError> {
  try {
    await call();
  } catch (err) {
    expect(err).toBeInstanceOf(EchoMQError);
    return err as EchoMQError;
  }
  throw new Error('expected the call to be refused');
}

export async function expectRefused(call: () => unknown, code: ErrorCode): Promise<void> {
  expect((await refusal(call)).code).toBe(code);
}

/** The score of `member` in the sorted set `key`, or null when it is not there. */
export async function scoreOf(raw: Redis, key: string, member: string): Promise<number | null> {
  const s = await raw.zscore(key, member);
  return s === null ? null : Number(s);
}

/** The Redis server's clock in ms. */
export async function serverNow(raw: Redis): Promise<number> {
  const [sec, usec] = await raw.time();
  return Number(sec) * 1000 + Math.floor(Number(usec) / 1000);
}

/** The largest number of instants that fall in any half-open window [t, t + windowMs). */
export function busiestWindow(instants: number[], windowMs: number): number {
  const sorted = [...instants].sort((a, b) => a - b);
  let best = 0;
  let j = 0;
  for (let i = 0; i < sorted.length; i++) {
    while (sorted[j]! <= sorted[i]! - windowMs) j += 1;
    best = Math.max(best, i - j + 1);
  }
  return best;
}

/** Consumers on connections of their own, closed (and their connections) by `closeAll`. */
export class Consumers {
  private readonly started: Consumer[] = [];
  private readonly conns: EchoMQ[] = [];

  constructor(private readonly url: () => string) {}

  /** A consumer of queue `name` on a new connection. */
  async start<D = unknown, R = unknown>(
    name: string,
    handler: Handler<D, R>,
    opts?: ConsumeOptions,
  ): Promise<Consumer<D, R>> {
    const mq = await EchoMQ.connect({ url: this.url() });
    this.conns.push(mq);
    const c = mq.queue<D, R>(name).consume(handler, opts);
    this.started.push(c as Consumer);
    return c;
  }

  closeAll(): Promise<void> {
    return closeAll(this.started, this.conns);
  }
}

/** Empties both lists: closes the consumers without waiting on their handlers, then the rest. */
export async function closeAll(
  consumers: { close(opts: { timeoutMs: number }): Promise<unknown> }[],
  others: { close(): Promise<unknown> }[] = [],
): Promise<void> {
  await Promise.all(consumers.splice(0).map((c) => c.close({ timeoutMs: 0 })));
  await Promise.all(others.splice(0).map((m) => m.close()));
}

/** Resolves once consumers have emitted `completed` `count` times in all, with the ids in order. */
export function completions(consumers: Consumer[], count: number): Promise<string[]> {
  const ids: string[] = [];
  return new Promise((resolve) => {
    for (const c of consumers) {
      const on = (job: { id: string }) => {
        ids.push(job.id);
        if (ids.length === count) resolve(ids);
      };
      c.on('completed', on);
    }
  });
}

/**
 * A consumer whose only slot (concurrency 1, a 60 s beat that cannot hide a missed wake) is
 * held by a long job until release(); the ids of the other jobs it runs are in `seen`, in order.
 * The consumer joins `consumers`, for the file's afterEach to close.
 */
export async function occupiedConsumer(
  q: Queue,
  consumers: Consumer[],
): Promise<{ seen: string[]; release: () => void }> {
  const gate = deferred();
  const started = deferred();
  const seen: string[] = [];
  const c = q.consume(
    async (job) => {
      if ((job.data as { long?: boolean }).long) {
        started.resolve();
        await gate.promise;
      } else seen.push(job.id);
    },
    { concurrency: 1, beatMs: 60_000 },
  );
  consumers.push(c);
  await q.enqueue({ long: true });
  await within(started.promise, 5000, 'the long job');
  return { seen, release: () => gate.resolve() };
}
