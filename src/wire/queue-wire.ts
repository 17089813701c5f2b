// QueueWire: one queue as the wire sees it (its name, keys, connection and limits) and the one
// way to run a protocol script on it. Every runtime room (consumer, events, lanes, recurring,
// flows, control, logs, sweep) receives this, not the Queue facade that owns it, so none of them
// imports the facade and the facade's import circles cannot come back.
//
// `run` builds KEYS from the script's contract header, stamps or checks the protocol version
// once per queue (hello, with the versions this runtime speaks: SPEC 22) and adds the queue to
// the registry of names before its first call.
import { wholeNumber } from '../core/check.js';
import type { Connector } from './connector.js';
import { durabilityOf, type Replication } from './durability.js';
import { Keyspace, PROTOCOL_VERSIONS, QUEUES_KEY } from './keyspace.js';
import { type Script, type ScriptName, script } from './scripts.js';

/** The queue options a job is checked against (QueueOptions, defaults applied). */
export interface QueueLimits {
  /** Attempts of a job that names none. */
  readonly defaultAttempts: number;
  /** The largest encoded job data, result or progress, in bytes. */
  readonly maxPayloadBytes: number;
}

/** The limits of `QueueOptions`, validated, with their defaults. */
export function queueLimits(opts: { defaultAttempts?: number; maxPayloadBytes?: number }): QueueLimits {
  return {
    defaultAttempts: wholeNumber(opts.defaultAttempts ?? 3, 'defaultAttempts', 1),
    maxPayloadBytes: wholeNumber(opts.maxPayloadBytes ?? 512 * 1024, 'maxPayloadBytes', 1),
  };
}

/** What hello told a runtime about a queue and its server (SPEC 19.1). */
export interface Greeting {
  /** The queue's protocol version: the one this runtime speaks on it. */
  readonly version: number;
  /** The feature level of the scripts that answered (SPEC 22.2). */
  readonly level: number;
  /** The server's optional commands found ('emq.promote', 'emq.stalled.check'), and 'emq.timers'. */
  readonly features: readonly string[];
}

/**
 * hello's reply by the evolution rule (SPEC 22.1): the entries this runtime knows, in order, and
 * nothing else; entries a later level appends are ignored, a bare integer is a level-1 reply.
 */
export function greetingOf(reply: unknown): Greeting {
  if (!Array.isArray(reply)) return { version: Number(reply), level: 1, features: [] };
  const [version, level, features] = reply as unknown[];
  return {
    version: Number(version),
    level: Number(level ?? 1),
    features: Array.isArray(features) ? features.map(String) : [],
  };
}

export class QueueWire {
  readonly keys: Keyspace;
  private hello: Promise<Greeting> | undefined;
  /** hello's answer, once it came; a migrate updates its version. */
  greeting: Greeting | undefined;
  private helloDone = false;
  /** KEYS per script for calls about no particular job: built once, not per call. */
  private readonly keyCache = new Map<string, string[]>();
  /** Other queues of this connection, by name (see sibling). */
  private readonly siblings = new Map<string, QueueWire>();

  constructor(
    readonly connector: Connector,
    readonly name: string,
    readonly limits: QueueLimits,
  ) {
    this.keys = new Keyspace(name);
  }

  /**
   * The queue's hello, once: stamps the protocol version in meta (or refuses a queue of another
   * version) and adds the queue to the registry. Every call awaits it first; a call that writes
   * this queue's keys from another queue's script (a flow over queues) awaits it itself.
   */
  async greet(): Promise<void> {
    if (!this.hello) {
      const hello = script('hello');
      // The registry of queue names lets tools list queues without scanning the keyspace.
      void this.connector.client.sadd(QUEUES_KEY, this.name).catch(() => {});
      const argv = [this.connector.newQueueVersion, PROTOCOL_VERSIONS[0]!, PROTOCOL_VERSIONS.at(-1)!];
      this.hello = this.connector.run(hello, [this.keys.key('meta')], argv).then(greetingOf, (err) => {
        this.hello = undefined;
        throw err;
      });
    }
    this.greeting = await this.hello;
    this.helloDone = true;
  }

