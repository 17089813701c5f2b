// A blocking stream read on a connection of its own: XREAD BLOCK, bounded by a watchdog, and
// endable early. The consumer's wake stream and the event reader share it, so a client quirk is
// fixed in one place.
//
// - The watchdog does not trust the client to settle a read that was in flight on a dropped
//   connection (with autoResendUnfulfilledCommands off, ioredis never does; the connector now
//   settles those on the drop, and the watchdog still covers a drop the client never noticed,
//   such as a half-open socket): WATCHDOG_GRACE_MS
//   after the read should have ended, it drops the connection (which reconnects) and stops
//   waiting by itself; the caller reads again from the id it holds, so nothing is missed.
// - Redis ends timed blocking reads on its cron tick (about 100 ms late at the default hz 10).
//   A caller that must act at an instant asks for an alarm (`endIn`): a local timer ends the
//   read with CLIENT UNBLOCK by this connection's id, which the main connection sends.
import { Redis } from 'ioredis';
import type { Connector, RedisClient } from './connector.js';

/** How long past its block time a read may stay unsettled before the watchdog drops the connection. */
export const WATCHDOG_GRACE_MS = 2000;

/** A stream entry as XREAD returns it: its id and its flat field list. */
export type StreamEntry = [id: string, fields: string[]];

export class BlockingRead {
  private conn: RedisClient | undefined;
  /** The connection's client id (CLIENT ID), once known: what CLIENT UNBLOCK names. */
  private clientId: number | undefined;
  /** Ends the read in flight now (null reply), and the alarm of the read in flight. */
  private giveUp: (() => void) | undefined;
  private alarm: NodeJS.Timeout | undefined;
  private settled = true;
  /** Counts reads, so an UNBLOCK answered late never ends a later read. */
  private reads = 0;

  /**
   * `onId`: a reader that will end reads on time (endIn) passes it: the connection's id is then
   * learned on each (re)connect, and `onId` called once it is known.
   */
  constructor(
    private readonly connector: Connector,
    onId?: () => void,
  ) {
    const conn = connector.duplicate();
    this.conn = conn;
    conn.on('error', () => {}); // reconnects on its own; the watchdog bounds waits
    if (!onId) return;
    conn.on('ready', () => {
      if (!(conn instanceof Redis)) return; // a Cluster's reads cannot be unblocked by id
      conn.client('ID').then(
        (id) => {
          this.clientId = Number(id);
          onId();
        },
        () => {},
      );
    });
  }

  /** Whether a read can be ended on time (the connection's id is known). */
  get canEndOnTime(): boolean {
    return this.clientId !== undefined;
  }

  /** The id of the stream's newest entry ('0-0' when it is empty), read on this connection. */
  async newest(key: string): Promise<string> {
    const conn = this.conn;
    if (!conn) return '0-0';
    const last = (await conn.xrevrange(key, '+', '-', 'COUNT', 1)) as StreamEntry[];
    return last[0]?.[0] ?? '0-0';
  }

  /**
   * Entries of `key` after `after`, waiting up to `blockMs` for some (at most `count`, when
   * given). Null when the wait ended without entries: timed out, given up (`stop`, the
   * watchdog) or ended by an alarm. Throws what the read throws (a dropped connection).
   */
  async read(key: string, after: string, blockMs: number, count?: number): Promise<StreamEntry[] | null> {
    const conn = this.conn;
    if (!conn) return null;
    const gaveUp = new Promise<null>((resolve) => {
      this.giveUp = () => resolve(null);
    });
    const watchdog = setTimeout(() => {
      conn.disconnect(true);
      this.giveUp?.();
    }, blockMs + WATCHDOG_GRACE_MS);
    this.settled = false;
    this.reads += 1;
    try {
      const read =
        count === undefined
          ? conn.xread('BLOCK', blockMs, 'STREAMS', key, after)
          : conn.xread('COUNT', count, 'BLOCK', blockMs, 'STREAMS', key, after);
      read.catch(() => {}); // abandoned by the watchdog: its entries are read again from `after`
      const reply = (await Promise.race([read, gaveUp])) as [string, StreamEntry[]][] | null;
      const entries = reply?.[0]?.[1];
      return entries && entries.length > 0 ? entries : null;
    } finally {
      this.settled = true;
      this.giveUp = undefined;
      clearTimeout(watchdog);
      clearTimeout(this.alarm);
      this.alarm = undefined;
    }
  }

  /**
   * Ends the read in flight `ms` from now with CLIENT UNBLOCK (replacing an earlier alarm), so
   * it ends on time rather than on the server's next tick. No-op while the id is unknown.
   */
  endIn(ms: number): void {
    const id = this.clientId;
    if (id === undefined || this.settled) return;
    clearTimeout(this.alarm);
    const thisRead = this.reads;
    const current = () => !this.settled && this.reads === thisRead;
    // The UNBLOCK can overtake a read still on its way to the server (it answers 0: nothing
    // blocked yet); then the read would wait out a whole server tick. Try again until it lands.
    const unblock = (tries: number) => {
      if (!current()) return;
      this.connector.client.client('UNBLOCK', id).then(
        (n) => {
          if (n === 0 && tries > 0 && current()) this.alarm = setTimeout(() => unblock(tries - 1), 1);
        },
        () => {},
      );
    };
    this.alarm = setTimeout(() => unblock(20), Math.max(0, ms));
  }

  /** Stops waiting for the read in flight now (its reply, if any, is read again later). */
  stop(): void {
    this.giveUp?.();
  }

  /** Stops waiting and closes the connection (a blocked XREAD ends with it). */
  close(): void {
    this.stop();
    if (this.conn) this.connector.release(this.conn);
    this.conn = undefined;
  }
}
