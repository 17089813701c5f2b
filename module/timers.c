/* The server moves time (SPEC 26.1): two timers per queue. The promote timer, armed at the head
 * of its `schedule`, releases the due jobs with EMQ.PROMOTE itself; the lease timer, armed at
 * the earliest lease deadline in `active`, recovers the expired leases with EMQ.STALLED.CHECK's
 * code by the queue's recovery mode (meta `recovery`: reap, the default, as a consumer's;
 * stalled with meta `max_stalled`; off). Both use the same rules, events and wake entries as
 * every other caller of those commands, then re-arm at the next head. Without them, every
 * clock that moves a job runs in a client: a consumer's beat or its park timer.
 *
 * - Armed by the writes: a ZADD on a queue's `schedule` (a delayed job, a retry's backoff, a
 *   scheduler's occurrence) or its `active` (a claim, an extension) reads the head through the
 *   key API (a skiplist's first node, no command) and moves the timer earlier when it is.
 * - Armed from the data: on load (once the data is in: timers never fire while the server
 *   loads), when this server becomes a primary, and every BACKSTOP_TICKS watch ticks, from the
 *   queue registry `emq:queues`; so a restart, a failover or a key written around the
 *   notifications (RESTORE, a replica's full sync) arms too.
 * - Redis Cluster: the registry is one key on one node, so a cluster node arms from its own
 *   keys (a SCAN on load and on becoming a primary), and a queue whose slot is being resharded
 *   is left alone until the slot settles (slots.c).
 * - Primary only: a replica's timers and notifications do nothing (its data comes from the
 *   primary, whose calls are replicated as their effects).
 * - Bounded: one firing moves at most SLICE jobs, then fires again at once, so clients run
 *   between slices when 100,000 jobs fall due at one instant.
 * - The clock (SPEC 2.1): a timer's delay is a duration on the event loop's monotonic clock, so
 *   a step of the wall clock neither fires it early nor holds it. The watch compares the wall
 *   clock with the monotonic one once a second (and each lease firing and the server's cron
 *   do, first): a step of more than JUMP_MIN_MS, or the event loop held that long between two
 *   looks (SIGSTOP, a long command), is a jump, kept in `jumps`. A recovery firing vouches for the time since
 *   the queue's last recovery pass less the jumps after it (expected_ms), so the command moves
 *   the live leases by exactly those; a promote firing vouches the same way less the steps
 *   only (jobs due during a stop run late, never early). A jump arms every timer at once.
 *
 * EMQ.TIMERS replies [running, queues known, promote timers armed, promote firings, jobs
 * released, lease timers armed, lease firings, leases recovered, jumps seen]; EMQ.TIMERS LIST
 * one entry per queue; EMQ.TIMERS OFF stops every timer (MODULE UNLOAD refuses a module that
 * holds one) and EMQ.TIMERS ON starts them again. EMQ.TIMERS.RUNNING replies 1 while they run
 * on this primary (hello's `emq.timers` feature). `--loadmodule echomq.so timers off` loads
 * the module with them stopped. */
#include "timers.h"

#include "host.h"
#include "promote.h"
#include "slots.h"
#include "sweep_stalled.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define SLICE 64 /* about a millisecond of work on a busy 2-core machine */
#define SLICE_TEXT "64"
#define WATCH_MS 1000
#define SCAN_COUNT "1000" /* keys a discovery step looks at (a cluster node's SCAN), then clients run */
#define BACKSTOP_TICKS 5
#define RETRY_MS 1000 /* after a refused call (garbage in the queue's keys): no busy loop */
#define JUMP_MIN_MS 500 /* SPEC 2.1's noise bound, as lib/jump.lua's */
#define JUMPS 16        /* the jumps remembered: a pass older than the oldest vouches for none */
#define NO_LIMIT "9007199254740991" /* reap is recovery without a threshold: 2^53 - 1 is never passed */

enum { PROMOTE, LEASE, KINDS };
static const char *const SET_OF[KINDS] = {"schedule", "active"};

typedef struct Armed Armed;

typedef struct {
  Armed *q;
  int kind;
  RedisModuleTimerID id;
  long long at; /* the instant armed for (server-clock ms) */
  int armed;
} Timer;

/* What a queue's lease timer does, from meta `recovery` and `max_stalled`. */
enum { REAP, STALLED, OFF, INVALID };
static const char *const MODE_NAME[] = {"reap", "stalled", "off", "invalid"};