  /**
   * Asks hello again (a consumer's backstop beat): what the server offers may have changed
   * (the module's timers stopped, a failover to a server without the module). A failed call
   * throws, as the beat's other calls do, and keeps the greeting it had.
   */
  async greetAgain(): Promise<void> {
    const argv = [this.connector.newQueueVersion, PROTOCOL_VERSIONS[0]!, PROTOCOL_VERSIONS.at(-1)!];
    const reply = await this.connector.run(script('hello'), [this.keys.key('meta')], argv);
    this.greeting = greetingOf(reply);
  }

  /** The queue's protocol version as hello (or a later migrate) found it. */
  async version(): Promise<number> {
    if (!this.helloDone) await this.greet();
    return this.greeting!.version;
  }

  /**
   * Runs a protocol script with KEYS built from its contract; `jobId` fills the `job` key. Not
   * async once greeted: every job's call passes here, and the connector's promise is returned
   * as is (its run checks the connection is open and rejects when it is not).
   */
  run(
    name: ScriptName,
    argv: readonly (string | number)[],
    jobId?: string,
    durability?: Replication,
    viaScript?: boolean,
  ): Promise<unknown> {
    if (!this.helloDone) return this.greetAndRun(name, argv, jobId, durability, viaScript);
    return this.send(name, argv, jobId, durability, viaScript);
  }

  private async greetAndRun(
    name: ScriptName,
    argv: readonly (string | number)[],
    jobId: string | undefined,
    durability: Replication | undefined,
    viaScript: boolean | undefined,
  ): Promise<unknown> {
    this.connector.assertOpen();
    await this.greet();
    return this.send(name, argv, jobId, durability, viaScript);
  }

  private send(
    name: ScriptName,
    argv: readonly (string | number)[],
    jobId: string | undefined,
    durability: Replication | undefined,
    viaScript: boolean | undefined,
  ): Promise<unknown> {
    let s: Script;
    let keys: string[] | undefined;
    try {
      s = script(name);
      keys = jobId === undefined ? this.keyCache.get(name) : undefined;
      if (!keys) {
        keys = s.keys.map((k) => this.keys.key(k, jobId));
        if (jobId === undefined) this.keyCache.set(name, keys);
      }
    } catch (err) {
      return Promise.reject(err); // a rejection, as from any call, never a throw
    }
    return this.connector.run(s, keys, argv, durability, viaScript);
  }

  /** A migrate moved the queue to `version`: what this handle says from now on. */
  setVersion(version: number): void {
    if (this.greeting) this.greeting = { ...this.greeting, version };
  }

  /** The queue's keys are gone (obliterate): the next call stamps the version again. */
  forgetHello(): void {
    this.hello = undefined;
    this.helloDone = false;
    this.greeting = undefined;
  }

  /** Takes the queue off the registry of names (obliterate deleted its keys). */
  async unlist(): Promise<void> {
    await this.connector.client.srem(QUEUES_KEY, this.name);
  }

  /**
   * Another queue of this connection by name, with this queue's limits (this queue itself for its
   * own name): what a flow hand-off calls on a parent's queue. Each is made once, so its hello is
   * sent once. EMQINPUT when `name` is not a valid queue name.
   */
  sibling(name: string): QueueWire {
    if (name === this.name) return this;
    let w = this.siblings.get(name);
    if (!w) {
      w = new QueueWire(this.connector, name, this.limits);
      this.siblings.set(name, w);
    }
    return w;
  }

  /** A call's `durability` option, the connection's default when absent. */
  durabilityFor(value: unknown, where: string): Replication | undefined {
    if (value === undefined) return this.connector.durability;
    const d = durabilityOf(value, where);
    if (d) this.connector.requireReplicas();
    return d;
  }
}
