/* The server moves time (SPEC 26.1): one timer per queue, armed at the head of its `schedule`,
 * releases the due jobs with EMQ.PROMOTE itself (the same rules, events and wake entries as
 * every other caller of it), then re-arms at the next head. Without it, every clock that moves
 * a job runs in a client: a consumer's beat or its park timer.
 *
 * - Armed by the writes: a ZADD on a queue's `schedule` (a delayed job, a retry's backoff, a
 *   scheduler's occurrence) reads the head and moves the timer earlier when it is.
 * - Armed from the data: on load (once the data is in: timers never fire while the server
 *   loads), when this server becomes a primary, and every BACKSTOP_TICKS watch ticks, from the
 *   queue registry `emq:queues`; so a restart, a failover or a key written around the
 *   notifications (RESTORE, a replica's full sync) arms too.
 * - Primary only: a replica's timers and notifications do nothing (its data comes from the
 *   primary, whose promote calls are replicated as their effects).
 * - Bounded: one firing releases at most SLICE jobs, then fires again at once, so clients run
 *   between slices when 100,000 jobs fall due at one instant.
 *
 * EMQ.TIMERS replies [queues known, timers armed, firings, jobs released]; EMQ.TIMERS OFF stops
 * every timer (MODULE UNLOAD refuses a module that holds one) and EMQ.TIMERS ON starts them
 * again. `--loadmodule echomq.so timers off` loads the module with them stopped. */
#include "timers.h"

#include "host.h"
#include "promote.h"

#include <stdlib.h>
#include <string.h>

#define SLICE 64 /* about a millisecond of work on a busy 2-core machine */
#define SLICE_TEXT "64"
#define WATCH_MS 1000
#define BACKSTOP_TICKS 5
#define RETRY_MS 1000 /* after a promote refused (garbage in the queue's keys): no busy loop */

typedef struct {
  char *prefix; /* 'emq:{<queue>}:' */
  size_t n;
  RedisModuleTimerID id;
  long long at; /* the instant armed for (server-clock ms) */
  int armed;
  void *next; /* every queue known, for stop and the count */
} Armed;

static RedisModuleDict *queues;
static Armed *all;
static size_t known;
static int running;
static int primary;
static int watching;
static RedisModuleTimerID watch_id;
static long long ticks, firings, released;

static int is_primary(RedisModuleCtx *ctx) {
  return (RedisModule_GetContextFlags(ctx) & REDISMODULE_CTX_FLAGS_MASTER) != 0;
}

static Armed *queue_of(const char *prefix, size_t n) {
  int missing = 0;
  Armed *a = RedisModule_DictGetC(queues, (void *)prefix, n, &missing);
  if (!missing && a) return a;
  a = RedisModule_Alloc(sizeof(*a));
  a->prefix = RedisModule_Alloc(n);
  memcpy(a->prefix, prefix, n);
  a->n = n;
  a->armed = 0;
  a->at = 0;
  a->next = all;
  all = a;
  RedisModule_DictSetC(queues, a->prefix, n, a);
  known++;
  return a;
}

static void fire(RedisModuleCtx *ctx, void *data);

static void disarm(RedisModuleCtx *ctx, Armed *a) {
  if (a->armed) RedisModule_StopTimer(ctx, a->id, NULL);
  a->armed = 0;
}

/* Arms `a` for `at` unless it is armed for that instant or earlier. A member scored `at` is due
 * once the clock reads `at`; the event loop runs timers on whole milliseconds, so waiting
 * `at - now + 1` never fires into the millisecond before it (which would find nothing due). */
static void arm_at(RedisModuleCtx *ctx, Armed *a, long long at) {
  if (a->armed && a->at <= at) return;
  disarm(ctx, a);
  long long delay = at - RedisModule_Milliseconds() + 1;
  if (delay < 0) delay = 0;
  a->id = RedisModule_CreateTimer(ctx, delay, fire, a);
  a->at = at;
  a->armed = 1;
}

