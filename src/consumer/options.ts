// Consume options: each with its unit and default, and the one check that turns what a caller
// passed into settings the consumer's parts read (a bad or unknown option is refused before the
// consumer exists, so nothing half-started is left behind).

import { Backoff, type BackoffPolicy } from '../core/backoff.js';
import { atLeast, knownKeys } from '../core/check.js';
import { EchoMQError, optionsObject, showValue } from '../core/errors.js';
import { DEFAULT_LOG_LINE_BYTES, DEFAULT_LOG_LINES } from '../jobs/logs.js';
import type { Durability, Replication } from '../wire/durability.js';
import { checkRetryPolicies, type RetryPolicy } from './retry-policy.js';

export type Recovery = 'reap' | 'stalled' | 'off';

export interface ConsumeOptions {
  /** Handlers running at once in this consumer. Default 10. */
  concurrency?: number;
  /** Lease length in ms: a job whose lease is not extended for this long is recovered. Default 30000. */
  leaseMs?: number;
  /** How often leases are extended (and a cancel request is noticed), in ms. Default leaseMs / 3. */
  extendMs?: number;
  /** The beat in ms: recovery runs and an idle consumer re-checks this often. Default 1000. */
  beatMs?: number;
  /** Recovery of expired leases: 'reap' (default), 'stalled' (dead-letter past maxStalled) or 'off'. */
  recovery?: Recovery;
  /** With recovery 'stalled': recoveries allowed before a job is dead-lettered. Default 1. */
  maxStalled?: number;
  /** Scheduled jobs released per promote call. Default 100. */
  promoteBatch?: number;
  /** Close the consumer after this many ms (a worker that recycles itself). Default: never. */
  ttlMs?: number;
  /** Retry delay for jobs enqueued without their own policy. Default exponential 1 s, cap 5 min. */
  backoff?: BackoffPolicy;
  /** Largest error message / stack stored on the row, in bytes. Default 2048 / 8192. */
  maxErrorBytes?: number;
  maxStackBytes?: number;
  /** Lines a job's log keeps (ctx.log; older ones are trimmed first). Default 100. */
  maxLogLines?: number;
  /** Longest log line in bytes; a longer one is cut and marked. Default 1024. */
  maxLogLineBytes?: number;
  /**
   * Completions resolve only once this many replicas have them (WAIT); one not confirmed is
   * sent again (a resent acknowledgement is idempotent). Default: connect's `durability`.
   */
  durability?: Durability | false;
  /**
   * Execution timeout per attempt in ms, for jobs enqueued without their own `timeoutMs`: the
   * handler's signal aborts and the attempt fails with reason `timeout`. Default: none.
   */
  timeoutMs?: number;
  /** A retry policy as code, for every job (see RetryPolicy). Default: the declarative backoff. */
  retry?: RetryPolicy;
  /** Per job name, a retry policy in place of `retry`. */
  retryByName?: Record<string, RetryPolicy>;
}

/** ConsumeOptions checked, with every default filled in. */
export interface ConsumeSettings {
  readonly concurrency: number;
  readonly leaseMs: number;
  readonly extendMs: number;
  readonly beatMs: number;
  readonly recovery: Recovery;
  /** The replicas every completion waits for (consume's or connect's `durability`), if any. */
  readonly durability: Replication | undefined;
  readonly maxStalled: number;
  readonly promoteBatch: number;
  readonly ttlMs: number | undefined;
  readonly backoff: BackoffPolicy;
  readonly maxErrorBytes: number;
  readonly maxStackBytes: number;
  readonly maxLogLines: number;
  readonly maxLogLineBytes: number;
  readonly timeoutMs: number | undefined;
  readonly retry: RetryPolicy | undefined;
  readonly retryByName: Record<string, RetryPolicy> | undefined;
  /** Completions per complete call at most (a batch consumer's batch size); default ackChunkFor(concurrency). */
  readonly ackChunk?: number;
}

