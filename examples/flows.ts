import { EchoMQ } from 'echomq';

const mq = await EchoMQ.connect({ url: process.env.REDIS_URL });
const queue = `flows-${process.pid}`; // a fresh queue per run
type Step = { step: string; city?: string };
const jobs = mq.queue<Step>(queue);

// The parent waits (state waiting_children) until every child has completed, then runs and
// reads their results. All the jobs of a flow are in one queue, admitted in one atomic call.
const flow = await mq.flow({
  queue,
  data: { step: 'report' },
  children: [
    { queue, data: { step: 'weather', city: 'Oslo' } },
    { queue, data: { step: 'weather', city: 'Lima' } },
  ],
});
console.log(`parent is ${(await jobs.get(flow.id))?.state}, with ${flow.children.length} children`);

const consumer = jobs.consume(async (job, ctx) => {
  if (job.data.step === 'weather') return `${job.data.city}: sunny`;
  const results = await ctx.childrenResults(); // child id -> result
  return Object.values(results).sort().join(', ');
});
console.log(`report: ${await jobs.waitFor(flow.id, { timeoutMs: 5000 })}`);

await consumer.close();
await mq.close();
