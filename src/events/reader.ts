// The event reader: follows a queue's `emq:{<queue>}:events` stream with XREAD BLOCK on a
// connection of its own and hands every entry to subscribers and async iterators. It always
// knows the id of the last entry it delivered, so after a dropped connection it resumes from
// there: no entry is skipped or delivered twice while the stream still holds it.

import { EventEmitter } from 'node:events';
import { wholeNumber } from '../core/check.js';
import { EchoMQError, optionsObject } from '../core/errors.js';
import type { EventName, QueueEvent } from '../core/types.js';
import { BlockingRead } from '../wire/blocking-read.js';
import type { QueueWire } from '../wire/queue-wire.js';
import { row } from '../wire/reads.js';

/** What the reader needs of a queue (a QueueWire, or a Queue, which has the same three). */
export type EventSource = Pick<QueueWire, 'name' | 'keys' | 'connector'>;

export interface EventsOptions {
  /** '$' (default): only events after the reader starts; '0': replay the stream; or a stream id to resume after. */
  from?: string;
  /** How long one XREAD blocks, in ms. Default 5000. */
  blockMs?: number;
  /** Entries read per call. Default 500. */
  count?: number;
}

type Listener = (e: QueueEvent) => void;

/** The longest timer Node keeps (2^31 - 1 ms), the bound of blockMs (and, as before, of count). */
const MAX_TIMER_MS = 2 ** 31 - 1;
const BACKLOG_MAX = 10_000;

export class QueueEvents extends EventEmitter {
  private lastId: string;
  private readonly blockMs: number;
  private readonly count: number;
  private reader: BlockingRead | undefined;
  private closing = false;
  private readonly loopDone: Promise<void>;
  private readonly iterators = new Set<{ push: (e: QueueEvent | null) => void }>();
  /**
   * Events delivered before the first iterator exists, so `for await` started after an
   * `await events.ready` (and an enqueue) still sees everything after `from`. Bounded.
   */
  private backlog: QueueEvent[] | undefined = [];
  /** Resolves once the reader has fixed its starting id (so nothing after it is missed). */
  readonly ready: Promise<void>;
  private markReady!: () => void;

  constructor(
    readonly queue: EventSource,
    options?: EventsOptions,
  ) {
    super();
    const opts = optionsObject(options, 'events options');
    const from = opts.from ?? '$';
    if (typeof from !== 'string' || !/^(\$|\d+(-\d+)?)$/.test(from)) {
      throw new EchoMQError('EMQINPUT', `from must be '$', '0' or a stream id such as '1700000000000-0'`);
    }
    this.lastId = from;
    this.blockMs = wholeNumber(opts.blockMs ?? 5000, 'blockMs', 1, MAX_TIMER_MS);
    this.count = wholeNumber(opts.count ?? 500, 'count', 1, MAX_TIMER_MS);
    this.ready = new Promise((resolve) => {
      this.markReady = resolve;
    });
    this.on('error', () => {}); // reported, never fatal: the reader reconnects and resumes
    this.reader = new BlockingRead(queue.connector);
    this.loopDone = this.loop();
  }

  /** Calls `handler` for every event (or only `name`); returns a function that unsubscribes. */
  subscribe(handler: Listener, name?: EventName): () => void {
    const key = name ?? 'event';
    this.on(key, handler);
    return () => this.off(key, handler);
  }

  private async loop(): Promise<void> {
    const key = this.queue.keys.key('events');
    while (!this.closing) {
      const reader = this.reader;
      if (!reader) break;
      try {
        // Pin '$' to a concrete id first, so a reconnect resumes from it instead of skipping.
        if (this.lastId === '$') this.lastId = await reader.newest(key);
        this.markReady();
        const entries = await reader.read(key, this.lastId, this.blockMs, this.count);
        for (const [streamId, flat] of entries ?? []) {
          this.lastId = streamId;
          for (const e of eventsOf(streamId, flat)) this.deliver(e);
        }
      } catch (err) {
        if (this.closing) break;
        this.emit('error', err);
        await new Promise((r) => setTimeout(r, 100)); // ioredis reconnects; resume from lastId
      }
    }
  }

  private deliver(e: QueueEvent): void {
    this.emit(e.event, e);
    this.emit('event', e);
    for (const it of this.iterators) it.push(e);
    if (this.backlog) {
      this.backlog.push(e);
      if (this.backlog.length > BACKLOG_MAX) this.backlog.shift();
    }
  }

