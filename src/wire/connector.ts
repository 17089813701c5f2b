// The connector: the one seam between EchoMQ and Redis. Every script call passes through
// `run`, which uses FCALL or EVALSHA and reloads a script transparently on NOSCRIPT (a restarted or
// new server), turns `EMQxxx` error replies into EchoMQErrors, and reports each call to the
// observers (metrics and tests hook in here with observe(); callers add no timing of their own).
import { type Cluster, Redis, type RedisOptions } from 'ioredis';
import { EchoMQError, fromScriptError } from '../core/errors.js';
import { type Durability, durabilityOf, ReplicatedWrites, type Replication } from './durability.js';
import { type ScriptsMode, ScriptTransport, type Send, scriptsModeOf } from './functions.js';
import { PROTOCOL_VERSION, PROTOCOL_VERSIONS } from './keyspace.js';
import { isMemoryUrl, type MemoryEngine, openMemory } from './memory/index.js';
import { isRequiredCommand, type ModuleMode } from './native-module.js';
import type { Script } from './scripts.js';
import { isAuthError, isConnectionError, shownUrl, unreachable } from './unreachable.js';

export type RedisClient = Redis | Cluster;

export interface ConnectOptions {
  /**
   * `redis://[user:pass@]host:port[/db]` or `rediss://` for TLS; default `redis://127.0.0.1:6379`.
   * `memory://` is an in-process engine of this connection's own, and `memory://<name>` one
   * shared by every connection in the process that names it: for tests, demos and
   * single-process development, not production (see src/wire/memory/).
   */
  url?: string | undefined;
  /** An ioredis client (Redis or Cluster) you own; EchoMQ will not close it. */
  redis?: RedisClient | undefined;
  /** Extra ioredis options for connections EchoMQ opens from `url`. */
  redisOptions?: RedisOptions | undefined;
  /**
   * The native module (module/, docs/reference/native-module.md): 'auto' (default) sends the sweeps
   * and complete's plain case as its commands where the server offers them, 'off' always as
   * scripts, 'require' refuses to connect without its sweeps (a module of an earlier release,
   * without EMQ.COMPLETE, is enough: complete then goes by the script).
   */
  module?: ModuleMode | undefined;
  /**
   * Replicated acknowledgement (docs/reference/reliability.md): enqueue and complete resolve only
   * once WAIT says `replicas` replicas have the write (within `timeoutMs`, default 1000), else fail
   * with EMQDURABILITY. Off by default; per call too (enqueue options, consume options).
   */
  durability?: Durability | false | undefined;
  /**
   * How long connect() waits for the server's first answer, in ms; default 5000. A refused
   * connection, an unknown host or a refused password fails at once, naming the URL and cause.
   */
  connectTimeoutMs?: number | undefined;
  /**
   * The protocol version a queue without one is stamped with when this connection first uses it
   * (docs/reference/upgrading.md): 2 (default; a job without `attempts` takes 3 stored as
   * nothing: a smaller row), which the previous release also speaks, or 1, for a fleet that still
   * holds a release speaking 1 only. A queue already stamped keeps its version until
   * `q.migrate()` steps it up.
   */
  protocolVersion?: 1 | 2 | undefined;
  /**
   * How the protocol's scripts are sent: 'functions' (default) as one Redis Functions library by
   * FCALL, where the server allows it (Redis 7.0 or later, an ACL user with FUNCTION and FCALL;
   * otherwise EVALSHA, with no error), or 'eval' by EVALSHA always. Same scripts, same replies.
   */
  scripts?: ScriptsMode | undefined;
}

/** What runs on a connection and must be closed (handing its work back) before it. */
export interface Dependent {
  /** `timeoutMs`: how long running work may take before it is handed back. */
  close(opts?: { timeoutMs?: number }): Promise<void>;
}

/**
 * With `autoResendUnfulfilledCommands: false`, ioredis neither resends nor settles a command
 * that was in flight when its connection dropped: it forgets it on reconnect, and whoever
 * awaits it (a consumer's beat, close()) waits forever. On the drop, this settles those
 * commands with a connection error (EMQNOSERVER once explained), so the caller goes on as after
 * any failed call. Their outcome is unknown, which the protocol allows for everywhere: a repeated
 * acknowledgement is fenced by its token, a claim whose reply was lost is recovered when its lease
 * runs out. Commands not yet sent (ioredis's offline queue) are left to be sent on reconnect.
 */
function settleDroppedCommands(client: RedisClient): void {
  if (!(client instanceof Redis) || client.options.autoResendUnfulfilledCommands !== false) return;
  client.on('close', () => {
    const lost = new Error(
      'Connection is closed with this command in flight; with autoResendUnfulfilledCommands off it is not resent, so its outcome is unknown',
    );
    for (let item = client.commandQueue.shift(); item; item = client.commandQueue.shift())
      item.command.reject(lost);
  });
}

