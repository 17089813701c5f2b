import { EchoMQ } from 'echomq';

const mq = await EchoMQ.connect({ url: process.env.REDIS_URL });
const calls = mq.queue<number>(`rate-limits-${process.pid}`); // a fresh queue per run

// At most 3 jobs start in any 500 ms window, across every consumer of the queue (a sliding
// window on the Redis server's clock: no burst at the window's edges). A lane can have its
// own: calls.lanes.configure('partner-api', { rateLimit: { max: 1, perMs: 1000 } }).
await calls.configure({ rateLimit: { max: 3, perMs: 500 } });
const added = await calls.enqueueMany([1, 2, 3, 4, 5, 6, 7].map((n) => ({ data: n })));

const consumer = calls.consume((job) => console.log(`call ${job.data}`), { concurrency: 10 });
await consumer.idle();
// Waiting consumers park on a timer until the window reopens; they do not poll Redis.
// Each job's start is the claim's instant on the server's clock, where the limit holds.
const starts = await Promise.all(added.map(async ({ id }) => (await calls.get(id))?.startedAt ?? 0));
const busiest = Math.max(...starts.map((s) => starts.filter((t) => t >= s && t < s + 500).length));
console.log(`7 calls, at most ${busiest} started in any 500 ms`);

await calls.configure({ rateLimit: null }); // lifts the limit
await consumer.close();
await mq.close();
