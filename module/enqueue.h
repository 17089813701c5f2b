/* EMQ.ENQUEUE (a prototype, branch nativeadd), see enqueue.c. */
#ifndef EMQ_ENQUEUE_H
#define EMQ_ENQUEUE_H
#include "redis_api.h"
/* Registers EMQ.ENQUEUE (writes by the low-level key API) and EMQ.ENQUEUE.CALL (the same
 * writes by RedisModule_Call), so the two can be measured side by side. */
int emq_enqueue_register(RedisModuleCtx *ctx, const char *flags);
#endif
