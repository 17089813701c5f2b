// Spins the CPU for job.data ms without yielding (a CPU-bound handler): a consumer running it
// in its own thread would miss every lease extension meanwhile.
export default function spin(job) {
  const end = Date.now() + job.data;
  let n = 0;
  while (Date.now() < end) n += 1;
  return n > 0 ? 'spun' : 'never';
}
