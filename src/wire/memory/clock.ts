// The memory engine's server clock: what TIME answers, stream ids and key expiry read, and what
// every script sees as "now". It runs with the wall clock, from an offset that `advance` and
// `set` move; watchers (parked blocking reads, consumers) hear of every move so they re-check
// what has fallen due. `mq.clock` is this clock on a memory engine and a refusing stand-in on
// Redis, whose clock only real time moves.
import { parseDuration } from '../../core/duration.js';
import { EchoMQError } from '../../core/errors.js';

/** A server clock a test can move: `mq.clock` (docs/guide/testing.md). */
export interface EngineClock {
  /** The server's now, epoch ms. */
  now(): number;
  /** Moves the clock forward by `by`: ms, or a duration such as '5m' or '1d'. */
  advance(by: number | string): void;
  /** Moves the clock to `to` (epoch ms, a Date, or an ISO 8601 string); it runs on from there. */
  set(to: number | Date | string): void;
}

export class MemoryClock implements EngineClock {
  /** Microseconds added to the wall clock. */
  private offsetUs = 0;
  private readonly watchers = new Set<() => void>();

  /** Now, in microseconds since the epoch. */
  nowUs(): number {
    return Math.floor((performance.timeOrigin + performance.now()) * 1000) + this.offsetUs;
  }

  now(): number {
    return Math.floor(this.nowUs() / 1000);
  }

  advance(by: number | string): void {
    const ms = typeof by === 'string' ? parseDuration(by) : by;
    if (typeof ms !== 'number' || !Number.isFinite(ms) || ms < 0) {
      throw new EchoMQError(
        'EMQINPUT',
        `clock.advance takes ms >= 0 or a duration such as '5m', got ${String(by)}`,
      );
    }
    this.offsetUs += Math.round(ms * 1000);
    this.moved();
  }

  set(to: number | Date | string): void {
    const ms = to instanceof Date ? to.getTime() : typeof to === 'string' ? Date.parse(to) : to;
    if (typeof ms !== 'number' || !Number.isFinite(ms) || ms < 0) {
      throw new EchoMQError(
        'EMQINPUT',
        `clock.set takes an instant: epoch ms, a Date or an ISO 8601 string, got ${String(to)}`,
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

/** `mq.clock` on a Redis connection: every move refuses, saying why and what to do. */
export const REDIS_CLOCK: EngineClock = {
  now() {
    throw notMovable('now');
  },
  advance() {
    throw notMovable('advance');
  },
  set() {
    throw notMovable('set');
  },
};

function notMovable(verb: string): EchoMQError {
  return new EchoMQError(
    'EMQINPUT',
    `mq.clock.${verb}() works on a memory engine only: this connection is to Redis, whose clock ` +
      `(TIME) moves with real time alone; connect with url 'memory://' to move time in tests`,
  );
}
