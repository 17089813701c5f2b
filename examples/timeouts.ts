import { EchoMQ } from 'echomq';

const mq = await EchoMQ.connect({ url: process.env.REDIS_URL });
const renders = mq.queue<{ pages: number }>(`timeouts-${process.pid}`); // a fresh queue per run

const consumer = renders.consume(
  async (job, ctx) => {
    for (let page = 1; page <= job.data.pages; page++) {
      if (ctx.signal.aborted) throw ctx.signal.reason; // the timeout aborts the signal
      await new Promise((resolve) => setTimeout(resolve, 20)); // ... render one page ...
    }
    return `${job.data.pages} pages`;
  },
  { timeoutMs: 5000 }, // the default for jobs enqueued without their own
);
consumer.on('failed', (job, err, outcome) =>
  console.log(`attempt ${job.attempts}: ${outcome} (${err.message.slice(0, 10)})`),
);

const short = await renders.enqueue({ pages: 3 });
console.log(`short: ${await renders.waitFor(short.id, { timeoutMs: 5000 })}`);

// Its own timeout: 200 ms per attempt, 2 attempts. Both run out, so the job ends dead.
const long = await renders.enqueue(
  { pages: 500 },
  { timeoutMs: 200, attempts: 2, backoff: { kind: 'fixed', ms: 10 } },
);
await renders.waitFor(long.id, { timeoutMs: 5000 }).catch(() => {});
console.log(`long: ${(await renders.get(long.id))?.state}`);

await consumer.close();
await mq.close();
