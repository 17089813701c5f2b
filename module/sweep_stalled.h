/* EMQ.STALLED.CHECK, see sweep_stalled.c. */
#ifndef EMQ_SWEEP_STALLED_H
#define EMQ_SWEEP_STALLED_H
#include "redis_api.h"
int emq_stalled_check(RedisModuleCtx *ctx, RedisModuleString **argv, int argc);
#endif
