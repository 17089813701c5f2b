import { EchoMQ } from 'echomq';

const mq = await EchoMQ.connect({ url: process.env.REDIS_URL });
const jobs = mq.queue<{ tenant: string }>(`lanes-${process.pid}`); // a fresh queue per run

// Every lane runs at most 2 jobs at once across all consumers; 'acme' 1, and 5 per second.
await jobs.lanes.configureDefault({ concurrency: 2 });
await jobs.lanes.configure('acme', { concurrency: 1, rateLimit: { max: 5, perMs: 1000 } });

// A tenant with a backlog does not hold up the others: lanes are served round-robin.
for (let i = 0; i < 4; i++) await jobs.enqueue({ tenant: 'big' }, { group: 'big' });
await jobs.enqueue({ tenant: 'acme' }, { group: 'acme' });
await jobs.enqueue({ tenant: 'small' }, { group: 'small' });

const order: string[] = [];
const consumer = jobs.consume(
  (job) => {
    order.push(job.data.tenant);
  },
  { concurrency: 1 },
);
await consumer.idle();
console.log(`started in order: ${order.join(' ')}`);

for (const lane of await jobs.lanes.list()) {
  console.log(`lane ${lane.group}: concurrency ${lane.concurrency}, ${lane.pending} waiting`);
}

await consumer.close();
await mq.close();
