/* EMQ.COMPLETE: protocol/scripts/complete.lua as a command for the plain case (SPEC 26): the
 * complete-and-claim-next path of a consumer on a queue without lanes, a queue-wide cap, rate
 * limits, holds, pause, flows, dedupe, per-job retention or execution timeouts. Same KEYS, ARGV
 * and reply as the script, the same writes in the same order, the same events; retention
 * (keep_completed, keep_completed_ms, completed_floor, the ids' window), the stats counter, the
 * drained event and next_due_ms included.
 *
 *   EMQ.COMPLETE 7 active completed events wake meta ring pending prefix lease_ms claim_n
 *     id token result ... [consumer]
 *
 * Anything outside the plain case is refused with `EMQNATIVE not plain: <what>` and nothing
 * written: the read pass (rows, meta, the claimable heads of pending) decides before any write,
 * so a caller can send the same call to the script. The writes go through RedisModule_Call, so
 * each is propagated and notified as the command itself (a write pass through the low-level key
 * API, replicated by hand, measured 3 % fewer instructions: docs/reference/performance.md). Held
 * to the script by test/module/native-complete.test.ts. */
#include "complete.h"

#include <math.h>
#include <stdio.h>
#include <string.h>
#include <sys/time.h>

#include "host.h"

static const char *const KEYS[] = {"active", "completed", "events", "wake", "meta", "ring", "pending"};
enum { ACTIVE, COMPLETED, EVENTS, WAKE, META, RING, PENDING, NKEYS };

/* complete.lua's one meta read: its own fields, then claim's (lib/claim.lua CLAIM_META). */
static const char *const META_FIELDS[] = {"events_max", "keep_completed", "keep_completed_ms", "keep_ids_ms",
                                          "completed_floor", "paused", "rate_max", "rate_ms",
                                          "concurrency", "running", "held_until", "version", NULL};
enum { M_EMAX, M_KEEP, M_KEEP_MS, M_IDS_MS, M_FLOOR, M_PAUSED, M_RATE_MAX, M_RATE_MS, M_CAP, M_RUNNING, M_HELD,
       M_VERSION, M_N };

/* The completed row's read, as the script's HMGET. */
static const char *const DONE_ROW[] = {"state", "token", "group", "dedupe", "parent", "retain_completed", "slot", NULL};
enum { D_STATE, D_TOKEN, D_GROUP, D_DEDUPE, D_PARENT, D_RETAIN, D_SLOT, D_N };

/* The claimed row's read, as claim's take(). */
static const char *const TAKE_ROW[] = {"state", "payload", "name", "max", "backoff", "attempts", "token", "timeout", NULL};
enum { T_STATE, T_PAYLOAD, T_NAME, T_MAX, T_BACKOFF, T_ATTEMPTS, T_TOKEN, T_TIMEOUT, T_N };

enum { ST_REPEAT, ST_LEASE, ST_DONE };

#define EMQINPUT_COMPLETE                                                                                        \
  "EMQINPUT complete takes prefix lease_ms claim_n (whole numbers >= 1 and >= 0), then id token result triples" \
  ", then an optional consumer"

static int argv_ok(Sweep *s) {
  long long lease, n;
  if (s->argc >= 3 && (s->argc - 3) % 3 != 2 && parse_whole(str_of(s->argv[1]), 1, &lease) &&
      parse_whole(str_of(s->argv[2]), 0, &n))
    return 1;
  return refuse(s, EMQINPUT_COMPLETE);
}

static int not_plain(Sweep *s, const char *what) {
  char msg[256];
  snprintf(msg, sizeof(msg), "EMQNATIVE not plain: %s", what);
  return refuse(s, msg);
}

/* The script's TIME, read once: µs for tokens, ms for everything else. */
static long long clock_now_us(void) {
  if (RedisModule_CachedMicroseconds) return RedisModule_CachedMicroseconds();
  struct timeval tv;
  gettimeofday(&tv, NULL);
  return (long long)tv.tv_sec * 1000000 + tv.tv_usec;
}

