// Replicated acknowledgement (docs/reference/reliability.md): a write that resolves only once WAIT
// says enough replicas have it. WAIT counts the replicas that acknowledged every write *of the
// connection it is sent on*, and holds that connection until then, so the writes that ask for it go
// over a connection of their own, pipelined with one WAIT behind each tick's batch: many
// acknowledgements cost one WAIT, and the connection every other call uses is never held.
//
// On a Redis Cluster the connection of their own is a duplicate Cluster, and a write's WAIT must
// reach the primary that took it: WAIT counts only the writes of the socket it is sent on, and
// only that primary's replicas. So a tick's batch is split by the primary serving each write's
// queue slot, and each part goes as one pipeline, its WAIT last (a pipeline of one node goes over
// that node's socket, WAIT included). The contract is the one primary's, per shard: a write
// resolves once its own shard's replicas confirm it, else fails with EMQDURABILITY.
import { Cluster, type Redis } from 'ioredis';
import { wholeNumber } from '../core/check.js';
import { EchoMQError, fromScriptError } from '../core/errors.js';
import type { Durability } from '../core/types.js';
import type { ScriptTransport, Send } from './functions.js';
import type { Script } from './scripts.js';
import { keySlot } from './slot.js';

export type { Durability };

/** A durability checked, with its defaults. */
export type Replication = Required<Durability>;

/** A `durability` option checked: undefined or false for none. */
export function durabilityOf(value: unknown, where: string): Replication | undefined {
  if (value === undefined || value === false) return undefined;
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw new EchoMQError('EMQINPUT', `${where} durability must be false or { replicas, timeoutMs? }`);
  }
  const o = value as Record<string, unknown>;
  for (const key of Object.keys(o)) {
    if (key !== 'replicas' && key !== 'timeoutMs') {
      throw new EchoMQError(
        'EMQINPUT',
        `unknown ${where} durability option "${key}"; known: replicas, timeoutMs`,
      );
    }
  }
  return {
    replicas: wholeNumber(o.replicas, `${where} durability.replicas`, 1, 1000),
    timeoutMs: wholeNumber(o.timeoutMs ?? 1000, `${where} durability.timeoutMs`, 1, 2 ** 31 - 1),
  };
}

interface Write {
  script: Script;
  keys: readonly string[];
  argv: readonly (string | number)[];
  durability: Replication;
  resolve: (reply: unknown) => void;
  reject: (err: unknown) => void;
  /** Times a Cluster sent this write elsewhere (MOVED, ASK) or refused it for a failover. */
  redirects?: number;
}

/** How often a write is sent again after a Cluster redirected or refused it (about 1.5 s in all). */
const MAX_REDIRECTS = 5;

/** The replicated writes of one connector, over their own connection. */
export class ReplicatedWrites {
  private pending: Write[] = [];

  constructor(
    private readonly open: () => Redis | Cluster,
    /** The connector's own: a server that refused FCALL is refused here too, and back. */
    private readonly transport: ScriptTransport,
  ) {}

  private client: Redis | Cluster | undefined;

  run(script: Script, keys: readonly string[], argv: readonly (string | number)[], durability: Replication) {
    return new Promise<unknown>((resolve, reject) => {
      if (this.pending.push({ script, keys, argv, durability, resolve, reject }) === 1) {
        process.nextTick(() => void this.flush());
      }
    });
  }

  /** This tick's writes, one part per primary (one part on a single Redis). */
  private async flush(): Promise<void> {
    const batch = this.pending;
    this.pending = [];
    this.client ??= this.open();
    const client = this.client;
    if (!(client instanceof Cluster)) return this.flushPart(batch);
    const parts = new Map<string, Write[]>();
    for (const w of batch) {
      // The primary of the write's slot, as the client knows it now; a slot it does not know yet
      // is a part of its own (a pipeline of one slot reaches one node, however it is routed).
      const slot = keySlot(String(w.keys[0]));
      const node = client.slots[slot]?.[0] ?? `slot ${slot}`;
      const part = parts.get(node);
      if (part) part.push(w);
      else parts.set(node, [w]);
    }
    await Promise.all([...parts.values()].map((part) => this.flushPart(part)));
  }

