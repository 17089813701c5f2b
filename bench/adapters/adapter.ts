// The seam every workload runs through: one small interface, an EchoMQ and a BullMQ
// implementation. A session is one library client on one Redis connection (plus whatever
// connections its consumers open); workloads open and close their own sessions.

/** A job payload: plain JSON, 100 bytes encoded (see payload() in workloads.ts). */
export type Data = Record<string, unknown>;

export interface ConsumeHooks {
  /** Called synchronously when a handler starts (before the no-op body), on the job's own data. */
  onStart?: (id: string, data: Data) => void;
  /** Called when the library reports the job completed (its acknowledgement reached Redis). */
  onCompleted?: () => void;
}

export interface Runner {
  /** Starts claiming. Connections are ready before this, so a timer started just before it measures work. */
  start(): void;
  /** Stops the consumer and closes the connections it opened. */
  close(): Promise<void>;
}

export interface Session {
  /** Adds one job and waits for Redis to accept it. */
  add(data: Data): Promise<void>;
  /** Adds a chunk of jobs as the library's bulk verb (EchoMQ enqueueMany, BullMQ addBulk). */
  addBulk(items: readonly Data[]): Promise<void>;
  /**
   * Adds jobs delayed by `delayMs` (100 adds in flight) and returns, per job, its id and the
   * instant it is meant to run, in epoch ms, as the library itself defines it.
   */
  addDelayed(items: readonly Data[], delayMs: number): Promise<{ id: string; runAt: number }[]>;
  /** Prepares a consumer running a no-op async handler at `concurrency`; start() starts it. */
  consume(concurrency: number, hooks: ConsumeHooks): Promise<Runner>;
  /** Closes every connection this session opened. */
  close(): Promise<void>;
}

export interface Adapter {
  readonly name: 'EchoMQ' | 'BullMQ';
  /** Opens a session on `queue` at the Redis `url` (`redis://host:port`). */
  open(url: string, queue: string): Promise<Session>;
}

/** Runs `fn` over `items` with at most `width` calls in flight, in order of start. */
export async function inFlight<T, R>(
  items: readonly T[],
  width: number,
  fn: (item: T, index: number) => Promise<R>,
): Promise<R[]> {
  const out: R[] = new Array(items.length);
  let next = 0;
  const lane = async () => {
    while (next < items.length) {
      const i = next++;
      out[i] = await fn(items[i]!, i);
    }
  };
  await Promise.all(Array.from({ length: Math.min(width, items.length) }, lane));
  return out;
}
