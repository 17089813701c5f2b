import { EchoMQ } from 'echomq';

const mq = await EchoMQ.connect({ url: process.env.REDIS_URL });
const jobs = mq.queue<string>(`priorities-${process.pid}`); // a fresh queue per run

// Lower runs first; jobs without a priority run before any prioritised one; equal priorities
// run in the order they were enqueued.
await jobs.enqueue('weekly report', { priority: 10 });
await jobs.enqueue('invoice', { priority: 1 });
await jobs.enqueue('password reset'); // no priority
await jobs.enqueue('receipt', { priority: 1 });

const order: string[] = [];
const consumer = jobs.consume(
  (job) => {
    order.push(job.data);
  },
  { concurrency: 1 },
);
await consumer.idle();
console.log(order.join(', '));

await consumer.close();
await mq.close();