struct Armed {
  char *prefix; /* 'emq:{<queue>}:' */
  size_t n;
  Timer t[KINDS];
  int mode;            /* as the last lease firing read it */
  long long recovered; /* leases this server's timers recovered on the queue */
  Armed *next;         /* every queue known, for stop and the counts */
};

/* A jump of the clock (see the header): the wall instant before which a pass did not see it,
 * its size, and whether it was a step of the wall clock (1) or the loop held (0). */
typedef struct {
  long long before;
  long long ms;
  int step;
} Jump;

static RedisModuleDict *queues;
static Armed *all;
static size_t known;
static int running;
static int primary;
static int watching;
static RedisModuleTimerID watch_id;
/* A cluster node's discovery (SCAN of its own keys) in progress, and where it is. */
static int scanning;
static RedisModuleTimerID scan_id;
static char scan_cursor[32];
static long long ticks;
static long long firings[KINDS], moved_total[KINDS];
static Jump jumps[JUMPS];
static long long jumps_seen;
/* The clocks at the last look (ms): the wall clock's offset from the monotonic one, and the
 * monotonic instant itself (the event loop ran then). */
static long long seen_offset, seen_mono;
static int clocks_read;

static long long mono_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int is_primary(RedisModuleCtx *ctx) {
  return (RedisModule_GetContextFlags(ctx) & REDISMODULE_CTX_FLAGS_MASTER) != 0;
}

static int in_cluster(RedisModuleCtx *ctx) {
  return (RedisModule_GetContextFlags(ctx) & REDISMODULE_CTX_FLAGS_CLUSTER) != 0;
}

static Armed *queue_of(const char *prefix, size_t n) {
  int missing = 0;
  Armed *a = RedisModule_DictGetC(queues, (void *)prefix, n, &missing);
  if (!missing && a) return a;
  a = RedisModule_Alloc(sizeof(*a));
  a->prefix = RedisModule_Alloc(n);
  memcpy(a->prefix, prefix, n);
  a->n = n;
  for (int k = 0; k < KINDS; k++) {
    a->t[k].q = a;
    a->t[k].kind = k;
    a->t[k].armed = 0;
    a->t[k].at = 0;
  }
  a->mode = REAP;
  a->recovered = 0;
  a->next = all;
  all = a;
  RedisModule_DictSetC(queues, a->prefix, n, a);
  known++;
  return a;
}

static void fire(RedisModuleCtx *ctx, void *data);

static void disarm(RedisModuleCtx *ctx, Timer *t) {
  if (t->armed) RedisModule_StopTimer(ctx, t->id, NULL);
  t->armed = 0;
}

/* Arms `t` for `at` unless it is armed for that instant or earlier. A member scored `at` is due
 * once the clock reads `at`; the event loop runs timers on whole milliseconds, so waiting
 * `at - now + 1` never fires into the millisecond before it (which would find nothing due).
 * The wait is a duration the event loop counts on its monotonic clock. */
static void arm_at(RedisModuleCtx *ctx, Timer *t, long long at) {
  if (t->armed && t->at <= at) return;
  disarm(ctx, t);
  long long delay = at - RedisModule_Milliseconds() + 1;
  if (delay < 0) delay = 0;
  t->id = RedisModule_CreateTimer(ctx, delay, fire, t);
  t->at = at;
  t->armed = 1;
}

static void arm_now(RedisModuleCtx *ctx, Timer *t) {
  disarm(ctx, t);
  t->id = RedisModule_CreateTimer(ctx, 0, fire, t);
  t->at = 0;
  t->armed = 1;
}

/* prefix + name into buf (at most 64 bytes of name after a prefix the caller checked fits). */
static size_t key_name(char *buf, const Armed *a, const char *name) {
  size_t m = strlen(name);
  memcpy(buf, a->prefix, a->n);
  memcpy(buf + a->n, name, m);
  return a->n + m;
}

/* Reads the head of the timer's set (the schedule, or active) through the key API, O(log n)
 * and no command, and arms for it; an empty set or a key of another type: nothing. */
