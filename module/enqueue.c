/* EMQ.ENQUEUE: protocol/scripts/enqueue.lua as a command, for the plain case only (SPEC 26).
 *
 *   EMQ.ENQUEUE 5 pending events wake meta ring prefix <7-field tuples>
 *   EMQ.ENQUEUE 1 pending prefix <7-field tuples>            (the rest by prefix)
 *
 * The plain case is what `q.enqueue(data)` and `q.enqueueMany(...)` send with default options:
 * tuples of 7 fields (or 9 whose dedupe keys are all ''), no group. Anything else is refused
 * with `EMQNATIVE not plain: <what>` before anything is read or written, so a caller can send
 * the script instead. The script's own ARGV refusals come first, with its messages, except
 * that a 13- or 14-field call is refused as not plain without its fields being checked.
 *
 * One clock reading, a read pass that decides every tuple's fate (the idempotency window, the
 * row's existence, an id named twice in the call) and checks the type of every key the writes
 * will touch, then a write pass making the script's writes by RedisModule_Call, as promote.c
 * does: a row (one HSET) per admitted job, pending (one ZADD of them all, as the script makes
 * it for a call of several jobs), the added entry (one for the call when the names agree), the
 * wake. A write pass through the low-level key API with hand-made replication was measured
 * beside this one (branch nativeadd) and not kept: 55.4k against 57.9k instructions a serial
 * job, slower in bulk, and its replication a second thing to keep equal to Redis's own. */
#include "enqueue.h"
#include "host.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const KEYS[] = {"pending", "events", "wake", "meta", "ring"};
enum { PENDING, EVENTS, WAKE, META, RING, NKEYS };

/* A tuple's fields, in order (9-field tuples add the dedupe key and spec). */
enum { F_ID, F_PAYLOAD, F_PRIO, F_GROUP, F_NAME, F_MAX, F_BACKOFF, F_DKEY, F_DSPEC };

#define MINTED_SLACK 60000
#define DAY_MS 86400000.0
#define WRONGTYPE "WRONGTYPE Operation against a key holding the wrong kind of value"

/* Field names and fixed values, made once at load (no context: never freed, never counted
 * against a call's automatic memory). */
enum { S_STATE, S_PENDING, S_PAYLOAD, S_CREATED, S_PRIO, S_NAME, S_MAX, S_BACKOFF, S_EVENT, S_ADDED, S_ID, S_IDS, S_W, S_ONE, NSTR };
static const char *const TEXTS[] = {"state", "pending", "payload", "created", "prio", "name", "max",
                                    "backoff", "event", "added", "id", "ids", "w", "1"};
static RedisModuleString *S[NSTR];

/* ── the ARGV: the script's width rule and checks ─────────────────────────── */

typedef struct {
  int first; /* index in s->argv of the first tuple */
  int w;     /* tuple width */
  int n;     /* tuples */
} Tuples;

static Str arg(Sweep *s, int i) { return str_of(s->argv[i]); }

static int starts_job(Str v) { return v.n >= 3 && memcmp(v.p, "JOB", 3) == 0; }

/* lib/dedupe.lua's dedupe_spec: '^(%a+):?(%d*)$' with the letters throttle or debounce. */
static int dedupe_spec_ok(Str v) {
  size_t i = 0;
  while (i < v.n && ((v.p[i] >= 'a' && v.p[i] <= 'z') || (v.p[i] >= 'A' && v.p[i] <= 'Z'))) i++;
  Str mode = {v.p, i};
  if (!str_eq(mode, "throttle") && !str_eq(mode, "debounce")) return 0;
  if (i < v.n && v.p[i] == ':') i++;
  for (; i < v.n; i++)
    if (v.p[i] < '0' || v.p[i] > '9') return 0;
  return 1;
}

/* The width the script reads the ARGV by (0 when too few), or -1 refused (replied). */
static int tuples_of(Sweep *s, Tuples *t) {
  int argc = s->argc; /* #ARGV */
  if (argc < 8) return refuse(s, "EMQINPUT enqueue takes the prefix, then 9 (or 7) fields per job"), -1;
  t->first = 1;
  t->w = 7;
  Str second = arg(s, 1);
  if (str_eq(second, "#13")) t->first = 2, t->w = 13;
  else if (str_eq(second, "#14")) t->first = 2, t->w = 14;
  else if ((argc - 1) % 9 == 0 && ((argc - 1) % 7 != 0 || starts_job(arg(s, 10)))) t->w = 9;
  if ((argc - t->first) % t->w != 0 || argc < t->first + t->w)
    return refuse(s, "EMQINPUT enqueue takes the prefix, then 9 (or 7) fields per job, or #13 and 13, or #14 and 14"), -1;
  t->n = (argc - t->first) / t->w;
  return t->w;
}

