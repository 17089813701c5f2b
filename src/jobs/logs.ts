// Per-job logs: lines a handler writes with ctx.log, kept in the list P job:<id>:logs beside the
// row (the newest `maxLogLines`, older ones trimmed first) and deleted with it. The consumer
// buffers lines and sends them with the job's acknowledgement or its lease checkpoint (one `log`
// call for every job with lines), so logging costs no round trip per line.
import { knownKeys, wholeNumber } from '../core/check.js';
import { EchoMQError, optionsObject } from '../core/errors.js';
import { assertJobId } from '../core/ids.js';
import type { QueueWire } from '../wire/queue-wire.js';
import { logPage } from '../wire/reads.js';

const LOGS_OPTIONS = new Set(['from', 'count']);
export const DEFAULT_LOG_LINES = 100;
export const DEFAULT_LOG_LINE_BYTES = 1024;

/** A line over `maxBytes` keeps its head and says how long it was. */
export function logLine(line: unknown, maxBytes: number): string {
  if (typeof line !== 'string') {
    throw new EchoMQError('EMQINPUT', `ctx.log takes a string, got ${typeof line}; format it first`);
  }
  const size = Buffer.byteLength(line);
  if (size <= maxBytes) return line;
  const marker = `… [truncated, ${size} bytes]`;
  const room = Math.max(0, maxBytes - Buffer.byteLength(marker));
  // Cutting bytes may split a character: the decoder drops the broken tail.
  const head = Buffer.from(line)
    .subarray(0, room)
    .toString('utf8')
    .replace(/\uFFFD+$/, '');
  return head + marker;
}

export interface LogPage {
  /** The lines from `from`, oldest first. */
  logs: string[];
  /** How many lines the job's log holds (the newest `maxLogLines` are kept). */
  count: number;
}

/** A page of a job's log: `count` lines (default 100) from index `from` (default 0, the oldest kept). */
export async function readLogs(
  w: QueueWire,
  id: string,
  options?: { from?: number; count?: number },
): Promise<LogPage> {
  w.connector.assertOpen();
  assertJobId(id);
  const opts = optionsObject(options, 'logs options');
  knownKeys(opts, LOGS_OPTIONS, 'logs option');
  const from = wholeNumber(opts.from ?? 0, 'from', 0);
  const count = wholeNumber(opts.count ?? 100, 'count', 1, 100_000);
  return logPage(w, id, from, count);
}
