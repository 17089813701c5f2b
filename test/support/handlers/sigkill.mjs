// SIGKILLs its own process on the first attempt (process sandboxes only); the retry returns.
export default function sigkill(job) {
  if (job.attempts === 1) process.kill(process.pid, 'SIGKILL');
  return `attempt ${job.attempts}`;
}
