/* EMQ.STALLED.CHECK: protocol/scripts/sweep_stalled.lua (its lib/recover.lua) as a command. One
 * clock reading, a read pass that selects the expired leases and checks every key their recovery
 * will touch, then one write pass making the script's calls in the script's order.
 *
 *   EMQ.STALLED.CHECK 8 active pending dead events wake meta ring cancelled prefix max_stalled batch [expected_ms]
 *   EMQ.STALLED.CHECK 3 active pending dead prefix max_stalled batch [expected_ms]   (the seeds' form)
 */
#include "flow.h"
#include "jump.h"
#include "sweep_stalled.h"
#include "quarantine.h"

#include <string.h>

static const char *const KEYS[] = {"active", "pending", "dead", "events", "wake", "meta", "ring", "cancelled"};
enum { ACTIVE, PENDING, DEAD, EVENTS, WAKE, META, RING, CANCELLED, NKEYS };

/* The script's own ARGV check, with its message. */
static int argv_ok(Sweep *s) {
  long long a, b, c;
  if (s->argc >= 3 && parse_whole(str_of(s->argv[1]), 0, &a) && parse_whole(str_of(s->argv[2]), 1, &b) &&
      (s->argc < 4 || parse_whole(str_of(s->argv[3]), 0, &c)))
    return 1;
  return refuse(s,
                "EMQINPUT sweep_stalled takes prefix max_stalled batch [expected_ms]: whole numbers >= 0, >= 1 and >= 0");
}

static const char *const ROW[] = {"state", "group", "prio", "cancel", "dedupe", "parent", "stalled", "slot", NULL};
enum { STATE, GROUP, PRIO, CANCEL, DEDUPE, PARENT, STALLED, SLOT, NROW };

static int is(RedisModuleString *v, const char *text) { return v && str_eq(str_of(v), text); }

/* lib/recover.lua's RECOVER_NUMBERS: the first malformed field of an active row, NULL when sound. */
static const char *bad_field(RedisModuleString **row, RedisModuleString **value) {
  if (!counter_text(row[STALLED])) return *value = row[STALLED], "stalled";
  if (!whole_text(row[PRIO])) return *value = row[PRIO], "prio";
  return NULL;
}

/* Read pass for one expired member: the keys its recovery, death or cancellation touches. Its
 * row is kept in `row` for the write pass: no write of this call touches an active job's row
 * but its own (a parent told of a child's end is waiting_children, not active; one found in
 * active anyway has its state read again at its turn). */
static int member_ok(Sweep *s, const QueueKeys *K, RedisModuleString *jk, RedisModuleString **row, long long max_stalled) {
  for (int f = 0; f < NROW; f++) row[f] = NULL;
  if (!expect_type(s, jk, REDISMODULE_KEYTYPE_HASH)) return 0;
  hash_fields(s, jk, ROW, row);
  int ok = 1;
  RedisModuleString *bad;
  if (row[STATE] && !is(row[STATE], "active")) {
    ok = rehome_keys_ok(s, K, jk, row[STATE]);
  } else if (row[STATE] && bad_field(row, &bad)) {
    ok = left_active_keys_ok(s, K, row[GROUP], row[SLOT]);
    if (ok) ok = quarantine_keys_ok(s, K, jk);
  } else if (row[STATE]) {
    long long stalled = 0;
    ok = expect_type(s, K->events, REDISMODULE_KEYTYPE_STREAM);
    if (ok) ok = left_active_keys_ok(s, K, row[GROUP], row[SLOT]);
    if (ok && row[STALLED] && !redis_integer(str_of(row[STALLED]), &stalled))
      ok = refuse(s, "ERR hash value is not an integer");
    if (ok && is(row[CANCEL], "1"))
      ok = expect_type(s, s->key[CANCELLED], REDISMODULE_KEYTYPE_ZSET) &&
           ended_keys_ok(s, K, row[DEDUPE], row[PARENT]);
    else if (ok && (double)(stalled + 1) > (double)max_stalled)
      ok = expect_type(s, s->key[DEAD], REDISMODULE_KEYTYPE_ZSET) &&
           ended_keys_ok(s, K, row[DEDUPE], row[PARENT]);
    else if (ok)
      ok = release_keys_ok(s, K, row[GROUP], row[PRIO]);
  }
  return ok;
}

