/* EMQ.COMPLETE (a prototype, not part of SPEC 26), see complete.c. */
#ifndef EMQ_COMPLETE_H
#define EMQ_COMPLETE_H
#include "redis_api.h"
int emq_complete(RedisModuleCtx *ctx, RedisModuleString **argv, int argc);
/* The same with its writes through the low-level key API, replicated and notified by hand. */
int emq_complete_keyapi(RedisModuleCtx *ctx, RedisModuleString **argv, int argc);
#endif