/* A whole number's decimal text (snprintf's %lld costs ~1k instructions a number). */
static size_t ll_text(char *buf, long long v) {
  char tmp[24];
  size_t n = 0, at = 0;
  unsigned long long u = v < 0 ? 0ULL - (unsigned long long)v : (unsigned long long)v;
  do tmp[n++] = (char)('0' + u % 10), u /= 10;
  while (u);
  if (v < 0) buf[at++] = '-';
  while (n) buf[at++] = tmp[--n];
  buf[at] = '\0';
  return at;
}

static RedisModuleString *text_of(Sweep *s, long long v) {
  char buf[32];
  return RedisModule_CreateString(s->ctx, buf, ll_text(buf, v));
}

/* The hash's fields (NULL where absent) in one key opening: 0 (WRONGTYPE replied) when the key
 * holds another type. */
static int read_hash(Sweep *s, RedisModuleString *key, const char *const *fields, RedisModuleString **out) {
  int type = hash_fields(s, key, fields, out);
  if (type == REDISMODULE_KEYTYPE_EMPTY || type == REDISMODULE_KEYTYPE_HASH) return 1;
  return refuse(s, "WRONGTYPE Operation against a key holding the wrong kind of value");
}

static int same(RedisModuleString *a, RedisModuleString *b) {
  if (!a || !b) return 0;
  Str x = str_of(a), y = str_of(b);
  return x.n == y.n && memcmp(x.p, y.p, x.n) == 0;
}

/* tonumber(v) of a meta field: 1 and its value, 0 when absent or no number. */
static int meta_number(RedisModuleString *v, double *out) { return v && lua_number(str_of(v), out); }

/* ids joined by spaces (lib/bulk.lua emit_batch's table.concat). */
static RedisModuleString *joined(Sweep *s, RedisModuleString **v, size_t n) {
  size_t len = 0;
  for (size_t i = 0; i < n; i++) len += str_of(v[i]).n + 1;
  char *buf = RedisModule_Alloc(len + 1);
  size_t at = 0;
  for (size_t i = 0; i < n; i++) {
    Str t = str_of(v[i]);
    if (i) buf[at++] = ' ';
    memcpy(buf + at, t.p, t.n);
    at += t.n;
  }
  RedisModuleString *out = RedisModule_CreateString(s->ctx, buf, at);
  RedisModule_Free(buf);
  return out;
}

/* One events entry, fields after `event`: XADD events MAXLEN ~ emax * <fields...>. */
static void xadd(Sweep *s, RedisModuleString **fields, size_t n) {
  RedisModuleString *argv[16];
  size_t k = 0;
  argv[k++] = RedisModule_CreateString(s->ctx, "MAXLEN", 6);
  argv[k++] = RedisModule_CreateString(s->ctx, "~", 1);
  argv[k++] = RedisModule_CreateString(s->ctx, s->emax.p, s->emax.n);
  argv[k++] = RedisModule_CreateString(s->ctx, "*", 1);
  for (size_t i = 0; i < n && k < 16; i++) argv[k++] = fields[i];
  RedisModuleCallReply *r = WRITE(s, "XADD", "sv", s->key[EVENTS], argv, k);
  if (r) RedisModule_FreeCallReply(r);
}

static RedisModuleString *cs(Sweep *s, const char *c) { return RedisModule_CreateString(s->ctx, c, strlen(c)); }

static Str reply_str(RedisModuleCallReply *list, size_t i) { return member_at(list, i); }

static RedisModuleString *reply_string(Sweep *s, RedisModuleCallReply *list, size_t i) {
  Str t = reply_str(list, i);
  return RedisModule_CreateString(s->ctx, t.p, t.n);
}

/* ── the write pass's calls, each a RedisModule_Call (WRITE: replicated and notified as the
 * command is; the first failure stops the pass) ───────────────────────────────────────────── */

/* HSET key f1 v1 ... (up to 5 pairs). */
static void w_hset(Sweep *s, RedisModuleString *key, int n, const char *const *f, RedisModuleString **v) {
  if (s->failure) return;
  RedisModuleString *argv[10];
  for (int i = 0; i < n; i++) argv[2 * i] = cs(s, f[i]), argv[2 * i + 1] = v[i];
  WRITE(s, "HSET", "sv", key, argv, (size_t)(2 * n));
}

