/* A job that ended in a sweep: its dedupe lock and its parent; see flow.h. */
#include "flow.h"

#include <string.h>

/* Deeper chains are not walked by the read pass (a loop of parents would not end otherwise). */
#define MAX_CHAIN 10000

static const char *const PARENT_ROW[] = {"state", "continue", "group", "prio", "parent", "children", NULL};
enum { STATE, CONTINUE, GROUP, PRIO, PARENT, CHILDREN, NROW };

/* lib/flow.lua's check of a parent's numbers: the first malformed field, NULL when sound. */
static const char *bad_parent_field(RedisModuleString **row) {
  if (!counter_text(row[CHILDREN])) return "children";
  if (!whole_text(row[PRIO])) return "prio";
  return NULL;
}

static RedisModuleString *queue_key(Sweep *s, const char *name) { return key3(s, cstr(name), cstr(""), cstr("")); }

static RedisModuleString *dedupe_key(Sweep *s, Str key) { return key3(s, cstr("dedupe:"), key, cstr("")); }

static int is(RedisModuleString *v, const char *text) { return v && str_eq(str_of(v), text); }

/* lib/flow.lua's parent in another queue: '<its prefix><its id>', not a JOB id, holding '}:'. */
static int remote_parent(Str parent) {
  if (parent.n >= 3 && memcmp(parent.p, "JOB", 3) == 0) return 0;
  for (size_t i = 0; i + 1 < parent.n; i++)
    if (parent.p[i] == '}' && parent.p[i + 1] == ':') return 1;
  return 0;
}

/* P job:<parent>:processed, the children a parent has counted (each once). */
static RedisModuleString *processed_key(Sweep *s, Str parent) {
  return key3(s, cstr("job:"), parent, cstr(":processed"));
}

/* lib/flow.lua's hand-off: the child's end recorded in this queue (P notice:<child>, P notices)
 * for a runtime to deliver to the parent's queue. A sweep's outcome has no result. */
static int record_notice(Sweep *s, RedisModuleString *parent, RedisModuleString *child, const char *outcome) {
  RedisModuleCallReply *r = RedisModule_Call(s->ctx, "HGET", "sc", job_key(s, str_of(child)), "error");
  RedisModuleString *err = NULL;
  if (r && RedisModule_CallReplyType(r) == REDISMODULE_REPLY_STRING) {
    size_t n;
    const char *p = RedisModule_CallReplyStringPtr(r, &n);
    err = RedisModule_CreateString(s->ctx, p, n);
  }
  if (r) RedisModule_FreeCallReply(r);
  RedisModuleCallReply *w = WRITE(s, "HSET", "scscccccs", key3(s, cstr("notice:"), str_of(child), cstr("")),
                                  "parent", parent, "outcome", outcome, "result", "", "error",
                                  err ? err : RedisModule_CreateString(s->ctx, "", 0));
  if (!w) return 0;
  RedisModule_FreeCallReply(w);
  w = WRITE(s, "ZADD", "sls", queue_key(s, "notices"), s->now, child);
  if (!w) return 0;
  RedisModule_FreeCallReply(w);
  return 1;
}

/* P job:<parent>:failures, where a parent with `continue` = ignore records its failed children. */
static RedisModuleString *failures_key(Sweep *s, Str parent) { return key3(s, cstr("job:"), parent, cstr(":failures")); }

/* lib/flow.lua's record of an ignored failure: child id -> '<outcome>: <error>' (or '<outcome>'). */
static int record_failure(Sweep *s, Str parent, RedisModuleString *child, const char *outcome) {
  RedisModuleCallReply *r = RedisModule_Call(s->ctx, "HGET", "sc", job_key(s, str_of(child)), "error");
  Str err = {NULL, 0};
  if (r && RedisModule_CallReplyType(r) == REDISMODULE_REPLY_STRING) err.p = RedisModule_CallReplyStringPtr(r, &err.n);
  size_t on = strlen(outcome), n = on + (err.p ? 2 + err.n : 0);
  char stack[512];
  char *buf = n <= sizeof(stack) ? stack : RedisModule_Alloc(n);
  memcpy(buf, outcome, on);
  if (err.p) memcpy(buf + on, ": ", 2), memcpy(buf + on + 2, err.p, err.n);
  RedisModuleString *value = RedisModule_CreateString(s->ctx, buf, n);
  if (buf != stack) RedisModule_Free(buf);
  if (r) RedisModule_FreeCallReply(r);
  RedisModuleCallReply *w = WRITE(s, "HSET", "sss", failures_key(s, parent), child, value);
  RedisModule_FreeString(s->ctx, value);
  if (!w) return 0;
  RedisModule_FreeCallReply(w);
  return 1;
}

