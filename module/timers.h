/* The module's timers, see timers.c. */
#ifndef EMQ_TIMERS_H
#define EMQ_TIMERS_H
#include "redis_api.h"
/* Registers EMQ.TIMERS and the schedule notifications and, unless loaded with `timers off`,
 * starts the timers. REDISMODULE_ERR for a load argument it does not know. */
int emq_timers_load(RedisModuleCtx *ctx, RedisModuleString **argv, int argc);
#endif
