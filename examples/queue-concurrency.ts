import { EchoMQ } from 'echomq';

const mq = await EchoMQ.connect({ url: process.env.REDIS_URL });
const renders = mq.queue<number>(`queue-concurrency-${process.pid}`); // a fresh queue per run

// At most 2 jobs of the queue run at once across every consumer, flat jobs and lanes together:
// the claim script counts them on the server, so more consumers add no slots.
await renders.configure({ concurrency: 2 });
const jobs = await renders.enqueueMany(
  [1, 2, 3, 4, 5, 6].map((n) => ({ data: n, opts: n % 2 === 0 ? { group: 'gpu' } : {} })),
);

let running = 0;
let most = 0;
const render = async () => {
  running += 1;
  most = Math.max(most, running);
  await new Promise((resolve) => setTimeout(resolve, 50));
  running -= 1;
};
// Three consumers with room for 5 jobs each: still 2 at a time.
const consumers = [1, 2, 3].map(() => renders.consume(render, { concurrency: 5 }));
await Promise.all(jobs.map(({ id }) => renders.waitFor(id, { timeoutMs: 10_000 })));
console.log(`6 renders, at most ${most} at once across 3 consumers`);

await renders.configure({ concurrency: null }); // removes the cap
await Promise.all(consumers.map((c) => c.close()));
await mq.close();
