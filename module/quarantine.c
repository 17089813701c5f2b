/* Malformed rows out of circulation; see quarantine.h. Call for call as lib/quarantine.lua. */
#include "quarantine.h"
#include "flow.h"

#include <string.h>

static const char *const ENDED_ROW[] = {"dedupe", "parent", NULL};
static const char *const HOME_ROW[] = {"group", "prio", "runat", "finished", NULL};
enum { GROUP, PRIO, RUNAT, FINISHED };

/* The set each state's id lives in (lib/quarantine.lua STATE_SET); NULL: an unknown state. */
static const char *state_set(Str state) {
  static const char *const map[][2] = {{"scheduled", "schedule"}, {"pending", "pending"}, {"active", "active"},
                                       {"waiting_children", "waiting_children"}, {"completed", "completed"},
                                       {"dead", "dead"}, {"cancelled", "cancelled"}};
  for (size_t i = 0; i < sizeof(map) / sizeof(map[0]); i++)
    if (str_eq(state, map[i][0])) return map[i][1];
  return NULL;
}

static RedisModuleString *queue_key(Sweep *s, const char *name) { return key3(s, cstr(name), cstr(""), cstr("")); }

/* The set the row's id belongs in: its lane for a grouped pending row. */
static RedisModuleString *home_key(Sweep *s, Str state, RedisModuleString *group) {
  if (str_eq(state, "pending") && group) return key3(s, cstr("g:"), str_of(group), cstr(":pending"));
  return queue_key(s, state_set(state));
}

int quarantine_keys_ok(Sweep *s, const QueueKeys *K, RedisModuleString *jk) {
  if (!expect_type(s, queue_key(s, "dead"), REDISMODULE_KEYTYPE_ZSET)) return 0;
  if (!expect_type(s, K->events, REDISMODULE_KEYTYPE_STREAM)) return 0;
  RedisModuleString *row[2];
  hash_fields(s, jk, ENDED_ROW, row);
  return ended_keys_ok(s, K, row[0], row[1]);
}

int rehome_keys_ok(Sweep *s, const QueueKeys *K, RedisModuleString *jk, RedisModuleString *state) {
  if (!state) return 1;
  Str st = str_of(state);
  if (!state_set(st)) return quarantine_keys_ok(s, K, jk);
  RedisModuleString *row[4];
  hash_fields(s, jk, HOME_ROW, row);
  if (!expect_type(s, home_key(s, st, row[GROUP]), REDISMODULE_KEYTYPE_ZSET)) return 0;
  if (!str_eq(st, "pending")) return 1;
  if (!whole_text(row[PRIO])) return quarantine_keys_ok(s, K, jk);
  return release_keys_ok(s, K, row[GROUP], row[PRIO]);
}

int quarantine(Sweep *s, const QueueKeys *K, RedisModuleString *jk, Str id, const char *field, Str value,
               long long *pending_card) {
  size_t shown = value.n > 40 ? 40 : value.n;
  Str parts[] = {cstr("EMQDATA job "), id, cstr(": its field "), cstr(field), cstr(" holds '"), {value.p, shown},
                 cstr(value.n > 40 ? "\xe2\x80\xa6" : ""),
                 cstr("', which no script writes; it was dead-lettered: correct or remove the field, then retry "
                      "the job")};
  size_t n = 0, at = 0, count = sizeof(parts) / sizeof(parts[0]);
  for (size_t i = 0; i < count; i++) n += parts[i].n;
  char *text = RedisModule_Alloc(n);
  for (size_t i = 0; i < count; i++) memcpy(text + at, parts[i].p, parts[i].n), at += parts[i].n;
  RedisModuleCallReply *r = WRITE(s, "HSET", "sccclcb", jk, "state", "dead", "finished", s->now, "error", text, n);
  RedisModule_Free(text);
  if (!r) return 0;
  RedisModule_FreeCallReply(r);
  r = WRITE(s, "ZADD", "slb", queue_key(s, "dead"), s->now, id.p, id.n);
  if (!r) return 0;
  RedisModule_FreeCallReply(r);
  if (!add_event3(s, K->events, "failed", id, "reason", cstr("data"), "field", cstr(field), NULL, cstr(""))) return 0;
  RedisModuleString *row[2];
  hash_fields(s, jk, ENDED_ROW, row);
  if (row[0]) dedupe_release(s, str_of(row[0]), id);
  if (s->failure || !row[1]) return 0;
  return child_ended(s, K, row[1], id, "dead", pending_card);
}

int rehome(Sweep *s, const QueueKeys *K, RedisModuleString *jk, Str id, RedisModuleString *state,
           long long *pending_card) {
  if (!state) return 0;
  Str st = str_of(state);
  if (!state_set(st)) return quarantine(s, K, jk, id, "state", st, pending_card);
  RedisModuleString *row[4];
  hash_fields(s, jk, HOME_ROW, row);
  RedisModuleString *set = home_key(s, st, row[GROUP]);
  RedisModuleCallReply *r = RedisModule_Call(s->ctx, "ZSCORE", "sb", set, id.p, id.n);
  int present = r && RedisModule_CallReplyType(r) == REDISMODULE_REPLY_STRING;
  if (r) RedisModule_FreeCallReply(r);
  if (present) return 0;
  if (str_eq(st, "pending")) {
    if (!whole_text(row[PRIO])) return quarantine(s, K, jk, id, "prio", str_of(row[PRIO]), pending_card);
    return release(s, K, id, row[GROUP], row[PRIO] ? str_of(row[PRIO]) : cstr("0"), pending_card);
  }
  RedisModuleString *score = NULL;
  if (str_eq(st, "scheduled") && row[RUNAT] && whole_text(row[RUNAT])) score = row[RUNAT];
  if ((str_eq(st, "completed") || str_eq(st, "dead") || str_eq(st, "cancelled")) && row[FINISHED] &&
      whole_text(row[FINISHED]))
    score = row[FINISHED];
  if (score)
    r = WRITE(s, "ZADD", "ssb", set, score, id.p, id.n);
  else
    r = WRITE(s, "ZADD", "slb", set, s->now, id.p, id.n);
  if (r) RedisModule_FreeCallReply(r);
  return 0;
}
