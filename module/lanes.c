/* Lanes and the ring; each function follows its namesake in protocol/lib/lanes.lua call for call. */
#include "lanes.h"

#include <string.h>

static RedisModuleString *lane_key(Sweep *s, Str group) { return key3(s, cstr("g:"), group, cstr(":pending")); }

static RedisModuleString *queue_key(Sweep *s, const char *name) { return key3(s, cstr(name), cstr(""), cstr("")); }

/* A hash counter field that Lua's tonumber reads (absent counts as 0). */
static int number_field_ok(Sweep *s, RedisModuleString *hash, Str field) {
  RedisModuleString *v = hash_field_str(s, hash, field);
  double d;
  if (v && !lua_number(str_of(v), &d)) return refuse(s, "ERR a lane counter is not a number");
  return 1;
}

/* ring_offer's keys: concurrency, paused, meta's ring_seq and the ring. */
static int offer_keys_ok(Sweep *s, const QueueKeys *K, Str group) {
  RedisModuleString *conc = queue_key(s, "lanes:concurrency");
  if (!expect_type(s, conc, REDISMODULE_KEYTYPE_HASH)) return 0;
  if (!number_field_ok(s, conc, group) || !number_field_ok(s, conc, cstr("*"))) return 0;
  if (!expect_type(s, queue_key(s, "lanes:paused"), REDISMODULE_KEYTYPE_SET)) return 0;
  if (!expect_type(s, K->meta, REDISMODULE_KEYTYPE_HASH)) return 0;
  RedisModuleString *seq = hash_field(s, K->meta, "ring_seq");
  long long n;
  if (seq && !redis_integer(str_of(seq), &n)) return refuse(s, "ERR hash value is not an integer");
  return expect_type(s, K->ring, REDISMODULE_KEYTYPE_ZSET);
}

static int running_ok(Sweep *s, Str group, int as_integer) {
  RedisModuleString *running = queue_key(s, "lanes:running");
  if (!expect_type(s, running, REDISMODULE_KEYTYPE_HASH)) return 0;
  RedisModuleString *v = hash_field_str(s, running, group);
  long long n;
  if (v && as_integer && !redis_integer(str_of(v), &n)) return refuse(s, "ERR hash value is not an integer");
  return number_field_ok(s, running, group);
}

int release_keys_ok(Sweep *s, const QueueKeys *K, RedisModuleString *group, RedisModuleString *prio) {
  if (prio && !score_ok(s, str_of(prio))) return 0;
  if (!expect_type(s, K->wake, REDISMODULE_KEYTYPE_STREAM)) return 0;
  if (!group) return expect_type(s, K->pending, REDISMODULE_KEYTYPE_ZSET);
  Str g = str_of(group);
  if (!expect_type(s, lane_key(s, g), REDISMODULE_KEYTYPE_ZSET)) return 0;
  if (!expect_type(s, queue_key(s, "lanes"), REDISMODULE_KEYTYPE_SET)) return 0;
  return running_ok(s, g, 0) && offer_keys_ok(s, K, g);
}

int lane_done_keys_ok(Sweep *s, const QueueKeys *K, RedisModuleString *group) {
  Str g = str_of(group);
  if (!expect_type(s, K->wake, REDISMODULE_KEYTYPE_STREAM)) return 0;
  if (!running_ok(s, g, 1)) return 0;
  if (!expect_type(s, lane_key(s, g), REDISMODULE_KEYTYPE_ZSET)) return 0;
  return offer_keys_ok(s, K, g);
}

/* Lua's tonumber(v or dflt) of a field already checked to be a number. */
static double number_or(RedisModuleString *v, double dflt) {
  double d = dflt;
  if (v) lua_number(str_of(v), &d);
  return d;
}

/* Put the group at the ring's tail when it has a free slot and is not paused. True when the
 * ring went from empty to non-empty. */
