/* The shared parts of a sweep call; see host.h. */
#include "host.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define WRONGTYPE "WRONGTYPE Operation against a key holding the wrong kind of value"

Str str_of(RedisModuleString *s) {
  Str out = {"", 0};
  if (s) out.p = RedisModule_StringPtrLen(s, &out.n);
  return out;
}

Str cstr(const char *c) { return (Str){c, strlen(c)}; }

int str_eq(Str a, const char *c) {
  size_t n = strlen(c);
  return a.n == n && memcmp(a.p, c, n) == 0;
}

int refuse(Sweep *s, const char *message) {
  RedisModule_ReplyWithError(s->ctx, message);
  return 0;
}

/* ── the call's shape ─────────────────────────────────────────────────────── */

/* An error reply may not hold CR or LF, and a key may hold any byte: show it printable, cut. */
static void shown(Str v, char *out, size_t size) {
  size_t j = 0, i = 0;
  for (; i < v.n && j + 8 < size; i++) {
    unsigned char c = (unsigned char)v.p[i];
    if (c >= 0x20 && c < 0x7f && c != '\'') out[j++] = (char)c;
    else j += (size_t)snprintf(out + j, size - j, "\\x%02x", c);
  }
  if (i < v.n) memcpy(out + j, "...", 3), j += 3;
  out[j] = '\0';
}

/* 'emq:{<queue>}:' with a queue name of at least one byte and no braces. */
static int queue_prefix(Str p) {
  if (p.n < 8 || memcmp(p.p, "emq:{", 5) != 0 || memcmp(p.p + p.n - 2, "}:", 2) != 0) return 0;
  for (size_t i = 5; i < p.n - 2; i++)
    if (p.p[i] == '{' || p.p[i] == '}') return 0;
  return 1;
}

static int key_in_layout(Str prefix, Str key, const char *name) {
  size_t n = strlen(name);
  return key.n == prefix.n + n && memcmp(key.p, prefix.p, prefix.n) == 0 &&
         memcmp(key.p + prefix.n, name, n) == 0;
}

int sweep_shape(Sweep *s, RedisModuleCtx *ctx, const char *verb, RedisModuleString **argv, int argc,
                const char *const *names, int nkeys, int short_keys, int (*argv_ok)(Sweep *s)) {
  char msg[512];
  memset(s, 0, sizeof(*s));
  s->ctx = ctx;
  s->verb = verb;
  long long given = -1;
  if (argc >= 2) {
    Str n = str_of(argv[1]);
    if (!parse_whole(n, 0, &given)) given = -1;
  }
  if (given != nkeys && given != short_keys) {
    snprintf(msg, sizeof(msg),
             "EMQINPUT %s takes numkeys (%d, or the short form's %d), the keys, then the script's ARGV",
             verb, nkeys, short_keys);
    return refuse(s, msg);
  }
  if (argc < 2 + given) {
    snprintf(msg, sizeof(msg), "EMQINPUT %s: numkeys is %lld but %d keys follow", verb, given, argc - 2);
    return refuse(s, msg);
  }
  s->argv = argv + 2 + given;
  s->argc = argc - 2 - (int)given;
  if (!argv_ok(s)) return 0;
  s->prefix = str_of(s->argv[0]);
  if (!queue_prefix(s->prefix)) {
    char p[128];
    shown(s->prefix, p, sizeof(p));
    snprintf(msg, sizeof(msg),
             "EMQINPUT layout_error: ARGV[1] is '%s', not a queue's prefix 'emq:{<queue>}:'", p);
    return refuse(s, msg);
  }
  for (int i = 0; i < nkeys; i++) {
    if (i < given) {
      Str k = str_of(argv[2 + i]);
      if (!key_in_layout(s->prefix, k, names[i])) {
        char got[128], want[160];
        shown(k, got, sizeof(got));
        shown(s->prefix, want, sizeof(want) - 16);
        snprintf(msg, sizeof(msg),
                 "EMQINPUT layout_error: KEYS[%d] is '%s', the %s key of the queue is '%s%s'", i + 1,
                 got, names[i], want, names[i]);
        return refuse(s, msg);
      }
      s->key[i] = argv[2 + i];
    } else {
      s->key[i] = key3(s, cstr(names[i]), cstr(""), cstr(""));
    }
  }
  return 1;
}

