// The hand-off between queues (SPEC 14.1): a flow child in another queue than its parent cannot
// count the parent down in the script that ends it (on a Redis Cluster the two queues are
// different slots), so that script records a notice in the child's own queue (first half).
// deliverNotices carries the notices to the parents' queues (second half: child_notice, which
// counts each child once however often it is told), and only then drops them, so a process
// that stops between the halves loses nothing: the next delivery applies them again.
//
// Who delivers: every consumer of the child's queue, when its beat's heartbeat reports notices
// waiting (no extra call on a queue without flows across queues); also queue.deliverNotices().

import { EchoMQError } from './core/errors.js';
import { remoteParent } from './wire/keyspace.js';
import type { ScriptName } from './wire/scripts.js';

/** What delivery needs of a queue: its prefix and its scripts. */
export interface NoticeQueue {
  readonly name: string;
  readonly keys: { readonly prefix: string };
  run(name: ScriptName, argv: readonly (string | number)[]): Promise<unknown>;
}

/**
 * Delivers every notice waiting in `queue` to its parent's queue (`reach` gives a queue by
 * name), `batch` per call. Resolves with how many it applied (counted or found counted before).
 * A notice that can never be applied (its parent's queue name is not a valid name) is dropped.
 */
export async function deliverNotices(
  queue: NoticeQueue,
  reach: (name: string) => NoticeQueue,
  batch = 100,
): Promise<number> {
  let done: string[] = [];
  let delivered = 0;
  for (;;) {
    const reply = (await queue.run('notices', [queue.keys.prefix, batch, ...done])) as string[];
    done = [];
    if (reply.length === 0) return delivered;
    for (let i = 0; i + 4 < reply.length; i += 5) {
      const [child, parent, outcome, result, error] = reply.slice(i, i + 5) as [
        string,
        string,
        string,
        string,
        string,
      ];
      const to = remoteParent(parent);
      let target: NoticeQueue | undefined;
      try {
        target = to && reach(to.queue);
      } catch (err) {
        if (!(err instanceof EchoMQError && err.code === 'EMQINPUT')) throw err;
      }
      if (to && target) {
        await target.run('child_notice', [
          target.keys.prefix,
          to.id,
          queue.keys.prefix + child,
          outcome,
          result,
          error,
        ]);
        delivered++;
      }
      done.push(child);
    }
  }
}