static int ring_offer(Sweep *s, const QueueKeys *K, RedisModuleString *group, double running) {
  Str g = str_of(group);
  RedisModuleString *conc = queue_key(s, "lanes:concurrency");
  RedisModuleString *own = hash_field_str(s, conc, g);
  double limit = own ? number_or(own, 0) : number_or(hash_field(s, conc, "*"), 0);
  if (limit > 0 && running >= limit) return 0;
  RedisModuleCallReply *r = RedisModule_Call(s->ctx, "SISMEMBER", "ss", queue_key(s, "lanes:paused"), group);
  long long paused = reply_int(r);
  if (r) RedisModule_FreeCallReply(r);
  if (paused == 1) return 0;
  r = WRITE(s, "HINCRBY", "scl", K->meta, "ring_seq", 1LL);
  if (!r) return 0;
  long long seq = reply_int(r);
  RedisModule_FreeCallReply(r);
  r = WRITE(s, "ZADD", "scls", K->ring, "NX", seq, group);
  if (!r) return 0;
  long long added = reply_int(r);
  RedisModule_FreeCallReply(r);
  return added == 1 && key_length(s, K->ring) == 1;
}

int release(Sweep *s, const QueueKeys *K, Str id, RedisModuleString *group, Str prio, long long *pending_card) {
  RedisModuleCallReply *r;
  if (group) {
    Str g = str_of(group);
    r = WRITE(s, "ZADD", "sbb", lane_key(s, g), prio.p, prio.n, id.p, id.n);
    if (!r) return 0;
    RedisModule_FreeCallReply(r);
    r = WRITE(s, "SADD", "ss", queue_key(s, "lanes"), group);
    if (!r) return 0;
    RedisModule_FreeCallReply(r);
    double running = number_or(hash_field_str(s, queue_key(s, "lanes:running"), g), 0);
    return ring_offer(s, K, group, running);
  }
  r = WRITE(s, "ZADD", "sbb", K->pending, prio.p, prio.n, id.p, id.n);
  if (!r) return 0;
  *pending_card += reply_int(r);
  RedisModule_FreeCallReply(r);
  return *pending_card == 1;
}

int lane_done(Sweep *s, const QueueKeys *K, RedisModuleString *group) {
  RedisModuleString *running_key = queue_key(s, "lanes:running");
  RedisModuleCallReply *r = WRITE(s, "HINCRBY", "ssl", running_key, group, -1LL);
  if (!r) return 0;
  long long running = reply_int(r);
  RedisModule_FreeCallReply(r);
  if (running <= 0) {
    r = WRITE(s, "HDEL", "ss", running_key, group);
    if (!r) return 0;
    RedisModule_FreeCallReply(r);
    running = 0;
  }
  if (key_length(s, lane_key(s, str_of(group))) > 0) return ring_offer(s, K, group, (double)running);
  return 0;
}

static int holds_slot(RedisModuleString *slot) { return slot && str_eq(str_of(slot), "1"); }

int left_active_keys_ok(Sweep *s, const QueueKeys *K, RedisModuleString *group, RedisModuleString *slot) {
  if (holds_slot(slot)) {
    if (!expect_type(s, K->meta, REDISMODULE_KEYTYPE_HASH)) return 0;
    RedisModuleString *running = hash_field(s, K->meta, "running");
    long long n;
    if (running && !redis_integer(str_of(running), &n)) return refuse(s, "ERR hash value is not an integer");
  }
  return !group || lane_done_keys_ok(s, K, group);
}

int left_active(Sweep *s, const QueueKeys *K, RedisModuleString *jk, RedisModuleString *group, RedisModuleString *slot) {
  int woke = 0;
  if (holds_slot(slot)) {
    RedisModuleCallReply *r = WRITE(s, "HDEL", "sc", jk, "slot");
    if (!r) return 0;
    RedisModule_FreeCallReply(r);
    r = WRITE(s, "HINCRBY", "scl", K->meta, "running", -1LL);
    if (!r) return 0;
    long long running = reply_int(r);
    RedisModule_FreeCallReply(r);
    if (running <= 0) {
      r = WRITE(s, "HDEL", "sc", K->meta, "running");
      if (!r) return 0;
      RedisModule_FreeCallReply(r);
    }
    /* Lua's tonumber(concurrency or '0') or 0: a malformed cap counts as none. */
    double cap = 0;
    RedisModuleString *c = hash_field(s, K->meta, "concurrency");
    if (c && !lua_number(str_of(c), &cap)) cap = 0;
    woke = cap > 0 && (double)(running + 1) >= cap;
  }
  if (group && lane_done(s, K, group)) woke = 1;
  return woke;
}

void wake(Sweep *s, const QueueKeys *K) {
  RedisModuleCallReply *r = WRITE(s, "XADD", "scccccc", K->wake, "MAXLEN", "~", "100", "*", "w", "1");
  if (r) RedisModule_FreeCallReply(r);
}
