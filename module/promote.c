/* EMQ.PROMOTE: protocol/scripts/promote.lua as a command. One clock reading, a read pass that
 * selects the due members and checks every key the release will touch, then one write pass that
 * makes the script's calls in the script's order (so keys, replies and events are the same).
 *
 *   EMQ.PROMOTE 6 schedule pending events wake meta ring prefix batch [mode [elapsed_ms]]
 *   (mode 'next': [count, now_ms, next_due_ms, handoffs], as the script replies)
 *   EMQ.PROMOTE 2 schedule pending prefix batch [mode [elapsed_ms]]   (the seeds' form; the rest by prefix)
 */
#include "promote.h"
#include "quarantine.h"
#include "jump.h"
#include "recurrence.h"

static const char *const KEYS[] = {"schedule", "pending", "events", "wake", "meta", "ring"};
enum { SCHEDULE, PENDING, EVENTS, WAKE, META, RING, NKEYS };

static long long batch_of(Sweep *s) {
  long long b = 0;
  parse_whole(str_of(s->argv[1]), 1, &b);
  return b;
}

/* The script's own ARGV check, with its message. */
static int argv_ok(Sweep *s) {
  long long b, e;
  if (s->argc >= 2 && parse_whole(str_of(s->argv[1]), 1, &b) && (s->argc < 4 || parse_whole(str_of(s->argv[3]), 0, &e)))
    return 1;
  return refuse(s, "EMQINPUT promote takes prefix batch [mode [elapsed_ms]]; batch a whole number >= 1, elapsed_ms >= 0");
}

static const char *const ROW[] = {"state", "group", "prio", NULL};
enum { STATE, GROUP, PRIO };

