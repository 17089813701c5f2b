// A sandboxed handler (test/consumer/sandbox.test.ts): logs, reports progress, checkpoints, and returns
// its data doubled with the thread or process it ran in.
import { threadId } from 'node:worker_threads';

export default async function handler(job, ctx) {
  ctx.log(`doubling ${job.data}`);
  await ctx.progress({ step: 1 });
  await ctx.checkpoint();
  return { doubled: job.data * 2, pid: process.pid, threadId };
}
