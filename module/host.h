/* What the two sweeps share: the call's shape (numkeys, the queue's keys, the layout check),
 * the one clock reading, key names built under the prefix, the read pass's type checks, and
 * the write pass's calls (each forwarded to replicas and the AOF, like a script's effects). */
#ifndef EMQ_HOST_H
#define EMQ_HOST_H

#include "redis_api.h"

/* A byte string that is not NUL-terminated (ids and prefixes may hold any byte). */
typedef struct {
  const char *p;
  size_t n;
} Str;

#define MAX_KEYS 8

/* One call of a sweep: its context, prefix, named keys, clock reading and events cap. */
typedef struct {
  RedisModuleCtx *ctx;
  const char *verb;                 /* EMQ.PROMOTE, EMQ.STALLED.CHECK */
  Str prefix;                       /* ARGV[1], 'emq:{<queue>}:' */
  RedisModuleString *key[MAX_KEYS]; /* the script's KEYS, in its order */
  RedisModuleString **argv;         /* ARGV[1..], after the keys */
  int argc;                         /* how many ARGV */
  long long now;                    /* the one clock reading, ms */
  Str emax;                         /* meta events_max, default 10000 */
  RedisModuleCallReply *failure;    /* the error a write-pass call returned, forwarded as is */
} Sweep;

/* The command's shape: `VERB numkeys key... arg...` with numkeys the script's count of KEYS or
 * the seeds' short form (the first `short_keys` of them; the rest are named by the prefix).
 * Checks the ARGV through `argv_ok` (the script's own check and message), then the layout: every
 * key must be the prefix followed by its name. Replies the error and returns 0 when refused. */
int sweep_shape(Sweep *s, RedisModuleCtx *ctx, const char *verb, RedisModuleString **argv, int argc,
                const char *const *names, int nkeys, int short_keys,
                int (*argv_ok)(Sweep *s));

/* The keys of a call, for the cluster and ACLs (the getkeys-api request). */
void sweep_key_positions(RedisModuleCtx *ctx, RedisModuleString **argv, int argc);

/* The one clock reading of a call: the command's cached server time when the server offers it
 * (Redis 7.2+), else the server's millisecond clock, read once. */
long long clock_now_ms(void);

Str str_of(RedisModuleString *s);
Str cstr(const char *c);
int str_eq(Str a, const char *c);

/* prefix + a + b (+ c) as a key name. */
RedisModuleString *key3(Sweep *s, Str a, Str b, Str c);
RedisModuleString *job_key(Sweep *s, Str id);

/* Lua's `whole(v, min)` of lib/args.lua: decimal digits (optional '-'), at most 17 characters,
 * in [min, 2^53 - 1]. */
int parse_whole(Str v, long long min, long long *out);
/* Lua 5.1's tonumber(v) of a string (strtod, hex, surrounding spaces). */
int lua_number(Str v, double *out);
/* protocol/lib/rows.lua's checks of a row field (NULL: absent, which passes): whole_text is
 * decimal text of a whole number (at most 17 characters, optional '-'); counter_text is an
 * integer as Redis writes one (what HINCRBY takes: no leading zero, no '-0'). */
int whole_text(RedisModuleString *v);
int counter_text(RedisModuleString *v);
/* Redis's integer text (what HINCRBY accepts). */
int redis_integer(Str v, long long *out);
/* A Lua number as Lua 5.1 writes it in a concatenation ('%.14g'). */
void lua_number_text(double v, char *buf, size_t size);

/* ── the read pass: types and values, nothing written ─────────────────────── */

int key_type(Sweep *s, RedisModuleString *key);
/* 1 when the key is absent or of `type`; else replies WRONGTYPE and returns 0. */
int expect_type(Sweep *s, RedisModuleString *key, int type);
/* The hash's fields (NULL where absent): C-string field names, NULL-terminated; returns the
 * key's type (REDISMODULE_KEYTYPE_*), the fields read only from a hash. */
int hash_fields(Sweep *s, RedisModuleString *key, const char *const *fields, RedisModuleString **out);
RedisModuleString *hash_field(Sweep *s, RedisModuleString *key, const char *field);
RedisModuleString *hash_field_str(Sweep *s, RedisModuleString *key, Str field);
size_t key_length(Sweep *s, RedisModuleString *key);
/* Replies an error and returns 0 (a refusal: nothing was written). */
int refuse(Sweep *s, const char *message);
/* Reads meta's events_max (default 10000) and checks it is a cap XADD takes. */
int read_events_cap(Sweep *s, RedisModuleString *meta);
/* The members of a zset scored up to now, at most `limit`, oldest first (Lua's ZRANGEBYSCORE). */
RedisModuleCallReply *due_members(Sweep *s, RedisModuleString *zset, long long limit);

/* A score ZADD accepts (the row's prio): refused with Redis's words otherwise. */
int score_ok(Sweep *s, Str score);

/* The i-th member of an array reply of strings (the selected members). */
Str member_at(RedisModuleCallReply *list, size_t i);

/* ── the write pass ────────────────────────────────────────────────────────── */

/* Checks a write-pass reply: NULL or an error stops the pass (s->failure keeps the error to
 * forward, as a script's failing redis.call would end it). */
RedisModuleCallReply *checked(Sweep *s, RedisModuleCallReply *r);
#define WRITE(s, cmd, fmt, ...) checked((s), RedisModule_Call((s)->ctx, cmd, "!" fmt, __VA_ARGS__))
long long reply_int(RedisModuleCallReply *r);
/* ZREM of every member of `list` in one call, where the script removes them one by one as its
 * loop reaches them: for a set nothing else in the pass reads (sweep_stalled's active). */
int remove_members(Sweep *s, RedisModuleString *zset, RedisModuleCallReply *list);
/* XADD events MAXLEN ~ emax * event <event> id <id> [f1 v1 [f2 v2]] */
int add_event(Sweep *s, RedisModuleString *events, const char *event, Str id, const char *f1, Str v1,
              const char *f2, Str v2);
/* The same with three fields (f3 NULL: two). */
int add_event3(Sweep *s, RedisModuleString *events, const char *event, Str id, const char *f1, Str v1,
               const char *f2, Str v2, const char *f3, Str v3);
/* Replies the failure a write pass stopped on. */
int reply_failure(Sweep *s);

/* A build of a later feature level, for the callers' reply-tolerance test (SPEC 22.1, 26):
 * with -DEMQ_LATER_LEVEL (make later-level) every tuple reply carries entries after today's,
 * as a later level may append them. A release build appends nothing. */
#ifdef EMQ_LATER_LEVEL
#define LATER_ENTRIES 2
static inline void reply_later_entries(RedisModuleCtx *ctx) {
  RedisModule_ReplyWithArray(ctx, 2);
  RedisModule_ReplyWithLongLong(ctx, 1);
  RedisModule_ReplyWithLongLong(ctx, 2);
  RedisModule_ReplyWithLongLong(ctx, 9);
}
#else
#define LATER_ENTRIES 0
static inline void reply_later_entries(RedisModuleCtx *ctx) { (void)ctx; }
#endif

#endif
