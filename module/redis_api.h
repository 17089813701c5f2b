/* The few declarations of the Redis module API this module uses, written from the Modules API
 * reference (redis.io, "Modules API reference") rather than copied from redismodule.h.
 *
 * API version relied on: REDISMODULE_APIVER_1, as served by Redis 7.0 and later (and Valkey,
 * which keeps the same API). Every function below exists since Redis 4.0 or 6.0, except
 * RedisModule_CachedMicroseconds (Redis 7.2), which is looked up but optional: without it the
 * one clock reading of a call is RedisModule_Milliseconds.
 *
 * How a module gets the functions (the reference's "Module initialization"): the server passes
 * a context whose first word is the address of a lookup function, GetApi(name, &pointer); the
 * module asks it for each function by name and keeps the pointers. */
#ifndef EMQ_REDIS_API_H
#define EMQ_REDIS_API_H

#include <stddef.h>
#include <stdint.h>

#define REDISMODULE_OK 0
#define REDISMODULE_ERR 1
#define REDISMODULE_APIVER_1 1

/* RedisModule_OpenKey modes. */
#define REDISMODULE_READ (1 << 0)
#define REDISMODULE_WRITE (1 << 1)

/* RedisModule_KeyType results. */
#define REDISMODULE_KEYTYPE_EMPTY 0
#define REDISMODULE_KEYTYPE_STRING 1
#define REDISMODULE_KEYTYPE_LIST 2
#define REDISMODULE_KEYTYPE_HASH 3
#define REDISMODULE_KEYTYPE_SET 4
#define REDISMODULE_KEYTYPE_ZSET 5
#define REDISMODULE_KEYTYPE_MODULE 6
#define REDISMODULE_KEYTYPE_STREAM 7

/* RedisModule_CallReplyType results (RESP2 replies). */
#define REDISMODULE_REPLY_UNKNOWN -1
#define REDISMODULE_REPLY_STRING 0
#define REDISMODULE_REPLY_ERROR 1
#define REDISMODULE_REPLY_INTEGER 2
#define REDISMODULE_REPLY_ARRAY 3
#define REDISMODULE_REPLY_NULL 4

/* RedisModule_HashGet flags: the field names are C strings. */
#define REDISMODULE_HASH_CFIELDS (1 << 2)

typedef struct RedisModuleCtx RedisModuleCtx;
typedef struct RedisModuleString RedisModuleString;
typedef struct RedisModuleKey RedisModuleKey;
typedef struct RedisModuleCallReply RedisModuleCallReply;
typedef struct RedisModuleDict RedisModuleDict;
typedef int (*RedisModuleCmdFunc)(RedisModuleCtx *ctx, RedisModuleString **argv, int argc);

/* Timers (the reference's "Modules Timers API"): a callback the event loop runs once, after a
 * period in ms; never while the server loads its data. */
typedef uint64_t RedisModuleTimerID;
typedef void (*RedisModuleTimerProc)(RedisModuleCtx *ctx, void *data);

/* Keyspace notifications a module subscribes to (independent of notify-keyspace-events). */
#define REDISMODULE_NOTIFY_GENERIC (1 << 2) /* del, expire, rename, restore (MIGRATE's write) */
#define REDISMODULE_NOTIFY_ZSET (1 << 7)
typedef int (*RedisModuleNotificationFunc)(RedisModuleCtx *ctx, int type, const char *event,
                                           RedisModuleString *key);

/* Server events (the reference's "Server hooks"): the cron loop runs `hz` times a second, so a
 * callback on it sees the event loop held (SIGSTOP, a long command) to within 1 / hz. */
typedef struct {
  uint64_t id;
  uint64_t dataver;
} RedisModuleEvent;
#define REDISMODULE_EVENT_CRON_LOOP 8
typedef void (*RedisModuleEventCallback)(RedisModuleCtx *ctx, RedisModuleEvent eid, uint64_t subevent, void *data);

/* RedisModule_GetContextFlags: the server is a primary (not a replica). */
#define REDISMODULE_CTX_FLAGS_MASTER (1 << 2)
/* ... and a node of a Redis Cluster. */
#define REDISMODULE_CTX_FLAGS_CLUSTER (1 << 5)