/** Called after every script call: verb, duration in ms, and the error when it failed. */
export type ScriptObserver = (name: string, ms: number, error?: unknown) => void;

export class Connector {
  private closed = false;
  private closing: Promise<void> | undefined;
  private readonly extra = new Set<RedisClient>();
  private readonly dependents = new Set<Dependent>();
  /** The connection's last error since it was last ready (owned connections): the cause to name. */
  private lastError: unknown;
  private readonly observers = new Set<ScriptObserver>();
  /** Script name -> module command, for the scripts the server runs natively (set at connect). */
  readonly native = new Map<string, string>();
  /**
   * `<script> <prefix>` -> until when (performance.now()) that queue's calls of that script go by
   * the script: the module refused one there as outside its case (EMQNATIVE: a queue with lanes,
   * a cap, a flow parent...). One entry per such queue, dropped by that queue's first call after
   * it ran out; no timer.
   */
  private readonly scriptOnly = new Map<string, number>();
  /** How long a queue goes by the script after a refusal, in ms (NATIVE_REFUSED_MS; tests shorten it). */
  nativeRefusedMs = NATIVE_REFUSED_MS;
  moduleMode: ModuleMode = 'off';
  /** The version hello stamps into a queue that has none (connect's `protocolVersion`). */
  newQueueVersion = Number(PROTOCOL_VERSION);
  /** The connection's default for enqueue and complete (connect's `durability`). */
  durability: Replication | undefined;
  private replicated: ReplicatedWrites | undefined;
  /** How scripts are sent: FCALL (connect's `scripts: 'functions'`) or EVALSHA, with their fallbacks. */
  private transport!: ScriptTransport;

  private constructor(
    readonly client: RedisClient,
    private readonly owned: boolean,
    /** Where the server is, for messages: the URL without its password. */
    readonly where: string,
    /** The memory engine behind a `memory://` URL; undefined on Redis. */
    readonly memory?: MemoryEngine,
  ) {
    settleDroppedCommands(client);
    if (!owned) return;
    // ioredis reconnects by itself; without a listener every drop would print "Unhandled error".
    client.on('error', (err) => {
      this.lastError = err;
    });
    client.on('ready', () => {
      this.lastError = undefined;
    });
  }

  static open(opts: ConnectOptions = {}): Connector {
    const durability = durabilityOf(opts.durability, 'connect');
    const scripts = scriptsModeOf(opts.scripts);
    const connector = Connector.client(opts);
    // The memory engine has no FUNCTION: EVALSHA there.
    connector.transport = new ScriptTransport(connector.client, connector.memory ? 'eval' : scripts);
    if (durability) connector.requireReplicas();
    connector.durability = durability;
    if (opts.protocolVersion !== undefined) {
      if (!PROTOCOL_VERSIONS.includes(opts.protocolVersion as number)) {
        throw new EchoMQError(
          'EMQINPUT',
          `protocolVersion must be one of ${PROTOCOL_VERSIONS.join(', ')} (the versions this runtime speaks), got ${String(opts.protocolVersion)}`,
        );
      }
      connector.newQueueVersion = opts.protocolVersion;
    }
    return connector;
  }

  private static client(opts: ConnectOptions): Connector {
    if (opts.redis && !isMemoryUrl(opts.url)) return new Connector(opts.redis, false, whereOf(opts.redis));
    const url = opts.url ?? process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';
    if (isMemoryUrl(url)) {
      const { client, engine } = openMemory(url, opts as Record<string, unknown>);
      return new Connector(client, true, url, engine);
    }
    const connectTimeout = opts.connectTimeoutMs ?? DEFAULT_CONNECT_TIMEOUT_MS;
    const client = new Redis(url, { lazyConnect: false, connectTimeout, ...opts.redisOptions });
    return new Connector(client, true, shownUrl(url));
  }