static void arm_now(RedisModuleCtx *ctx, Armed *a) {
  disarm(ctx, a);
  a->id = RedisModule_CreateTimer(ctx, 0, fire, a);
  a->at = 0;
  a->armed = 1;
}

/* prefix + name into buf (at most 64 bytes of name after a prefix the caller checked fits). */
static size_t key_name(char *buf, const Armed *a, const char *name) {
  size_t m = strlen(name);
  memcpy(buf, a->prefix, a->n);
  memcpy(buf + a->n, name, m);
  return a->n + m;
}

/* Reads the head of the queue's schedule and arms for it (an empty schedule: nothing). */
static void arm_head(RedisModuleCtx *ctx, Armed *a) {
  char buf[1100];
  if (a->n > 1024) return;
  size_t kn = key_name(buf, a, "schedule");
  RedisModuleCallReply *r = RedisModule_Call(ctx, "ZRANGE", "bccc", buf, kn, "0", "0", "WITHSCORES");
  if (r && RedisModule_CallReplyType(r) == REDISMODULE_REPLY_ARRAY && RedisModule_CallReplyLength(r) >= 2) {
    size_t len;
    const char *p = RedisModule_CallReplyStringPtr(RedisModule_CallReplyArrayElement(r, 1), &len);
    char score[64];
    if (p && len < sizeof(score)) {
      memcpy(score, p, len);
      score[len] = '\0';
      char *end;
      double d = strtod(score, &end);
      if (end != score && d == d) {
        long long at = d > 9e15 ? 9000000000000000LL : (long long)d;
        if ((double)at < d) at++; /* a fractional score is due at the next whole ms */
        arm_at(ctx, a, at);
      }
    }
  }
  if (r) RedisModule_FreeCallReply(r);
}

/* How many of the schedule's members are due at `now`. */
static long long due_at(RedisModuleCtx *ctx, const char *key, size_t kn, long long now) {
  RedisModuleCallReply *r = RedisModule_Call(ctx, "ZCOUNT", "bcl", key, kn, "-inf", now);
  long long n = r && RedisModule_CallReplyType(r) == REDISMODULE_REPLY_INTEGER ? RedisModule_CallReplyInteger(r) : 0;
  if (r) RedisModule_FreeCallReply(r);
  return n;
}

/* A firing runs EMQ.PROMOTE's own code in this timer's context, not through RedisModule_Call:
 * its writes are then this context's calls, replicated as their effects (as a script's are),
 * where a command called through RedisModule_Call would keep its nested writes from the
 * replicas. Its reply goes to the context's own client and is dropped; the schedule's head,
 * read after, says when to fire next. */
static void fire(RedisModuleCtx *ctx, void *data) {
  Armed *a = data;
  a->armed = 0;
  if (!running || !is_primary(ctx)) return;
  if (a->n > 1024) return;
  firings++;
  static const char *const names[] = {"schedule", "pending", "events", "wake", "meta", "ring"};
  RedisModuleString *argv[11];
  char buf[1100];
  argv[0] = RedisModule_CreateString(ctx, "EMQ.PROMOTE", 11);
  argv[1] = RedisModule_CreateString(ctx, "6", 1);
  for (int i = 0; i < 6; i++) argv[2 + i] = RedisModule_CreateString(ctx, buf, key_name(buf, a, names[i]));
  argv[8] = RedisModule_CreateString(ctx, a->prefix, a->n);
  argv[9] = RedisModule_CreateString(ctx, SLICE_TEXT, strlen(SLICE_TEXT));
  size_t sn = key_name(buf, a, "schedule");
  /* Both counts at one instant, read before the call (whose own reading is the same or later,
   * so it releases at least these, up to a slice): what it took out of them is what it
   * released, and a refused call takes none. */
  long long now = clock_now_ms();
  long long due = due_at(ctx, buf, sn, now);
  emq_promote(ctx, argv, 10);
  for (int i = 0; i < 10; i++) RedisModule_FreeString(ctx, argv[i]);
  long long left = due_at(ctx, buf, sn, now);
  long long moved = left < due ? due - left : 0;
  released += moved;
  if (due > 0 && moved == 0) {
    /* Refused (a key of the wrong type, garbage a promote cannot quarantine): looked at again
     * later, as a consumer's promote leg would retry on its beat; no busy loop. */
    arm_at(ctx, a, RedisModule_Milliseconds() + RETRY_MS);
    return;
  }
  if (left > 0) arm_now(ctx, a); /* more due: the next slice, after the clients' turn */
  else arm_head(ctx, a);          /* the next head (due already: at once) */
}