/* ZADD key score m1 score m2 ...: every member at one score (its text as given). */
static void w_zadd(Sweep *s, RedisModuleString *key, RedisModuleString *score_s, RedisModuleString **members,
                   size_t n) {
  if (s->failure || n == 0) return;
  RedisModuleString **pairs = RedisModule_Alloc(sizeof(*pairs) * 2 * n);
  for (size_t i = 0; i < n; i++) pairs[2 * i] = score_s, pairs[2 * i + 1] = members[i];
  WRITE(s, "ZADD", "sv", key, pairs, 2 * n);
  RedisModule_Free(pairs);
}

/* ZREM key m1 m2 ... */
static void w_zrem(Sweep *s, RedisModuleString *key, RedisModuleString **members, size_t n) {
  if (s->failure || n == 0) return;
  WRITE(s, "ZREM", "sv", key, members, n);
}

/* ZPOPMIN key count, whose members the read pass found (the first `n` of the set). */
static void w_popmin(Sweep *s, RedisModuleString *key, long long count, size_t n) {
  if (s->failure) return;
  RedisModuleCallReply *popped = WRITE(s, "ZPOPMIN", "sl", key, count);
  if (popped && RedisModule_CallReplyLength(popped) != 2 * n) s->failure = (RedisModuleCallReply *)-1;
}

/* HINCRBY key field by; the new value. */
static long long w_hincrby(Sweep *s, RedisModuleString *key, const char *field, long long by) {
  if (s->failure) return 0;
  return reply_int(WRITE(s, "HINCRBY", "scl", key, field, by));
}

static void w_pexpire(Sweep *s, RedisModuleString *key, long long ms) {
  if (s->failure) return;
  WRITE(s, "PEXPIRE", "sl", key, ms);
}

/* ── retention (lib/retention.lua trim_floored, for the queue's bounds) ─────────────────────── */

typedef struct {
  long long keep, age, window;
  RedisModuleString *floor; /* meta completed_floor as read (NULL: none) */
  int has_floor;            /* tonumber(floor) is a number */
  double floor_n;
} Retention;

/* Lua's math.floor(keep / 10), at most 100. */
static long long trim_slack(long long keep) {
  long long t = keep >= 0 ? keep / 10 : -((-keep + 9) / 10);
  return t < 100 ? t : 100;
}

/* lib/idempotency.lua remember: `pairs` (score, id, ...) of the rows deleted. */
static void remember(Sweep *s, RedisModuleString **pairs, size_t n, long long window) {
  if (window <= 0 || n == 0 || s->failure) return;
  RedisModuleString *key = key3(s, cstr("ids:ended"), cstr(""), cstr(""));
  RedisModuleCallReply *r = WRITE(s, "ZADD", "sv", key, pairs, n);
  if (!r) return;
  char bound[32];
  snprintf(bound, sizeof(bound), "(%lld", s->now - window);
  r = WRITE(s, "ZREMRANGEBYSCORE", "scc", key, "-inf", bound);
  if (!r) return;
  r = WRITE(s, "PEXPIRE", "sl", key, window);
}

