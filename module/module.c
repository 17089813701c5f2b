/* The EchoMQ module: the protocol's two sweeps as server commands, EMQ.PROMOTE and
 * EMQ.STALLED.CHECK, replying exactly as promote.lua and sweep_stalled.lua do, complete.lua's plain
 * case as EMQ.COMPLETE (complete.c), and timers that
 * release each queue's due jobs and recover its expired leases (timers.c, EMQ.TIMERS). Load it with
 * `redis-server --loadmodule module/build/echomq.so [timers off]` (or MODULE LOAD). */
#include "complete.h"
#include "enqueue.h"
#include "promote.h"
#include "redis_api.h"
#include "sweep_stalled.h"
#include "timers.h"

#define MODULE_NAME "echomq"
#define MODULE_VERSION 1

/* The pointers redis_api.h declares. */
#define EMQ_DEFINE(ret, name, params, required) ret(*RedisModule_##name) params = 0;
EMQ_REDIS_API(EMQ_DEFINE)
#undef EMQ_DEFINE

int emq_api_init(RedisModuleCtx *ctx, const char *name, int version) {
  /* The context's first word is the server's GetApi(name, &pointer) (0 when found). */
  int (*get_api)(const char *, void *) = (int (*)(const char *, void *))((void **)ctx)[0];
  int missing = 0;
#define EMQ_FETCH(ret, fn, params, required) \
  if (get_api("RedisModule_" #fn, (void *)&RedisModule_##fn) != 0) { \
    RedisModule_##fn = 0;                                           \
    if (required) missing = 1;                                       \
  }
  EMQ_REDIS_API(EMQ_FETCH)
#undef EMQ_FETCH
  if (missing) return REDISMODULE_ERR;
  RedisModule_SetModuleAttribs(ctx, name, version, REDISMODULE_APIVER_1);
  return REDISMODULE_OK;
}

/* All write, so replicas refuse them and the server checks maxmemory before running one;
 * the keys are found by the command itself (numkeys, as EVALSHA's). */
/* Not deny-oom: like the scripts (`#!lua flags=allow-oom`), a sweep runs on a full server, since
 * recovering leases and releasing due jobs is how its jobs go on to end and retention frees memory. */
#define FLAGS "write getkeys-api"

__attribute__((visibility("default"))) int RedisModule_OnLoad(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
  if (emq_api_init(ctx, MODULE_NAME, MODULE_VERSION) != REDISMODULE_OK) return REDISMODULE_ERR;
  if (RedisModule_CreateCommand(ctx, "emq.promote", emq_promote, FLAGS, 2, 2, 1) != REDISMODULE_OK)
    return REDISMODULE_ERR;
  if (RedisModule_CreateCommand(ctx, "emq.stalled.check", emq_stalled_check, FLAGS, 2, 2, 1) != REDISMODULE_OK)
    return REDISMODULE_ERR;
  /* complete.lua's and enqueue.lua's plain cases; anything else is refused (EMQNATIVE) for the
   * caller to send the script. -DEMQ_WITHOUT_COMPLETE (make without-complete): the earlier
   * release's module, the sweeps only, for a test. */
#ifndef EMQ_WITHOUT_COMPLETE
  if (RedisModule_CreateCommand(ctx, "emq.complete", emq_complete, FLAGS, 2, 2, 1) != REDISMODULE_OK)
    return REDISMODULE_ERR;
  if (emq_enqueue_register(ctx, FLAGS) != REDISMODULE_OK) return REDISMODULE_ERR;
#endif
  return emq_timers_load(ctx, argv, argc);
}
