/* EMQ.COMPLETE: complete.lua's plain case as a command (SPEC 26), see complete.c. */
#ifndef EMQ_COMPLETE_H
#define EMQ_COMPLETE_H
#include "redis_api.h"
int emq_complete(RedisModuleCtx *ctx, RedisModuleString **argv, int argc);
#endif
