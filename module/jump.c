/* Jumps of the server clock (SPEC section 2.1), as protocol/lib/jump.lua: the same reads, the
 * same writes in the same order (each forwarded to replicas and the AOF). */
#include "jump.h"

#include <stdio.h>

#define JUMP_MIN_MS 500

/* The members of `zset` scored after `after` (exclusive), with their scores, oldest first. */
static RedisModuleCallReply *after(Sweep *s, RedisModuleString *zset, double after_ms) {
  char from[40];
  snprintf(from, sizeof(from), "(%.17g", after_ms);
  return RedisModule_Call(s->ctx, "ZRANGEBYSCORE", "sccc", zset, from, "+inf", "WITHSCORES");
}

static double score_at(RedisModuleCallReply *list, size_t i) {
  double d = 0;
  lua_number(member_at(list, i), &d);
  return d;
}

long long clock_follow(Sweep *s, RedisModuleString *meta, const char *field, long long expected,
                       RedisModuleString *zset) {
  RedisModuleString *kept = hash_field(s, meta, field);
  double seen = 0;
  int known = kept && lua_number(str_of(kept), &seen);
  double jump = 0, gap = (double)s->now - seen;
  if (known && gap < -JUMP_MIN_MS) jump = gap;
  else if (known && expected >= 0 && gap - (double)expected > JUMP_MIN_MS) jump = gap - (double)expected;
  if (jump != 0) {
    RedisModuleCallReply *m = after(s, zset, seen);
    size_t n = m && RedisModule_CallReplyType(m) == REDISMODULE_REPLY_ARRAY ? RedisModule_CallReplyLength(m) : 0;
    for (size_t i = 0; i + 1 < n && !s->failure; i += 2) {
      char score[40];
      snprintf(score, sizeof(score), "%.17g", score_at(m, i + 1) + jump);
      Str member = member_at(m, i);
      RedisModuleCallReply *r = WRITE(s, "ZADD", "scb", zset, score, member.p, member.n);
      if (r) RedisModule_FreeCallReply(r);
    }
    if (m) RedisModule_FreeCallReply(m);
  }
  if (!s->failure) {
    RedisModuleCallReply *r = WRITE(s, "HSET", "scl", meta, field, s->now);
    if (r) RedisModule_FreeCallReply(r);
  }
  return (long long)jump;
}

void jump_after_now(Sweep *s, RedisModuleString *zset, long long jump) {
  RedisModuleCallReply *m = after(s, zset, (double)s->now);
  size_t n = m && RedisModule_CallReplyType(m) == REDISMODULE_REPLY_ARRAY ? RedisModule_CallReplyLength(m) : 0;
  for (size_t i = 0; i + 1 < n && !s->failure; i += 2) {
    Str member = member_at(m, i);
    RedisModuleCallReply *r = WRITE(s, "ZINCRBY", "slb", zset, jump, member.p, member.n);
    if (r) RedisModule_FreeCallReply(r);
  }
  if (m) RedisModule_FreeCallReply(m);
}
