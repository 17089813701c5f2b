import { EchoMQ } from 'echomq';

const mq = await EchoMQ.connect({ url: process.env.REDIS_URL });
const mail = mq.queue<string>(`consumer-pause-${process.pid}`); // a fresh queue per run

const sent: string[] = [];
const consumer = mail.consume(async (job) => {
  sent.push(job.data);
});

// This consumer stops claiming (its running jobs finish first); the queue is not paused,
// so other consumers, in this process or elsewhere, carry on.
await consumer.pause();
const { id } = await mail.enqueue('welcome');
console.log(`queue paused: ${await mail.isPaused()}, pending: ${(await mail.counts()).pending}`);

consumer.resume();
await mail.waitFor(id, { timeoutMs: 5000 });
console.log(`sent: ${sent.join(', ')}`);

await consumer.close();
await mq.close();