  /**
   * Resolves with the server's first answer (a PING), or fails with EMQNOSERVER naming the URL
   * and the cause: at once on a connection's error (on a connection EchoMQ opened; a client of
   * your own retries as you configured it), when it gives up, or after `timeoutMs`.
   */
  async reach(timeoutMs = DEFAULT_CONNECT_TIMEOUT_MS): Promise<void> {
    const client = this.client;
    const ping = client.ping();
    if (this.memory) return void (await ping);
    let fail: (err: unknown) => void = () => {};
    const failed = new Promise<never>((_, reject) => {
      fail = reject;
    });
    // Only errors that mean "no server here" end the wait: a refused SELECT is an error event
    // too, and the connection goes on (selectDatabase refuses it with its own words).
    const onError = (err: unknown) => {
      if (this.owned && (isConnectionError(err) || isAuthError(err)))
        fail(unreachable(this.where, err, 'connect'));
    };
    const onEnd = () => fail(unreachable(this.where, this.lastError ?? 'the connection ended', 'connect'));
    const timer = setTimeout(
      () => fail(unreachable(this.where, this.lastError ?? `no answer in ${timeoutMs} ms`, 'connect')),
      timeoutMs,
    );
    client.on('error', onError);
    client.once('end', onEnd);
    try {
      await Promise.race([
        ping.catch((err: unknown) => {
          throw isConnectionError(err) ? unreachable(this.where, this.lastError ?? err, 'connect') : err;
        }),
        failed,
      ]);
    } finally {
      clearTimeout(timer);
      client.off('error', onError);
      client.off('end', onEnd);
      ping.catch(() => {}); // the race was decided by a failure: its rejection is reported there
    }
  }
  get isClosed(): boolean {
    return this.closed;
  }

  /** Whether the server is a Redis Cluster (keys of different hash slots need different calls). */
  get isCluster(): boolean {
    return this.client.isCluster;
  }

  /** Whether the main connection is up now (a dropped one reconnects by itself). */
  get isReady(): boolean {
    return this.client.status === 'ready';
  }

  assertOpen(): void {
    if (this.closed) {
      throw new EchoMQError(
        'EMQCLOSED',
        'this EchoMQ connection was closed (mq.close()); make calls before closing it, or open another with EchoMQ.connect()',
      );
    }
  }

  /**
   * Registers something that runs on this connection (a consumer): close() closes it first, so
   * its jobs are handed back while the connection still works. Returns the function that ends
   * the registration (the dependent closing on its own).
   */
  attach(dependent: Dependent): () => void {
    this.dependents.add(dependent);
    return () => {
      this.dependents.delete(dependent);
    };
  }

  /** Calls `observer` after every script call from now on; returns the function that stops it. */
  observe(observer: ScriptObserver): () => void {
    // A wrapper of its own, so the same function observed twice is two subscriptions, each
    // ended by its own unsubscribe.
    const entry: ScriptObserver = (name, ms, error) => observer(name, ms, error);
    this.observers.add(entry);
    return () => {
      this.observers.delete(entry);
    };
  }

  /** Tells the observers about a call that began at `started` (undefined: nobody was observing). */
  private report(name: string, started: number | undefined, error?: unknown): void {
    if (started === undefined) return;
    const ms = performance.now() - started;
    for (const observer of this.observers) observer(name, ms, error);
  }

  /** Replicated acknowledgement needs a server with replicas (WAIT): not the memory engine. */
  requireReplicas(): void {
    if (this.memory) {
      throw new EchoMQError(
        'EMQINPUT',
        'durability needs a Redis primary with replicas (WAIT); the memory engine has none',
      );
    }
  }

  /**
   * Runs a protocol script: by FCALL (src/wire/functions.ts) or EVALSHA, the body once more on NOSCRIPT. With `durability`,
   * over the replicated writes' own connection, resolving once WAIT confirms the replicas.
   * `viaScript`: the caller knows this call is outside the module command's plain case (an
   * enqueue with a group or a dedupe key), so it goes by the script without a refused try.
   */
  async run(
    script: Script,
    keys: readonly string[],
    argv: readonly (string | number)[],
    durability?: Replication,
    viaScript = false,
  ): Promise<unknown> {
    this.assertOpen();
    const started = this.observers.size > 0 ? performance.now() : undefined;
    try {
      const command = durability || viaScript ? undefined : this.nativeFor(script, argv);
      const reply = durability
        ? await this.replicatedWrites().run(script, keys, argv, durability)
        : command
          ? await this.runNative(command, script, keys, argv)
          : await this.runScript(script, keys, argv);
      this.report(script.name, started);
      return reply;
    } catch (err) {
      const mapped = this.explain(fromScriptError(err));
      this.report(script.name, started, mapped);
      throw mapped;
    }
  }

  /**
   * Sends a script call the transport's way. Every call of every verb passes here, so its
   * arguments are built once into one array (no spread into a rest parameter), and a resend
   * after a refusal only changes the target in front.
   */
  private runScript(script: Script, keys: readonly string[], argv: readonly (string | number)[]) {
    const args: (string | number)[] = ['', keys.length];
    for (const k of keys) args.push(k);
    for (const a of argv) args.push(a);
    return this.sendScript(script, this.transport.first(script), args);
  }

  private async sendScript(script: Script, send: Send, args: (string | number)[]): Promise<unknown> {
    for (;;) {
      args[0] = send.target;
      try {
        return await this.client.call(send.command, args);
      } catch (err) {
        const next = await this.transport.after(script, send, err);
        if (!next) throw err;
        send = next;
      }
    }
  }