  /** Every event, in stream order, until close(). */
  [Symbol.asyncIterator](): AsyncIterator<QueueEvent> {
    const buffer: (QueueEvent | null)[] = this.backlog ?? [];
    this.backlog = undefined;
    let waiting: ((r: IteratorResult<QueueEvent>) => void) | undefined;
    const it = {
      push: (e: QueueEvent | null) => {
        if (waiting) {
          const w = waiting;
          waiting = undefined;
          w(e ? { value: e, done: false } : { value: undefined, done: true });
        } else buffer.push(e);
      },
    };
    this.iterators.add(it);
    if (this.closing) it.push(null);
    return {
      next: () => {
        const e = buffer.shift();
        if (e !== undefined)
          return Promise.resolve(e ? { value: e, done: false } : { value: undefined, done: true });
        return new Promise((resolve) => {
          waiting = resolve;
        });
      },
      return: () => {
        this.iterators.delete(it);
        return Promise.resolve({ value: undefined, done: true });
      },
    };
  }

  /** The id of the last entry delivered (resume point). */
  get position(): string {
    return this.lastId;
  }

  /** Stops reading, ends the iterators and closes the reader's connection. */
  async close(): Promise<void> {
    if (this.closing) return this.loopDone;
    this.closing = true;
    this.markReady();
    this.reader?.close();
    this.reader = undefined;
    for (const it of this.iterators) it.push(null);
    this.iterators.clear();
    await this.loopDone;
    this.removeAllListeners();
  }
}

/**
 * The events one stream entry stands for. Most entries are one event; a call that moved many
 * jobs at once (claim's `active`, complete's `completed`) writes one entry with `ids` (and a
 * plural per-job field such as `attempts`), which is expanded here into one event a job, all
 * with the entry's stream id.
 */
export function eventsOf(streamId: string, flat: string[]): QueueEvent[] {
  const fields: Record<string, string> = {};
  for (let i = 0; i + 1 < flat.length; i += 2) fields[flat[i]!] = flat[i + 1]!;
  const { event, id, ids, ...rest } = fields;
  if (ids === undefined) return [{ event: event as EventName, id: id ?? '', streamId, fields: rest }];
  // A plural field whose singular is on the entry too (attempts / attempt) lists a value a job.
  const plural = Object.keys(rest).filter((name) => name.endsWith('s') && name.slice(0, -1) in rest);
  const shared = Object.fromEntries(Object.entries(rest).filter(([name]) => !plural.includes(name)));
  const lists = plural.map((name) => [name.slice(0, -1), rest[name]!.split(' ')] as const);
  return ids.split(' ').map((jobId, i) => {
    const own: Record<string, string> = { ...shared };
    for (const [name, values] of lists) own[name] = values[i] ?? '';
    return { event: event as EventName, id: jobId, streamId, fields: own };
  });
}

/**
 * Resolves with the job's result once it completes; rejects with EMQJOBFAILED when it ends
 * dead, EMQCANCELLED when cancelled, EMQTIMEOUT after `timeoutMs`, EMQNOJOB when unknown.
 * Built on the events: it reads the row once, then follows events from before that read.
 */
export async function waitFor<R>(queue: QueueWire, id: string, timeoutMs = 30_000): Promise<R> {
  const events = new QueueEvents(queue, { blockMs: Math.min(5000, timeoutMs) });
  let timer: NodeJS.Timeout | undefined;
  try {
    await events.ready; // events from here on are seen, so the row read below cannot miss the end
    return await new Promise<R>((resolve, reject) => {
      timer = setTimeout(
        () => reject(new EchoMQError('EMQTIMEOUT', `job ${id} did not finish within ${timeoutMs} ms`)),
        timeoutMs,
      );
      const settleFromRow = async () => {
        const job = await row<unknown, R>(queue, id);
        if (!job) reject(new EchoMQError('EMQNOJOB', `no job ${id} in queue ${queue.name}`));
        else if (job.state === 'completed') resolve(job.result as R);
        else if (job.state === 'dead') {
          reject(
            new EchoMQError('EMQJOBFAILED', `job ${id} failed: ${job.error?.message ?? 'unknown error'}`),
          );
        } else if (job.state === 'cancelled')
          reject(new EchoMQError('EMQCANCELLED', `job ${id} was cancelled`));
      };
      events.subscribe((e) => {
        if (e.id === id && (e.event === 'completed' || e.event === 'failed' || e.event === 'removed')) {
          settleFromRow().catch(reject);
        }
      });
      settleFromRow().catch(reject);
    });
  } finally {
    clearTimeout(timer);
    await events.close();
  }
}
