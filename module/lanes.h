/* Lanes and the ring, as protocol/lib/lanes.lua has them: a grouped job waits in
 * P g:<group>:pending; the ring holds the groups that can be served now, oldest turn first. */
#ifndef EMQ_LANES_H
#define EMQ_LANES_H

#include "host.h"

/* The queue keys the lane functions write (they are the script's K). */
typedef struct {
  RedisModuleString *pending, *events, *wake, *meta, *ring;
} QueueKeys;

/* Read pass: every key a release into `group` (NULL: flat pending) may touch has its type, the
 * lane's counters are numbers the write pass can use, and the row's `prio` (NULL: 0) is a score.
 * Replies the refusal, returns 0. */
int release_keys_ok(Sweep *s, const QueueKeys *K, RedisModuleString *group, RedisModuleString *prio);
/* Read pass: the same for a grouped job leaving active (lane_done). */
int lane_done_keys_ok(Sweep *s, const QueueKeys *K, RedisModuleString *group);

/* Write pass; each returns 1 when claimable work went from none to some (a wake is due).
 * `pending_card`: pending's length, tracked by the caller (read once, then counted). */
/* Read pass for lib/lanes.lua's left_active: lane_done's keys when grouped, and, when the row
 * holds a queue-wide slot (`slot` 1), meta's running (an integer) and concurrency (a number). */
int left_active_keys_ok(Sweep *s, const QueueKeys *K, RedisModuleString *group, RedisModuleString *slot);
/* lib/lanes.lua's left_active: frees the queue-wide slot the row holds, then the lane slot.
 * Returns 1 when a wake is due. */
int left_active(Sweep *s, const QueueKeys *K, RedisModuleString *jk, RedisModuleString *group, RedisModuleString *slot);
int release(Sweep *s, const QueueKeys *K, Str id, RedisModuleString *group, Str prio, long long *pending_card);
int lane_done(Sweep *s, const QueueKeys *K, RedisModuleString *group);
void wake(Sweep *s, const QueueKeys *K);

#endif
