import { EchoMQ } from 'echomq';

const mq = await EchoMQ.connect({ url: process.env.REDIS_URL });
const imports = mq.queue<{ rows: number }>(`progress-${process.pid}`); // a fresh queue per run

// Anyone can follow progress as `progress` events (a CLI, a dashboard, another service).
const events = imports.events();
events.subscribe((e) => console.log(`progress ${e.fields.progress}`), 'progress');
await events.ready;

const consumer = imports.consume(async (job, ctx) => {
  for (let done = 1; done <= job.data.rows; done++) {
    // ... import one row ...
    await ctx.progress({ done, of: job.data.rows }); // stored on the job's row, and an event
  }
  return 'imported';
});

const { id } = await imports.enqueue({ rows: 3 });
await imports.waitFor(id, { timeoutMs: 5000 });
console.log(`last progress: ${JSON.stringify((await imports.get(id))?.progress)}`);

await consumer.close();
await events.close();
await mq.close();
