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
} from './adapter.js';

function connection(url: string): { host: string; port: number } {
  const u = new URL(url);
  return { host: u.hostname, port: Number(u.port || 6379) };
}

export const bullmqAdapter: Adapter = {
  name: 'BullMQ',
  async open(url: string, name: string): Promise<Session> {
    const queue = new Queue<Data, void, string>(name, { connection: connection(url) });
    await queue.waitUntilReady();
    return {
      async add(data) {
        await queue.add('job', data);
      },
      async addBulk(items) {
        await queue.addBulk(items.map((data) => ({ name: 'job', data })));
      },
      async addDelayed(items, delayMs) {
        // BullMQ prices a delay on the client: the job runs at job.timestamp (Date.now() at add) + delay.
        return inFlight(items, 100, async (data) => {
          const job = await queue.add('job', data, { delay: delayMs });
          return { id: String(job.id), runAt: job.timestamp + delayMs };
        });
      },
      async consume(concurrency: number, hooks: ConsumeHooks): Promise<Runner> {
        const { onStart, onCompleted } = hooks;
        const worker = new Worker<Data, void, string>(
          name,
          async (job) => {
            onStart?.(String(job.id), job.data);
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
        await queue.close();
      },
    };
  },
};
