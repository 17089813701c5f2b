// The memory engine's server clock: what TIME answers, stream ids and key expiry read, and what
// every script sees as "now". It runs with the wall clock, from an offset that `advance` and
// `set` move; watchers (parked blocking reads) hear of every move so they can re-check.
import { EchoMQError } from '../../core/errors.js';

export class MemoryClock {
  /** Microseconds added to the wall clock. */
  private offsetUs = 0;
  private readonly watchers = new Set<() => void>();

  /** Now, in microseconds since the epoch. */
  nowUs(): number {
    return Math.floor((performance.timeOrigin + performance.now()) * 1000) + this.offsetUs;
  }

  /** Now, in ms since the epoch. */
  now(): number {
    return Math.floor(this.nowUs() / 1000);
  }

  /** Moves the clock forward by `ms` (a number of ms >= 0). */
  advance(ms: number): void {
    if (typeof ms !== 'number' || !Number.isFinite(ms) || ms < 0) {
      throw new EchoMQError('EMQINPUT', `clock.advance takes a number of ms >= 0, got ${String(ms)}`);
    }
    this.offsetUs += Math.round(ms * 1000);
    this.moved();
  }

  /** Sets the clock to `epochMs` (ms since the epoch, or a Date); it runs on from there. */
  set(epochMs: number | Date): void {
    const ms = epochMs instanceof Date ? epochMs.getTime() : epochMs;
    if (typeof ms !== 'number' || !Number.isFinite(ms) || ms < 0) {
      throw new EchoMQError(
        'EMQINPUT',
        `clock.set takes an instant in epoch ms or a Date, got ${String(epochMs)}`,
      );
    }
    this.offsetUs += Math.round(ms * 1000) - this.nowUs();
    this.moved();
  }

  /** Calls `fn` after every move, until the returned function is called. */
  watch(fn: () => void): () => void {
    this.watchers.add(fn);
    return () => this.watchers.delete(fn);
  }

  private moved(): void {
    for (const fn of [...this.watchers]) fn();
  }
}
