/* A job that ends in a sweep (dead or cancelled): its dedupe lock is freed and its waiting
 * parent told, as protocol/lib/dedupe.lua (dedupe_release) and lib/flow.lua (child_ended) do. */
#ifndef EMQ_FLOW_H
#define EMQ_FLOW_H

#include "lanes.h"

/* Read pass: the dedupe lock's type, and every key the walk up the parents may touch. */
int ended_keys_ok(Sweep *s, const QueueKeys *K, RedisModuleString *dedupe, RedisModuleString *parent);

/* Write pass. */
void dedupe_release(Sweep *s, Str key, Str id);
/* `outcome`: 'dead' or 'cancelled'. Returns 1 when claimable work went from none to some. */
int child_ended(Sweep *s, const QueueKeys *K, RedisModuleString *parent, Str id, const char *outcome,
                long long *pending_card);

#endif
