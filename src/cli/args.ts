// Parsers of option values: each turns the text into the value the command uses, or throws
// commander's InvalidArgumentError, which commander reports with the option's name (exit 1).
import { InvalidArgumentError } from 'commander';
import { parseDuration } from '../core/duration.js';
import { JOB_STATES, type JobState } from '../core/types.js';

/** A whole number from `min` to `max`. */
export function wholeArg(min: number, max = Number.MAX_SAFE_INTEGER) {
  return (value: string): number => {
    const n = Number(value);
    if (!/^\d+$/.test(value) || !Number.isSafeInteger(n) || n < min || n > max) {
      throw new InvalidArgumentError(`expected a whole number from ${min} to ${max}`);
    }
    return n;
  };
}

/** BullMQ's (and Sidekiq's) names for the states, accepted beside EchoMQ's own. */
export const STATE_ALIASES: Readonly<Record<string, JobState>> = {
  failed: 'dead',
  delayed: 'scheduled',
  waiting: 'pending',
  wait: 'pending',
  prioritized: 'pending',
  'waiting-children': 'waiting_children',
  retry: 'scheduled',
};

/** A job state, by EchoMQ's name or a BullMQ alias (failed, delayed, waiting). */
export function stateArg(value: string): JobState {
  if ((JOB_STATES as readonly string[]).includes(value)) return value as JobState;
  const alias = STATE_ALIASES[value];
  if (alias) return alias;
  throw new InvalidArgumentError(
    `expected one of ${JOB_STATES.join(', ')} (or ${Object.keys(STATE_ALIASES).join(', ')})`,
  );
}

/** A duration: 500ms, 5s, 10m, 1h, 7d (see parseDuration); in ms. */
export function durationArg(value: string): number {
  try {
    return parseDuration(value);
  } catch (err) {
    throw new InvalidArgumentError((err as Error).message.replace(/^EMQINPUT: /, ''));
  }
}

/** An instant: epoch ms, or an ISO 8601 date. */
export function instantArg(value: string): number {
  const n = /^\d+$/.test(value) ? Number(value) : Date.parse(value);
  if (!Number.isSafeInteger(n) || n < 0) {
    throw new InvalidArgumentError('expected epoch ms or an ISO date, e.g. 2030-01-01T09:00:00Z');
  }
  return n;
}

/** Where a stream read starts: '$', 0, or a stream id. */
export function fromArg(value: string): string {
  if (!/^(\$|\d+(-\d+)?)$/.test(value)) {
    throw new InvalidArgumentError("expected '$' (new events only), 0 (replay the stream) or a stream id");
  }
  return value;
}
