import { EchoMQ, Inspector } from 'echomq';

const mq = await EchoMQ.connect({ url: process.env.REDIS_URL });
const q = mq.queue<string>(`job-options-${process.pid}`); // a fresh queue per run

await q.enqueue('old news', { priority: 2 });
await q.enqueue('breaking', { priority: 2, lifo: true }); // ahead of the older jobs of its priority
await q.enqueue('ping', { removeOnComplete: true, tags: ['health'] }); // gone once it completes
await q.enqueue('invoice', { removeOnFail: { count: 100 }, tags: ['billing', 'eu'] });

// Tags filter the jobs tools list (Inspector.jobs, `echomq jobs --tag`, the dashboard).
const billing = await new Inspector(mq).jobs(q.name, 'pending', { tag: 'billing' });
console.log(`tagged billing: ${billing.jobs.map((j) => j.data).join(', ')}`);

const order: string[] = [];
const consumer = q.consume((job) => {
  order.push(job.data);
});
await consumer.idle();
console.log(`ran: ${order.join(', ')}`);
const counts = await q.counts();
console.log(`completed kept: ${counts.completed}`); // 'ping' removed itself

await consumer.close();
await mq.close();