/* The schedule of `emq:{<queue>}:` changed: arm for its head when that is earlier. */
static int on_zset(RedisModuleCtx *ctx, int type, const char *event, RedisModuleString *key) {
  (void)type;
  if (!running || (strcmp(event, "zadd") != 0 && strcmp(event, "zincr") != 0)) return REDISMODULE_OK;
  size_t n;
  const char *name = RedisModule_StringPtrLen(key, &n);
  static const char suffix[] = "}:schedule";
  size_t sn = sizeof(suffix) - 1;
  if (n <= 5 + sn || memcmp(name, "emq:{", 5) != 0 || memcmp(name + n - sn, suffix, sn) != 0) return REDISMODULE_OK;
  if (!is_primary(ctx)) return REDISMODULE_OK;
  arm_head(ctx, queue_of(name, n - (sn - 2)));
  return REDISMODULE_OK;
}

/* Every queue of the registry, armed for its head. */
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
    arm_head(ctx, queue_of(prefix, len + 7));
  }
  RedisModule_FreeCallReply(r);
}

/* The watch: once a second, the role; on becoming a primary (and on the first tick after load)
 * and every BACKSTOP_TICKS ticks, every queue of the registry armed from the data. */
static void watch(RedisModuleCtx *ctx, void *data) {
  (void)data;
  watching = 0;
  if (!running) return;
  int now_primary = is_primary(ctx);
  if (now_primary && (!primary || ticks % BACKSTOP_TICKS == 0)) arm_registry(ctx);
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
  watch_id = RedisModule_CreateTimer(ctx, 0, watch, NULL);
  watching = 1;
}

static void stop(RedisModuleCtx *ctx) {
  running = 0;
  if (watching) RedisModule_StopTimer(ctx, watch_id, NULL);
  watching = 0;
  for (Armed *a = all; a; a = a->next) disarm(ctx, a);
}

static long long armed_count(void) {
  long long n = 0;
  for (Armed *a = all; a; a = a->next) n += a->armed;
  return n;
}

static int emq_timers(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
  if (argc > 2) return RedisModule_ReplyWithError(ctx, "EMQINPUT EMQ.TIMERS takes [ON|OFF]");
  if (argc == 2) {
    size_t n;
    const char *w = RedisModule_StringPtrLen(argv[1], &n);
    if (n == 2 && (w[0] | 32) == 'o' && (w[1] | 32) == 'n') start(ctx);
    else if (n == 3 && (w[0] | 32) == 'o' && (w[1] | 32) == 'f' && (w[2] | 32) == 'f') stop(ctx);
    else return RedisModule_ReplyWithError(ctx, "EMQINPUT EMQ.TIMERS takes [ON|OFF]");
  }
  RedisModule_ReplyWithArray(ctx, 5);
  RedisModule_ReplyWithLongLong(ctx, running);
  RedisModule_ReplyWithLongLong(ctx, (long long)known);
  RedisModule_ReplyWithLongLong(ctx, armed_count());
  RedisModule_ReplyWithLongLong(ctx, firings);
  RedisModule_ReplyWithLongLong(ctx, released);
  return REDISMODULE_OK;
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
  if (RedisModule_SubscribeToKeyspaceEvents(ctx, REDISMODULE_NOTIFY_ZSET, on_zset) != REDISMODULE_OK) return REDISMODULE_ERR;
  if (RedisModule_CreateCommand(ctx, "emq.timers", emq_timers, "admin", 0, 0, 0) != REDISMODULE_OK) return REDISMODULE_ERR;
  if (on) start(ctx);
  return REDISMODULE_OK;
}