static int argv_ok(Sweep *s) {
  Tuples t;
  int w = tuples_of(s, &t);
  if (w < 0) return 0;
  if (w >= 13) return refuse(s, w == 13 ? "EMQNATIVE not plain: 13-field tuples" : "EMQNATIVE not plain: 14-field tuples");
  long long v;
  for (int i = 0; i < t.n; i++) {
    int b = t.first + i * w;
    if (!starts_job(arg(s, b + F_ID))) return refuse(s, "EMQKIND job id must be JOB-namespaced");
    Str max = arg(s, b + F_MAX);
    if (!parse_whole(arg(s, b + F_PRIO), 0, &v) || (max.n != 0 && !parse_whole(max, 1, &v)))
      return refuse(s, "EMQINPUT enqueue takes a priority that is a whole number >= 0 and a max that is empty or >= 1");
    if (w == 9 && arg(s, b + F_DKEY).n != 0 && !dedupe_spec_ok(arg(s, b + F_DSPEC)))
      return refuse(s, "EMQINPUT dedupe_spec must be throttle or debounce, optionally :<ttl_ms>");
  }
  for (int i = 0; i < t.n; i++) {
    int b = t.first + i * w;
    if (arg(s, b + F_GROUP).n != 0) return refuse(s, "EMQNATIVE not plain: a group (lanes)");
    if (w == 9 && arg(s, b + F_DKEY).n != 0) return refuse(s, "EMQNATIVE not plain: a dedupe key");
  }
  return 1;
}

/* ── the read pass ────────────────────────────────────────────────────────── */

/* The mint instant of a minted id (JOB + 20 Crockford base32 characters, the first 10 the
 * instant in ms), or -1: the script's minted_at. */
static long long minted_at(Str id) {
  if (id.n != 23 || !starts_job(id)) return -1;
  for (size_t i = 3; i < 23; i++) {
    unsigned char c = (unsigned char)id.p[i];
    int ok = (c >= '0' && c <= '9') || (c >= 'A' && c <= 'Z' && c != 'I' && c != 'L' && c != 'O' && c != 'U');
    if (!ok) return -1;
  }
  long long t = 0;
  for (size_t i = 3; i < 13; i++) {
    int c = (unsigned char)id.p[i];
    if (c < 58) t = t * 32 + c - 48;
    else t = t * 32 + c - 55 - (c > 73) - (c > 76) - (c > 79) - (c > 85);
  }
  return t;
}

/* Ids named twice in one call: every occurrence after the first finds the row the first wrote,
 * or was refused with it, so it is a duplicate either way. An open-addressing set of the ids
 * seen, sized to twice the call's tuples. */
static uint64_t id_hash(Str v) {
  uint64_t h = 1469598103934665603ULL;
  for (size_t i = 0; i < v.n; i++) h = (h ^ (unsigned char)v.p[i]) * 1099511628211ULL;
  return h;
}

static void mark_repeats(Sweep *s, const Tuples *t, unsigned char *repeat) {
  if (t->n < 2) return;
  size_t size = 4;
  while (size < (size_t)t->n * 2) size <<= 1;
  int *slot = RedisModule_Alloc(sizeof(*slot) * size);
  memset(slot, 0xff, sizeof(*slot) * size);
  for (int i = 0; i < t->n; i++) {
    Str id = arg(s, t->first + i * t->w);
    size_t h = (size_t)id_hash(id) & (size - 1);
    for (;; h = (h + 1) & (size - 1)) {
      if (slot[h] < 0) {
        slot[h] = i;
        break;
      }
      Str seen = arg(s, t->first + slot[h] * t->w);
      if (seen.n == id.n && memcmp(seen.p, id.p, id.n) == 0) {
        repeat[i] = 1;
        break;
      }
    }
  }
  RedisModule_Free(slot);
}