void sweep_key_positions(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
  long long n;
  if (argc < 2 || !parse_whole(str_of(argv[1]), 0, &n)) return;
  for (long long i = 0; i < n && 2 + i < argc; i++) RedisModule_KeyAtPos(ctx, (int)(2 + i));
}

long long clock_now_ms(void) {
  if (RedisModule_CachedMicroseconds) return RedisModule_CachedMicroseconds() / 1000;
  return RedisModule_Milliseconds();
}

/* ── names and numbers ────────────────────────────────────────────────────── */

RedisModuleString *key3(Sweep *s, Str a, Str b, Str c) {
  size_t n = s->prefix.n + a.n + b.n + c.n;
  char stack[256];
  char *buf = n <= sizeof(stack) ? stack : RedisModule_Alloc(n);
  memcpy(buf, s->prefix.p, s->prefix.n);
  memcpy(buf + s->prefix.n, a.p, a.n);
  memcpy(buf + s->prefix.n + a.n, b.p, b.n);
  memcpy(buf + s->prefix.n + a.n + b.n, c.p, c.n);
  RedisModuleString *key = RedisModule_CreateString(s->ctx, buf, n);
  if (buf != stack) RedisModule_Free(buf);
  return key;
}

RedisModuleString *job_key(Sweep *s, Str id) { return key3(s, cstr("job:"), id, cstr("")); }

int parse_whole(Str v, long long min, long long *out) {
  if (v.n == 0 || v.n > 17) return 0;
  size_t i = v.p[0] == '-' ? 1 : 0;
  if (i == v.n) return 0;
  long long n = 0;
  for (size_t j = i; j < v.n; j++) {
    if (v.p[j] < '0' || v.p[j] > '9') return 0;
    n = n * 10 + (v.p[j] - '0');
  }
  if (i) n = -n;
  if (n < min || n > 9007199254740991LL) return 0;
  *out = n;
  return 1;
}

/* A NUL-terminated copy of at most 63 bytes (longer texts are no number Lua or Redis reads). */
static int small_text(Str v, char *buf) {
  if (v.n > 63) return 0;
  memcpy(buf, v.p, v.n);
  buf[v.n] = '\0';
  return 1;
}

int lua_number(Str v, double *out) {
  char buf[64], *end;
  if (!small_text(v, buf)) return 0;
  double d = strtod(buf, &end);
  if (end == buf) return 0;
  if (*end == 'x' || *end == 'X') d = (double)strtoul(buf, &end, 16);
  while (isspace((unsigned char)*end)) end++;
  if (*end != '\0') return 0;
  *out = d;
  return 1;
}

int redis_integer(Str v, long long *out) {
  char buf[64], *end;
  if (v.n == 0 || v.n > 20 || !small_text(v, buf)) return 0;
  if (buf[0] == '0' && v.n > 1) return 0;
  if (!(buf[0] == '-' || (buf[0] >= '0' && buf[0] <= '9'))) return 0;
  if (buf[0] == '-' && (v.n == 1 || buf[1] == '0')) return 0;
  errno = 0;
  long long n = strtoll(buf, &end, 10);
  if (errno != 0 || *end != '\0') return 0;
  *out = n;
  return 1;
}

void lua_number_text(double v, char *buf, size_t size) { snprintf(buf, size, "%.14g", v); }

/* ── the read pass ────────────────────────────────────────────────────────── */

int key_type(Sweep *s, RedisModuleString *key) {
  RedisModuleKey *k = RedisModule_OpenKey(s->ctx, key, REDISMODULE_READ);
  int type = RedisModule_KeyType(k);
  RedisModule_CloseKey(k);
  return type;
}

int expect_type(Sweep *s, RedisModuleString *key, int type) {
  int t = key_type(s, key);
  if (t == REDISMODULE_KEYTYPE_EMPTY || t == type) return 1;
  return refuse(s, WRONGTYPE);
}