static void arm_head(RedisModuleCtx *ctx, Timer *t) {
  char buf[1100];
  if (t->q->n > 1024) return;
  RedisModuleString *name = RedisModule_CreateString(ctx, buf, key_name(buf, t->q, SET_OF[t->kind]));
  RedisModuleKey *key = RedisModule_OpenKey(ctx, name, REDISMODULE_READ);
  if (key && RedisModule_KeyType(key) == REDISMODULE_KEYTYPE_ZSET &&
      RedisModule_ZsetFirstInScoreRange(key, -1.0 / 0.0, 1.0 / 0.0, 0, 0) == REDISMODULE_OK) {
    double d = 0;
    RedisModuleString *member = RedisModule_ZsetRangeCurrentElement(key, &d);
    if (member) {
      RedisModule_FreeString(ctx, member);
      if (d == d) {
        long long at = d > 9e15 ? 9000000000000000LL : d < -9e15 ? -9000000000000000LL : (long long)d;
        if ((double)at < d) at++; /* a fractional score is due at the next whole ms */
        arm_at(ctx, t, at);
      }
    }
    RedisModule_ZsetRangeStop(key);
  }
  if (key) RedisModule_CloseKey(key);
  RedisModule_FreeString(ctx, name);
}

static void arm_heads(RedisModuleCtx *ctx, Armed *a) {
  for (int k = 0; k < KINDS; k++) arm_head(ctx, &a->t[k]);
}

/* ── the clock: jumps seen against the monotonic clock (SPEC 2.1) ──────────── */

static void remember_jump(long long before, long long ms, int step) {
  memmove(jumps + 1, jumps, sizeof(jumps[0]) * (JUMPS - 1));
  jumps[0].before = before;
  jumps[0].ms = ms;
  jumps[0].step = step;
  jumps_seen++;
}

/* Compares the clocks with the last look: 1 when a jump was seen (remembered, and every timer
 * should look at its queue again). A forward step and a held loop count against the passes
 * made before them; a step back needs nothing remembered (the commands see it themselves). */
static int look_at_clocks(void) {
  long long wall = RedisModule_Milliseconds(), mono = mono_ms(), offset = wall - mono;
  int jumped = 0;
  if (clocks_read) {
    long long step = offset - seen_offset;
    if (step > JUMP_MIN_MS) remember_jump(wall - step, step, 1), jumped = 1;
    else if (step < -JUMP_MIN_MS) jumped = 1;
    /* The loop looks at least `hz` times a second (the cron hook): a longer gap is the time it
     * was held, all of it (never less: a lease would then be recovered that much early). */
    long long held = mono - seen_mono;
    /* Seen now: a pass before now (even one in the millisecond the loop was last looked at,
     * just before the hold) did not count it. */
    if (held > JUMP_MIN_MS) remember_jump(wall, held, 0), jumped = 1;
  }
  seen_offset = offset;
  seen_mono = mono;
  clocks_read = 1;
  return jumped;
}

/* The time a caller may vouch for since a pass at wall instant `seen` (ms): the gap less the
 * jumps after it (steps only, or steps and held loops), at least 0. */
static long long vouched_since(long long now, long long seen, int steps_only) {
  long long lost = 0;
  for (int i = 0; i < JUMPS && i < jumps_seen; i++) {
    if (jumps[i].before <= seen) break; /* newest first: the rest came before the pass */
    if (!steps_only || jumps[i].step) lost += jumps[i].ms;
  }
  long long v = now - seen - lost;
  return v < 0 ? 0 : v;
}

/* meta's `field` as a whole number, or -1 when absent or not one. */
static long long meta_number(RedisModuleCtx *ctx, const char *meta, size_t mn, const char *field) {
  RedisModuleCallReply *r = RedisModule_Call(ctx, "HGET", "bc", meta, mn, field);
  long long v = -1;
  if (r && RedisModule_CallReplyType(r) == REDISMODULE_REPLY_STRING) {
    size_t len;
    const char *p = RedisModule_CallReplyStringPtr(r, &len);
    char text[32];
    if (p && len > 0 && len < sizeof(text)) {
      memcpy(text, p, len);
      text[len] = '\0';
      char *end;
      double d = strtod(text, &end);
      if (*end == '\0' && d == d && d >= 0 && d < 9e15) v = (long long)d;
    }
  }
  if (r) RedisModule_FreeCallReply(r);
  return v;
}

/* The queue's recovery mode from meta `recovery` and `max_stalled`: REAP when absent (what a
 * consumer runs by default), STALLED with its limit (default 1, a consumer's maxStalled), OFF,
 * or INVALID (a value no runtime writes: nothing is recovered, the consumers' legs still are). */