  /**
   * Writes bound for one primary, pipelined, then one WAIT for the most replicas any of them asks.
   * Each write goes as the connector's other calls do (ScriptTransport: FCALL, else EVALSHA); the
   * ones a server refused for a missing library or script are sent again, the next way, in a
   * pipeline of their own with its WAIT, the one that counts: it covers every write before it.
   */
  private async flushPart(batch: Write[]): Promise<void> {
    const replicas = Math.max(...batch.map((w) => w.durability.replicas));
    const timeoutMs = Math.max(...batch.map((w) => w.durability.timeoutMs));
    const replies: [Error | null, unknown][] = [];
    let acked: number;
    try {
      let round = batch.map((w, i) => ({ i, send: this.transport.first(w.script) }));
      let waited: [Error | null, unknown] | undefined;
      while (round.length > 0) {
        const got = await this.send(
          round.map(({ i, send }) => [batch[i]!, send]),
          replicas,
          timeoutMs,
        );
        waited = got[round.length];
        // One await for all (a missing library is loaded once for the batch).
        const next = await Promise.all(
          round.map(async ({ i, send }, k) => {
            replies[i] = got[k]!;
            const err = got[k]![0];
            return { i, send: err ? await this.transport.after(batch[i]!.script, send, err) : undefined };
          }),
        );
        round = next.filter((r): r is { i: number; send: Send } => r.send !== undefined);
      }
      const [waitErr, count] = waited ?? [new Error('no WAIT reply'), 0];
      if (waitErr) throw waitErr;
      acked = Number(count);
    } catch (err) {
      for (const w of batch) w.reject(fromScriptError(err));
      return;
    }
    for (const [i, w] of batch.entries()) {
      const [err, reply] = replies[i]!;
      if (err && this.redirected(w, err)) continue;
      if (err) w.reject(fromScriptError(err));
      else if (acked < w.durability.replicas) w.reject(notReplicated(w, acked));
      else w.resolve(reply);
    }
  }

  /**
   * On a Cluster, a write refused because its slot is elsewhere or not served yet (MOVED, ASK, a
   * failover's CLUSTERDOWN or TRYAGAIN) did not run: it is sent again, to the primary the
   * refreshed slot table names, a few times with a pause that grows. A pipeline whose WAIT
   * answered is not one ioredis redirects by itself. True when the write was taken back.
   */
  private redirected(w: Write, err: Error): boolean {
    const client = this.client;
    if (!(client instanceof Cluster) || !/^(MOVED|ASK|CLUSTERDOWN|TRYAGAIN) /.test(err.message)) return false;
    w.redirects = (w.redirects ?? 0) + 1;
    if (w.redirects > MAX_REDIRECTS) return false;
    client.refreshSlotsCache(() => {
      setTimeout(() => {
        if (this.pending.push(w) === 1) process.nextTick(() => void this.flush());
      }, 50 * w.redirects!);
    });
    return true;
  }

  private async send(
    writes: [Write, Send][],
    replicas: number,
    timeoutMs: number,
  ): Promise<[Error | null, unknown][]> {
    const pipeline = this.client!.pipeline();
    for (const [w, send] of writes)
      pipeline.call(send.command, send.target, w.keys.length, ...w.keys, ...w.argv);
    pipeline.call('wait', replicas, timeoutMs);
    return ((await pipeline.exec()) ?? []) as [Error | null, unknown][];
  }

  close(): void {
    this.client?.disconnect();
    this.client = undefined;
  }
}

function notReplicated(w: Write, acked: number): EchoMQError {
  return new EchoMQError(
    'EMQDURABILITY',
    `${w.script.name} ran on the primary, but ${acked} of the ${w.durability.replicas} replica(s) asked for ` +
      `confirmed it within ${w.durability.timeoutMs} ms: a failover now could lose it. Retrying the call is ` +
      'safe (the same job id is a duplicate, the same lease token a resent acknowledgement)',
  );
}
