/* EMQ.ENQUEUE, enqueue.lua's plain case as a command: see enqueue.c. */
#ifndef EMQ_ENQUEUE_H
#define EMQ_ENQUEUE_H
#include "redis_api.h"
/* Registers EMQ.ENQUEUE (its strings made once, at load). */
int emq_enqueue_register(RedisModuleCtx *ctx, const char *flags);
#endif
