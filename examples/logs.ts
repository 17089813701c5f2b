import { EchoMQ } from 'echomq';

const mq = await EchoMQ.connect({ url: process.env.REDIS_URL });
const imports = mq.queue<{ rows: string[] }>(`logs-${process.pid}`); // a fresh queue per run

const consumer = imports.consume(
  (job, ctx) => {
    ctx.log(`importing ${job.data.rows.length} rows`); // buffered: no round trip per line
    for (const row of job.data.rows) ctx.log(`row ${row}: ok`);
    ctx.log('x'.repeat(100)); // a line over maxLogLineBytes is cut and marked
    return 'imported';
  },
  { maxLogLines: 4, maxLogLineBytes: 40 }, // defaults: 100 lines of 1 KiB
);

const { id } = await imports.enqueue({ rows: ['a', 'b', 'c'] });
await imports.waitFor(id, { timeoutMs: 5000 });

// The newest lines are kept with the job (oldest trimmed first), and removed with it.
const { logs, count } = await imports.logs(id);
console.log(`${count} lines kept:`);
for (const line of logs) console.log(`  ${line}`);
console.log(`from line 2: ${(await imports.logs(id, { from: 2, count: 1 })).logs[0]}`);

await consumer.close();
await mq.close();
