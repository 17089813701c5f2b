import { EchoMQ } from 'echomq';

const mq = await EchoMQ.connect({ url: process.env.REDIS_URL });
const rows = mq.queue<{ sku: string; qty: number }>(`batches-${process.pid}`); // a fresh queue per run

// Up to 5 jobs per call (a batch waits at most 50 ms to fill): one bulk write for all of them.
const consumer = rows.consumeBatch(
  async (batch) => {
    console.log(`batch of ${batch.jobs.length}`);
    for (const job of batch.jobs) if (job.data.qty < 0) batch.fail(job, new Error('negative quantity'));
    // ... one bulk insert of the others ...
    return batch.jobs.map((job) => `stored ${job.data.sku}`); // one result per job, in order
  },
  { size: 5, waitMs: 50 },
);

const made = await rows.enqueueMany(
  ['A1', 'A2', 'A3', 'A4', 'A5'].map((sku, i) => ({
    data: { sku, qty: i === 2 ? -1 : 1 },
    opts: { attempts: 1 },
  })),
);
for (const { id } of made) await rows.waitFor(id, { timeoutMs: 5000 }).catch(() => {});
console.log(`completed: ${(await rows.counts()).completed}, dead: ${(await rows.counts()).dead}`);

await consumer.close();
await mq.close();
