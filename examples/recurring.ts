import { calculateNextMillis, EchoMQ } from 'echomq';

const mq = await EchoMQ.connect({ url: process.env.REDIS_URL });
const jobs = mq.queue<{ kind: string }>(`recurring-${process.pid}`); // a fresh queue per run

// A fixed cadence: every 200 ms from now, a job named 'tick'. Promote releases each and makes the next.
console.log(`repeat: ${await jobs.repeat.register('tick', 200, { kind: 'tick' }, { catchUp: 'once' })}`);

// A job scheduler: a run right away, then every 300 ms; after 3 runs in all it has ended.
const digest = await jobs.schedulers.upsert(
  'digest',
  { every: 300, immediately: true, limit: 3 },
  { data: { kind: 'digest' } },
);
console.log(`scheduler: ${digest.status}`);

// A cron pattern read in a time zone: 03:00 Berlin time, whatever the server's zone.
const nightly = await jobs.schedulers.upsert('nightly', { pattern: '0 3 * * *', tz: 'Europe/Berlin' });
const at = new Date(nightly.nextRunAt!).toLocaleTimeString('en-GB', { timeZone: 'Europe/Berlin' });
console.log(`nightly: ${nightly.status}, next run at ${at} Berlin time`);

const ran: Record<string, number> = {};
let ticked!: () => void;
const threeTicks = new Promise<void>((resolve) => {
  ticked = resolve;
});
const consumer = jobs.consume((job) => {
  ran[job.data.kind] = (ran[job.data.kind] ?? 0) + 1;
  if (job.data.kind === 'tick' && ran.tick === 3) ticked();
});

await threeTicks;
console.log('tick ran 3 times');
while ((await jobs.schedulers.get('digest'))?.ended === undefined || ran.digest !== 3) {
  await new Promise((r) => setTimeout(r, 50));
}
console.log(`digest ran ${ran.digest} times, then ended (${(await jobs.schedulers.get('digest'))?.ended})`);

// Stop them: minted jobs stay ordinary jobs; a scheduler's waiting occurrence is removed.
const unregistered = await jobs.repeat.unregister('tick');
console.log(`unregistered: ${unregistered}, removed: ${await jobs.schedulers.remove('nightly')}`);

// The next-run computation is a pure function. DST: 02:30 does not exist in New York on
// 2026-03-08 (the clocks jump from 02:00 to 03:00), so that day's run is at 03:00 EDT.
const next = calculateNextMillis(
  { pattern: '30 2 * * *', tz: 'America/New_York' },
  Date.parse('2026-03-08T05:00:00Z'), // midnight in New York
);
console.log(`next 02:30 New York run: ${new Date(next!).toISOString()}`);

await consumer.close();
await mq.close();
