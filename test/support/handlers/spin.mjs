// Spins the CPU for job.data ms without yielding (a CPU-bound handler): a consumer running it
// in its own thread would miss every lease extension meanwhile.
export default function spin(job) {
  const end = Date.now() + job.data;
  let n = 0;
  // At least one turn: a thread descheduled between reading `end` and the first check would
  // otherwise see its time already over and report 'never' (the test read that as a stale sandbox).
  do n += 1;
  while (Date.now() < end);
  return n > 0 ? 'spun' : 'never';
}
