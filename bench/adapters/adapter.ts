// The seam every workload runs through: one small interface, an EchoMQ and a BullMQ
// implementation. A session is one library client on one Redis connection (plus whatever
// connections its consumers open); workloads open and close their own sessions.

/** A job payload: plain JSON, 100 bytes encoded (see payload() in workloads.ts). */
export type Data = Record<string, unknown>;

export interface ConsumeHooks {
  /**
   * Called synchronously when a handler starts (before its body), on the job's own data. `slot`:
   * for an occurrence of a recurring definition, the instant it stands for (epoch ms, as the
   * library names it in the occurrence's id); undefined for other jobs.
   */
  onStart?: (id: string, data: Data, slot: number | undefined) => void;
  /** The handler's body sleeps this long (ms) when it is a number > 0; else it is a no-op. */
  workMs?: (data: Data) => number | undefined;
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
   * addBulk with a lane (group) per job. EchoMQ: the `group` option; BullMQ has no groups in its
   * open-source edition, so it adds the same jobs flat (its fairness figure shows what that costs).
   */
  addBulkGrouped(items: readonly { data: Data; group: string }[]): Promise<void>;
  /**
   * Adds jobs delayed by `delayMs` (100 adds in flight) and returns, per job, its id and the
   * instant it is meant to run, in epoch ms, as the library itself defines it.
   */
  addDelayed(items: readonly Data[], delayMs: number): Promise<{ id: string; runAt: number }[]>;
  /**
   * Adds one job delayed by `delayMs` and returns its id and intended instant (as addDelayed),
   * without 100 calls in flight: for workloads that interleave delayed jobs with other traffic.
   */
  addOneDelayed(data: Data, delayMs: number): Promise<{ id: string; runAt: number }>;
  /**
   * Makes a recurring definition `id` with `data` as its template: 'every' a job scheduler
   * running every `everyMs` (EchoMQ schedulers.upsert, BullMQ upsertJobScheduler); 'now' one
   * whose first run is now (EchoMQ repeat.register with firstRunMs: now, BullMQ
   * upsertJobScheduler with immediately). Resolves once it is stored.
   */
  addRecurring(kind: 'every' | 'now', id: string, everyMs: number, data: Data): Promise<void>;
  /** Removes what addRecurring made. */
  removeRecurring(kind: 'every' | 'now', id: string): Promise<void>;
  /**
   * Takes up to `n` waiting jobs into active under a lease (BullMQ: a lock) of `leaseMs`, without
   * running them: work a consumer claimed and then went silent on (EchoMQ: claim by hand; BullMQ:
   * Worker.getNextJob, 100 calls in flight, with no lock renewal). Resolves with how many it took.
   */
  hold(n: number, leaseMs: number): Promise<number>;
  /**
   * Runs the library's stalled check once, as its consumer does on its timer, and resolves with
   * the jobs it returned to waiting. EchoMQ: sweepStalled (batch 100, the consumer's default)
   * until a call recovers fewer than a batch; BullMQ: the Worker's moveStalledJobsToWait, with
   * its stalled-check key cleared first (as the stalled interval passing would). BullMQ recovers
   * only jobs an earlier check marked, so a stalled job takes two checks there.
   */
  checkStalled(): Promise<number>;
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

export const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

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
