// consume() with a handler file instead of a function: checks the file and builds the pool
// whose handler the consumer runs (the consumer itself is unchanged by it).

import { EchoMQError } from '../../core/errors.js';
import type { Handler } from '../../core/types.js';
import type { ConsumeOptions } from '../consumer.js';
import { checkSandbox, type SandboxKind, type SandboxOptions, SandboxPool } from './pool.js';

export interface SandboxConsumeOptions {
  /**
   * Where a handler file runs: 'process' (a child process per slot, the default for a file) or
   * 'thread' (a worker thread per slot). Only with a handler file.
   */
  sandbox?: SandboxKind;
  /** Node options, memory caps and the abort grace of each sandbox. See SandboxOptions. */
  sandboxOptions?: SandboxOptions;
}

/**
 * The handler and consume options for the consumer: a function passes through; a file path is
 * checked at once (a missing file, or one that exports no function, is EMQINPUT here) and gets
 * a pool of `concurrency` sandboxes, which the caller closes with its consumer.
 */
export function handlerFor<D, R>(
  handler: Handler<D, R> | string,
  opts: (ConsumeOptions & SandboxConsumeOptions) | undefined,
): { handler: Handler<D, R>; options: ConsumeOptions | undefined; pool?: SandboxPool } {
  if (opts === null || typeof opts !== 'object' || (!('sandbox' in opts) && !('sandboxOptions' in opts))) {
    if (typeof handler === 'string') return handlerFor(handler, { ...(opts ?? {}), sandbox: 'process' });
    return { handler, options: opts ?? undefined };
  }
  const { sandbox, sandboxOptions, ...options } = opts;
  if (typeof handler !== 'string') {
    throw new EchoMQError(
      'EMQINPUT',
      'sandbox takes the path of a handler file (its code must load in another thread or process), not a function',
    );
  }
  const checked = checkSandbox(handler, sandbox ?? 'process', sandboxOptions);
  const size = typeof options.concurrency === 'number' && options.concurrency >= 1 ? options.concurrency : 10;
  const pool = new SandboxPool(checked.path, checked.kind, Math.floor(size), checked.options);
  return { handler: pool.handler as Handler<D, R>, options, pool };
}
