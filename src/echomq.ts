// EchoMQ: a connection to Redis and the queues on it.
import { type ConnectOptions, Connector } from './connector.js';
import { addFlow, type FlowJob, type FlowResult } from './flows.js';
import { Queue, type QueueOptions } from './jobs.js';

export interface EchoMQOptions extends ConnectOptions, QueueOptions {}

export class EchoMQ {
  private readonly queues = new Map<string, Queue<never, never>>();

  private constructor(
    readonly connector: Connector,
    private readonly defaults: QueueOptions,
  ) {}

  /** Connects (and checks the server answers). `url` defaults to REDIS_URL, then 127.0.0.1:6379. */
  static async connect(opts: EchoMQOptions = {}): Promise<EchoMQ> {
    const connector = Connector.open(opts);
    try {
      await connector.client.ping();
    } catch (err) {
      await connector.close();
      throw err;
    }
    const { defaultAttempts, maxPayloadBytes } = opts;
    return new EchoMQ(connector, { defaultAttempts, maxPayloadBytes });
  }

  /** The queue with this name (one object per name per connection). */
  queue<D = unknown, R = unknown>(name: string, opts: QueueOptions = {}): Queue<D, R> {
    this.connector.assertOpen();
    let q = this.queues.get(name);
    if (!q) {
      q = new Queue<never, never>(this.connector, name, { ...this.defaults, ...opts });
      this.queues.set(name, q);
    }
    return q as unknown as Queue<D, R>;
  }

  /**
   * Adds a flow: a parent job (state waiting_children) that runs once all its children have
   * completed, atomically with them; children may have children. Every job is in the root's
   * queue. Resolves with the ids, shaped like the flow. See src/flows.ts.
   */
  flow<D = unknown>(root: FlowJob<D>): Promise<FlowResult> {
    this.connector.assertOpen();
    return addFlow(this, root);
  }

  /** Closes every connection EchoMQ opened. Later calls fail with EMQCLOSED. */
  async close(): Promise<void> {
    await this.connector.close();
  }
}