int hash_fields(Sweep *s, RedisModuleString *key, const char *const *fields, RedisModuleString **out) {
  int n = 0;
  while (fields[n]) out[n] = NULL, n++;
  RedisModuleKey *k = RedisModule_OpenKey(s->ctx, key, REDISMODULE_READ);
  int type = RedisModule_KeyType(k);
  if (type == REDISMODULE_KEYTYPE_HASH) {
    /* HashGet takes (field, &value) pairs up to a NULL: eight at a time. */
    for (int at = 0; at < n; at += 8) {
      const char *f[8] = {0};
      for (int i = 0; i < 8 && at + i < n; i++) f[i] = fields[at + i];
      RedisModuleString **o = out + at;
      RedisModule_HashGet(k, REDISMODULE_HASH_CFIELDS, f[0], &o[0], f[1], &o[1], f[2], &o[2], f[3], &o[3], f[4],
                          &o[4], f[5], &o[5], f[6], &o[6], f[7], &o[7], NULL);
    }
  }
  RedisModule_CloseKey(k);
  return type;
}

RedisModuleString *hash_field(Sweep *s, RedisModuleString *key, const char *field) {
  const char *fields[] = {field, NULL};
  RedisModuleString *out[1];
  hash_fields(s, key, fields, out);
  return out[0];
}

RedisModuleString *hash_field_str(Sweep *s, RedisModuleString *key, Str field) {
  char stack[256];
  if (field.n >= sizeof(stack)) {
    /* Long field names (a group name is at most 200 characters): read through HGET. */
    RedisModuleCallReply *r = RedisModule_Call(s->ctx, "HGET", "sb", key, field.p, field.n);
    RedisModuleString *v = NULL;
    if (r && RedisModule_CallReplyType(r) == REDISMODULE_REPLY_STRING) {
      size_t n;
      const char *p = RedisModule_CallReplyStringPtr(r, &n);
      v = RedisModule_CreateString(s->ctx, p, n);
    }
    if (r) RedisModule_FreeCallReply(r);
    return v;
  }
  if (memchr(field.p, '\0', field.n)) return NULL; /* no C-string field: no such field is read */
  memcpy(stack, field.p, field.n);
  stack[field.n] = '\0';
  return hash_field(s, key, stack);
}

size_t key_length(Sweep *s, RedisModuleString *key) {
  RedisModuleKey *k = RedisModule_OpenKey(s->ctx, key, REDISMODULE_READ);
  size_t n = k && RedisModule_KeyType(k) != REDISMODULE_KEYTYPE_EMPTY ? RedisModule_ValueLength(k) : 0;
  RedisModule_CloseKey(k);
  return n;
}

int read_events_cap(Sweep *s, RedisModuleString *meta) {
  if (!expect_type(s, meta, REDISMODULE_KEYTYPE_HASH)) return 0;
  RedisModuleString *v = hash_field(s, meta, "events_max");
  s->emax = v ? str_of(v) : cstr("10000");
  long long n;
  if (!redis_integer(s->emax, &n)) return refuse(s, "ERR value is not an integer or out of range");
  if (n < 0) return refuse(s, "ERR The MAXLEN argument must be >= 0.");
  return 1;
}

RedisModuleCallReply *due_members(Sweep *s, RedisModuleString *zset, long long limit) {
  RedisModuleCallReply *r =
      RedisModule_Call(s->ctx, "ZRANGEBYSCORE", "sclcll", zset, "-inf", s->now, "LIMIT", 0LL, limit);
  return r;
}

int score_ok(Sweep *s, Str score) {
  char buf[64], *end;
  if (score.n == 0 || !small_text(score, buf) || isspace((unsigned char)buf[0]))
    return refuse(s, "ERR value is not a valid float");
  double d = strtod(buf, &end);
  if (*end != '\0' || d != d) return refuse(s, "ERR value is not a valid float");
  return 1;
}

Str member_at(RedisModuleCallReply *list, size_t i) {
  Str id = {"", 0};
  id.p = RedisModule_CallReplyStringPtr(RedisModule_CallReplyArrayElement(list, i), &id.n);
  return id;
}

