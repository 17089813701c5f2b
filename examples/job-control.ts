import { EchoMQ } from 'echomq';

const mq = await EchoMQ.connect({ url: process.env.REDIS_URL });
const mail = mq.queue<{ to: string; body: string }>(`job-control-${process.pid}`); // a fresh queue per run

// Three jobs that have not started yet: one due in an hour, two waiting with priorities.
const reminder = await mail.enqueueIn({ to: 'ana', body: 'see you' }, 3_600_000);
const digest = await mail.enqueue({ to: 'bo', body: 'digest' }, { priority: 5 });
const alert = await mail.enqueue({ to: 'cy', body: 'disk 91%' }, { priority: 5 });

await mail.update(alert.id, { to: 'cy', body: 'disk 97%' }); // new data, same job
await mail.reprioritize(alert.id, 1); // now ahead of the digest
await mail.reschedule(digest.id, { in: 3_600_000 }); // the digest waits an hour more
await mail.promote(reminder.id); // the reminder runs now instead

const sent: string[] = [];
const consumer = mail.consume((job) => {
  sent.push(`${job.data.to}: ${job.data.body}`);
  return 'sent';
});
await mail.waitFor(reminder.id, { timeoutMs: 5000 });
await mail.waitFor(alert.id, { timeoutMs: 5000 });
console.log(`sent: ${sent.join(', ')}`);
console.log(`digest is ${(await mail.get(digest.id))?.state}`);

// A job that went wrong runs again, even once completed (a re-run).
await mail.retry(alert.id);
await mail.waitFor(alert.id, { timeoutMs: 5000 });
console.log(`alert ran ${sent.filter((s) => s.startsWith('cy')).length} times`);
await consumer.close();

// A job that has started cannot be changed under its holder.
const slow = await mail.enqueue({ to: 'dee', body: 'slow' });
const busy = mail.consume(() => new Promise((resolve) => setTimeout(resolve, 300)));
while ((await mail.get(slow.id))?.state !== 'active') await new Promise((r) => setTimeout(r, 10));
await mail.update(slow.id, { to: 'dee', body: 'changed' }).catch((err) => console.log(err.code));

await busy.close();
await mq.close();