/* True when the call looked at the set's oldest members (popped or probed). */
static int trim(Sweep *s, RedisModuleString *set, const Retention *R) {
  long long excess = (long long)key_length(s, set) - R->keep;
  int popped = excess > trim_slack(R->keep);
  RedisModuleCallReply *old;
  if (popped) {
    old = WRITE(s, "ZPOPMIN", "sl", set, excess < 1000 ? excess : 1000LL);
  } else if (R->age >= 0 && !(R->has_floor && R->floor_n > (double)(s->now - R->age) && R->floor_n <= (double)s->now)) {
    old = checked(s, RedisModule_Call(s->ctx, "ZRANGEBYSCORE", "sclccll", set, "-inf", s->now - R->age, "WITHSCORES",
                                      "LIMIT", 0LL, 100LL));
  } else {
    return 0;
  }
  if (!old) return 1;
  size_t n = RedisModule_CallReplyLength(old) / 2;
  if (n == 0) return 1;
  static const char *const SIDE[] = {"", ":results", ":logs", ":failures", ":deps", ":processed"};
  RedisModuleString **rows = RedisModule_Alloc(sizeof(*rows) * 6 * n);
  RedisModuleString **ids = RedisModule_Alloc(sizeof(*ids) * n);
  RedisModuleString **ended = RedisModule_Alloc(sizeof(*ended) * 2 * n);
  for (size_t i = 0; i < n; i++) {
    Str id = reply_str(old, 2 * i);
    for (int k = 0; k < 6; k++) rows[6 * i + k] = key3(s, cstr("job:"), id, cstr(SIDE[k]));
    ids[i] = RedisModule_CreateString(s->ctx, id.p, id.n);
    ended[2 * i] = reply_string(s, old, 2 * i + 1);
    ended[2 * i + 1] = ids[i];
  }
  RedisModuleCallReply *r = WRITE(s, "DEL", "v", rows, 6 * n);
  if (r && !popped) r = WRITE(s, "ZREM", "sv", set, ids, n);
  if (r) remember(s, ended, 2 * n, R->window);
  RedisModule_Free(rows);
  RedisModule_Free(ids);
  RedisModule_Free(ended);
  return 1;
}

static void trim_floored(Sweep *s, RedisModuleString *set, const Retention *R) {
  if (!trim(s, set, R) || s->failure) return;
  RedisModuleCallReply *head = RedisModule_Call(s->ctx, "ZRANGE", "sccc", set, "0", "0", "WITHSCORES");
  if (head && RedisModule_CallReplyType(head) == REDISMODULE_REPLY_ARRAY && RedisModule_CallReplyLength(head) >= 2) {
    RedisModuleString *score = reply_string(s, head, 1);
    if (!same(score, R->floor)) WRITE(s, "HSET", "scs", s->key[META], "completed_floor", score);
  } else if (R->floor) {
    WRITE(s, "HDEL", "sc", s->key[META], "completed_floor");
  }
}

/* The call's arrays (nine), freed together on every way out (AutoMemory frees the strings and
 * replies); more than 16 would leak. */
typedef struct {
  void *p[16];
  int n;
} Pool;

static void *pool_alloc(Pool *pool, size_t bytes) {
  void *p = RedisModule_Alloc(bytes ? bytes : 1);
  if (pool->n < 16) pool->p[pool->n++] = p;
  return p;
}

static int pool_free(Pool *pool) {
  for (int i = 0; i < pool->n; i++) RedisModule_Free(pool->p[i]);
  pool->n = 0;
  return REDISMODULE_OK;
}

/* ── the command ────────────────────────────────────────────────────────────────────────────── */

static int complete(RedisModuleCtx *ctx, RedisModuleString **argv, int argc, Pool *pool);

int emq_complete(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
  if (RedisModule_IsKeysPositionRequest(ctx)) {
    sweep_key_positions(ctx, argv, argc);
    return REDISMODULE_OK;
  }
  RedisModule_AutoMemory(ctx);
  Pool pool = {{0}, 0};
  complete(ctx, argv, argc, &pool);
  return pool_free(&pool);
}

