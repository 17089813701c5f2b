// The chaos suite's fault schedule: a seeded PRNG (mulberry32, a few lines of our own, so a seed
// replays the same schedule on any machine) and the plan of which fault strikes when.
//
// Fault kinds:
//   kill    SIGKILL a consumer process (a replacement is started at once)
//   stop    SIGSTOP a consumer for longer than its lease, then SIGCONT: it wakes up as a zombie
//           whose jobs were recovered and re-run elsewhere, and its late results must be refused
//   client  CLIENT KILL TYPE normal: every client connection is dropped server-side
//   restart SIGKILL redis-server and start it again on the same dir and port (a crash, not a
//           clean shutdown: what survives is what the AOF holds)
//   slow    a consumer's next handler blocks its event loop for longer than the lease (no lease
//           extension can run), so the handler outlives its lease

export type FaultKind = 'kill' | 'stop' | 'client' | 'restart' | 'slow';
export const FAULT_KINDS: readonly FaultKind[] = ['kill', 'stop', 'client', 'restart', 'slow'];

export interface Fault {
  /** ms after the start of the fault window. */
  at: number;
  kind: FaultKind;
  /** A number the harness maps onto a live consumer (kill, stop, slow). */
  target: number;
  /** stop: how long the process stays stopped, in ms. */
  holdMs: number;
}

/** mulberry32: a tiny, fast 32-bit PRNG; the same seed gives the same sequence everywhere. */
export function mulberry32(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** A whole number in [lo, hi] from `rand`. */
export function between(rand: () => number, lo: number, hi: number): number {
  return lo + Math.floor(rand() * (hi - lo + 1));
}

export interface FaultPlanOptions {
  seed: number;
  /** Length of the run in ms; faults are placed in [10 %, 75 %] of it, so the end is calm. */
  durationMs: number;
  leaseMs: number;
  /** How often the consumers recover expired leases (their beat), ms. */
  beatMs: number;
  /** One extra fault per this many ms on average, beyond one of each kind. Default 5000. */
  everyMs?: number;
}

/**
 * The schedule: every kind once (in a seeded order, evenly spread with jitter), then extra
 * faults of seeded kinds at seeded instants. Two restarts are kept at least 2 s apart, and a stop
 * lasts lease + two beats + up to a second, so the lease surely expires and is recovered before
 * the process wakes up.
 */
export function planFaults(opts: FaultPlanOptions): Fault[] {
  const rand = mulberry32(opts.seed ^ 0x5eed);
  const from = Math.floor(opts.durationMs * 0.1);
  const to = Math.floor(opts.durationMs * 0.75);
  const span = Math.max(1, to - from);
  const hold = () => opts.leaseMs + 2 * opts.beatMs + between(rand, 0, 1000);
  const order = [...FAULT_KINDS];
  for (let i = order.length - 1; i > 0; i--) {
    const j = between(rand, 0, i);
    [order[i], order[j]] = [order[j]!, order[i]!];
  }
  const faults: Fault[] = order.map((kind, i) => ({
    at: from + Math.floor(((i + 0.25 + rand() * 0.5) * span) / order.length),
    kind,
    target: between(rand, 0, 1_000_000),
    holdMs: kind === 'stop' ? hold() : 0,
  }));
  const extra = Math.max(0, Math.floor(opts.durationMs / (opts.everyMs ?? 5000)) - order.length);
  for (let i = 0; i < extra; i++) {
    const kind = FAULT_KINDS[between(rand, 0, FAULT_KINDS.length - 1)]!;
    const at = from + between(rand, 0, span);
    if (kind === 'restart' && faults.some((f) => f.kind === 'restart' && Math.abs(f.at - at) < 2000))
      continue;
    faults.push({ at, kind, target: between(rand, 0, 1_000_000), holdMs: kind === 'stop' ? hold() : 0 });
  }
  return faults.sort((a, b) => a.at - b.at);
}
