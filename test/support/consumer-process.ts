// A consumer in a process of its own, for the crash tests (a test SIGKILLs it mid-job).
// Usage: node --import tsx test/support/consumer-process.ts <redis-url> <queue> <leaseMs> [concurrency]
// Its handler prints `started <job id>` and never returns, so the job stays held under this
// process's lease until the process dies; the lease is extended by the consumer as usual.
import { EchoMQ } from '../../src/queue/echomq.js';

const [url, queue, leaseMs, concurrency = '1'] = process.argv.slice(2);
if (!url || !queue || !leaseMs) {
  process.stderr.write('usage: consumer-process.ts <redis-url> <queue> <leaseMs> [concurrency]\n');
  process.exit(2);
}

const mq = await EchoMQ.connect({ url });
mq.queue(queue).consume(
  async (job) => {
    process.stdout.write(`started ${job.id}\n`);
    await new Promise<never>(() => {}); // held until the process is killed
  },
  { concurrency: Number(concurrency), leaseMs: Number(leaseMs) },
);
process.stdout.write('ready\n');
