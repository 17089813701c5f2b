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
int release(Sweep *s, const QueueKeys *K, Str id, RedisModuleString *group, Str prio, long long *pending_card);
int lane_done(Sweep *s, const QueueKeys *K, RedisModuleString *group);
void wake(Sweep *s, const QueueKeys *K);

#endif
