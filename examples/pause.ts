import { EchoMQ } from 'echomq';

const mq = await EchoMQ.connect({ url: process.env.REDIS_URL });
const jobs = mq.queue<string>(`pause-${process.pid}`); // a fresh queue per run
const consumer = jobs.consume((job) => console.log(`ran ${job.data}`));

// Pause every consumer of the queue: running jobs finish, nothing new starts.
await jobs.pause();
const { id } = await jobs.enqueue('enqueued while paused'); // enqueue still works
console.log(`paused: ${await jobs.isPaused()}, pending: ${(await jobs.counts()).pending}`);

// One lane can be paused on its own, while the others flow.
await jobs.lanes.pause('imports');

await jobs.resume(); // wakes the parked consumers
await jobs.waitFor(id, { timeoutMs: 5000 });
console.log(`paused: ${await jobs.isPaused()}`);

await consumer.close();
await mq.close();