static int recovery_of(RedisModuleCtx *ctx, const char *meta, size_t mn, char *limit, size_t size) {
  RedisModuleCallReply *r = RedisModule_Call(ctx, "HMGET", "bcc", meta, mn, "recovery", "max_stalled");
  int mode = INVALID;
  snprintf(limit, size, "%s", NO_LIMIT);
  if (r && RedisModule_CallReplyType(r) == REDISMODULE_REPLY_ARRAY && RedisModule_CallReplyLength(r) == 2) {
    size_t len = 0, ln = 0;
    RedisModuleCallReply *m = RedisModule_CallReplyArrayElement(r, 0);
    RedisModuleCallReply *l = RedisModule_CallReplyArrayElement(r, 1);
    const char *v = RedisModule_CallReplyType(m) == REDISMODULE_REPLY_STRING ? RedisModule_CallReplyStringPtr(m, &len) : NULL;
    const char *lim = RedisModule_CallReplyType(l) == REDISMODULE_REPLY_STRING ? RedisModule_CallReplyStringPtr(l, &ln) : NULL;
    if (!v || (len == 4 && memcmp(v, "reap", 4) == 0)) mode = REAP;
    else if (len == 3 && memcmp(v, "off", 3) == 0) mode = OFF;
    else if (len == 7 && memcmp(v, "stalled", 7) == 0) {
      mode = STALLED;
      snprintf(limit, size, "1");
      if (lim) {
        int digits = ln > 0 && ln <= 16;
        for (size_t i = 0; i < ln && digits; i++) digits = lim[i] >= '0' && lim[i] <= '9';
        if (digits) snprintf(limit, size, "%.*s", (int)ln, lim);
        else mode = INVALID;
      }
    }
  }
  if (r) RedisModule_FreeCallReply(r);
  return mode;
}

/* How many of the set's members are due at `now`. */
static long long due_at(RedisModuleCtx *ctx, const char *key, size_t kn, long long now) {
  RedisModuleCallReply *r = RedisModule_Call(ctx, "ZCOUNT", "bcl", key, kn, "-inf", now);
  long long n = r && RedisModule_CallReplyType(r) == REDISMODULE_REPLY_INTEGER ? RedisModule_CallReplyInteger(r) : 0;
  if (r) RedisModule_FreeCallReply(r);
  return n;
}

static long long card_of(RedisModuleCtx *ctx, const char *key, size_t kn) {
  RedisModuleCallReply *r = RedisModule_Call(ctx, "ZCARD", "b", key, kn);
  long long n = r && RedisModule_CallReplyType(r) == REDISMODULE_REPLY_INTEGER ? RedisModule_CallReplyInteger(r) : 0;
  if (r) RedisModule_FreeCallReply(r);
  return n;
}

static void arm_all_now(RedisModuleCtx *ctx) {
  for (Armed *a = all; a; a = a->next)
    for (int k = 0; k < KINDS; k++) arm_now(ctx, &a->t[k]);
}

/* A firing runs the command's own code (EMQ.PROMOTE, or EMQ.STALLED.CHECK for the leases) in
 * this timer's context, not through RedisModule_Call: its writes are then this context's
 * calls, replicated as their effects (as a script's are), where a command called through
 * RedisModule_Call would keep its nested writes from the replicas. Its reply goes to the
 * context's own client and is dropped; the set's head, read after, says when to fire next. */