/* ── the write pass ───────────────────────────────────────────────────────── */

RedisModuleCallReply *checked(Sweep *s, RedisModuleCallReply *r) {
  if (s->failure) return NULL;
  if (!r) {
    s->failure = (RedisModuleCallReply *)-1;
    return NULL;
  }
  if (RedisModule_CallReplyType(r) == REDISMODULE_REPLY_ERROR) {
    s->failure = r;
    return NULL;
  }
  return r;
}

long long reply_int(RedisModuleCallReply *r) {
  return r && RedisModule_CallReplyType(r) == REDISMODULE_REPLY_INTEGER ? RedisModule_CallReplyInteger(r) : 0;
}

int remove_members(Sweep *s, RedisModuleString *zset, RedisModuleCallReply *list) {
  size_t n = RedisModule_CallReplyLength(list);
  if (n == 0) return 1;
  RedisModuleString **members = RedisModule_Alloc(sizeof(*members) * n);
  for (size_t i = 0; i < n; i++) {
    Str id = member_at(list, i);
    members[i] = RedisModule_CreateString(s->ctx, id.p, id.n);
  }
  RedisModuleCallReply *r = WRITE(s, "ZREM", "sv", zset, members, n);
  for (size_t i = 0; i < n; i++) RedisModule_FreeString(s->ctx, members[i]);
  RedisModule_Free(members);
  if (r) RedisModule_FreeCallReply(r);
  return r != NULL;
}

int add_event(Sweep *s, RedisModuleString *events, const char *event, Str id, const char *f1, Str v1,
              const char *f2, Str v2) {
  RedisModuleCallReply *r;
  if (!f1)
    r = WRITE(s, "XADD", "sccbccccb", events, "MAXLEN", "~", s->emax.p, s->emax.n, "*", "event", event,
              "id", id.p, id.n);
  else if (!f2)
    r = WRITE(s, "XADD", "sccbccccb" "cb", events, "MAXLEN", "~", s->emax.p, s->emax.n, "*", "event",
              event, "id", id.p, id.n, f1, v1.p, v1.n);
  else
    r = WRITE(s, "XADD", "sccbccccb" "cbcb", events, "MAXLEN", "~", s->emax.p, s->emax.n, "*", "event",
              event, "id", id.p, id.n, f1, v1.p, v1.n, f2, v2.p, v2.n);
  if (r) RedisModule_FreeCallReply(r);
  return r != NULL;
}

int add_event3(Sweep *s, RedisModuleString *events, const char *event, Str id, const char *f1, Str v1,
               const char *f2, Str v2, const char *f3, Str v3) {
  if (!f3) return add_event(s, events, event, id, f1, v1, f2, v2);
  RedisModuleCallReply *r = WRITE(s, "XADD", "sccbccccb" "cbcbcb", events, "MAXLEN", "~", s->emax.p, s->emax.n,
                                  "*", "event", event, "id", id.p, id.n, f1, v1.p, v1.n, f2, v2.p, v2.n, f3,
                                  v3.p, v3.n);
  if (r) RedisModule_FreeCallReply(r);
  return r != NULL;
}

int whole_text(RedisModuleString *v) {
  if (!v) return 1;
  Str t = str_of(v);
  if (t.n == 0 || t.n > 17) return 0;
  size_t i = t.p[0] == '-' ? 1 : 0;
  if (i == t.n) return 0;
  for (; i < t.n; i++)
    if (t.p[i] < '0' || t.p[i] > '9') return 0;
  return 1;
}

int counter_text(RedisModuleString *v) {
  if (!v) return 1;
  Str t = str_of(v);
  if (t.n == 1 && t.p[0] == '0') return 1;
  if (!whole_text(v)) return 0;
  size_t i = t.p[0] == '-' ? 1 : 0;
  return t.p[i] != '0';
}

int reply_failure(Sweep *s) {
  if (s->failure == (RedisModuleCallReply *)-1)
    return RedisModule_ReplyWithError(s->ctx, "ERR a write of the sweep could not run");
  return RedisModule_ReplyWithCallReply(s->ctx, s->failure);
}
