// Crashes its sandbox on the first attempt (process.exit(3)); the retry returns.
export default function exit(job) {
  if (job.attempts === 1) process.exit(3);
  return `attempt ${job.attempts}`;
}
