// The event hub: one events-stream reader per queue, shared by every subscriber (the dashboard's
// SSE clients and page refreshers, the metrics counters), opened on the first subscription and
// closed when the last one leaves, so a hub nobody listens to holds no blocking connection.
// It is given a way to open a reader rather than a connection, so it knows nothing above it.
import type { QueueEvent } from '../core/types.js';

export type HubListener = (queue: string, event: QueueEvent) => void;

/** What the hub needs of an events reader (a QueueEvents). */
export interface HubReader {
  subscribe(listener: (event: QueueEvent) => void): unknown;
  /** Resolves once the reader has fixed its starting point. */
  readonly ready: Promise<unknown>;
  close(): Promise<void>;
}

/**
 * Opens a reader of `queue`'s events from now on, whose XREAD blocks `blockMs` at a time;
 * e.g. `(queue, blockMs) => mq.queue(queue).events({ blockMs })`.
 */
export type OpenReader = (queue: string, blockMs: number) => HubReader;

interface Feed {
  reader: HubReader;
  listeners: Set<HubListener>;
}

export class EventHub {
  private readonly feeds = new Map<string, Feed>();
  private closed = false;

  constructor(
    private readonly openReader: OpenReader,
    /** How long one XREAD blocks, in ms (the reader's close waits at most this long). */
    private readonly blockMs = 2000,
  ) {}

  /** Follows `queue`'s events from now on; returns the unsubscribe function. */
  subscribe(queue: string, listener: HubListener): () => void {
    if (this.closed) return () => {};
    let feed = this.feeds.get(queue);
    if (!feed) {
      const reader = this.openReader(queue, this.blockMs);
      const created: Feed = { reader, listeners: new Set() };
      reader.subscribe((e) => {
        for (const l of created.listeners) l(queue, e);
      });
      this.feeds.set(queue, created);
      feed = created;
    }
    feed.listeners.add(listener);
    const current = feed;
    return () => {
      current.listeners.delete(listener);
      if (current.listeners.size === 0 && this.feeds.get(queue) === current) {
        this.feeds.delete(queue);
        current.reader.close().catch(() => {}); // a reader that failed to close has nothing left to read
      }
    };
  }

  /** Resolves once the reader of `queue` has fixed its starting point (nothing after is missed). */
  async ready(queue: string): Promise<void> {
    await this.feeds.get(queue)?.reader.ready;
  }

  /** Queues with an open reader (for tests and diagnostics). */
  get open(): string[] {
    return [...this.feeds.keys()];
  }

  async close(): Promise<void> {
    this.closed = true;
    const feeds = [...this.feeds.values()];
    this.feeds.clear();
    await Promise.all(feeds.map((f) => f.reader.close()));
  }
}