/* What the read pass decided: the call's fate, row by row. */
typedef struct {
  Tuples t;
  unsigned char *admit;       /* per tuple: 1 written, 0 duplicate */
  RedisModuleString **jk;     /* per admitted tuple: its row's key */
  int admitted;               /* how many */
  int unset_max;              /* protocol version >= 2: a max of 3 is not written */
  int woke;                   /* pending was absent and a job went to it */
  int same_name;              /* every admitted job has the first's name: one added entry */
  long long emax;               /* events_max, checked before anything is written */
  RedisModuleString *emax_text; /* as XADD's MAXLEN ~ takes it */
} Plan;

/* lib/idempotency.lua's ids_window of meta's keep_ids_ms. */
static double ids_window(RedisModuleString *v) {
  double d;
  if (!v || !lua_number(str_of(v), &d)) return DAY_MS;
  return d;
}

static int read_pass(Sweep *s, Plan *P) {
  Tuples *t = &P->t;
  P->admit = RedisModule_Alloc((size_t)t->n);
  memset(P->admit, 0, (size_t)t->n);
  P->jk = RedisModule_Alloc(sizeof(*P->jk) * (size_t)t->n);
  s->now = clock_now_ms();
  if (!expect_type(s, s->key[META], REDISMODULE_KEYTYPE_HASH)) return 0;
  static const char *const META_FIELDS[] = {"events_max", "keep_ids_ms", "version", NULL};
  RedisModuleString *m[3];
  hash_fields(s, s->key[META], META_FIELDS, m);
  double version = 1;
  if (m[2] && !lua_number(str_of(m[2]), &version)) version = 1;
  P->unset_max = version >= 2;
  double window = ids_window(m[1]);

  /* The idempotency window (lib/idempotency.lua remembered): ids that ended within it. */
  unsigned char *known = P->admit; /* reused: 1 = known, flipped to the admission below */
  if (window > 0) {
    RedisModuleKey *ended = RedisModule_OpenKey(s->ctx, key3(s, cstr("ids:ended"), cstr(""), cstr("")), REDISMODULE_READ);
    int type = RedisModule_KeyType(ended);
    if (type != REDISMODULE_KEYTYPE_EMPTY && type != REDISMODULE_KEYTYPE_ZSET) {
      RedisModule_CloseKey(ended);
      return refuse(s, WRONGTYPE);
    }
    if (type == REDISMODULE_KEYTYPE_ZSET) {
      for (int i = 0; i < t->n; i++) {
        double score;
        if (RedisModule_ZsetScore(ended, s->argv[t->first + i * t->w], &score) == REDISMODULE_OK &&
            score >= (double)s->now - window)
          known[i] = 1;
      }
    }
    RedisModule_CloseKey(ended);
  }
  unsigned char *repeat = RedisModule_Alloc((size_t)t->n);
  memset(repeat, 0, (size_t)t->n);
  mark_repeats(s, t, repeat);
  int pending_absent = !RedisModule_KeyExists(s->ctx, s->key[PENDING]);
  Str first_name = {"", 0};
  P->same_name = 1;
  P->admitted = 0;
  for (int i = 0; i < t->n; i++) {
    int b = t->first + i * t->w;
    int dup = known[i] || repeat[i];
    RedisModuleString *jk = NULL;
    if (!dup) {
      jk = job_key(s, arg(s, b + F_ID));
      dup = RedisModule_KeyExists(s->ctx, jk);
    }
    P->admit[i] = !dup;
    if (dup) continue;
    P->jk[P->admitted] = jk;
    Str name = arg(s, b + F_NAME);
    if (P->admitted == 0) first_name = name;
    else if (name.n != first_name.n || memcmp(name.p, first_name.p, name.n) != 0) P->same_name = 0;
    P->admitted++;
  }
  RedisModule_Free(repeat);
  if (P->admitted == 0) return 1;
  P->woke = pending_absent;
  /* The keys the writes touch, and the cap XADD takes (what the script's calls would refuse). */
  if (!expect_type(s, s->key[PENDING], REDISMODULE_KEYTYPE_ZSET)) return 0;
  if (!expect_type(s, s->key[EVENTS], REDISMODULE_KEYTYPE_STREAM)) return 0;
  if (P->woke && !expect_type(s, s->key[WAKE], REDISMODULE_KEYTYPE_STREAM)) return 0;
  s->emax = m[0] ? str_of(m[0]) : cstr("10000");
  P->emax_text = m[0] ? m[0] : RedisModule_CreateString(s->ctx, "10000", 5);
  if (!redis_integer(s->emax, &P->emax)) return refuse(s, "ERR value is not an integer or out of range");
  if (P->emax < 0) return refuse(s, "ERR The MAXLEN argument must be >= 0.");
  return 1;
}