/* X(return type, name without the RedisModule_ prefix, parameters, required) */
#define EMQ_REDIS_API(X)                                                                        \
  X(void, SetModuleAttribs, (RedisModuleCtx * ctx, const char *name, int ver, int apiver), 1)   \
  X(int, CreateCommand,                                                                         \
    (RedisModuleCtx * ctx, const char *name, RedisModuleCmdFunc fn, const char *flags, int first, \
     int last, int step),                                                                       \
    1)                                                                                          \
  X(void, AutoMemory, (RedisModuleCtx * ctx), 1)                                                \
  X(void *, Alloc, (size_t bytes), 1)                                                           \
  X(void, Free, (void *ptr), 1)                                                                 \
  X(int, IsKeysPositionRequest, (RedisModuleCtx * ctx), 1)                                      \
  X(void, KeyAtPos, (RedisModuleCtx * ctx, int pos), 1)                                         \
  X(int, ReplyWithError, (RedisModuleCtx * ctx, const char *err), 1)                            \
  X(int, ReplyWithLongLong, (RedisModuleCtx * ctx, long long ll), 1)                            \
  X(int, ReplyWithArray, (RedisModuleCtx * ctx, long len), 1)                                   \
  X(int, ReplyWithString, (RedisModuleCtx * ctx, RedisModuleString * str), 1)                   \
  X(int, ReplyWithCallReply, (RedisModuleCtx * ctx, RedisModuleCallReply * reply), 1)           \
  X(const char *, StringPtrLen, (const RedisModuleString *str, size_t *len), 1)                 \
  X(RedisModuleString *, CreateString, (RedisModuleCtx * ctx, const char *ptr, size_t len), 1)   \
  X(void, FreeString, (RedisModuleCtx * ctx, RedisModuleString * str), 1)                       \
  X(RedisModuleKey *, OpenKey, (RedisModuleCtx * ctx, RedisModuleString * name, int mode), 1)    \
  X(void, CloseKey, (RedisModuleKey * key), 1)                                                  \
  X(int, KeyType, (RedisModuleKey * key), 1)                                                    \
  X(size_t, ValueLength, (RedisModuleKey * key), 1)                                             \
  X(int, HashGet, (RedisModuleKey * key, int flags, ...), 1)                                    \
  X(int, KeyExists, (RedisModuleCtx * ctx, RedisModuleString * keyname), 1)                     \
  X(int, ZsetScore, (RedisModuleKey * key, RedisModuleString * ele, double *score), 1)          \
  X(RedisModuleCallReply *, Call, (RedisModuleCtx * ctx, const char *cmd, const char *fmt, ...), 1) \
  X(void, FreeCallReply, (RedisModuleCallReply * reply), 1)                                     \
  X(int, CallReplyType, (RedisModuleCallReply * reply), 1)                                      \
  X(long long, CallReplyInteger, (RedisModuleCallReply * reply), 1)                             \
  X(size_t, CallReplyLength, (RedisModuleCallReply * reply), 1)                                 \
  X(RedisModuleCallReply *, CallReplyArrayElement, (RedisModuleCallReply * reply, size_t i), 1) \
  X(const char *, CallReplyStringPtr, (RedisModuleCallReply * reply, size_t *len), 1)           \
  X(long long, Milliseconds, (void), 1)                                                         \
  X(int, GetContextFlags, (RedisModuleCtx * ctx), 1)                                            \
  X(RedisModuleTimerID, CreateTimer,                                                            \
    (RedisModuleCtx * ctx, long long period, RedisModuleTimerProc callback, void *data), 1)     \
  X(int, StopTimer, (RedisModuleCtx * ctx, RedisModuleTimerID id, void **data), 1)              \
  X(int, SubscribeToKeyspaceEvents, (RedisModuleCtx * ctx, int types, RedisModuleNotificationFunc cb), 1) \
  X(int, SubscribeToServerEvent, (RedisModuleCtx * ctx, RedisModuleEvent event, RedisModuleEventCallback cb), 1) \
  X(RedisModuleDict *, CreateDict, (RedisModuleCtx * ctx), 1)                                   \
  X(void *, DictGetC, (RedisModuleDict * d, void *key, size_t keylen, int *nokey), 1)           \
  X(int, DictSetC, (RedisModuleDict * d, void *key, size_t keylen, void *ptr), 1)              \
  X(int, StringToLongLong, (const RedisModuleString *str, long long *ll), 1)                   \
  X(int, ZsetFirstInScoreRange, (RedisModuleKey * key, double min, double max, int minex, int maxex), 1) \
  X(RedisModuleString *, ZsetRangeCurrentElement, (RedisModuleKey * key, double *score), 1)    \
  X(void, ZsetRangeStop, (RedisModuleKey * key), 1)                                             \
  X(int, ReplyWithStringBuffer, (RedisModuleCtx * ctx, const char *buf, size_t len), 1)       \
  X(int, ReplyWithNull, (RedisModuleCtx * ctx), 1)                                              \
  X(int, ZsetRangeNext, (RedisModuleKey * key), 1)                                              \
  X(int, ZsetRangeEndReached, (RedisModuleKey * key), 1)                                        \
  X(long long, CachedMicroseconds, (void), 0)

#define EMQ_DECLARE(ret, name, params, required) extern ret(*RedisModule_##name) params;
EMQ_REDIS_API(EMQ_DECLARE)
#undef EMQ_DECLARE

/* Fills every pointer above from the server's lookup function; REDISMODULE_ERR when a
 * required one is missing (a server older than the API version relied on). */
int emq_api_init(RedisModuleCtx *ctx, const char *name, int version);

#endif
