// Hand-offs (SPEC 19.37-19.40): a running job handed back for later without spending an attempt
// (snooze, rate_limit), and a flow child's end handed to its parent in another queue (notices
// lists what waits here, child_notice applies one). See verbs/index.ts.
import { EchoMQError } from '../../core/errors.js';
import type { QueueWire } from '../queue-wire.js';

/** snooze's and rate_limit's reply: an instant (server ms), or -1. */
async function instant(
  w: QueueWire,
  verb: 'snooze' | 'rate_limit',
  id: string,
  token: string,
  delayMs: number,
): Promise<number> {
  const at = await w.run(verb, [w.keys.prefix, id, token, delayMs], id);
  if (typeof at !== 'number') throw new EchoMQError('EMQPROTOCOL', `${verb} replied ${String(at)}`);
  return at;
}

// ── 19.37 snooze, 19.38 rate_limit ────────────────────────────────────────────

/** Runs the job again `delayMs` from now (server clock); the run-at, or -1 when dead-lettered as bad data. */
export function snooze(w: QueueWire, id: string, token: string, delayMs: number): Promise<number> {
  return instant(w, 'snooze', id, token, delayMs);
}

/** Returns the job to claimable work and holds claiming `delayMs`; the hold's end, or -1 as snooze's. */
export function rateLimit(w: QueueWire, id: string, token: string, delayMs: number): Promise<number> {
  return instant(w, 'rate_limit', id, token, delayMs);
}

// ── 19.39 child_notice, 19.40 notices ─────────────────────────────────────────

/** A flow child's end recorded in its own queue for a parent in another (section 14.1). */
export interface Notice {
  /** The child's id in this queue. */
  child: string;
  /** The parent as '<its prefix><its id>'. */
  parent: string;
  outcome: string;
  /** The child's encoded result, '' none. */
  result: string;
  /** The child's error, '' none. */
  error: string;
}

/** Up to `n` notices waiting in this queue, oldest first, after dropping those of `delivered`. */
export async function notices(w: QueueWire, n: number, delivered: readonly string[]): Promise<Notice[]> {
  const flat = (await w.run('notices', [w.keys.prefix, n, ...delivered])) as string[];
  const out: Notice[] = [];
  for (let i = 0; i + 4 < flat.length; i += 5) {
    out.push({
      child: flat[i]!,
      parent: flat[i + 1]!,
      outcome: flat[i + 2]!,
      result: flat[i + 3]!,
      error: flat[i + 4]!,
    });
  }
  return out;
}

/** Applies a child's end (`child` as '<its prefix><its id>') to parent `parentId` of this queue; true when counted. */
export async function childNotice(
  w: QueueWire,
  parentId: string,
  child: string,
  notice: Pick<Notice, 'outcome' | 'result' | 'error'>,
): Promise<boolean> {
  const reply = await w.run('child_notice', [
    w.keys.prefix,
    parentId,
    child,
    notice.outcome,
    notice.result,
    notice.error,
  ]);
  return reply === 1;
}
