import { EchoMQ } from 'echomq';

// Connect (REDIS_URL, else redis://127.0.0.1:6379) and open a typed queue.
const mq = await EchoMQ.connect({ url: process.env.REDIS_URL });
const emails = mq.queue<{ to: string }, string>('emails');

// Watch: print the queue's lifecycle events as they happen.
const events = emails.events();
const seenCompleted = new Promise<void>((resolve) => {
  events.subscribe((e) => {
    console.log(`event: ${e.event}`);
    if (e.event === 'completed') resolve();
  });
});
await events.ready;

// Consume: run a handler over the queue's jobs, up to 5 at once.
const consumer = emails.consume(
  async (job) => {
    console.log(`sending to ${job.data.to} (attempt ${job.attempts} of ${job.maxAttempts})`);
    return `sent to ${job.data.to}`;
  },
  { concurrency: 5 },
);

// Produce: enqueue a job, then wait for its result.
const { id } = await emails.enqueue({ to: 'ada@example.com' }, { name: 'welcome' });
console.log(`result: ${await emails.waitFor(id, { timeoutMs: 10_000 })}`);
await seenCompleted;

// Shut down: let running handlers finish, then close every connection.
await consumer.close();
await events.close();
await mq.close();