/* ── the write pass ───────────────────────────────────────────────────────── */

/* The row the script's one HSET writes: field, value pairs (at most 7), their count. */
static int row_of(Sweep *s, const Plan *P, int b, RedisModuleString **row) {
  int k = 0;
  row[k++] = S[S_STATE], row[k++] = S[S_PENDING];
  row[k++] = S[S_PAYLOAD], row[k++] = s->argv[b + F_PAYLOAD];
  long long minted = minted_at(arg(s, b + F_ID));
  if (minted < 0 || minted > s->now || minted < s->now - MINTED_SLACK) {
    char now[32];
    int n = snprintf(now, sizeof(now), "%lld", s->now);
    row[k++] = S[S_CREATED], row[k++] = RedisModule_CreateString(s->ctx, now, (size_t)n);
  }
  if (!str_eq(arg(s, b + F_PRIO), "0")) row[k++] = S[S_PRIO], row[k++] = s->argv[b + F_PRIO];
  if (arg(s, b + F_NAME).n != 0) row[k++] = S[S_NAME], row[k++] = s->argv[b + F_NAME];
  Str max = arg(s, b + F_MAX);
  if (max.n != 0 && !(P->unset_max && str_eq(max, "3"))) row[k++] = S[S_MAX], row[k++] = s->argv[b + F_MAX];
  if (arg(s, b + F_BACKOFF).n != 0) row[k++] = S[S_BACKOFF], row[k++] = s->argv[b + F_BACKOFF];
  return k;
}

/* The added entry's fields for jobs [from, to) of the admitted (one job: its own entry). */
typedef struct {
  RedisModuleString *f[8];
  int n;
} Entry;

static RedisModuleString *joined_ids(Sweep *s, const Plan *P) {
  size_t len = 0;
  for (int i = 0; i < P->t.n; i++)
    if (P->admit[i]) len += arg(s, P->t.first + i * P->t.w).n + 1;
  char *buf = RedisModule_Alloc(len);
  size_t at = 0;
  for (int i = 0; i < P->t.n; i++) {
    if (!P->admit[i]) continue;
    Str id = arg(s, P->t.first + i * P->t.w);
    if (at) buf[at++] = ' ';
    memcpy(buf + at, id.p, id.n);
    at += id.n;
  }
  RedisModuleString *ids = RedisModule_CreateString(s->ctx, buf, at);
  RedisModule_Free(buf);
  return ids;
}

/* lib/bulk.lua's emit_batch for added (shared name): event added id <first> name <name> [ids <all>]. */
static void batch_entry(Sweep *s, const Plan *P, int b, Entry *e) {
  e->n = 0;
  e->f[e->n++] = S[S_EVENT], e->f[e->n++] = S[S_ADDED];
  e->f[e->n++] = S[S_ID], e->f[e->n++] = s->argv[b + F_ID];
  e->f[e->n++] = S[S_NAME], e->f[e->n++] = s->argv[b + F_NAME];
  if (P->admitted > 1) e->f[e->n++] = S[S_IDS], e->f[e->n++] = joined_ids(s, P);
}

static void single_entry(Sweep *s, int b, Entry *e) {
  e->n = 0;
  e->f[e->n++] = S[S_EVENT], e->f[e->n++] = S[S_ADDED];
  e->f[e->n++] = S[S_ID], e->f[e->n++] = s->argv[b + F_ID];
  e->f[e->n++] = S[S_NAME], e->f[e->n++] = s->argv[b + F_NAME];
}

static int call_ok(RedisModuleCallReply *r) {
  if (!r) return 0;
  RedisModule_FreeCallReply(r);
  return 1;
}

static int xadd_call(Sweep *s, RedisModuleString *key, RedisModuleString *cap, RedisModuleString **fields, int n) {
  return call_ok(WRITE(s, "XADD", "sccscv", key, "MAXLEN", "~", cap, "*", fields, (size_t)n));
}