  /**
   * The module command to send `script`'s call as, if any: none while its queue (ARGV[1], the
   * key prefix, for every script the module offers) goes by the script after a refusal.
   */
  private nativeFor(script: Script, argv: readonly (string | number)[]): string | undefined {
    const command = this.native.get(script.name);
    if (command === undefined || this.scriptOnly.size === 0) return command;
    const key = `${script.name} ${argv[0]}`;
    const until = this.scriptOnly.get(key);
    if (until === undefined) return command;
    if (performance.now() < until) return undefined;
    this.scriptOnly.delete(key);
    return command;
  }

  /**
   * The module's command, with the script's KEYS and ARGV. A refusal as outside the command's
   * case (EMQNATIVE, nothing written) sends the same call as the script at once, and that
   * queue's later calls too for nativeRefusedMs (30 s), so a queue with lanes pays one extra round
   * trip per window, not per call. A server that no longer knows the command (a restart without
   * the module, a failover to a node without it, or to a module of an earlier release) gets this
   * call and the later ones as the script, unless the module (its sweeps) was required.
   */
  private async runNative(
    command: string,
    script: Script,
    keys: readonly string[],
    argv: readonly (string | number)[],
  ) {
    const args: (string | number)[] = [keys.length];
    for (const k of keys) args.push(k);
    for (const a of argv) args.push(a);
    try {
      return await this.client.call(command, args);
    } catch (err) {
      if (!(err instanceof Error)) throw err;
      if (err.message.startsWith('EMQNATIVE ')) {
        this.scriptOnly.set(`${script.name} ${argv[0]}`, performance.now() + this.nativeRefusedMs);
        return this.runScript(script, keys, argv);
      }
      if (!err.message.startsWith('ERR unknown command')) throw err;
      if (this.moduleMode === 'require' && isRequiredCommand(command)) {
        throw new EchoMQError('EMQNOMODULE', `the server no longer offers ${command} (module: 'require')`, {
          cause: err,
        });
      }
      // A sweep unknown: the module is gone, and its other commands with it. EMQ.COMPLETE alone
      // unknown: a module of an earlier release, whose sweeps still answer.
      if (isRequiredCommand(command)) this.native.clear();
      else this.native.delete(script.name);
      return this.runScript(script, keys, argv);
    }
  }

  /**
   * A new connection to the same server(s), for blocking reads (XREAD BLOCK) that must not
   * hold up script calls. Closed with the connector.
   */
  duplicate(): RedisClient {
    this.assertOpen();
    const dup = this.client.duplicate() as RedisClient;
    dup.on('error', () => {}); // it reconnects by itself, as the client does
    settleDroppedCommands(dup);
    this.extra.add(dup);
    return dup;
  }

  private replicatedWrites(): ReplicatedWrites {
    this.replicated ??= new ReplicatedWrites(() => this.duplicate(), this.transport);
    return this.replicated;
  }

  /** Closes a duplicate early (a consumer or event reader closing on its own). */
  release(dup: RedisClient): void {
    if (this.extra.delete(dup)) dup.disconnect();
  }

  /** A connection error as EMQNOSERVER naming the server and the cause; other errors unchanged. */
  explain(err: unknown): unknown {
    if (!isConnectionError(err) || (err instanceof EchoMQError && err.code === 'EMQNOSERVER')) return err;
    return unreachable(this.where, this.lastError ?? err, 'call');
  }

  /**
   * Closes what runs on the connection (consumers hand their jobs back, giving running handlers
   * `timeoutMs`, default theirs), then the connection.
   */
  close(opts: { timeoutMs?: number } = {}): Promise<void> {
    this.closing ??= this.shutdown(opts);
    return this.closing;
  }

  private async shutdown(opts: { timeoutMs?: number }): Promise<void> {
    await Promise.all([...this.dependents].map((d) => d.close(opts).catch(() => {})));
    this.dependents.clear();
    this.closed = true;
    for (const dup of this.extra) dup.disconnect();
    this.extra.clear();
    if (this.owned) {
      // QUIT waits in the offline queue of a connection that is down: just drop that one.
      if (this.client.status !== 'ready') this.client.disconnect();
      else await this.client.quit().catch(() => this.client.disconnect());
    }
  }
}

const DEFAULT_CONNECT_TIMEOUT_MS = 5000;

/** How long a queue goes by the script after the module refused its call (EMQNATIVE), in ms. */
export const NATIVE_REFUSED_MS = 30_000;

/** A client's server for messages: host:port, or the cluster's first node. */
function whereOf(client: RedisClient): string {
  if (client instanceof Redis)
    return `redis://${client.options.host ?? '127.0.0.1'}:${client.options.port ?? 6379}`;
  const [first] = client.nodes();
  return first ? `a cluster (${first.options.host ?? ''}:${first.options.port ?? ''})` : 'a cluster';
}