static void fire(RedisModuleCtx *ctx, void *data) {
  Timer *t = data;
  Armed *a = t->q;
  t->armed = 0;
  if (!running || !is_primary(ctx)) return;
  if (a->n > 1024) return;
  if (in_cluster(ctx) && slot_moving(slot_of(a->prefix, a->n))) {
    /* Resharding: the queue's keys are split between two nodes until the slot settles. */
    arm_at(ctx, t, RedisModule_Milliseconds() + RETRY_MS);
    return;
  }
  if (t->kind == LEASE && look_at_clocks()) {
    /* A jump since the watch looked: every queue looks again, this one now (below). */
    arm_all_now(ctx);
    disarm(ctx, t);
  }
  char buf[1100], meta[1100];
  size_t mn = key_name(meta, a, "meta");
  long long now = clock_now_ms();
  RedisModuleString *argv[16];
  int argc = 0;
  char limit[32], vouched[32];
  if (t->kind == PROMOTE) {
    static const char *const names[] = {"schedule", "pending", "events", "wake", "meta", "ring"};
    argv[argc++] = RedisModule_CreateString(ctx, "EMQ.PROMOTE", 11);
    argv[argc++] = RedisModule_CreateString(ctx, "6", 1);
    for (int i = 0; i < 6; i++) argv[argc++] = RedisModule_CreateString(ctx, buf, key_name(buf, a, names[i]));
    argv[argc++] = RedisModule_CreateString(ctx, a->prefix, a->n);
    argv[argc++] = RedisModule_CreateString(ctx, SLICE_TEXT, strlen(SLICE_TEXT));
    long long seen = meta_number(ctx, meta, mn, "clock_schedule");
    if (seen >= 0 && jumps_seen > 0) {
      /* A step seen since the last promote: vouch for the time less it, so promote moves the
       * schedule by the step (SPEC 2.1); without one the call vouches for nothing, as before. */
      argv[argc++] = RedisModule_CreateString(ctx, "count", 5);
      argv[argc++] = RedisModule_CreateString(ctx, vouched, snprintf(vouched, sizeof(vouched), "%lld", vouched_since(now, seen, 1)));
    }
  } else {
    a->mode = recovery_of(ctx, meta, mn, limit, sizeof(limit));
    if (a->mode == OFF) return; /* armed again by the next claim, or the backstop */
    if (a->mode == INVALID) {
      arm_at(ctx, t, RedisModule_Milliseconds() + RETRY_MS); /* looked at again, no busy loop */
      return;
    }
    static const char *const names[] = {"active", "pending", "dead", "events", "wake", "meta", "ring", "cancelled"};
    argv[argc++] = RedisModule_CreateString(ctx, "EMQ.STALLED.CHECK", 17);
    argv[argc++] = RedisModule_CreateString(ctx, "8", 1);
    for (int i = 0; i < 8; i++) argv[argc++] = RedisModule_CreateString(ctx, buf, key_name(buf, a, names[i]));
    argv[argc++] = RedisModule_CreateString(ctx, a->prefix, a->n);
    argv[argc++] = RedisModule_CreateString(ctx, limit, strlen(limit));
    argv[argc++] = RedisModule_CreateString(ctx, SLICE_TEXT, strlen(SLICE_TEXT));
    long long seen = meta_number(ctx, meta, mn, "clock_lease");
    long long v = seen >= 0 ? vouched_since(now, seen, 0) : 1000;
    argv[argc++] = RedisModule_CreateString(ctx, vouched, snprintf(vouched, sizeof(vouched), "%lld", v));
  }
  firings[t->kind]++;
  size_t sn = key_name(buf, a, SET_OF[t->kind]);
  /* Both counts at one instant, read before the call (whose own reading is the same or later,
   * so it moves at least these, up to a slice): what it took out of them is what it moved, and
   * a refused call takes none. */
  long long due = due_at(ctx, buf, sn, now);
  long long held = t->kind == LEASE ? card_of(ctx, buf, sn) : 0;
  if (t->kind == PROMOTE) emq_promote(ctx, argv, argc);
  else emq_stalled_check(ctx, argv, argc);
  for (int i = 0; i < argc; i++) RedisModule_FreeString(ctx, argv[i]);
  long long left = due_at(ctx, buf, sn, now);
  /* Released: what left the due part of the schedule. Recovered: what left active (a jump
   * moves live leases on, which is not a recovery; nothing enters active in one call). */
  long long moved = t->kind == LEASE ? held - card_of(ctx, buf, sn) : left < due ? due - left : 0;
  if (moved < 0) moved = 0;
  moved_total[t->kind] += moved;
  if (t->kind == LEASE) a->recovered += moved;
  if (due > 0 && moved == 0) {
    /* Refused (a key of the wrong type, garbage a command cannot quarantine), or a jump moved
     * every due member on: looked at again later, as a consumer's leg would retry on its beat;
     * no busy loop. The head is armed too, for members the jump moved. */
    arm_head(ctx, t);
    arm_at(ctx, t, RedisModule_Milliseconds() + RETRY_MS);
    return;
  }
  if (left > 0) arm_now(ctx, t); /* more due: the next slice, after the clients' turn */
  else arm_head(ctx, t);          /* the next head (due already: at once) */
}