/* One ZADD pending of every admitted job (score, id pairs): the same members and scores as the
 * script's ZADD a job, one command call instead of k (bulk 24.2k -> 19.5k instructions a job). */
static int zadd_pending_call(Sweep *s, const Plan *P) {
  RedisModuleString **v = RedisModule_Alloc(sizeof(*v) * 2 * (size_t)P->admitted);
  int k = 0;
  for (int i = 0; i < P->t.n; i++) {
    if (!P->admit[i]) continue;
    int b = P->t.first + i * P->t.w;
    v[k++] = s->argv[b + F_PRIO];
    v[k++] = s->argv[b + F_ID];
  }
  int ok = call_ok(WRITE(s, "ZADD", "sv", s->key[PENDING], v, (size_t)k));
  RedisModule_Free(v);
  return ok;
}

/* The script's writes, each by RedisModule_Call with "!": Redis propagates every call as the
 * command it ran (one MULTI/EXEC around the command's calls), as it does a script's effects, so
 * nothing here is replicated by hand. */
static int write_pass(Sweep *s, const Plan *P) {
  int j = 0, first = -1;
  for (int i = 0; i < P->t.n; i++) {
    if (!P->admit[i]) continue;
    int b = P->t.first + i * P->t.w;
    RedisModuleString *row[14];
    int k = row_of(s, P, b, row);
    if (!call_ok(WRITE(s, "HSET", "sv", P->jk[j++], row, (size_t)k))) return 0;
    if (first < 0) first = b;
  }
  if (!zadd_pending_call(s, P)) return 0;
  Entry e;
  if (P->same_name) {
    batch_entry(s, P, first, &e);
    if (!xadd_call(s, s->key[EVENTS], P->emax_text, e.f, e.n)) return 0;
  } else {
    for (int i = 0; i < P->t.n; i++) {
      if (!P->admit[i]) continue;
      single_entry(s, P->t.first + i * P->t.w, &e);
      if (!xadd_call(s, s->key[EVENTS], P->emax_text, e.f, e.n)) return 0;
    }
  }
  if (P->woke) {
    RedisModuleString *w[2] = {S[S_W], S[S_ONE]};
    RedisModuleString *hundred = RedisModule_CreateString(s->ctx, "100", 3);
    if (!xadd_call(s, s->key[WAKE], hundred, w, 2)) return 0;
  }
  return 1;
}

/* ── the command ──────────────────────────────────────────────────────────── */

static int emq_enqueue(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
  if (RedisModule_IsKeysPositionRequest(ctx)) {
    sweep_key_positions(ctx, argv, argc);
    return REDISMODULE_OK;
  }
  RedisModule_AutoMemory(ctx);
  Sweep sweep, *s = &sweep;
  if (!sweep_shape(s, ctx, "EMQ.ENQUEUE", argv, argc, KEYS, NKEYS, 1, argv_ok)) return REDISMODULE_OK;
  Plan plan, *P = &plan;
  memset(P, 0, sizeof(*P));
  tuples_of(s, &P->t);
  int ok = read_pass(s, P);
  if (ok && P->admitted > 0) {
    ok = write_pass(s, P);
    if (!ok) {
      RedisModule_Free(P->admit);
      RedisModule_Free(P->jk);
      if (s->failure) return reply_failure(s), REDISMODULE_OK;
      return RedisModule_ReplyWithError(ctx, "ERR a write of EMQ.ENQUEUE could not run"), REDISMODULE_OK;
    }
  }
  if (ok) {
    RedisModule_ReplyWithArray(ctx, P->t.n);
    for (int i = 0; i < P->t.n; i++) RedisModule_ReplyWithLongLong(ctx, P->admit[i]);
  }
  RedisModule_Free(P->admit);
  RedisModule_Free(P->jk);
  return REDISMODULE_OK;
}

int emq_enqueue_register(RedisModuleCtx *ctx, const char *flags) {
  for (int i = 0; i < NSTR; i++) S[i] = RedisModule_CreateString(NULL, TEXTS[i], strlen(TEXTS[i]));
  return RedisModule_CreateCommand(ctx, "emq.enqueue", emq_enqueue, flags, 2, 2, 1);
}
