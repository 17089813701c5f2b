package echomq

// The hand-off between queues (SPEC 14.1): a flow child in another queue than its parent
// cannot count the parent down in the script that ends it (on a Redis Cluster the two queues
// are different slots), so that script records a notice in the child's own queue (first half).
// DeliverNotices carries the notices to the parents' queues (second half: child_notice, which
// counts each child once however often it is told), and only then drops them, so a process that
// stops between the halves loses nothing: the next delivery applies them again.
//
// Who delivers: every consumer of the child's queue, when its beat's heartbeat reports notices
// waiting (no extra call on a queue without flows across queues), as TypeScript's do.

import (
	"context"

	"github.com/gomodule/redigo/redis"
)

// noticeBatch is how many notices one notices call lists (TypeScript's).
const noticeBatch = 100

// DeliverNotices delivers every notice waiting in q to its parent's queue and returns how many
// it applied (counted now or found counted before). A notice that can never be applied (its
// parent's queue name is not a valid name) is dropped.
func (q *Queue) DeliverNotices(ctx context.Context) (int, error) {
	var done []interface{}
	delivered := 0
	for {
		argv := append([]interface{}{q.Prefix, noticeBatch}, done...)
		flat, err := redis.Strings(q.Run(ctx, "notices", "", argv...))
		if err != nil {
			return delivered, err
		}
		done = nil
		if len(flat) == 0 {
			return delivered, nil
		}
		// 5 entries per notice: child parent outcome result error.
		for i := 0; i+4 < len(flat); i += 5 {
			child, parent, outcome, result, childErr := flat[i], flat[i+1], flat[i+2], flat[i+3], flat[i+4]
			if queue, id, ok := splitRef(parent); ok {
				if target, err := q.sibling(queue); err == nil {
					if _, err := target.Run(ctx, "child_notice", "", target.Prefix, id, q.Prefix+child, outcome, result, childErr); err != nil {
						return delivered, err
					}
					delivered++
				}
			}
			done = append(done, child)
		}
	}
}

// noticesWaiting reads heartbeat's reply, `[seen, notices]` (SPEC 19.22): how many hand-offs
// wait in the queue; a reply without the entry (a bare count) has none.
func noticesWaiting(reply interface{}) int64 {
	entries, err := redis.Values(reply, nil)
	if err != nil || len(entries) < 2 {
		return 0
	}
	n, _ := redis.Int64(entries[1], nil)
	return n
}
