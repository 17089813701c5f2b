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
// - On a Redis Cluster the read's connection is a duplicate Cluster, one socket per node, and a
//   client id means something only on the node that gave it. So the id is learned from the node
//   connection that carries the read (the primary of the stream key's slot), again whenever that
//   node or its socket changes (a failover, a reconnect), and the UNBLOCK goes over the main
//   client's connection to that same node. Sent to any other node, it would end nothing (the
//   read then waits out the server's tick, about 100 ms) or, worse, another client's read there.
import { Cluster, Redis } from 'ioredis';
import { nodeAt, nodeKeyOf, nodeServing } from './cluster-node.js';
import type { Connector, RedisClient } from './connector.js';

/** How long past its block time a read may stay unsettled before the watchdog drops the connection. */
export const WATCHDOG_GRACE_MS = 2000;

/** A stream entry as XREAD returns it: its id and its flat field list. */
export type StreamEntry = [id: string, fields: string[]];

export class BlockingRead {
  private conn: RedisClient | undefined;
  /** The connection's client id (CLIENT ID), once known: what CLIENT UNBLOCK names. */
  private clientId: number | undefined;
  /** On a Cluster: the node connection `clientId` belongs to (`host:port`), where UNBLOCK goes. */
  private idNode: Redis | undefined;
  /** Node connections whose reconnects this reader already listens for. */
  private readonly watched = new WeakSet<Redis>();
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
    private readonly onId?: () => void,
  ) {
    const conn = connector.duplicate();
    this.conn = conn;
    conn.on('error', () => {}); // reconnects on its own; the watchdog bounds waits
    if (!onId) return;
    conn.on('ready', () => {
      if (!(conn instanceof Redis)) return; // a Cluster's id is per node: learned per read (nodeId)
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
    let gaveUpNow = false;
    const gaveUp = new Promise<null>((resolve) => {
      this.giveUp = () => {
        gaveUpNow = true;
        resolve(null);
      };
    });
    const watchdog = setTimeout(() => {
      conn.disconnect(true);
      this.giveUp?.();
    }, blockMs + WATCHDOG_GRACE_MS);
    this.settled = false;
    this.reads += 1;
    try {
      // An alarm set meanwhile (endIn) reads the id when it fires, so it may be learned here.
      if (this.onId && conn instanceof Cluster) await this.nodeId(conn, key);
      if (gaveUpNow) return null; // stopped while learning it: send no read to wait for
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
   * On a Cluster, learns the client id of the node connection that will carry a read of `key`:
   * one round trip when that node changed or its socket reconnected, none otherwise. A node not
   * known yet (slots not loaded) leaves the id unknown: that read ends on the server's tick.
   */
  private async nodeId(conn: Cluster, key: string): Promise<void> {
    const node = nodeServing(conn, key);
    if (node === this.idNode && this.clientId !== undefined) return;
    this.idNode = node;
    this.clientId = undefined;
    if (!node) return;
    if (!this.watched.has(node)) {
      this.watched.add(node);
      // A reconnected socket has a new id: learn it before the next read.
      node.on('close', () => {
        if (this.idNode === node) this.clientId = undefined;
      });
    }
    try {
      const id = Number(await node.client('ID'));
      if (this.idNode === node) this.clientId = id;
    } catch {
      return; // the read itself will meet (and report) what is wrong with the node
    }
    this.onId?.();
  }

  /** Where CLIENT UNBLOCK goes: the main client, or on a Cluster its connection to the read's node. */
  private unblocker(): Redis | undefined {
    const main = this.connector.client;
    if (!(main instanceof Cluster)) return main;
    return this.idNode ? nodeAt(main, nodeKeyOf(this.idNode)) : undefined;
  }

  /**
   * Ends the read in flight `ms` from now with CLIENT UNBLOCK (replacing an earlier alarm), so
   * it ends on time rather than on the server's next tick. No-op when the id is unknown then.
   */
  endIn(ms: number): void {
    if (this.settled) return;
    clearTimeout(this.alarm);
    const thisRead = this.reads;
    const current = () => !this.settled && this.reads === thisRead;
    // The UNBLOCK can overtake a read still on its way to the server (it answers 0: nothing
    // blocked yet); then the read would wait out a whole server tick. Try again until it lands.
    const unblock = (tries: number) => {
      if (!current()) return;
      const id = this.clientId;
      const via = this.unblocker();
      // The id or node not known (yet): this read ends on the server's tick.
      if (id === undefined || !via) return;
      via.client('UNBLOCK', id).then(
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
