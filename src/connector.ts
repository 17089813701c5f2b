// The connector: the one seam between EchoMQ and Redis. Every script call passes through
// `run`, which uses EVALSHA and reloads a script transparently on NOSCRIPT (a restarted or
// new server), turns `EMQxxx` error replies into EchoMQErrors, and reports each call to an
// optional observer (metrics and tracing hook in here, callers add no timing of their own).
import { type Cluster, Redis, type RedisOptions } from 'ioredis';
import { EchoMQError, fromScriptError } from './errors.js';
import type { Script } from './scripts.js';

export type RedisClient = Redis | Cluster;

export interface ConnectOptions {
  /** `redis://[user:pass@]host:port[/db]` or `rediss://` for TLS; default `redis://127.0.0.1:6379`. */
  url?: string;
  /** An ioredis client (Redis or Cluster) you own; EchoMQ will not close it. */
  redis?: RedisClient;
  /** Extra ioredis options for connections EchoMQ opens from `url`. */
  redisOptions?: RedisOptions;
}

/** Called after every script call: verb, duration in ms, and the error when it failed. */
export type ScriptObserver = (name: string, ms: number, error?: unknown) => void;

export class Connector {
  private closed = false;
  private readonly extra = new Set<RedisClient>();
  observer: ScriptObserver | undefined;

  private constructor(
    readonly client: RedisClient,
    private readonly owned: boolean,
  ) {}

  static open(opts: ConnectOptions = {}): Connector {
    if (opts.redis) return new Connector(opts.redis, false);
    const url = opts.url ?? process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';
    const client = new Redis(url, { lazyConnect: false, ...opts.redisOptions });
    // ioredis reconnects by itself; without a listener every drop would print "Unhandled error".
    client.on('error', () => {});
    return new Connector(client, true);
  }

  get isClosed(): boolean {
    return this.closed;
  }

  assertOpen(): void {
    if (this.closed) {
      throw new EchoMQError('EMQCLOSED', 'this EchoMQ connection is closed; call EchoMQ.connect() again');
    }
  }

  /** Runs a protocol script: EVALSHA first, the body once more on NOSCRIPT. */
  async run(script: Script, keys: readonly string[], argv: readonly (string | number)[]): Promise<unknown> {
    this.assertOpen();
    const started = this.observer ? performance.now() : 0;
    try {
      let reply: unknown;
      try {
        reply = await this.client.evalsha(script.sha, keys.length, ...keys, ...argv);
      } catch (err) {
        if (!(err instanceof Error) || !err.message.startsWith('NOSCRIPT')) throw err;
        reply = await this.client.eval(script.body, keys.length, ...keys, ...argv);
      }
      this.observer?.(script.name, performance.now() - started);
      return reply;
    } catch (err) {
      const mapped = fromScriptError(err);
      this.observer?.(script.name, performance.now() - started, mapped);
      throw mapped;
    }
  }

  /**
   * A new connection to the same server(s), for blocking reads (XREAD BLOCK) that must not
   * hold up script calls. Closed with the connector.
   */
  duplicate(): RedisClient {
    this.assertOpen();
    const dup = this.client.duplicate() as RedisClient;
    this.extra.add(dup);
    return dup;
  }

  /** Closes a duplicate early (a consumer or event reader closing on its own). */
  release(dup: RedisClient): void {
    if (this.extra.delete(dup)) dup.disconnect();
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    for (const dup of this.extra) dup.disconnect();
    this.extra.clear();
    if (this.owned) {
      await this.client.quit().catch(() => this.client.disconnect());
    }
  }
}
