// The BullMQ side of the bench, with BullMQ's defaults (completed jobs are kept, one
// connection per Queue, a Worker opens its own client and blocking connection).
import { Queue, Worker } from 'bullmq';
import {
  type Adapter,
  type ConsumeHooks,
  type Data,
  inFlight,
  type Runner,
  type Session,
  sleep,
} from './adapter.js';

/** The instant a job scheduler's occurrence stands for: its id is 'repeat:<scheduler>:<millis>'. */
function slotOf(id: string): number | undefined {
  const m = /^repeat:.*:(\d+)$/.exec(id);
  return m ? Number(m[1]) : undefined;
}

function connection(url: string): { host: string; port: number } {
  const u = new URL(url);
  return { host: u.hostname, port: Number(u.port || 6379) };
}

export const bullmqAdapter: Adapter = {
  name: 'BullMQ',
  async open(url: string, name: string): Promise<Session> {
    const queue = new Queue<Data, void, string>(name, { connection: connection(url) });
    await queue.waitUntilReady();
    // Workers that hold jobs (hold) or check for stalled ones (checkStalled), closed with the session.
    const workers: Worker[] = [];
    const idle = async (lockDuration: number) => {
      const worker = new Worker(name, null, { connection: connection(url), autorun: false, lockDuration });
      worker.on('error', () => {});
      workers.push(worker);
      await worker.waitUntilReady();
      return worker;
    };
    let checker: Worker | undefined;
    return {
      async add(data) {
        await queue.add('job', data);
      },
      async addBulk(items) {
        await queue.addBulk(items.map((data) => ({ name: 'job', data })));
      },
      async addBulkGrouped(items) {
        await queue.addBulk(items.map(({ data }) => ({ name: 'job', data }))); // no groups: flat
      },
      async addDelayed(items, delayMs) {
        // BullMQ prices a delay on the client: the job runs at job.timestamp (Date.now() at add) + delay.
        return inFlight(items, 100, async (data) => {
          const job = await queue.add('job', data, { delay: delayMs });
          return { id: String(job.id), runAt: job.timestamp + delayMs };
        });
      },
      async addOneDelayed(data, delayMs) {
        const job = await queue.add('job', data, { delay: delayMs });
        return { id: String(job.id), runAt: job.timestamp + delayMs };
      },
      async addRecurring(kind, id, everyMs, data) {
        // BullMQ has no separate fixed-cadence verb, and its `every` scheduler runs its first
        // job at once: that serves as 'now' too (`immediately` with `every` only warns).
        void kind;
        await queue.upsertJobScheduler(id, { every: everyMs }, { name: id, data });
      },
      async removeRecurring(_kind, id) {
        await queue.removeJobScheduler(id);
      },
      async hold(n, leaseMs) {
        const worker = await idle(leaseMs);
        const got = await inFlight(
          Array.from({ length: n }, (_, i) => `hold-${i}`),
          100,
          (token) => worker.getNextJob(token, { block: false }),
        );
        return got.filter((j) => j !== undefined).length;
      },
      async checkStalled() {
        checker ??= await idle(30_000);
        await (await queue.backend.client).del(queue.keys['stalled-check']!);
        return (await checker.backend.moveStalledJobsToWait()).length;
      },
      async consume(concurrency: number, hooks: ConsumeHooks): Promise<Runner> {
        const { onStart, onCompleted, workMs } = hooks;
        const worker = new Worker<Data, void, string>(
          name,
          async (job) => {
            const id = String(job.id);
            onStart?.(id, job.data, slotOf(id));
            const ms = workMs?.(job.data);
            if (ms) await sleep(ms);
          },
          { connection: connection(url), concurrency, autorun: false },
        );
        worker.on('error', () => {}); // reported by the bench as a stall, not a crash
        if (onCompleted) worker.on('completed', onCompleted);
        await worker.waitUntilReady();
        return {
          start() {
            worker.run().catch(() => {});
          },
          async close() {
            await worker.close();
          },
        };
      },
      async close() {
        await Promise.allSettled(workers.map((w) => w.close()));
        await queue.close();
      },
    };
  },
};
