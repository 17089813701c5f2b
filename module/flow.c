/* A job that ended in a sweep: its dedupe lock and its parent; see flow.h. */
#include "flow.h"

#include <string.h>

/* Deeper chains are not walked by the read pass (a loop of parents would not end otherwise). */
#define MAX_CHAIN 10000

static const char *const PARENT_ROW[] = {"state", "continue", "group", "prio", "parent", NULL};
enum { STATE, CONTINUE, GROUP, PRIO, PARENT };

static RedisModuleString *queue_key(Sweep *s, const char *name) { return key3(s, cstr(name), cstr(""), cstr("")); }

static RedisModuleString *dedupe_key(Sweep *s, Str key) { return key3(s, cstr("dedupe:"), key, cstr("")); }

static int is(RedisModuleString *v, const char *text) { return v && str_eq(str_of(v), text); }

int ended_keys_ok(Sweep *s, const QueueKeys *K, RedisModuleString *dedupe, RedisModuleString *parent) {
  if (dedupe && !expect_type(s, dedupe_key(s, str_of(dedupe)), REDISMODULE_KEYTYPE_STRING)) return 0;
  for (int step = 0; parent && step < MAX_CHAIN; step++) {
    RedisModuleString *pk = job_key(s, str_of(parent));
    if (!expect_type(s, pk, REDISMODULE_KEYTYPE_HASH)) return 0;
    RedisModuleString *row[5];
    hash_fields(s, pk, PARENT_ROW, row);
    if (!is(row[STATE], "waiting_children")) return 1;
    if (!expect_type(s, queue_key(s, "waiting_children"), REDISMODULE_KEYTYPE_ZSET)) return 0;
    if (!expect_type(s, K->events, REDISMODULE_KEYTYPE_STREAM)) return 0;
    if (is(row[CONTINUE], "1")) {
      RedisModuleString *children = hash_field(s, pk, "children");
      long long n;
      if (children && !redis_integer(str_of(children), &n))
        return refuse(s, "ERR hash value is not an integer");
      return release_keys_ok(s, K, row[GROUP], row[PRIO]);
    }
    if (!expect_type(s, queue_key(s, "dead"), REDISMODULE_KEYTYPE_ZSET)) return 0;
    parent = row[PARENT];
  }
  return 1;
}

void dedupe_release(Sweep *s, Str key, Str id) {
  RedisModuleString *dk = dedupe_key(s, key);
  RedisModuleCallReply *r = RedisModule_Call(s->ctx, "GET", "s", dk);
  int own = 0;
  if (r && RedisModule_CallReplyType(r) == REDISMODULE_REPLY_STRING) {
    Str v;
    v.p = RedisModule_CallReplyStringPtr(r, &v.n);
    own = v.n == id.n && memcmp(v.p, id.p, id.n) == 0;
  }
  if (r) RedisModule_FreeCallReply(r);
  if (!own) return;
  r = WRITE(s, "DEL", "s", dk);
  if (r) RedisModule_FreeCallReply(r);
}

/* 'child ' .. id .. ' failed (' .. outcome .. ')' */
static RedisModuleString *failed_message(Sweep *s, Str child, const char *outcome) {
  Str parts[] = {cstr("child "), child, cstr(" failed ("), cstr(outcome), cstr(")")};
  size_t n = 0, at = 0;
  for (int i = 0; i < 5; i++) n += parts[i].n;
  char stack[512];
  char *buf = n <= sizeof(stack) ? stack : RedisModule_Alloc(n);
  for (int i = 0; i < 5; i++) memcpy(buf + at, parts[i].p, parts[i].n), at += parts[i].n;
  RedisModuleString *message = RedisModule_CreateString(s->ctx, buf, n);
  if (buf != stack) RedisModule_Free(buf);
  return message;
}

int child_ended(Sweep *s, const QueueKeys *K, RedisModuleString *parent, Str id, const char *outcome,
                long long *pending_card) {
  RedisModuleString *child = RedisModule_CreateString(s->ctx, id.p, id.n);
  while (parent && !s->failure) {
    Str pid = str_of(parent);
    RedisModuleString *pk = job_key(s, pid);
    RedisModuleString *row[5];
    hash_fields(s, pk, PARENT_ROW, row);
    if (!is(row[STATE], "waiting_children")) return 0;
    RedisModuleCallReply *r;
    if (is(row[CONTINUE], "1")) {
      r = WRITE(s, "HINCRBY", "scl", pk, "children", -1LL);
      if (!r) return 0;
      long long left = reply_int(r);
      RedisModule_FreeCallReply(r);
      if (left > 0) return 0;
      r = WRITE(s, "ZREM", "ss", queue_key(s, "waiting_children"), parent);
      if (!r) return 0;
      RedisModule_FreeCallReply(r);
      r = WRITE(s, "HSET", "scc", pk, "state", "pending");
      if (!r) return 0;
      RedisModule_FreeCallReply(r);
      int woke = release(s, K, pid, row[GROUP], row[PRIO] ? str_of(row[PRIO]) : cstr("0"), pending_card);
      add_event(s, K->events, "waiting", pid, NULL, cstr(""), NULL, cstr(""));
      return woke;
    }
    r = WRITE(s, "ZREM", "ss", queue_key(s, "waiting_children"), parent);
    if (!r) return 0;
    RedisModule_FreeCallReply(r);
    Str c = str_of(child);
    RedisModuleString *message = failed_message(s, c, outcome);
    r = WRITE(s, "HSET", "sccclcs", pk, "state", "dead", "finished", s->now, "error", message);
    if (!r) return 0;
    RedisModule_FreeCallReply(r);
    r = WRITE(s, "ZADD", "sls", queue_key(s, "dead"), s->now, parent);
    if (!r) return 0;
    RedisModule_FreeCallReply(r);
    add_event(s, K->events, "failed", pid, "reason", cstr("child"), "child", c);
    child = parent;
    parent = row[PARENT];
    outcome = "dead";
  }
  return 0;
}