static int complete(RedisModuleCtx *ctx, RedisModuleString **argv, int argc, Pool *pool) {
  Sweep sweep, *s = &sweep;
  if (!sweep_shape(s, ctx, "EMQ.COMPLETE", argv, argc, KEYS, NKEYS, NKEYS, argv_ok)) return REDISMODULE_OK;
  long long lease = 0, asked = 0;
  parse_whole(str_of(s->argv[1]), 1, &lease);
  parse_whole(str_of(s->argv[2]), 0, &asked);
  int tail = (s->argc - 3) % 3;
  size_t triples = (size_t)(s->argc - 3 - tail) / 3;
  RedisModuleString *consumer = tail == 1 && str_of(s->argv[s->argc - 1]).n > 0 ? s->argv[s->argc - 1] : NULL;

  /* ── read pass: the clock, every key's type, meta, the rows, the heads of pending ── */
  long long now_us = clock_now_us();
  s->now = now_us / 1000;
  RedisModuleString *limited = key3(s, cstr("lanes:limited"), cstr(""), cstr(""));
  RedisModuleString *running = key3(s, cstr("lanes:running"), cstr(""), cstr(""));
  RedisModuleString *schedule = key3(s, cstr("schedule"), cstr(""), cstr(""));
  RedisModuleString *ids_ended = key3(s, cstr("ids:ended"), cstr(""), cstr(""));
  char minute[32];
  ll_text(minute, s->now / 60000);
  RedisModuleString *stats = key3(s, cstr("stats:"), cstr(minute), cstr(""));
  if (!expect_type(s, s->key[ACTIVE], REDISMODULE_KEYTYPE_ZSET) ||
      !expect_type(s, s->key[COMPLETED], REDISMODULE_KEYTYPE_ZSET) ||
      !expect_type(s, s->key[EVENTS], REDISMODULE_KEYTYPE_STREAM) ||
      !expect_type(s, s->key[WAKE], REDISMODULE_KEYTYPE_STREAM) ||
      !expect_type(s, stats, REDISMODULE_KEYTYPE_HASH) ||
      !expect_type(s, ids_ended, REDISMODULE_KEYTYPE_ZSET))
    return REDISMODULE_OK;
  if (key_type(s, s->key[RING]) != REDISMODULE_KEYTYPE_EMPTY || key_type(s, limited) != REDISMODULE_KEYTYPE_EMPTY ||
      key_type(s, running) != REDISMODULE_KEYTYPE_EMPTY)
    return not_plain(s, "lanes"), REDISMODULE_OK;

  RedisModuleString *m[M_N];
  if (!read_hash(s, s->key[META], META_FIELDS, m)) return REDISMODULE_OK;
  s->emax = m[M_EMAX] ? str_of(m[M_EMAX]) : cstr("10000");
  long long emax;
  if (!redis_integer(s->emax, &emax) || emax < 0) return not_plain(s, "meta events_max"), REDISMODULE_OK;
  Retention R = {1000, 86400000, 86400000, m[M_FLOOR], 0, 0};
  if (m[M_KEEP] && !parse_whole(str_of(m[M_KEEP]), 0, &R.keep)) return not_plain(s, "meta keep_completed"), REDISMODULE_OK;
  if (m[M_KEEP_MS] && !parse_whole(str_of(m[M_KEEP_MS]), -9007199254740991LL, &R.age))
    return not_plain(s, "meta keep_completed_ms"), REDISMODULE_OK;
  if (m[M_IDS_MS] && !parse_whole(str_of(m[M_IDS_MS]), -9007199254740991LL, &R.window))
    return not_plain(s, "meta keep_ids_ms"), REDISMODULE_OK;
  R.has_floor = meta_number(m[M_FLOOR], &R.floor_n);
  double d;
  if (m[M_PAUSED] && str_eq(str_of(m[M_PAUSED]), "1")) return not_plain(s, "paused"), REDISMODULE_OK;
  if (m[M_RATE_MAX] && !(meta_number(m[M_RATE_MAX], &d) && d == 0)) return not_plain(s, "rate limit"), REDISMODULE_OK;
  if (meta_number(m[M_CAP], &d) && d > 0) return not_plain(s, "queue-wide concurrency"), REDISMODULE_OK;
  if (meta_number(m[M_HELD], &d) && d > 0) return not_plain(s, "held_until"), REDISMODULE_OK;
  const char *unset_max = meta_number(m[M_VERSION], &d) && d >= 2 ? "3" : "1";

  /* The rows to complete. A job named twice sees the row the first naming left: completed,
   * under the same token. */
  RedisModuleString **done_jk = pool_alloc(pool, sizeof(*done_jk) * (triples + 1));
  int *status = pool_alloc(pool, sizeof(*status) * (triples + 1));
  RedisModuleString **gone = pool_alloc(pool, sizeof(*gone) * (triples + 1));
  size_t done = 0;
  int ok = 1;
  for (size_t i = 0; i < triples && ok; i++) {
    RedisModuleString *id = s->argv[3 + 3 * i], *token = s->argv[4 + 3 * i];
    RedisModuleString *row[D_N];
    int twice = -1;
    for (size_t j = 0; j < i && twice < 0; j++)
      if (status[j] == ST_DONE && same(s->argv[3 + 3 * j], id)) twice = (int)j;
    if (twice >= 0) {
      status[i] = same(s->argv[4 + 3 * twice], token) ? ST_REPEAT : ST_LEASE;
      continue;
    }
    done_jk[i] = job_key(s, str_of(id));
    if (!(ok = read_hash(s, done_jk[i], DONE_ROW, row))) break;
    int state_completed = row[D_STATE] && str_eq(str_of(row[D_STATE]), "completed");
    int state_active = row[D_STATE] && str_eq(str_of(row[D_STATE]), "active");
    if (state_completed && same(row[D_TOKEN], token)) {
      status[i] = ST_REPEAT;
    } else if (!state_active || !same(row[D_TOKEN], token)) {
      status[i] = ST_LEASE;
    } else {
      static const char *const WHAT[] = {"", "", "a lane (row group)", "a dedupe lock (row dedupe)",
                                         "a flow parent (row parent)", "its own retention (row retain_completed)",
                                         "a queue-wide slot (row slot)"};
      for (int f = D_GROUP; f < D_N && ok; f++)
        if (row[f]) ok = not_plain(s, WHAT[f]);
      status[i] = ST_DONE;
      gone[done++] = id;
    }
  }
  if (!ok) return REDISMODULE_OK;

  /* What claim will pop: the first `asked` members of pending (ZPOPMIN's order), each a pending
   * row with sound numbers and no timeout, so the claim is the flat path's and nothing else. */
  RedisModuleKey *pk = RedisModule_OpenKey(ctx, s->key[PENDING], REDISMODULE_READ);
  int ptype = RedisModule_KeyType(pk);
  size_t plen = ptype == REDISMODULE_KEYTYPE_ZSET ? RedisModule_ValueLength(pk) : 0;
  size_t want = asked < (long long)plen ? (size_t)asked : plen;
  RedisModuleString **take_id = pool_alloc(pool, sizeof(*take_id) * (want + 1));
  RedisModuleString **take_jk = pool_alloc(pool, sizeof(*take_jk) * (want + 1));
  RedisModuleString **take_row = pool_alloc(pool, sizeof(*take_row) * T_N * (want + 1));
  size_t got = 0;
  if (want > 0) {
    RedisModule_ZsetFirstInScoreRange(pk, -INFINITY, INFINITY, 0, 0);
    while (got < want && !RedisModule_ZsetRangeEndReached(pk)) {
      double score;
      take_id[got++] = RedisModule_ZsetRangeCurrentElement(pk, &score);
      RedisModule_ZsetRangeNext(pk);
    }
    RedisModule_ZsetRangeStop(pk);
  }
  RedisModule_CloseKey(pk);
  if (ptype != REDISMODULE_KEYTYPE_EMPTY && ptype != REDISMODULE_KEYTYPE_ZSET)
    return refuse(s, "WRONGTYPE Operation against a key holding the wrong kind of value"), REDISMODULE_OK;
  /* next_due_ms: complete writes no schedule, so its head now is its head after the writes */
  long long head = -1;
  RedisModuleKey *sk = RedisModule_OpenKey(ctx, schedule, REDISMODULE_READ);
  int stype = RedisModule_KeyType(sk);
  if (stype == REDISMODULE_KEYTYPE_ZSET) {
    RedisModule_ZsetFirstInScoreRange(sk, -INFINITY, INFINITY, 0, 0);
    double score;
    if (!RedisModule_ZsetRangeEndReached(sk) && RedisModule_ZsetRangeCurrentElement(sk, &score))
      head = (long long)score; /* tonumber of the score, replied as an integer: truncated */
    RedisModule_ZsetRangeStop(sk);
  }
  RedisModule_CloseKey(sk);
  if (stype != REDISMODULE_KEYTYPE_EMPTY && stype != REDISMODULE_KEYTYPE_ZSET)
    return refuse(s, "WRONGTYPE Operation against a key holding the wrong kind of value"), REDISMODULE_OK;
  for (size_t i = 0; i < got && ok; i++) {
    RedisModuleString **row = take_row + T_N * i;
    take_jk[i] = job_key(s, str_of(take_id[i]));
    if (!(ok = read_hash(s, take_jk[i], TAKE_ROW, row))) break;
    if (!row[T_STATE] || !str_eq(str_of(row[T_STATE]), "pending")) ok = not_plain(s, "a ghost or moved row in pending");
    else if (!whole_text(row[T_ATTEMPTS]) || !whole_text(row[T_TOKEN]) || !whole_text(row[T_MAX]))
      ok = not_plain(s, "a malformed row in pending (quarantine)");
    else if (row[T_TIMEOUT]) ok = not_plain(s, "an execution timeout (row timeout)");
  }
  if (!ok) return REDISMODULE_OK;

  /* ── write pass: complete.lua's calls, in its order ── */
  RedisModuleString *now_s = text_of(s, s->now), *completed_s = cs(s, "completed"), *active_s = cs(s, "active");
  for (size_t i = 0; i < triples && !s->failure; i++) {
    if (status[i] != ST_DONE) continue;
    static const char *const FIELDS[] = {"state", "finished", "result"};
    RedisModuleString *v[3] = {completed_s, now_s, s->argv[5 + 3 * i]};
    w_hset(s, done_jk[i], str_of(v[2]).n > 0 ? 3 : 2, FIELDS, v);
  }
  if (done > 0 && !s->failure) {
    w_zrem(s, s->key[ACTIVE], gone, done);
    w_zadd(s, s->key[COMPLETED], now_s, gone, done);
    RedisModuleString *ev[6] = {cs(s, "event"), completed_s, cs(s, "id"), gone[0]};
    size_t nev = 4;
    if (done > 1) ev[nev++] = cs(s, "ids"), ev[nev++] = joined(s, gone, done);
    if (!s->failure) xadd(s, ev, nev);
    if (w_hincrby(s, stats, "completed", (long long)done) == (long long)done) w_pexpire(s, stats, 7200000);
  }
  if (!s->failure) trim_floored(s, s->key[COMPLETED], &R);

  /* claim (lib/claim.lua), the flat path */
  RedisModuleString **tries = pool_alloc(pool, sizeof(*tries) * (got + 1));
  long long *tokens = pool_alloc(pool, sizeof(*tokens) * (got + 1));
  long long *attempts = pool_alloc(pool, sizeof(*attempts) * (got + 1));
  if (got > 0 && !s->failure) {
    w_popmin(s, s->key[PENDING], asked, got);
    RedisModuleString *now_us_s = NULL;
    for (size_t i = 0; i < got && !s->failure; i++) {
      RedisModuleString **row = take_row + T_N * i;
      long long prev_attempts = 0, prev_token = 0;
      if (row[T_ATTEMPTS]) parse_whole(str_of(row[T_ATTEMPTS]), -9007199254740991LL, &prev_attempts);
      if (row[T_TOKEN]) parse_whole(str_of(row[T_TOKEN]), -9007199254740991LL, &prev_token);
      attempts[i] = prev_attempts + 1;
      tokens[i] = prev_token + 1 > now_us ? prev_token + 1 : now_us;
      RedisModuleString *text;
      if (tokens[i] == now_us) text = now_us_s ? now_us_s : (now_us_s = text_of(s, now_us));
      else text = text_of(s, tokens[i]);
      tries[i] = row[T_ATTEMPTS] ? text_of(s, attempts[i]) : cs(s, "1");
      static const char *const FIELDS[] = {"state", "started", "attempts", "token", "consumer"};
      RedisModuleString *v[5] = {active_s, now_s, tries[i], text, consumer};
      w_hset(s, take_jk[i], consumer ? 5 : 4, FIELDS, v);
    }
    /* active as a skiplist for a claim of several (lib/claim.lua's placeholder member) */
    int widen = 0;
    if (got > 1 && !s->failure) {
      RedisModuleCallReply *enc = RedisModule_Call(ctx, "OBJECT", "cs", "ENCODING", s->key[ACTIVE]);
      int type = enc ? RedisModule_CallReplyType(enc) : REDISMODULE_REPLY_ERROR;
      if (type == REDISMODULE_REPLY_NULL) widen = 1;
      else if (type == REDISMODULE_REPLY_STRING) {
        Str e;
        e.p = RedisModule_CallReplyStringPtr(enc, &e.n);
        widen = str_eq(e, "listpack") || str_eq(e, "ziplist");
      }
    }
    char wide_text[200];
    memset(wide_text, '~', sizeof(wide_text));
    RedisModuleString *wide = widen ? RedisModule_CreateString(ctx, wide_text, sizeof(wide_text)) : NULL;
    if (wide) w_zadd(s, s->key[ACTIVE], cs(s, "0"), &wide, 1);
    w_zadd(s, s->key[ACTIVE], text_of(s, s->now + lease), take_id, got);
    if (wide) w_zrem(s, s->key[ACTIVE], &wide, 1);
    RedisModuleString *ev[12] = {cs(s, "event"), active_s, cs(s, "id"), take_id[0], cs(s, "attempt"), tries[0]};
    size_t nev = 6;
    if (got > 1) {
      ev[nev++] = cs(s, "ids"), ev[nev++] = joined(s, take_id, got);
      ev[nev++] = cs(s, "attempts"), ev[nev++] = joined(s, tries, got);
    }
    if (consumer) ev[nev++] = cs(s, "consumer"), ev[nev++] = consumer;
    if (!s->failure) xadd(s, ev, nev);
  }
  Str wid = cstr("");
  if ((long long)got < asked && !s->failure) {
    RedisModuleCallReply *last = RedisModule_Call(ctx, "XREVRANGE", "scccc", s->key[WAKE], "+", "-", "COUNT", "1");
    wid = cstr("0-0");
    if (last && RedisModule_CallReplyType(last) == REDISMODULE_REPLY_ARRAY && RedisModule_CallReplyLength(last) > 0)
      wid.p = RedisModule_CallReplyStringPtr(
          RedisModule_CallReplyArrayElement(RedisModule_CallReplyArrayElement(last, 0), 0), &wid.n);
  }
  /* drained: the read pass saw no ring, limited or lanes:running, so only pending can hold work */
  if (got > 0 && !s->failure && plen == got) {
    RedisModuleString *ev[4] = {cs(s, "event"), cs(s, "drained"), cs(s, "id"), cs(s, "")};
    xadd(s, ev, 4);
  }
  if (s->failure) return reply_failure(s), REDISMODULE_OK;

  /* ── reply: {statuses, jobs, wake_id, wait_ms, now_ms, next_due_ms} ── */
  RedisModule_ReplyWithArray(ctx, 6);
  RedisModule_ReplyWithArray(ctx, (long)triples);
  for (size_t i = 0; i < triples; i++)
    if (status[i] == ST_LEASE) RedisModule_ReplyWithStringBuffer(ctx, "EMQLEASE", 8);
    else RedisModule_ReplyWithStringBuffer(ctx, "OK", 2);
  RedisModule_ReplyWithArray(ctx, (long)(7 * got));
  for (size_t i = 0; i < got; i++) {
    RedisModuleString **row = take_row + T_N * i;
    RedisModule_ReplyWithString(ctx, take_id[i]);
    RedisModule_ReplyWithLongLong(ctx, tokens[i]);
    RedisModule_ReplyWithLongLong(ctx, attempts[i]);
    if (row[T_MAX]) RedisModule_ReplyWithString(ctx, row[T_MAX]);
    else RedisModule_ReplyWithStringBuffer(ctx, unset_max, 1);
    if (row[T_PAYLOAD]) RedisModule_ReplyWithString(ctx, row[T_PAYLOAD]);
    else RedisModule_ReplyWithNull(ctx);
    if (row[T_NAME]) RedisModule_ReplyWithString(ctx, row[T_NAME]);
    else RedisModule_ReplyWithStringBuffer(ctx, "", 0);
    if (row[T_BACKOFF]) RedisModule_ReplyWithString(ctx, row[T_BACKOFF]);
    else RedisModule_ReplyWithStringBuffer(ctx, "", 0);
  }
  RedisModule_ReplyWithStringBuffer(ctx, wid.p, wid.n);
  RedisModule_ReplyWithLongLong(ctx, -1);
  RedisModule_ReplyWithLongLong(ctx, s->now);
  RedisModule_ReplyWithLongLong(ctx, head);
  return REDISMODULE_OK;
}
