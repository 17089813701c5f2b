import { EchoMQ } from 'echomq';

const mq = await EchoMQ.connect({ url: process.env.REDIS_URL });
const jobs = mq.queue<{ query: string }>(`dedupe-${process.pid}`); // a fresh queue per run

// Throttle: while the first job with a key has not ended, others with the key are dropped.
const sync = { dedupe: { key: 'sync:user-7', mode: 'throttle' } } as const;
const first = await jobs.enqueue({ query: 'sync' }, sync);
const again = await jobs.enqueue({ query: 'sync again' }, sync);
console.log(`throttle: ${again.status}, kept the first: ${again.id === first.id}`);

// Debounce: each call replaces the waiting job's data and pushes its run time back, so the
// job runs once, 300 ms after the last call, with the last data.
const typing = { dedupe: { key: 'search:user-7', mode: 'debounce', ttlMs: 5000 } } as const;
let search = '';
for (const query of ['e', 'ec', 'echo']) search = (await jobs.enqueueIn({ query }, 300, typing)).id;

const consumer = jobs.consume((job) => {
  console.log(`ran with ${job.data.query}`);
});
await jobs.waitFor(first.id, { timeoutMs: 5000 });
await jobs.waitFor(search, { timeoutMs: 5000 });

await consumer.close();
await mq.close();