/** The settings a consumer shows as its own read-only properties (consumer.concurrency, ...). */
const SHOWN = [
  'concurrency',
  'leaseMs',
  'extendMs',
  'beatMs',
  'recovery',
  'durability',
  'maxStalled',
  'promoteBatch',
  'ttlMs',
  'maxLogLines',
] as const;
export type ShownSettings = Pick<ConsumeSettings, (typeof SHOWN)[number]>;

/** The shown part of `s`, to be assigned onto the consumer. */
export function shownSettings(s: ConsumeSettings): ShownSettings {
  return Object.fromEntries(SHOWN.map((k) => [k, s[k]])) as ShownSettings;
}

/** Every ConsumeOptions field (the Record makes a new option a compile error until listed). */
const CONSUME_OPTION_FIELDS: Record<keyof ConsumeOptions, true> = {
  concurrency: true,
  leaseMs: true,
  extendMs: true,
  beatMs: true,
  recovery: true,
  maxStalled: true,
  promoteBatch: true,
  ttlMs: true,
  backoff: true,
  maxErrorBytes: true,
  maxStackBytes: true,
  maxLogLines: true,
  maxLogLineBytes: true,
  durability: true,
  timeoutMs: true,
  retry: true,
  retryByName: true,
};
/** Anything else is refused: a misspelt option is no silent default. */
const CONSUME_OPTIONS: ReadonlySet<string> = new Set(Object.keys(CONSUME_OPTION_FIELDS));
export const DEFAULT_BACKOFF: BackoffPolicy = { kind: 'exponential', base: 1000, cap: 300_000 };

/**
 * Checks consume options in a fixed order (the first bad one is the one reported) and fills in
 * the defaults. `durabilityFor` resolves `durability` against the connection's own (the queue's
 * rule, shared with enqueue).
 */
export function consumeSettings(
  options: ConsumeOptions | undefined,
  durabilityFor: (value: unknown, where: string) => Replication | undefined,
): ConsumeSettings {
  const opts = optionsObject(options, 'consume options');
  knownKeys(opts, CONSUME_OPTIONS, 'consume option');
  const concurrency = atLeast(opts.concurrency ?? 10, 'concurrency', 1);
  const leaseMs = atLeast(opts.leaseMs ?? 30_000, 'leaseMs', 1);
  const extendMs = atLeast(opts.extendMs ?? Math.max(1, Math.floor(leaseMs / 3)), 'extendMs', 1);
  const beatMs = atLeast(opts.beatMs ?? 1000, 'beatMs', 1);
  const recovery = opts.recovery ?? 'reap';
  const durability = durabilityFor(opts.durability, 'consume');
  if (!['reap', 'stalled', 'off'].includes(recovery)) {
    throw new EchoMQError(
      'EMQINPUT',
      `recovery must be 'reap', 'stalled' or 'off', got ${showValue(opts.recovery)}`,
    );
  }
  checkRetryPolicies(opts);
  return {
    concurrency,
    leaseMs,
    extendMs,
    beatMs,
    recovery,
    durability,
    maxStalled: atLeast(opts.maxStalled ?? 1, 'maxStalled', 0),
    promoteBatch: atLeast(opts.promoteBatch ?? 100, 'promoteBatch', 1),
    ttlMs: opts.ttlMs === undefined ? undefined : atLeast(opts.ttlMs, 'ttlMs', 1),
    backoff: Backoff.validate(opts.backoff ?? DEFAULT_BACKOFF),
    maxErrorBytes: atLeast(opts.maxErrorBytes ?? 2048, 'maxErrorBytes', 1),
    maxStackBytes: atLeast(opts.maxStackBytes ?? 8192, 'maxStackBytes', 1),
    maxLogLines: atLeast(opts.maxLogLines ?? DEFAULT_LOG_LINES, 'maxLogLines', 1),
    maxLogLineBytes: atLeast(opts.maxLogLineBytes ?? DEFAULT_LOG_LINE_BYTES, 'maxLogLineBytes', 32),
    timeoutMs: opts.timeoutMs === undefined ? undefined : atLeast(opts.timeoutMs, 'timeoutMs', 1),
    retry: opts.retry,
    retryByName: opts.retryByName,
  };
}