int emq_promote(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
  if (RedisModule_IsKeysPositionRequest(ctx)) {
    sweep_key_positions(ctx, argv, argc);
    return REDISMODULE_OK;
  }
  RedisModule_AutoMemory(ctx);
  Sweep sweep, *s = &sweep;
  if (!sweep_shape(s, ctx, "EMQ.PROMOTE", argv, argc, KEYS, NKEYS, 2, argv_ok)) return REDISMODULE_OK;
  QueueKeys K = {s->key[PENDING], s->key[EVENTS], s->key[WAKE], s->key[META], s->key[RING]};
  int next = s->argc >= 3 && str_eq(str_of(s->argv[2]), "next");

  /* ── read pass: one clock reading, the due members, the types of what they will touch ── */
  s->now = clock_now_ms();
  if (!expect_type(s, s->key[SCHEDULE], REDISMODULE_KEYTYPE_ZSET)) return REDISMODULE_OK;
  if (!expect_type(s, s->key[META], REDISMODULE_KEYTYPE_HASH)) return REDISMODULE_OK;
  RedisModuleCallReply *due = due_members(s, s->key[SCHEDULE], batch_of(s));
  if (!due || RedisModule_CallReplyType(due) != REDISMODULE_REPLY_ARRAY)
    return refuse(s, "ERR the schedule could not be read"), REDISMODULE_OK;
  size_t n = RedisModule_CallReplyLength(due);
  if (!read_events_cap(s, s->key[META])) return REDISMODULE_OK;
  /* The rows read here are the rows the writes see: no write of this call touches another
   * member's row. */
  RedisModuleString **jks = RedisModule_Alloc(sizeof(*jks) * (n + 1));
  RedisModuleString **rows = RedisModule_Alloc(sizeof(*rows) * 3 * (n + 1));
  int ok = 1, flat = 0;
  for (size_t i = 0; i < n && ok; i++) {
    RedisModuleString **row = rows + 3 * i;
    jks[i] = job_key(s, member_at(due, i));
    row[STATE] = row[GROUP] = row[PRIO] = NULL;
    if (!(ok = expect_type(s, jks[i], REDISMODULE_KEYTYPE_HASH))) break;
    hash_fields(s, jks[i], ROW, row);
    if (!row[STATE]) continue; /* a ghost */
    if (!str_eq(str_of(row[STATE]), "scheduled")) {
      flat = 1; /* a rehome may release to pending, a quarantine a flow parent */
      ok = rehome_keys_ok(s, &K, jks[i], row[STATE]);
      continue;
    }
    if (!whole_text(row[PRIO])) {
      flat = 1;
      ok = quarantine_keys_ok(s, &K, jks[i]);
      continue;
    }
    if (!row[GROUP]) flat = 1;
    ok = expect_type(s, K.events, REDISMODULE_KEYTYPE_STREAM) && release_keys_ok(s, &K, row[GROUP], row[PRIO]) &&
         follow_ok(s, &K, s->key[SCHEDULE], member_at(due, i)) &&
         repeat_follow_ok(s, &K, s->key[SCHEDULE], member_at(due, i));
  }
  if (!ok) {
    RedisModule_Free(jks);
    RedisModule_Free(rows);
    return REDISMODULE_OK;
  }
  long long pending_card = flat ? (long long)key_length(s, K.pending) : 0;

  /* ── a jump of the clock moves the schedule first (lib/jump.lua; ahead is one only against
   * the caller's elapsed_ms). The members it moves only ever leave the due ones, so the read
   * pass above checked what remains: the first of them, in the same order. ── */
  long long elapsed = -1;
  if (s->argc >= 4) parse_whole(str_of(s->argv[3]), 0, &elapsed);
  if (clock_follow(s, s->key[META], "clock_schedule", elapsed, s->key[SCHEDULE]) != 0 && !s->failure) {
    due = due_members(s, s->key[SCHEDULE], batch_of(s));
    n = due && RedisModule_CallReplyType(due) == REDISMODULE_REPLY_ARRAY ? RedisModule_CallReplyLength(due) : 0;
  }
  if (s->failure) {
    RedisModule_Free(jks);
    RedisModule_Free(rows);
    return reply_failure(s), REDISMODULE_OK;
  }

  /* ── write pass: the script's loop ── */
  int woke = 0;
  long long handoffs = 0;
  for (size_t i = 0; i < n && !s->failure; i++) {
    Str id = member_at(due, i);
    RedisModuleString **row = rows + 3 * i;
    /* One ZREM a member, as the loop reaches it: a hand-off below asks whether the occurrence it
     * made heads the schedule, which the members not yet removed take part in. */
    RedisModuleCallReply *rm = WRITE(s, "ZREM", "sb", s->key[SCHEDULE], id.p, id.n);
    if (!rm) break;
    RedisModule_FreeCallReply(rm);
    /* A ghost (row gone) leaves the set and is not resurrected; only a scheduled row moves. A row
     * in another state goes to its own set when that lacks it; a malformed prio dead-letters. */
    if (!row[STATE]) continue;
    if (!str_eq(str_of(row[STATE]), "scheduled")) {
      if (rehome(s, &K, jks[i], id, row[STATE], &pending_card)) woke = 1;
    } else if (!whole_text(row[PRIO])) {
      if (quarantine(s, &K, jks[i], id, "prio", str_of(row[PRIO]), &pending_card)) woke = 1;
    } else {
      RedisModuleCallReply *r = WRITE(s, "HSET", "scc", jks[i], "state", "pending");
      if (!r) break;
      RedisModule_FreeCallReply(r);
      if (release(s, &K, id, row[GROUP], row[PRIO] ? str_of(row[PRIO]) : cstr("0"), &pending_card)) woke = 1;
      add_event(s, K.events, "waiting", id, NULL, cstr(""), NULL, cstr(""));
      /* A recurring occurrence (a scheduler's, a cadence's): its next one exists before it runs. */
      if (!s->failure && scheduler_follow(s, &K, s->key[SCHEDULE], id)) handoffs++;
      if (!s->failure) repeat_follow(s, &K, s->key[SCHEDULE], id);
    }
  }
  RedisModule_Free(jks);
  RedisModule_Free(rows);
  if (woke && !s->failure) wake(s, &K);
  if (s->failure) return reply_failure(s), REDISMODULE_OK;

  if (next) {
    RedisModuleCallReply *head = RedisModule_Call(ctx, "ZRANGE", "sccc", s->key[SCHEDULE], "0", "0", "WITHSCORES");
    long long at = -1;
    if (head && RedisModule_CallReplyType(head) == REDISMODULE_REPLY_ARRAY && RedisModule_CallReplyLength(head) >= 2) {
      Str score;
      score.p = RedisModule_CallReplyStringPtr(RedisModule_CallReplyArrayElement(head, 1), &score.n);
      double d;
      if (lua_number(score, &d)) at = (long long)d; /* a Lua number replied as an integer: truncated */
    }
    RedisModule_ReplyWithArray(ctx, 4 + LATER_ENTRIES);
    RedisModule_ReplyWithLongLong(ctx, (long long)n);
    RedisModule_ReplyWithLongLong(ctx, s->now);
    RedisModule_ReplyWithLongLong(ctx, at);
    RedisModule_ReplyWithLongLong(ctx, handoffs);
    reply_later_entries(ctx);
    return REDISMODULE_OK;
  }
  RedisModule_ReplyWithLongLong(ctx, (long long)n);
  return REDISMODULE_OK;
}
