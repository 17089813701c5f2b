import { EchoMQ } from 'echomq';

const mq = await EchoMQ.connect({ url: process.env.REDIS_URL });
const hashes = mq.queue<{ text: string; rounds: number }>(`sandbox-${process.pid}`); // a fresh queue per run

// The handler is a file: each of the 2 slots runs it in a worker thread of its own ('process'
// would use child processes). A TypeScript file needs a TS loader in the sandbox: tsx here.
const consumer = hashes.consume('examples/handlers/checksum.ts', {
  sandbox: 'thread',
  sandboxOptions: { execArgv: ['--import', 'tsx'], resourceLimits: { maxOldGenerationSizeMb: 64 } },
  concurrency: 2,
});

const { id } = await hashes.enqueue({ text: 'hello', rounds: 100_000 });
console.log(`checksum: ${await hashes.waitFor(id, { timeoutMs: 60_000 })}`);
console.log(`log: ${(await hashes.logs(id)).logs.join(', ')}`);

await consumer.close();
await mq.close();