/* `emq:{<queue>}:schedule` or `:active` was written: arm for its head when that is earlier. */
static void arm_for_key(RedisModuleCtx *ctx, const char *name, size_t n) {
  if (n <= 5 || memcmp(name, "emq:{", 5) != 0) return;
  static const char *const suffix[KINDS] = {"}:schedule", "}:active"};
  for (int k = 0; k < KINDS; k++) {
    size_t sn = strlen(suffix[k]);
    if (n <= 5 + sn || memcmp(name + n - sn, suffix[k], sn) != 0) continue;
    if (is_primary(ctx)) arm_head(ctx, &queue_of(name, n - (sn - 2))->t[k]);
    return;
  }
}

/* A ZADD or ZINCRBY; or a RESTORE, the write MIGRATE makes on the node a slot moves to (and a
 * raw RESTORE anywhere): keys that arrive whole, without a zadd. */
static int on_write(RedisModuleCtx *ctx, int type, const char *event, RedisModuleString *key) {
  int zset = type & REDISMODULE_NOTIFY_ZSET;
  if (!running || (zset ? strcmp(event, "zadd") != 0 && strcmp(event, "zincr") != 0 : strcmp(event, "restore") != 0))
    return REDISMODULE_OK;
  size_t n;
  const char *name = RedisModule_StringPtrLen(key, &n);
  arm_for_key(ctx, name, n);
  return REDISMODULE_OK;
}

/* A queue's keys (its schedule, active or meta) are in this server's keyspace (on a cluster node: it serves their slot). */
static int holds(RedisModuleCtx *ctx, const Armed *a) {
  char buf[1100];
  if (a->n > 1024) return 0;
  int held = 0;
  static const char *const names[] = {"schedule", "active", "meta"};
  for (int k = 0; k < 3 && !held; k++) {
    RedisModuleString *name = RedisModule_CreateString(ctx, buf, key_name(buf, a, names[k]));
    RedisModuleKey *key = RedisModule_OpenKey(ctx, name, REDISMODULE_READ);
    held = key && RedisModule_KeyType(key) != REDISMODULE_KEYTYPE_EMPTY;
    if (key) RedisModule_CloseKey(key);
    RedisModule_FreeString(ctx, name);
  }
  return held;
}

/* A cluster node's discovery: `emq:queues` is one key in one slot, on one node, so a node arms
 * from its own keys instead, walking them SCAN_COUNT at a time (a zero-delay timer between
 * steps, so clients run) for every `emq:{<queue>}:schedule` and `:active`. Started on load and
 * whenever this node becomes a primary. */
static void scan_step(RedisModuleCtx *ctx, void *data) {
  (void)data;
  scanning = 0;
  if (!running || !is_primary(ctx)) return;
  RedisModuleCallReply *r =
      RedisModule_Call(ctx, "SCAN", "cccccc", scan_cursor, "MATCH", "emq:{*}:*", "COUNT", SCAN_COUNT, "TYPE", "zset");
  if (!r || RedisModule_CallReplyType(r) != REDISMODULE_REPLY_ARRAY || RedisModule_CallReplyLength(r) != 2) {
    if (r) RedisModule_FreeCallReply(r);
    return;
  }
  size_t cn = 0;
  const char *next = RedisModule_CallReplyStringPtr(RedisModule_CallReplyArrayElement(r, 0), &cn);
  RedisModuleCallReply *keys = RedisModule_CallReplyArrayElement(r, 1);
  for (size_t i = 0; i < RedisModule_CallReplyLength(keys); i++) {
    size_t len;
    const char *k = RedisModule_CallReplyStringPtr(RedisModule_CallReplyArrayElement(keys, i), &len);
    if (k) arm_for_key(ctx, k, len);
  }
  int more = next && cn > 0 && cn < sizeof(scan_cursor) && !(cn == 1 && next[0] == '0');
  if (more) snprintf(scan_cursor, sizeof(scan_cursor), "%.*s", (int)cn, next);
  RedisModule_FreeCallReply(r);
  if (more) {
    scan_id = RedisModule_CreateTimer(ctx, 0, scan_step, NULL);
    scanning = 1;
  }
}

static void start_scan(RedisModuleCtx *ctx) {
  snprintf(scan_cursor, sizeof(scan_cursor), "0");
  if (scanning) return; /* the walk in progress goes on from the start */
  scan_id = RedisModule_CreateTimer(ctx, 0, scan_step, NULL);
  scanning = 1;
}

