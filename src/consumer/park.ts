// How the beat waits between passes: asleep on a timer, or blocked on the queue's wake stream
// (XREAD BLOCK on a connection of its own) so that new work, a schedule change or a recurring
// definition change ends the wait at once. A wait can be ended early: at an earlier due instant
// a reply reports (CLIENT UNBLOCK by the blocking connection's id), on recheck(), or on close.

import type { EventEmitter } from 'node:events';
import { Redis } from 'ioredis';
import type { ConsumerEvents } from '../core/types.js';
import type { RedisClient } from '../wire/connector.js';
import type { QueueWire } from '../wire/queue-wire.js';

const WATCHDOG_GRACE_MS = 2000;
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
  private blocking: RedisClient | undefined;
  private blockingId: number | undefined;

  constructor(
    private readonly queue: QueueWire,
    private readonly events: EventEmitter<ConsumerEvents>,
    private readonly isClosing: () => boolean,
  ) {}

  /** Opens the blocking connection; its client id lets a timer end a read on time (see block). */
  open(): void {
    const blocking = this.queue.connector.duplicate();
    this.blocking = blocking;
    blocking.on('error', () => {}); // reconnects on its own; the watchdog bounds waits
    const learnId = () => {
      if (!(blocking instanceof Redis)) return;
      blocking.client('ID').then(
        (id) => {
          this.blockingId = Number(id);
          // A busy loop that parked before the id came sleeps the whole beat, deaf to the wake
          // stream (and so to due instants): park again, now able to block.
          if (this.state === 'sleep') this.wake();
        },
        () => {},
      );
    };
    blocking.on('ready', learnId);
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
    // Closed once: a second disconnect of an ioredis client leaves a 2 s timer holding the
    // process open.
    if (this.blocking) this.queue.connector.release(this.blocking);
    this.blocking = undefined;
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
    if (forWork || this.blockingId !== undefined) {
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
   * XREAD BLOCK on the wake stream, bounded by a watchdog that drops a dead connection.
   * Redis times out blocking reads on its cron tick (about 100 ms at the default hz 10), so
   * when a due job or a rate window sets the deadline (`onTime`), a local timer ends the read
   * with CLIENT UNBLOCK at the instant instead: delayed jobs start on time, not a tick late.
   */
  private async block(ms: number, onTime: boolean): Promise<Wake | undefined> {
    const conn = this.blocking;
    if (!conn) return undefined;
    // The watchdog does not trust the client to settle a read on a dropped connection (with
    // autoResendUnfulfilledCommands off, ioredis never does): it stops waiting by itself.
    let giveUp!: () => void;
    const gaveUp = new Promise<null>((resolve) => {
      giveUp = () => resolve(null);
    });
    this.unpark = giveUp; // close() ends the wait at once
    const watchdog = setTimeout(() => {
      conn.disconnect(true);
      giveUp();
    }, ms + WATCHDOG_GRACE_MS);
    const id = this.blockingId;
    // The UNBLOCK can overtake a read still on its way to the server (it answers 0: nothing
    // blocked yet); then the read would wait out a whole server tick. Try again until it lands.
    let settled = false;
    const unblock = (tries: number) => {
      if (settled || id === undefined) return;
      this.queue.connector.client.client('UNBLOCK', id).then(
        (n) => {
          if (n === 0 && tries > 0) alarm = setTimeout(() => unblock(tries - 1), 1);
        },
        () => {},
      );
    };
    let alarm = onTime && id !== undefined ? setTimeout(() => unblock(20), ms) : undefined;
    // A claim reply (a job finishing meanwhile) may report an earlier due instant: end the read then.
    this.rearmBlock = (inMs) => {
      if (id === undefined || settled) return;
      clearTimeout(alarm);
      alarm = setTimeout(() => unblock(20), Math.max(0, inMs));
    };
    try {
      const read = conn.xread('BLOCK', ms, 'STREAMS', this.queue.keys.key('wake'), this.wakeId);
      read.catch(() => {}); // a read abandoned by the watchdog may still fail later
      const reply = (await Promise.race([read, gaveUp])) as [string, [string, string[]][]][] | null;
      const entries = reply?.[0]?.[1];
      if (!entries || entries.length === 0) return undefined;
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
      settled = true;
      this.rearmBlock = undefined;
      clearTimeout(watchdog);
      clearTimeout(alarm);
    }
  }
}

/** True when stream id `a` ('ms-seq') comes before `b`. */
function streamIdBefore(a: string, b: string): boolean {
  const [am = '0', as = '0'] = a.split('-');
  const [bm = '0', bs = '0'] = b.split('-');
  return am.length !== bm.length ? am.length < bm.length : am !== bm ? am < bm : Number(as) < Number(bs);
}
