import { EchoMQ } from 'echomq';

type Order = { step: 'charge' | 'ship' | 'done'; log: string[] };
const mq = await EchoMQ.connect({ url: process.env.REDIS_URL });
const orders = mq.queue<Order, string[]>(`step-jobs-${process.pid}`); // a fresh queue per run

// A step job: each run does one step, stores how far it got (ctx.update, fenced by the lease)
// and snoozes until the next step is due (ctx.snooze: back in the schedule on the Redis server's
// clock, no attempt spent). A crash repeats only the step that was running.
const consumer = orders.consume(async (job, ctx) => {
  const { step, log } = job.data;
  console.log(`step ${step}`);
  if (step === 'charge') {
    await ctx.update({ step: 'ship', log: [...log, 'charged'] });
    return ctx.snooze(100); // let the payment settle
  }
  if (step === 'ship') {
    await ctx.update({ step: 'done', log: [...log, 'shipped'] });
    return ctx.snooze(100);
  }
  return [...log, 'delivered'];
});
consumer.on('snoozed', (_job, runAt) =>
  console.log(`snoozed until ${new Date(runAt).toISOString().slice(11, 23)}`),
);

const { id } = await orders.enqueue({ step: 'charge', log: [] }, { attempts: 1 });
console.log(`result: ${(await orders.waitFor(id, { timeoutMs: 5000 })).join(', ')}`);
console.log(`attempts used: ${(await orders.get(id))?.attempts} of 1`);

await consumer.close();
await mq.close();