/* Every queue of the registry, armed for its heads. */
static void arm_registry(RedisModuleCtx *ctx) {
  RedisModuleCallReply *r = RedisModule_Call(ctx, "SMEMBERS", "c", "emq:queues");
  if (!r || RedisModule_CallReplyType(r) != REDISMODULE_REPLY_ARRAY) {
    if (r) RedisModule_FreeCallReply(r);
    return;
  }
  char prefix[1100];
  for (size_t i = 0; i < RedisModule_CallReplyLength(r); i++) {
    size_t len;
    const char *q = RedisModule_CallReplyStringPtr(RedisModule_CallReplyArrayElement(r, i), &len);
    if (!q || len > 1000) continue;
    memcpy(prefix, "emq:{", 5);
    memcpy(prefix + 5, q, len);
    memcpy(prefix + 5 + len, "}:", 2);
    arm_heads(ctx, queue_of(prefix, len + 7));
  }
  RedisModule_FreeCallReply(r);
}

/* The cron hook (hz times a second): a held event loop is seen as soon as it runs again, and
 * measured to within 1 / hz, where the watch alone would miss up to a second of it. */
static void on_cron(RedisModuleCtx *ctx, RedisModuleEvent eid, uint64_t subevent, void *data) {
  (void)eid, (void)subevent, (void)data;
  if (running && look_at_clocks() && is_primary(ctx)) arm_all_now(ctx);
}

/* The watch: once a second, the role and the clocks; on becoming a primary (and on the first
 * tick after load) and every BACKSTOP_TICKS ticks, every queue of the registry armed from the
 * data; on a jump, every timer at once. */
static void watch(RedisModuleCtx *ctx, void *data) {
  (void)data;
  watching = 0;
  if (!running) return;
  int now_primary = is_primary(ctx);
  int jumped = look_at_clocks();
  if (now_primary && in_cluster(ctx)) {
    /* Each node arms the queues whose keys it holds (SPEC 26.1 point 11): from its own keys on
     * becoming a primary, and the known queues' heads as the backstop. */
    slots_refresh(ctx);
    if (!primary) start_scan(ctx);
    else if (ticks % BACKSTOP_TICKS == 0)
      for (Armed *a = all; a; a = a->next) arm_heads(ctx, a);
  } else if (now_primary && (!primary || ticks % BACKSTOP_TICKS == 0)) {
    arm_registry(ctx);
  }
  if (now_primary && jumped) arm_all_now(ctx);
  primary = now_primary;
  ticks++;
  watch_id = RedisModule_CreateTimer(ctx, WATCH_MS, watch, NULL);
  watching = 1;
}

static void start(RedisModuleCtx *ctx) {
  if (running) return;
  running = 1;
  primary = 0; /* the first tick arms from the registry */
  ticks = 1;
  clocks_read = 0;
  watch_id = RedisModule_CreateTimer(ctx, 0, watch, NULL);
  watching = 1;
}

static void stop(RedisModuleCtx *ctx) {
  running = 0;
  if (watching) RedisModule_StopTimer(ctx, watch_id, NULL);
  watching = 0;
  if (scanning) RedisModule_StopTimer(ctx, scan_id, NULL);
  scanning = 0;
  for (Armed *a = all; a; a = a->next)
    for (int k = 0; k < KINDS; k++) disarm(ctx, &a->t[k]);
}

static long long armed_count(int kind) {
  long long n = 0;
  for (Armed *a = all; a; a = a->next) n += a->t[kind].armed;
  return n;
}

/* EMQ.TIMERS LIST: per queue [prefix, promote armed at, lease armed at (-1: not armed),
 * recovery mode, leases recovered here]. */
static int reply_list(RedisModuleCtx *ctx) {
  /* A cluster node lists the queues it holds: one whose slot moved away is no longer its own. */
  int cluster = in_cluster(ctx);
  long listed = 0;
  for (Armed *a = all; a; a = a->next) listed += !cluster || holds(ctx, a);
  RedisModule_ReplyWithArray(ctx, listed);
  for (Armed *a = all; a; a = a->next) {
    if (cluster && !holds(ctx, a)) continue;
    RedisModule_ReplyWithArray(ctx, 5);
    RedisModuleString *p = RedisModule_CreateString(ctx, a->prefix, a->n);
    RedisModule_ReplyWithString(ctx, p);
    RedisModule_FreeString(ctx, p);
    for (int k = 0; k < KINDS; k++) RedisModule_ReplyWithLongLong(ctx, a->t[k].armed ? a->t[k].at : -1);
    RedisModuleString *m = RedisModule_CreateString(ctx, MODE_NAME[a->mode], strlen(MODE_NAME[a->mode]));
    RedisModule_ReplyWithString(ctx, m);
    RedisModule_FreeString(ctx, m);
    RedisModule_ReplyWithLongLong(ctx, a->recovered);
  }
  return REDISMODULE_OK;
}

