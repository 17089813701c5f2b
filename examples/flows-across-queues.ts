import { EchoMQ, type Handler } from 'echomq';

const mq = await EchoMQ.connect({ url: process.env.REDIS_URL });
const orders = `orders-${process.pid}`; // fresh queues per run
const mail = `mail-${process.pid}`;

// The parent is in one queue, a child in another. On one Redis (or queues sharing a Cluster
// slot) the tree is admitted in one atomic call; otherwise per queue, the parent first.
const flow = await mq.flow({
  queue: orders,
  data: { step: 'ship order 7' },
  children: [
    { queue: orders, data: { step: 'charge card' } },
    { queue: mail, data: { step: 'send receipt' }, opts: { tags: ['receipt'] } },
  ],
});
const tree = await mq.queue(orders).flow(flow.id);
console.log(tree?.children.map((c) => `${c.queue.split('-')[0]}: ${c.state}`).join(', '));

// Each queue has its own consumers; the mail child's end reaches the parent's queue through
// the hand-off its consumers deliver on their beat.
const work: Handler<{ step: string }, string> = async (job) => `${job.data.step}: done`;
const consumers = [orders, mail].map((q) => mq.queue<{ step: string }>(q).consume(work, { beatMs: 100 }));
console.log(await mq.queue(orders).waitFor(flow.id, { timeoutMs: 10_000 }));
const deps = await mq.queue(orders).dependencies(flow.id);
console.log(`processed: ${deps.processed.map((d) => d.result).join(', ')}`);

await Promise.all(consumers.map((c) => c.close()));
await mq.close();
