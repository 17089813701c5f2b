// EchoMQ: a connection to Redis and the queues on it.

import { knownKeys } from '../core/check.js';
import { optionsObject } from '../core/errors.js';
import type { QueueOptions } from '../core/types.js';
import { addFlow, type FlowJob, type FlowOptions, type FlowResult } from '../flows/add.js';
import type { ConnectOptions, Connector } from '../wire/connector.js';
import { type EngineClock, REDIS_CLOCK } from '../wire/memory/index.js';
import { openChecked } from '../wire/open.js';
import { Queue } from './queue.js';

export interface EchoMQOptions extends ConnectOptions, QueueOptions {}

/** Every QueueOptions field (mq.queue(name, options)). */
const QUEUE_OPTION_FIELDS: Record<keyof QueueOptions, true> = {
  defaultAttempts: true,
  maxPayloadBytes: true,
};
const QUEUE_OPTIONS: ReadonlySet<string> = new Set(Object.keys(QUEUE_OPTION_FIELDS));
const CONNECT_OPTIONS = [
  'url',
  'redis',
  'redisOptions',
  'module',
  'connectTimeoutMs',
  'defaultAttempts',
  'maxPayloadBytes',
  'durability',
  'protocolVersion',
  'scripts',
];

export class EchoMQ {
  private readonly queues = new Map<string, Queue>();

  private constructor(
    readonly connector: Connector,
    private readonly defaults: QueueOptions,
  ) {}

  /** Connects (and checks the server answers). `url` defaults to REDIS_URL, then 127.0.0.1:6379. */
  static async connect(options?: EchoMQOptions): Promise<EchoMQ> {
    const opts = optionsObject(options, 'connect options');
    knownKeys(opts, new Set(CONNECT_OPTIONS), 'connect option', ' (ioredis options go under redisOptions)');
    const connector = await openChecked(opts);
    const { defaultAttempts, maxPayloadBytes } = opts;
    return new EchoMQ(connector, { defaultAttempts, maxPayloadBytes });
  }

  /**
   * The server clock every script reads. On a `memory://` engine a test moves it
   * (`mq.clock.advance('5m')`, `mq.clock.set(date)`) and the consumers on the engine act on what
   * fell due; on Redis its methods refuse (EMQINPUT): only real time moves a server's TIME.
   */
  get clock(): EngineClock {
    return this.connector.memory?.clock ?? REDIS_CLOCK;
  }

  /** The queue with this name (one object per name per connection). */
  queue<D = unknown, R = unknown>(name: string, options?: QueueOptions): Queue<D, R> {
    this.connector.assertOpen();
    const opts = optionsObject(options, 'queue options');
    knownKeys(opts, QUEUE_OPTIONS, 'queue option');
    let q = this.queues.get(name);
    if (!q) {
      // An option given as undefined (an unset variable) leaves the connection's default.
      const given = Object.fromEntries(Object.entries(opts).filter(([, v]) => v !== undefined));
      q = new Queue(this.connector, name, { ...this.defaults, ...given });
      this.queues.set(name, q);
    }
    return q as Queue<D, R>;
  }

  /**
   * Adds a flow: a parent job (state waiting_children) that runs once all its children have
   * completed; children may have children, in any queue. Admitted in one atomic call when one
   * script can reach every queue of the flow (a single Redis, or one Cluster hash slot), else
   * per queue unless `{ atomic: true }`. Resolves with the ids, shaped like the flow. See
   * src/flows/add.ts.
   */
  flow<D = unknown>(root: FlowJob<D>, opts?: FlowOptions): Promise<FlowResult> {
    this.connector.assertOpen();
    return addFlow((name) => this.queue(name).wire, root, opts);
  }

  /**
   * Closes the consumers still open on this connection (each as `consumer.close()` does: running
   * handlers get `timeoutMs`, default 10 s, then their jobs are handed back), then every
   * connection EchoMQ opened. Later calls fail with EMQCLOSED.
   */
  async close(opts?: { timeoutMs?: number }): Promise<void> {
    await this.connector.close(optionsObject(opts, 'close options'));
  }
}