static int word_is(RedisModuleString *s, const char *w) {
  size_t n, m = strlen(w);
  const char *p = RedisModule_StringPtrLen(s, &n);
  if (n != m) return 0;
  for (size_t i = 0; i < n; i++)
    if ((p[i] | 32) != w[i]) return 0;
  return 1;
}

static int emq_timers(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
  static const char usage[] = "EMQINPUT EMQ.TIMERS takes [ON|OFF|LIST]";
  if (argc > 2) return RedisModule_ReplyWithError(ctx, usage);
  if (argc == 2) {
    if (word_is(argv[1], "on")) start(ctx);
    else if (word_is(argv[1], "off")) stop(ctx);
    else if (word_is(argv[1], "list")) return reply_list(ctx);
    else return RedisModule_ReplyWithError(ctx, usage);
  }
  /* The first five entries as before the lease timers; theirs appended (SPEC 22.1). */
  RedisModule_ReplyWithArray(ctx, 9);
  RedisModule_ReplyWithLongLong(ctx, running);
  RedisModule_ReplyWithLongLong(ctx, (long long)known);
  RedisModule_ReplyWithLongLong(ctx, armed_count(PROMOTE));
  RedisModule_ReplyWithLongLong(ctx, firings[PROMOTE]);
  RedisModule_ReplyWithLongLong(ctx, moved_total[PROMOTE]);
  RedisModule_ReplyWithLongLong(ctx, armed_count(LEASE));
  RedisModule_ReplyWithLongLong(ctx, firings[LEASE]);
  RedisModule_ReplyWithLongLong(ctx, moved_total[LEASE]);
  RedisModule_ReplyWithLongLong(ctx, jumps_seen);
  return REDISMODULE_OK;
}

/* 1 while the timers run on this primary: the server moves time, so a consumer's promote and
 * recovery legs can fall back to a backstop (hello's `emq.timers`, SPEC 19.1). */
static int emq_timers_running(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
  (void)argv;
  if (argc != 1) return RedisModule_ReplyWithError(ctx, "EMQINPUT EMQ.TIMERS.RUNNING takes no arguments");
  return RedisModule_ReplyWithLongLong(ctx, running && is_primary(ctx));
}

int emq_timers_load(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
  int on = 1;
  for (int i = 0; i + 1 < argc; i += 2) {
    size_t n, m;
    const char *k = RedisModule_StringPtrLen(argv[i], &n);
    const char *v = RedisModule_StringPtrLen(argv[i + 1], &m);
    if (n == 6 && memcmp(k, "timers", 6) == 0 && ((m == 3 && memcmp(v, "off", 3) == 0) || (m == 2 && memcmp(v, "on", 2) == 0)))
      on = m == 2;
    else
      return REDISMODULE_ERR; /* an argument the module does not know: refuse to load */
  }
  if (argc % 2) return REDISMODULE_ERR;
  queues = RedisModule_CreateDict(NULL);
  if (RedisModule_SubscribeToKeyspaceEvents(ctx, REDISMODULE_NOTIFY_ZSET | REDISMODULE_NOTIFY_GENERIC, on_write) != REDISMODULE_OK) return REDISMODULE_ERR;
  static const RedisModuleEvent cron = {REDISMODULE_EVENT_CRON_LOOP, 1};
  if (RedisModule_SubscribeToServerEvent(ctx, cron, on_cron) != REDISMODULE_OK) return REDISMODULE_ERR;
  if (RedisModule_CreateCommand(ctx, "emq.timers", emq_timers, "admin", 0, 0, 0) != REDISMODULE_OK) return REDISMODULE_ERR;
  if (RedisModule_CreateCommand(ctx, "emq.timers.running", emq_timers_running, "readonly fast", 0, 0, 0) != REDISMODULE_OK)
    return REDISMODULE_ERR;
  if (on) start(ctx);
  return REDISMODULE_OK;
}
