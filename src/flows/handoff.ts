// The hand-off between queues (SPEC 14.1): a flow child in another queue than its parent cannot
// count the parent down in the script that ends it (on a Redis Cluster the two queues are
// different slots), so that script records a notice in the child's own queue (first half).
// deliverNotices carries the notices to the parents' queues (second half: child_notice, which
// counts each child once however often it is told), and only then drops them, so a process
// that stops between the halves loses nothing: the next delivery applies them again.
//
// Who delivers: every consumer of the child's queue, when its beat's heartbeat reports notices
// waiting (no extra call on a queue without flows across queues); also queue.deliverNotices().

import { EchoMQError } from '../core/errors.js';
import { remoteParent } from '../wire/keyspace.js';
import type { QueueWire } from '../wire/queue-wire.js';
import * as verbs from '../wire/verbs/index.js';

/**
 * Delivers every notice waiting in `queue` to its parent's queue (`queue.sibling`), `batch` per
 * call. Resolves with how many it applied (counted or found counted before).
 * A notice that can never be applied (its parent's queue name is not a valid name) is dropped.
 */
export async function deliverNotices(queue: QueueWire, batch = 100): Promise<number> {
  let done: string[] = [];
  let delivered = 0;
  for (;;) {
    const waiting = await verbs.notices(queue, batch, done);
    done = [];
    if (waiting.length === 0) return delivered;
    for (const notice of waiting) {
      const to = remoteParent(notice.parent);
      let target: QueueWire | undefined;
      try {
        target = to && queue.sibling(to.queue);
      } catch (err) {
        if (!(err instanceof EchoMQError && err.code === 'EMQINPUT')) throw err;
      }
      if (to && target) {
        await verbs.childNotice(target, to.id, queue.keys.prefix + notice.child, notice);
        delivered++;
      }
      done.push(notice.child);
    }
  }
}
