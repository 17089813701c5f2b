/* EMQ.PROMOTE, see promote.c. */
#ifndef EMQ_PROMOTE_H
#define EMQ_PROMOTE_H
#include "redis_api.h"
int emq_promote(RedisModuleCtx *ctx, RedisModuleString **argv, int argc);
#endif
