import { EchoMQ, type EchoMQError } from 'echomq';

const mq = await EchoMQ.connect({ url: process.env.REDIS_URL });
const exports = mq.queue<{ file: string }>(`manual-claim-${process.pid}`); // a fresh queue per run

await exports.enqueue({ file: 'a.csv' });
await exports.enqueue({ file: 'b.csv' });

// Take jobs by hand, e.g. to hand them to another system that calls back when done.
const jobs = await exports.claim(2, { leaseMs: 10_000 });
console.log(`claimed: ${jobs.map((j) => j.data.file).join(', ')}`);

const [a, b] = jobs;
await a!.extend(); // still working: the lease runs another leaseMs from now
await a!.complete('uploaded'); // fenced by the job's lease token
console.log(`b: ${await b!.fail(new Error('remote refused'))}`); // retried per its backoff

// A completion sent again is idempotent; anything else after the end is refused by the token.
await a!.fail(new Error('late')).catch((err: EchoMQError) => console.log(`late fail: ${err.code}`));

await mq.close();
