import { EchoMQ, RateLimitError, retryAfterMs } from 'echomq';

const mq = await EchoMQ.connect({ url: process.env.REDIS_URL });
const calls = mq.queue<number>(`back-pressure-${process.pid}`); // a fresh queue per run

// A partner API that answers its first call with 429 Too Many Requests, Retry-After: 1 (s).
let answered = 0;
const partnerApi = async () => ({
  status: answered++ === 0 ? 429 : 200,
  headers: new Headers(answered === 1 ? { 'retry-after': '1' } : {}),
});

const ids = await calls.enqueueMany([1, 2, 3].map((n) => ({ data: n })));
const consumer = calls.consume(
  async (job) => {
    const res = await partnerApi();
    // Back-pressure: the job goes back to the queue (no attempt spent) and no consumer of the
    // queue claims anything until Retry-After has passed, on the Redis server's clock. A job in
    // a lane holds only its lane. Retry-After may be seconds or an HTTP-date.
    if (res.status === 429) throw new RateLimitError(retryAfterMs(res.headers.get('retry-after')));
    console.log(`call ${job.data}: ${res.status}`);
  },
  { concurrency: 1 },
);
consumer.on('rateLimited', (job) => console.log(`call ${job.data}: 429, the queue waits`));

await Promise.all(ids.map(({ id }) => calls.waitFor(id, { timeoutMs: 10_000 })));
console.log(`attempts used by call 1: ${(await calls.get(ids[0]!.id))?.attempts}`);

await consumer.close();
await mq.close();
