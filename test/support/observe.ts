// Observing a queue from a test without sleeping: bounded waits and polls, the events stream
// and job rows read raw, and a fixture of consumers on their own connections (as separate
// processes would have) that afterEach closes.
import type { Redis } from 'ioredis';
import type { ConsumeOptions, Consumer, Handler } from '../../src/consumer.js';
import { EchoMQ } from '../../src/echomq.js';
import type { Queue } from '../../src/jobs.js';

export interface Deferred<T> {
  promise: Promise<T>;
  resolve: (value: T) => void;
}

export function deferred<T = void>(): Deferred<T> {
  let resolve!: (value: T) => void;
  const promise = new Promise<T>((r) => {
    resolve = r;
  });
  return { promise, resolve };
}

export function pause(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}

/** Rejects when `promise` has not settled within `ms`. */
export async function within<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([
      promise,
      new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new Error(`timed out after ${ms} ms waiting for ${what}`)), ms);
      }),
    ]);
  } finally {
    clearTimeout(timer);
  }
}

/** Polls `read` every 5 ms until `done` holds, for at most `ms`. */
export async function poll<T>(
  read: () => Promise<T>,
  done: (v: T) => boolean,
  what: string,
  ms = 5000,
): Promise<T> {
  const end = Date.now() + ms;
  for (;;) {
    const v = await read();
    if (done(v)) return v;
    if (Date.now() > end) throw new Error(`timed out after ${ms} ms waiting for ${what}`);
    await pause(5);
  }
}

export type Entry = { streamId: string } & Record<string, string>;

/** Every entry of the queue's events stream, oldest first (only `event` ones when given). */
export async function streamEvents(raw: Redis, queue: Queue, event?: string): Promise<Entry[]> {
  const entries = await raw.xrange(queue.keys.key('events'), '-', '+');
  const out: Entry[] = [];
  for (const [streamId, fields] of entries) {
    const entry = { streamId } as Entry;
    for (let i = 0; i < fields.length; i += 2) entry[fields[i]!] = fields[i + 1]!;
    if (event === undefined || entry.event === event) out.push(entry);
  }
  return out;
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

  async closeAll(): Promise<void> {
    await Promise.all(this.started.splice(0).map((c) => c.close({ timeoutMs: 0 })));
    await Promise.all(this.conns.splice(0).map((m) => m.close()));
  }
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
