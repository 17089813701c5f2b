import { EchoMQ } from 'echomq';

const mq = await EchoMQ.connect({ url: process.env.REDIS_URL });
const jobs = mq.queue<number>(`retention-${process.pid}`); // a fresh queue per run

// Ended jobs are kept for inspection, then trimmed as others end. Defaults: the newest 1,000
// completed for a day, the newest 10,000 dead (and cancelled) for 7 days. Change them:
await jobs.configure({
  retention: { completed: { count: 3, ageMs: 60 * 60_000 }, dead: { count: 100, ageMs: -1 } },
});

const consumer = jobs.consume((job) => {
  if (job.data === 0) throw new Error('zero is not allowed');
  return job.data * 2;
});
const done = await jobs.enqueueMany([0, 1, 2, 3, 4, 5].map((n) => ({ data: n, opts: { attempts: 1 } })));
for (const { id } of done) await jobs.waitFor(id, { timeoutMs: 5000 }).catch(() => {});
console.log(`kept: ${JSON.stringify(await jobs.counts(), ['completed', 'dead'])}`);

// Or delete ended jobs yourself: the dead ones that ended at least a second ago, up to 1,000.
await new Promise((r) => setTimeout(r, 1000));
console.log(`cleaned: ${await jobs.clean({ state: 'dead', olderThanMs: 1000, limit: 1000 })}`);

await consumer.close();
await mq.close();