int ended_keys_ok(Sweep *s, const QueueKeys *K, RedisModuleString *dedupe, RedisModuleString *parent) {
  if (dedupe && !expect_type(s, dedupe_key(s, str_of(dedupe)), REDISMODULE_KEYTYPE_STRING)) return 0;
  for (int step = 0; parent && step < MAX_CHAIN; step++) {
    if (remote_parent(str_of(parent))) return expect_type(s, queue_key(s, "notices"), REDISMODULE_KEYTYPE_ZSET);
    RedisModuleString *pk = job_key(s, str_of(parent));
    if (!expect_type(s, pk, REDISMODULE_KEYTYPE_HASH)) return 0;
    RedisModuleString *row[NROW];
    hash_fields(s, pk, PARENT_ROW, row);
    if (!is(row[STATE], "waiting_children")) return 1;
    if (!expect_type(s, processed_key(s, str_of(parent)), REDISMODULE_KEYTYPE_SET)) return 0;
    if (!expect_type(s, queue_key(s, "waiting_children"), REDISMODULE_KEYTYPE_ZSET)) return 0;
    if (!expect_type(s, K->events, REDISMODULE_KEYTYPE_STREAM)) return 0;
    int ignore = is(row[CONTINUE], "ignore");
    if (ignore && !bad_parent_field(row) && !expect_type(s, failures_key(s, str_of(parent)), REDISMODULE_KEYTYPE_HASH))
      return 0;
    if ((is(row[CONTINUE], "1") || ignore) && !bad_parent_field(row))
      return release_keys_ok(s, K, row[GROUP], row[PRIO]);
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

/* 'child ' .. id .. ' failed (' .. outcome .. ')', or with a malformed `field` of the parent the
 * EMQDATA message of lib/flow.lua. */
static RedisModuleString *failed_message(Sweep *s, Str parent, Str child, const char *outcome, const char *field) {
  Str plain[] = {cstr("child "), child, cstr(" failed ("), cstr(outcome), cstr(")")};
  Str data[] = {cstr("EMQDATA job "), parent, cstr(": its field "), cstr(field ? field : ""),
                cstr(" is not a whole number; it was dead-lettered when its child "), child,
                cstr(" ended: correct or remove the field, then retry the job")};
  Str *parts = field ? data : plain;
  int count = field ? 7 : 5;
  size_t n = 0, at = 0;
  for (int i = 0; i < count; i++) n += parts[i].n;
  char stack[512];
  char *buf = n <= sizeof(stack) ? stack : RedisModule_Alloc(n);
  for (int i = 0; i < count; i++) memcpy(buf + at, parts[i].p, parts[i].n), at += parts[i].n;
  RedisModuleString *message = RedisModule_CreateString(s->ctx, buf, n);
  if (buf != stack) RedisModule_Free(buf);
  return message;
}

int child_ended(Sweep *s, const QueueKeys *K, RedisModuleString *parent, Str id, const char *outcome,
                long long *pending_card) {
  RedisModuleString *child = RedisModule_CreateString(s->ctx, id.p, id.n);
  while (parent && !s->failure) {
    Str pid = str_of(parent);
    if (remote_parent(pid)) {
      record_notice(s, parent, child, outcome);
      return 0;
    }
    RedisModuleString *pk = job_key(s, pid);
    RedisModuleString *row[NROW];
    hash_fields(s, pk, PARENT_ROW, row);
    if (!is(row[STATE], "waiting_children")) return 0;
    RedisModuleCallReply *r = WRITE(s, "SADD", "ss", processed_key(s, pid), child);
    if (!r) return 0;
    long long fresh = reply_int(r);
    RedisModule_FreeCallReply(r);
    if (!fresh) return 0;
    const char *field = bad_parent_field(row);
    int ignore = is(row[CONTINUE], "ignore");
    if (ignore && !field && !record_failure(s, pid, child, outcome)) return 0;
    if ((is(row[CONTINUE], "1") || ignore) && !field) {
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
    RedisModuleString *message = failed_message(s, pid, c, outcome, field);
    r = WRITE(s, "HSET", "sccclcs", pk, "state", "dead", "finished", s->now, "error", message);
    if (!r) return 0;
    RedisModule_FreeCallReply(r);
    r = WRITE(s, "ZADD", "sls", queue_key(s, "dead"), s->now, parent);
    if (!r) return 0;
    RedisModule_FreeCallReply(r);
    if (field)
      add_event3(s, K->events, "failed", pid, "reason", cstr("data"), "field", cstr(field), "child", c);
    else
      add_event(s, K->events, "failed", pid, "reason", cstr("child"), "child", c);
    child = parent;
    parent = row[PARENT];
    outcome = "dead";
  }
  return 0;
}
