/* Redis Cluster's slots for the timers, see slots.c. */
#ifndef EMQ_SLOTS_H
#define EMQ_SLOTS_H
#include "redis_api.h"
#include <stddef.h>
/* The cluster slot of a key (its hash tag's, when it has one), as the server computes it. */
int slot_of(const char *key, size_t n);
/* Reads this node's migrating and importing slots (CLUSTER NODES, its `myself` line). */
void slots_refresh(RedisModuleCtx *ctx);
/* 1 while `slot` was migrating away from or importing into this node at the last refresh. */
int slot_moving(int slot);
#endif
