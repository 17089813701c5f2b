// A CPU-bound handler in a file of its own, for examples/sandbox.ts: it runs in a sandbox (a
// worker thread here), so hashing never stalls the consumer's beat or lease extensions.
import { createHash } from 'node:crypto';
import type { Job, JobContext } from 'echomq';

export default async function checksum(job: Job<{ text: string; rounds: number }>, ctx: JobContext) {
  let digest = job.data.text;
  for (let i = 0; i < job.data.rounds; i++) digest = createHash('sha256').update(digest).digest('hex');
  ctx.log(`hashed ${job.data.rounds} times`); // ctx works as in-process: log, progress, signal
  return digest.slice(0, 12);
}