/* Array replies of ids, built while the write pass runs. */
typedef struct {
  Str *ids;
  size_t n;
} Ids;

int emq_stalled_check(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
  if (RedisModule_IsKeysPositionRequest(ctx)) {
    sweep_key_positions(ctx, argv, argc);
    return REDISMODULE_OK;
  }
  RedisModule_AutoMemory(ctx);
  Sweep sweep, *s = &sweep;
  if (!sweep_shape(s, ctx, "EMQ.STALLED.CHECK", argv, argc, KEYS, NKEYS, 3, argv_ok)) return REDISMODULE_OK;
  QueueKeys K = {s->key[PENDING], s->key[EVENTS], s->key[WAKE], s->key[META], s->key[RING]};
  long long max_stalled = 0, batch = 0;
  parse_whole(str_of(s->argv[1]), 0, &max_stalled);
  parse_whole(str_of(s->argv[2]), 1, &batch);

  /* ── read pass ── */
  s->now = clock_now_ms();
  if (!read_events_cap(s, s->key[META])) return REDISMODULE_OK;
  if (!expect_type(s, s->key[ACTIVE], REDISMODULE_KEYTYPE_ZSET)) return REDISMODULE_OK;
  RedisModuleCallReply *expired = due_members(s, s->key[ACTIVE], batch);
  if (!expired || RedisModule_CallReplyType(expired) != REDISMODULE_REPLY_ARRAY)
    return refuse(s, "ERR the active set could not be read"), REDISMODULE_OK;
  size_t n = RedisModule_CallReplyLength(expired);
  RedisModuleString **jks = RedisModule_Alloc(sizeof(*jks) * (n + 1));
  RedisModuleString **rows = RedisModule_Alloc(sizeof(*rows) * NROW * (n + 1));
  int ok = 1;
  for (size_t i = 0; i < n && ok; i++) {
    jks[i] = job_key(s, member_at(expired, i));
    ok = member_ok(s, &K, jks[i], rows + NROW * i, max_stalled);
  }
  if (!ok || !expect_type(s, K.pending, REDISMODULE_KEYTYPE_ZSET)) {
    RedisModule_Free(jks);
    RedisModule_Free(rows);
    return REDISMODULE_OK;
  }
  long long pending_card = (long long)key_length(s, K.pending);

  /* ── a jump of the clock moves the live leases first (lib/jump.lua; back, the lanes waiting
   * out a rate window too). The leases it moves only ever leave the expired ones, so the read
   * pass above checked what remains: the first of them, in the same order. ── */
  long long expected = 1000;
  if (s->argc >= 4) parse_whole(str_of(s->argv[3]), 0, &expected);
  long long jump = clock_follow(s, s->key[META], "clock_lease", expected, s->key[ACTIVE]);
  if (jump < 0 && !s->failure) jump_after_now(s, key3(s, cstr("lanes:limited"), cstr(""), cstr("")), jump);
  if (jump != 0 && !s->failure) {
    expired = due_members(s, s->key[ACTIVE], batch);
    n = expired && RedisModule_CallReplyType(expired) == REDISMODULE_REPLY_ARRAY ? RedisModule_CallReplyLength(expired) : 0;
  }
  if (s->failure) {
    RedisModule_Free(jks);
    RedisModule_Free(rows);
    return reply_failure(s), REDISMODULE_OK;
  }

  /* ── write pass: lib/recover.lua's loop ── */
  char limit_text[32];
  lua_number_text((double)max_stalled, limit_text, sizeof(limit_text));
  Ids recovered = {RedisModule_Alloc(sizeof(Str) * (n + 1)), 0};
  Ids dead = {RedisModule_Alloc(sizeof(Str) * (n + 1)), 0};
  int woke = 0;
  remove_members(s, s->key[ACTIVE], expired);
  for (size_t i = 0; i < n && !s->failure; i++) {
    Str id = member_at(expired, i);
    RedisModuleString *jk = jks[i], **row = rows + NROW * i;
    RedisModuleCallReply *r;
    RedisModuleString *bad;
    const char *field;
    if (row[STATE] && !is(row[STATE], "active")) {
      /* The state as it is now, not as the read pass saw it: a waiting_children row found in
       * active is a flow parent that an earlier member of this batch may have told of its end
       * (dead, or released to pending), and the script re-homes what the row says at its turn. */
      if (rehome(s, &K, jk, id, hash_field(s, jk, "state"), &pending_card)) woke = 1;
    } else if (row[STATE] && (field = bad_field(row, &bad))) {
      if (left_active(s, &K, jk, row[GROUP], row[SLOT])) woke = 1;
      if (!s->failure && quarantine(s, &K, jk, id, field, str_of(bad), &pending_card)) woke = 1;
    } else if (row[STATE]) {
      if (left_active(s, &K, jk, row[GROUP], row[SLOT])) woke = 1;
      r = WRITE(s, "HINCRBY", "scl", jk, "stalled", 1LL);
      if (!r) break;
      long long stalled = reply_int(r);
      RedisModule_FreeCallReply(r);
      const char *ended = NULL;
      if (is(row[CANCEL], "1")) {
        ended = "cancelled";
        r = WRITE(s, "HSET", "scccl", jk, "state", "cancelled", "finished", s->now);
        if (r) RedisModule_FreeCallReply(r);
        r = WRITE(s, "ZADD", "slb", s->key[CANCELLED], s->now, id.p, id.n);
        if (r) RedisModule_FreeCallReply(r);
        add_event(s, K.events, "failed", id, "reason", cstr("cancelled"), NULL, cstr(""));
      } else if ((double)stalled > (double)max_stalled) {
        ended = "dead";
        Str why[] = {cstr("job stalled more than max_stalled ("), cstr(limit_text), cstr(") times")};
        char text[96];
        size_t at = 0;
        for (int k = 0; k < 3; k++) memcpy(text + at, why[k].p, why[k].n), at += why[k].n;
        r = WRITE(s, "HSET", "sccclcb", jk, "state", "dead", "finished", s->now, "error", text, at);
        if (r) RedisModule_FreeCallReply(r);
        r = WRITE(s, "ZADD", "slb", s->key[DEAD], s->now, id.p, id.n);
        if (r) RedisModule_FreeCallReply(r);
        add_event(s, K.events, "failed", id, "reason", cstr("stalled"), NULL, cstr(""));
        dead.ids[dead.n++] = id;
      } else {
        r = WRITE(s, "HSET", "scc", jk, "state", "pending");
        if (r) RedisModule_FreeCallReply(r);
        if (!s->failure &&
            release(s, &K, id, row[GROUP], row[PRIO] ? str_of(row[PRIO]) : cstr("0"), &pending_card))
          woke = 1;
        add_event(s, K.events, "stalled", id, NULL, cstr(""), NULL, cstr(""));
        recovered.ids[recovered.n++] = id;
      }
      if (ended && !s->failure) {
        if (row[DEDUPE]) dedupe_release(s, str_of(row[DEDUPE]), id);
        if (row[PARENT] && child_ended(s, &K, row[PARENT], id, ended, &pending_card)) woke = 1;
      }
    }
  }
  RedisModule_Free(jks);
  RedisModule_Free(rows);
  if (woke && !s->failure) wake(s, &K);
  if (s->failure) {
    reply_failure(s);
  } else {
    RedisModule_ReplyWithArray(ctx, 2 + LATER_ENTRIES);
    Ids *lists[] = {&recovered, &dead};
    for (int l = 0; l < 2; l++) {
      RedisModule_ReplyWithArray(ctx, (long)lists[l]->n);
      for (size_t i = 0; i < lists[l]->n; i++) {
        RedisModuleString *v = RedisModule_CreateString(ctx, lists[l]->ids[i].p, lists[l]->ids[i].n);
        RedisModule_ReplyWithString(ctx, v);
        RedisModule_FreeString(ctx, v);
      }
    }
    reply_later_entries(ctx);
  }
  RedisModule_Free(recovered.ids);
  RedisModule_Free(dead.ids);
  return REDISMODULE_OK;
}
