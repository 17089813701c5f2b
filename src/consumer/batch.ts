// Batch consumption: queue.consumeBatch(handler, { size, waitMs, concurrency }) hands the
// handler up to `size` jobs at once. It is a consumer with size x concurrency slots whose
// per-job handler only collects: a batch starts once `size` jobs are in (a claim brings up to
// all free slots' worth in one call) or `waitMs` after its first job came (one timer per
// forming batch, none per job). The handler's answer settles every job of the batch in the same
// tick, so the completions travel as one `complete` call (the ack chunk is the batch size);
// each failed job is its own `fail` call, as with any consumer.

import { atLeast } from '../core/check.js';
import { EchoMQError, optionsObject } from '../core/errors.js';
import type { Job, JobContext } from '../core/types.js';
import type { QueueWire } from '../wire/queue-wire.js';
import { type ConsumeOptions, Consumer } from './consumer.js';

/** A job of a batch: the Job, and its own ctx (progress, log, checkpoint, signal...). */
export type BatchJob<D> = Job<D> & JobContext;

export interface Batch<D> {
  /** Up to `size` jobs, in claim order. */
  readonly jobs: readonly BatchJob<D>[];
  /** Fails one job of the batch (retried per its policy); the others complete with their results. */
  fail(job: Job<D>, error: unknown): void;
}

/**
 * Returns one result per job, in `batch.jobs` order (or nothing: every job completes without a
 * result); a failed job's entry is ignored. A throw fails every job of the batch that was not
 * failed already.
 */
export type BatchHandler<D, R> = (
  batch: Batch<D>,
) => Promise<readonly R[] | undefined> | readonly R[] | undefined;

export interface BatchOptions extends Omit<ConsumeOptions, 'concurrency'> {
  /** Most jobs in one batch (>= 1). */
  size: number;
  /** How long a batch waits to fill after its first job, in ms. Default 0: it takes what one claim brought. */
  waitMs?: number;
  /** Batches running at once. Default 1. */
  concurrency?: number;
}

interface Entry<D, R> {
  job: BatchJob<D>;
  resolve: (result: R) => void;
  reject: (error: unknown) => void;
}

class Collector<D, R> {
  private forming: Entry<D, R>[] = [];
  private timer: NodeJS.Timeout | undefined;

  constructor(
    private readonly handler: BatchHandler<D, R>,
    private readonly size: number,
    private readonly waitMs: number,
  ) {}

  /** The consumer's per-job handler: the job's outcome is settled when its batch ends. */
  add(job: BatchJob<D>): Promise<R> {
    return new Promise<R>((resolve, reject) => {
      this.forming.push({ job, resolve, reject });
      if (this.forming.length >= this.size) this.dispatch();
      // Jobs of one claim arrive in one tick: with no wait, the batch starts once they are all in.
      else if (!this.timer) this.timer = setTimeout(() => this.dispatch(), this.waitMs);
    });
  }

  private dispatch(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
    const entries = this.forming.splice(0, this.size);
    if (this.forming.length > 0) this.timer = setTimeout(() => this.dispatch(), this.waitMs);
    if (entries.length > 0) void this.run(entries);
  }

  private async run(entries: Entry<D, R>[]): Promise<void> {
    const failed = new Map<Job<D>, unknown>();
    const batch: Batch<D> = {
      jobs: entries.map((e) => e.job),
      fail: (job, error) => {
        if (!entries.some((e) => e.job === job)) {
          throw new EchoMQError(
            'EMQINPUT',
            `batch.fail() takes a job of this batch; job ${job.id} is not one`,
          );
        }
        failed.set(job, error);
      },
    };
    let results: readonly R[] | undefined;
    try {
      results = await this.handler(batch);
      if (results !== undefined && !Array.isArray(results)) {
        throw new EchoMQError(
          'EMQINPUT',
          'a batch handler returns an array of results in batch.jobs order, or nothing',
        );
      }
    } catch (err) {
      for (const e of entries) e.reject(failed.has(e.job) ? failed.get(e.job) : err);
      return;
    }
    for (const [i, e] of entries.entries()) {
      if (failed.has(e.job)) e.reject(failed.get(e.job));
      else e.resolve(results?.[i] as R);
    }
  }
}

/** Starts a batch consumer (queue.consumeBatch). */
export function consumeBatch<D, R>(
  queue: QueueWire,
  handler: BatchHandler<D, R>,
  options: BatchOptions,
): Consumer<D, R> {
  if (typeof handler !== 'function') {
    throw new EchoMQError('EMQINPUT', 'consumeBatch() takes a handler function (batch) => results');
  }
  const { size, waitMs, concurrency, ...rest } = optionsObject(options, 'consumeBatch options');
  const batchSize = atLeast(size, 'size', 1, 'a batch holds at least one job');
  const wait = atLeast(waitMs ?? 0, 'waitMs', 0);
  const batches = atLeast(concurrency ?? 1, 'concurrency', 1);
  const collector = new Collector<D, R>(handler, batchSize, wait);
  return new Consumer<D, R>(
    queue,
    (job) => collector.add(job as BatchJob<D>),
    { ...rest, concurrency: batchSize * batches },
    { ackChunk: batchSize },
  );
}
