// How the beat waits between passes: asleep on a timer, or blocked on the queue's wake stream
// (XREAD BLOCK on a connection of its own) so that new work, a schedule change or a recurring
// definition change ends the wait at once. A wait can be ended early: at an earlier due instant
// a reply reports (CLIENT UNBLOCK by the blocking connection's id), on recheck(), or on close.

import type { EventEmitter } from 'node:events';
import type { ConsumerEvents } from '../core/types.js';
import { BlockingRead } from '../wire/blocking-read.js';
import type { QueueWire } from '../wire/queue-wire.js';

/** How late Redis may end a timed blocking read (its cron tick at the default hz 10), plus slack. */
const SERVER_TICK_MS = 150;

/** What the wake stream said while the beat waited. */
export interface Wake {
  /** A 'w s': the schedule's earliest run-at changed. */
  schedule: boolean;
  /** A 'w r': a recurring definition changed. */
  recurrence: boolean;
}

export class Parking {
  /** How the loop waits now: asleep on a timer (slots full or work waiting) or blocked on wake. */
  state: 'no' | 'sleep' | 'block' = 'no';
  /** Local performance.now() the current wait ends at by itself. */
  private until = Number.POSITIVE_INFINITY;
  /** The wake stream id to block after: the newest a read or a short claim has covered. */
  private wakeId = '0-0';
  /** The newest wake stream id a read returned: work announced up to it is known of. */
  private heard = '0-0';
  private timer: NodeJS.Timeout | undefined;
  private unpark: (() => void) | undefined;
  /** While blocked on wake: end the read in `ms` instead (an earlier due instant). */
  private rearmBlock: ((ms: number) => void) | undefined;
  /** The wake stream reads, on a connection of their own (shared with the event reader's kind). */
  private reader: BlockingRead | undefined;

  constructor(
    private readonly queue: QueueWire,
    private readonly events: EventEmitter<ConsumerEvents>,
    private readonly isClosing: () => boolean,
  ) {}

  /** Opens the blocking connection; its client id lets a timer end a read on time (see block). */
  open(): void {
    // A busy loop that parked before the id came sleeps the whole beat, deaf to the wake stream
    // (and so to due instants): once the id is known, park again, now able to block.
    this.reader = new BlockingRead(this.queue.connector, () => {
      if (this.state === 'sleep') this.wake();
    });
  }

  /**
   * A claim came back short with the wake stream's last id `wid`: true when that holds, so the
   * beat may wait for a wake after it. False when a read has returned a newer wake since: the
   * claim ran on the server before that wake's work was there (its reply was overtaken by the
   * read's, on the other connection), so the work may be waiting unclaimed and no further wake
   * will say so (wakes are written only when claimable work goes from none to some).
   */
  shortHolds(wid: string): boolean {
    if (streamIdBefore(wid, this.heard)) return false;
    if (streamIdBefore(this.wakeId, wid)) this.wakeId = wid;
    return true;
  }

  /** Ends any wait and closes the blocking connection (which ends a blocking XREAD at once). */
  close(): void {
    this.wake();
    this.reader?.close();
    this.reader = undefined;
  }

  /**
   * Waits `wait` ms (`untilDue`: to the next due instant). Waiting for work (`forWork`), it
   * blocks on the wake stream. Busy (every slot taken), it blocks too when it can end the read
   * on time (CLIENT UNBLOCK): a 'w s' then still reaches it, so it promotes at each due instant
   * and the occurrences it releases make their next ones (no slot skipped while all slots are
   * busy). A 'w 1' it cannot act on only costs one more read. Resolves with what the wake stream
   * said, if anything.
   */
  async park(wait: number, untilDue: number, forWork: boolean): Promise<Wake | undefined> {
    this.until = performance.now() + wait;
    let woke: Wake | undefined;
    if (forWork || this.reader?.canEndOnTime) {
      this.state = 'block';
      // A read that ends at the beat may come back a server tick (~100 ms) late: when a due
      // instant follows within that, end it on time too.
      woke = await this.block(Math.max(1, Math.ceil(wait)), untilDue <= wait + SERVER_TICK_MS);
    } else {
      this.state = 'sleep';
      await this.sleep(wait);
    }
    this.state = 'no';
    return woke;
  }

  /** The loop must act at local instant `at`: end the current wait then, if it would end later. */
  wakeBy(at: number): void {
    if (this.state === 'no' || at >= this.until) return;
    if (this.state === 'sleep') this.wake();
    else this.rearmBlock?.(at - performance.now());
  }

  /** Ends the current wait now (a blocking read as soon as it can be unblocked). */
  wakeNow(): void {
    if (this.state === 'sleep') this.wake();
    else if (this.state === 'block') this.rearmBlock?.(0);
  }

  sleep(ms: number): Promise<void> {
    return new Promise((resolve) => {
      this.unpark = resolve;
      this.timer = setTimeout(resolve, ms);
    });
  }

  /** Ends a sleep, or a blocked wait by giving up on its read. */
  wake(): void {
    if (this.timer) clearTimeout(this.timer);
    this.unpark?.();
  }

  /**
   * Reads the wake stream after wakeId for up to `ms`. Redis times out blocking reads on its
   * cron tick (about 100 ms at the default hz 10), so when a due job or a rate window sets the
   * deadline (`onTime`), the read is ended at the instant instead (BlockingRead.endIn): delayed
   * jobs start on time, not a tick late.
   */
  private async block(ms: number, onTime: boolean): Promise<Wake | undefined> {
    const reader = this.reader;
    if (!reader) return undefined;
    this.unpark = () => reader.stop(); // close() ends the wait at once
    // A claim reply (a job finishing meanwhile) may report an earlier due instant: end the read then.
    this.rearmBlock = (inMs) => reader.endIn(inMs);
    try {
      const read = reader.read(this.queue.keys.key('wake'), this.wakeId, ms);
      if (onTime) reader.endIn(ms);
      const entries = await read;
      if (!entries) return undefined;
      const last = entries[entries.length - 1]![0];
      if (streamIdBefore(this.heard, last)) this.heard = last;
      if (streamIdBefore(this.wakeId, last)) this.wakeId = last;
      const woke: Wake = { schedule: false, recurrence: false };
      for (const [, fields] of entries) {
        if (fields[1] === 's') woke.schedule = true;
        else if (fields[1] === 'r') woke.recurrence = true;
      }
      return woke;
    } catch (err) {
      if (!this.isClosing()) {
        this.events.emit('error', err);
        await this.sleep(Math.min(100, ms)); // the connection is coming back; don't spin
      }
      return undefined;
    } finally {
      this.rearmBlock = undefined;
    }
  }
}

/** True when stream id `a` ('ms-seq') comes before `b`. */
function streamIdBefore(a: string, b: string): boolean {
  const [am = '0', as = '0'] = a.split('-');
  const [bm = '0', bs = '0'] = b.split('-');
  return am.length !== bm.length ? am.length < bm.length : am !== bm ? am < bm : Number(as) < Number(bs);
}
