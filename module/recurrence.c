/* A job scheduler's hand-off in promote; each function follows its namesake in
 * protocol/lib/recurrence.lua. The record's `repeat` is JSON (the runtimes write it with
 * JSON.stringify); it is read here as the script's cjson.decode reads such text. */
#include "recurrence.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ── the repeat options: the few JSON fields the hand-off reads ────────────── */

typedef enum { J_ABSENT, J_NUMBER, J_STRING, J_TRUE, J_FALSE, J_NULL, J_OTHER } JType;
typedef struct {
  JType t;
  double n;
} JVal;
typedef struct {
  int table; /* an object or an array: Lua's type(r) == 'table' */
  JVal every, pattern, immediately, start, end, limit;
} Repeat;

typedef struct {
  const char *p, *end;
  int depth;
} Cursor;

static void skip_ws(Cursor *c) {
  while (c->p < c->end && (*c->p == ' ' || *c->p == '\t' || *c->p == '\n' || *c->p == '\r')) c->p++;
}

static int hex4(const char *p) {
  int v = 0;
  for (int i = 0; i < 4; i++) {
    char h = p[i];
    v = v * 16 + (h >= '0' && h <= '9' ? h - '0' : h >= 'a' && h <= 'f' ? h - 'a' + 10 : h >= 'A' && h <= 'F' ? h - 'A' + 10 : -1000);
  }
  return v;
}

/* A JSON string; its text (ASCII escapes decoded) into `out` when it fits, else `*len` = cap. */
static int json_string(Cursor *c, char *out, size_t cap, size_t *len) {
  size_t n = 0;
  if (c->p >= c->end || *c->p != '"') return 0;
  c->p++;
  while (c->p < c->end && *c->p != '"') {
    char ch = *c->p++;
    if ((unsigned char)ch < 0x20) return 0;
    if (ch == '\\') {
      if (c->p >= c->end) return 0;
      char e = *c->p++;
      switch (e) {
      case '"': case '\\': case '/': ch = e; break;
      case 'b': ch = '\b'; break;
      case 'f': ch = '\f'; break;
      case 'n': ch = '\n'; break;
      case 'r': ch = '\r'; break;
      case 't': ch = '\t'; break;
      case 'u': {
        if (c->end - c->p < 4) return 0;
        int v = hex4(c->p);
        if (v < 0) return 0;
        c->p += 4;
        ch = v < 0x80 ? (char)v : '\x01'; /* beyond ASCII: no key this reader looks for */
        break;
      }
      default: return 0;
      }
    }
    if (n < cap) out[n] = ch;
    n++;
  }
  if (c->p >= c->end) return 0;
  c->p++;
  *len = n < cap ? n : cap;
  return 1;
}

static int json_number(Cursor *c, double *out) {
  const char *s = c->p, *q = c->p;
  if (q < c->end && *q == '-') q++;
  if (q >= c->end || *q < '0' || *q > '9') return 0;
  if (*q == '0') q++;
  else while (q < c->end && *q >= '0' && *q <= '9') q++;
  if (q < c->end && *q == '.') {
    q++;
    if (q >= c->end || *q < '0' || *q > '9') return 0;
    while (q < c->end && *q >= '0' && *q <= '9') q++;
  }
  if (q < c->end && (*q == 'e' || *q == 'E')) {
    q++;
    if (q < c->end && (*q == '+' || *q == '-')) q++;
    if (q >= c->end || *q < '0' || *q > '9') return 0;
    while (q < c->end && *q >= '0' && *q <= '9') q++;
  }
  char buf[512];
  if ((size_t)(q - s) >= sizeof(buf)) return 0;
  memcpy(buf, s, (size_t)(q - s));
  buf[q - s] = '\0';
  *out = strtod(buf, NULL);
  c->p = q;
  return 1;
}

static int literal(Cursor *c, const char *word) {
  size_t n = strlen(word);
  if ((size_t)(c->end - c->p) < n || memcmp(c->p, word, n) != 0) return 0;
  c->p += n;
  return 1;
}

static int json_value(Cursor *c, JVal *v);

/* An object or array (a nested value: its content is not needed), up to cjson's depth. */
static int json_container(Cursor *c, char open) {
  if (++c->depth > 1000) return 0;
  char close = open == '{' ? '}' : ']';
  c->p++;
  skip_ws(c);
  if (c->p < c->end && *c->p == close) return c->p++, c->depth--, 1;
  for (;;) {
    JVal ignored;
    skip_ws(c);
    if (open == '{') {
      size_t len;
      if (!json_string(c, NULL, 0, &len)) return 0;
      skip_ws(c);
      if (c->p >= c->end || *c->p++ != ':') return 0;
      skip_ws(c);
    }
    if (!json_value(c, &ignored)) return 0;
    skip_ws(c);
    if (c->p >= c->end) return 0;
    if (*c->p == ',') {
      c->p++;
      continue;
    }
    if (*c->p++ != close) return 0;
    c->depth--;
    return 1;
  }
}

static int json_value(Cursor *c, JVal *v) {
  v->t = J_OTHER;
  v->n = 0;
  if (c->p >= c->end) return 0;
  char ch = *c->p;
  if (ch == '{' || ch == '[') return json_container(c, ch);
  if (ch == '"') {
    size_t len;
    v->t = J_STRING;
    return json_string(c, NULL, 0, &len);
  }
  if (literal(c, "true")) return v->t = J_TRUE, 1;
  if (literal(c, "false")) return v->t = J_FALSE, 1;
  if (literal(c, "null")) return v->t = J_NULL, 1;
  v->t = J_NUMBER;
  return json_number(c, &v->n);
}

/* cjson.decode(text), keeping the fields the hand-off reads; 0 when the text is not JSON. */
static int parse_repeat(Str text, Repeat *r) {
  memset(r, 0, sizeof(*r));
  Cursor c = {text.p, text.p + text.n, 0};
  skip_ws(&c);
  if (c.p < c.end && *c.p == '{') {
    r->table = 1;
    c.p++;
    skip_ws(&c);
    if (c.p < c.end && *c.p == '}') c.p++;
    else
      for (;;) {
        char key[16];
        size_t len;
        JVal v;
        skip_ws(&c);
        if (!json_string(&c, key, sizeof(key), &len)) return 0;
        skip_ws(&c);
        if (c.p >= c.end || *c.p++ != ':') return 0;
        skip_ws(&c);
        if (!json_value(&c, &v)) return 0;
        JVal *slot = NULL;
        if (len < sizeof(key)) {
          key[len] = '\0';
          if (strcmp(key, "every") == 0) slot = &r->every;
          else if (strcmp(key, "pattern") == 0) slot = &r->pattern;
          else if (strcmp(key, "immediately") == 0) slot = &r->immediately;
          else if (strcmp(key, "startDate") == 0) slot = &r->start;
          else if (strcmp(key, "endDate") == 0) slot = &r->end;
          else if (strcmp(key, "limit") == 0) slot = &r->limit;
        }
        if (slot) *slot = v; /* a repeated key: the last one counts, as in cjson */
        skip_ws(&c);
        if (c.p >= c.end) return 0;
        if (*c.p == ',') {
          c.p++;
          continue;
        }
        if (*c.p++ != '}') return 0;
        break;
      }
  } else {
    JVal v;
    r->table = c.p < c.end && *c.p == '[';
    if (!json_value(&c, &v)) return 0;
  }
  skip_ws(&c);
  return c.p == c.end;
}

static int truthy(JVal v) { return v.t != J_ABSENT && v.t != J_FALSE; }

/* ── the next run (every_after, every_next, end_reason) ────────────────────── */

/* 0 when there is no next run. */
static int every_after(const Repeat *r, double ref, double count, double *n) {
  if (r->limit.t != J_ABSENT && count >= r->limit.n) return 0;
  if (r->start.t != J_ABSENT && r->start.n > ref) *n = r->start.n;
  else if (truthy(r->immediately) && count == 0) *n = ref;
  else *n = ref + r->every.n;
  if (r->end.t != J_ABSENT && *n > r->end.n) return 0;
  return 1;
}

static int every_next(const Repeat *r, double prev, double count, double now, double *out) {
  double n, after;
  if (!every_after(r, prev, count, &n)) return 0;
  if (n >= now) return *out = n, 1;
  if (!every_after(r, n, count + 1, &after) || after > now) return *out = n, 1;
  return every_after(r, prev + floor((now - prev) / r->every.n) * r->every.n, count, out);
}

static const char *end_reason(const Repeat *r, double count) {
  if (r->limit.t != J_ABSENT && count >= r->limit.n) return "limit";
  if (truthy(r->end)) return "endDate";
  return "done";
}

/* ── the hand-off ─────────────────────────────────────────────────────────── */

static const char *const RECORD[] = {"repeat", "job", "count", "ended", "data", "name", "prio", "group", "max", "backoff", "ahead", NULL};
enum { REPEAT, JOB, COUNT, ENDED, DATA, NAME, PRIO, GROUP, MAX, BACKOFF, AHEAD, NFIELDS };

/* A lookahead left with fewer instants is listed for a runtime's top-up (the script's AHEAD_LOW). */
#define AHEAD_LOW 4

typedef struct {
  enum { NONE, RUNTIME, END, MAKE } kind; /* RUNTIME: the record waits for a runtime's hand-off */
  Str sid;
  RedisModuleString *record_key, *schedulers;
  RedisModuleString *rec[NFIELDS];
  double count, next_at;
  const char *reason;
  /* A cron pattern's lookahead (ahead_list, ahead_next): what is left after next_at, as the
   * text the script writes (the listed digit runs joined by one space), how many, the last. */
  int pattern;
  const char *rest;
  size_t rest_n;
  int left;
  Str last;
} Plan;

/* P schedulers:topup, the cron schedulers whose lookahead runs low. */
static RedisModuleString *topup_key(Sweep *s) { return key3(s, cstr("schedulers:topup"), cstr(""), cstr("")); }

/* A digit run of the lookahead: its text and its value as tonumber reads it. */
typedef struct {
  Str text;
  double at;
} Instant;

/* ahead_list + ahead_next: the record's lookahead after `at`, and the next occurrence at `now`
 * from it (the hand-off rule over listed instants). 0 when the list cannot tell (RUNTIME). */
static int ahead_plan(Sweep *s, Plan *f, double at) {
  Str text = f->rec[AHEAD] ? str_of(f->rec[AHEAD]) : cstr("");
  size_t cap = text.n / 2 + 1, n = 0;
  Instant *list = RedisModule_Alloc(cap * sizeof(Instant));
  for (size_t i = 0; i < text.n;) {
    if (text.p[i] < '0' || text.p[i] > '9') {
      i++;
      continue;
    }
    size_t j = i;
    while (j < text.n && text.p[j] >= '0' && text.p[j] <= '9') j++;
    Instant v = {{text.p + i, j - i}, 0};
    if (lua_number(v.text, &v.at) && v.at > at) list[n++] = v;
    i = j;
  }
  size_t pick = n;
  double now = (double)s->now;
  if (n > 0 && list[0].at >= now) pick = 0;
  else if (n > 1 && list[1].at > now) pick = 0;
  else
    for (size_t i = 2; i < n; i++)
      if (list[i].at > now) {
        pick = i;
        break;
      }
  if (pick == n) {
    RedisModule_Free(list);
    return 0;
  }
  f->next_at = list[pick].at;
  f->left = (int)(n - pick - 1);
  f->rest_n = 0;
  for (size_t i = pick + 1; i < n; i++) f->rest_n += list[i].text.n + (i > pick + 1);
  char *rest = RedisModule_Alloc(f->rest_n + 1);
  size_t o = 0;
  for (size_t i = pick + 1; i < n; i++) {
    if (i > pick + 1) rest[o++] = ' ';
    memcpy(rest + o, list[i].text.p, list[i].text.n);
    o += list[i].text.n;
  }
  /* Copied into strings the context owns: the record's reply the list points into is freed. */
  Str kept = str_of(RedisModule_CreateString(s->ctx, rest, f->rest_n));
  f->rest = kept.p;
  if (f->left > 0) f->last = str_of(RedisModule_CreateString(s->ctx, list[n - 1].text.p, list[n - 1].text.n));
  RedisModule_Free(rest);
  RedisModule_Free(list);
  return 1;
}

/* What scheduler_follow would do for `id` now. With `check` (the read pass), the keys it reads
 * have their types and the options it computes with are numbers, or the call is refused. */
static int plan(Sweep *s, Str id, Plan *f, int check) {
  f->kind = NONE;
  if (id.n < 16 || memcmp(id.p + 13, ":s:", 3) != 0) return 1;
  f->sid = (Str){id.p + 16, id.n - 16};
  f->record_key = key3(s, cstr("scheduler:"), f->sid, cstr(""));
  if (check && !expect_type(s, f->record_key, REDISMODULE_KEYTYPE_HASH)) return 0;
  hash_fields(s, f->record_key, RECORD, f->rec);
  RedisModuleString **rec = f->rec;
  if (!rec[REPEAT] || !rec[JOB] || rec[ENDED]) return 1;
  Str job = str_of(rec[JOB]);
  if (job.n != id.n || memcmp(job.p, id.p, id.n) != 0) return 1;
  Repeat r;
  f->kind = RUNTIME;
  f->pattern = 0;
  if (!parse_repeat(str_of(rec[REPEAT]), &r) || !r.table) return 1;
  if (r.pattern.t == J_ABSENT && r.every.t != J_ABSENT && (r.every.t != J_NUMBER || r.every.n < 1)) return 1;
  f->kind = NONE;
  f->schedulers = key3(s, cstr("schedulers"), cstr(""), cstr(""));
  if (check && !expect_type(s, f->schedulers, REDISMODULE_KEYTYPE_ZSET)) return 0;
  RedisModuleCallReply *score = RedisModule_Call(s->ctx, "ZSCORE", "sb", f->schedulers, f->sid.p, f->sid.n);
  double at;
  int have_at = 0;
  if (score && RedisModule_CallReplyType(score) == REDISMODULE_REPLY_STRING) {
    Str v;
    v.p = RedisModule_CallReplyStringPtr(score, &v.n);
    have_at = lua_number(v, &at);
  }
  if (score) RedisModule_FreeCallReply(score);
  if (!have_at || !lua_number(rec[COUNT] ? str_of(rec[COUNT]) : cstr("0"), &f->count)) return 1;
  if (r.pattern.t != J_ABSENT) {
    /* A cron pattern: its limit is the only option the script reads; the lookahead the rest. */
    f->pattern = 1;
    if (check && r.limit.t != J_ABSENT && r.limit.t != J_NUMBER)
      return refuse(s, "ERR a job scheduler's repeat options hold a limit that is not a number");
    if (r.limit.t != J_ABSENT && f->count >= r.limit.n) {
      f->kind = END;
      f->reason = "limit";
      return 1;
    }
    f->kind = ahead_plan(s, f, at) ? MAKE : RUNTIME;
    return 1;
  }
  JVal numbers[] = {r.limit, r.start, r.end};
  for (int i = 0; check && i < 3; i++)
    if (numbers[i].t != J_ABSENT && numbers[i].t != J_NUMBER)
      return refuse(s, "ERR a job scheduler's repeat options hold a limit, startDate or endDate that is not a number");
  if (r.every.t == J_NUMBER && every_next(&r, at, f->count, (double)s->now, &f->next_at)) {
    f->kind = MAKE;
    return 1;
  }
  f->kind = END;
  f->reason = end_reason(&r, f->count);
  return 1;
}

/* A Lua number as redis.call passes it: '%.17g'. */
static Str number_text(Sweep *s, double v) {
  char buf[40];
  int n = snprintf(buf, sizeof(buf), "%.17g", v);
  return str_of(RedisModule_CreateString(s->ctx, buf, (size_t)n));
}

/* 'JOB' + the instant in 10 Crockford base32 characters + ':' + tag + ':' + the name. */
static Str occurrence_id(Sweep *s, char tag, Str sid, double at) {
  static const char B32[] = "0123456789ABCDEFGHJKMNPQRSTVWXYZ";
  char digits[10];
  double rest = at;
  for (int i = 9; i >= 0; i--) {
    double d = rest - floor(rest / 32) * 32;
    digits[i] = B32[(int)d & 31];
    rest = (rest - d) / 32;
  }
  size_t n = 3 + 10 + 3 + sid.n;
  char *buf = RedisModule_Alloc(n);
  memcpy(buf, "JOB", 3);
  memcpy(buf + 3, digits, 10);
  buf[13] = ':';
  buf[14] = tag;
  buf[15] = ':';
  memcpy(buf + 16, sid.p, sid.n);
  RedisModuleString *id = RedisModule_CreateString(s->ctx, buf, n);
  RedisModule_Free(buf);
  return str_of(id);
}

int follow_ok(Sweep *s, const QueueKeys *K, RedisModuleString *schedule, Str id) {
  Plan f;
  if (!plan(s, id, &f, 1)) return 0;
  if (f.pattern && (f.kind == MAKE || f.kind == END) && !expect_type(s, topup_key(s), REDISMODULE_KEYTYPE_ZSET))
    return 0;
  if (f.kind != MAKE) return 1;
  return expect_type(s, schedule, REDISMODULE_KEYTYPE_ZSET) &&
         expect_type(s, K->events, REDISMODULE_KEYTYPE_STREAM) && expect_type(s, K->wake, REDISMODULE_KEYTYPE_STREAM);
}

/* scheduler_make: the occurrence at f->next_at from the record's template, unless its row exists. */
static void scheduler_make(Sweep *s, const QueueKeys *K, RedisModuleString *schedule, Plan *f) {
  RedisModuleString **rec = f->rec;
  Str id = occurrence_id(s, 's', f->sid, f->next_at);
  Str at = number_text(s, f->next_at);
  RedisModuleString *jk = job_key(s, id);
  RedisModuleCallReply *r;
  if (key_type(s, jk) == REDISMODULE_KEYTYPE_EMPTY) {
    /* One HSET of the fields the script writes with one HSET each, in the same order; no
       `attempts`, as the script (absent = 0: the occurrence still waits). */
    RedisModuleString *row[20];
    int n = 0;
    const char *fixed[] = {"state", "scheduled"};
    for (int i = 0; i < 2; i++) row[n++] = RedisModule_CreateString(s->ctx, fixed[i], strlen(fixed[i]));
    row[n++] = RedisModule_CreateString(s->ctx, "payload", 7);
    row[n++] = rec[DATA] ? rec[DATA] : RedisModule_CreateString(s->ctx, "", 0);
    row[n++] = RedisModule_CreateString(s->ctx, "created", 7);
    Str now = number_text(s, (double)s->now);
    row[n++] = RedisModule_CreateString(s->ctx, now.p, now.n);
    row[n++] = RedisModule_CreateString(s->ctx, "runat", 5);
    row[n++] = RedisModule_CreateString(s->ctx, at.p, at.n);
    const int optional[] = {NAME, PRIO, GROUP, MAX, BACKOFF};
    const char *const names[] = {"name", "prio", "group", "max", "backoff"};
    for (int i = 0; i < 5; i++) {
      if (!rec[optional[i]]) continue;
      row[n++] = RedisModule_CreateString(s->ctx, names[i], strlen(names[i]));
      row[n++] = rec[optional[i]];
    }
    r = WRITE(s, "HSET", "sv", jk, row, (size_t)n);
    if (!r) return;
    RedisModule_FreeCallReply(r);
    r = WRITE(s, "ZADD", "sbb", schedule, at.p, at.n, id.p, id.n);
    if (!r) return;
    RedisModule_FreeCallReply(r);
    add_event(s, K->events, "delayed", id, "name", rec[NAME] ? str_of(rec[NAME]) : cstr(""), "at", at);
    RedisModuleCallReply *head = RedisModule_Call(s->ctx, "ZRANGE", "scc", schedule, "0", "0");
    int first = 0;
    if (head && RedisModule_CallReplyType(head) == REDISMODULE_REPLY_ARRAY && RedisModule_CallReplyLength(head) > 0) {
      Str h = member_at(head, 0);
      first = h.n == id.n && memcmp(h.p, id.p, id.n) == 0;
    }
    if (head) RedisModule_FreeCallReply(head);
    if (first) {
      r = WRITE(s, "XADD", "scccccc", K->wake, "MAXLEN", "~", "100", "*", "w", "s"); /* the head moved */
      if (!r) return;
      RedisModule_FreeCallReply(r);
    }
  }
  Str count = number_text(s, f->count + 1);
  r = WRITE(s, "HSET", "scbcb", f->record_key, "job", id.p, id.n, "count", count.p, count.n);
  if (!r) return;
  RedisModule_FreeCallReply(r);
  r = WRITE(s, "ZADD", "sbb", f->schedulers, at.p, at.n, f->sid.p, f->sid.n);
  if (r) RedisModule_FreeCallReply(r);
}

int scheduler_follow(Sweep *s, const QueueKeys *K, RedisModuleString *schedule, Str id) {
  Plan f;
  if (!plan(s, id, &f, 0) || f.kind == NONE) return 0;
  if (f.kind == RUNTIME) return 1;
  RedisModuleCallReply *r;
  if (f.kind == MAKE) {
    scheduler_make(s, K, schedule, &f);
    if (!f.pattern) return 0;
    r = f.rest_n > 0 ? WRITE(s, "HSET", "scb", f.record_key, "ahead", f.rest, f.rest_n)
                     : WRITE(s, "HDEL", "sc", f.record_key, "ahead");
    if (!r) return 0;
    RedisModule_FreeCallReply(r);
    if (f.left >= AHEAD_LOW) return 0;
    Str last = f.left > 0 ? f.last : number_text(s, f.next_at);
    r = WRITE(s, "ZADD", "sbb", topup_key(s), last.p, last.n, f.sid.p, f.sid.n);
    if (r) RedisModule_FreeCallReply(r);
    return 1;
  }
  r = WRITE(s, "HSET", "scc", f.record_key, "ended", f.reason);
  if (!r) return 0;
  RedisModule_FreeCallReply(r);
  r = WRITE(s, "ZADD", "scb", f.schedulers, "inf", f.sid.p, f.sid.n);
  if (!r) return 0;
  RedisModule_FreeCallReply(r);
  if (!f.pattern) return 0;
  r = WRITE(s, "ZREM", "sb", topup_key(s), f.sid.p, f.sid.n);
  if (r) RedisModule_FreeCallReply(r);
  return 0;
}

/* ── a Repeat cadence's hand-off (repeat_next, repeat_make, repeat_follow) ─── */

static const char *const CADENCE[] = {"every_ms", "template", "catch_up", "max", "job", "runs", NULL};
enum { C_EVERY, C_TEMPLATE, C_CATCH_UP, C_MAX, C_JOB, C_RUNS, C_NFIELDS };

typedef struct {
  int make;
  Str name;
  RedisModuleString *record_key, *registry;
  RedisModuleString *rec[C_NFIELDS];
  double at, next_at;
} Cadence;

/* What repeat_follow would do for `id` now. With `check` (the read pass), what its writes need
 * is there (types, a template, runs an integer), or the call is refused. */
static int cadence_plan(Sweep *s, const QueueKeys *K, RedisModuleString *schedule, Str id, Cadence *c, int check) {
  c->make = 0;
  if (id.n < 16 || memcmp(id.p + 13, ":r:", 3) != 0) return 1;
  c->name = (Str){id.p + 16, id.n - 16};
  c->record_key = key3(s, cstr("repeat:"), c->name, cstr(""));
  if (check && !expect_type(s, c->record_key, REDISMODULE_KEYTYPE_HASH)) return 0;
  hash_fields(s, c->record_key, CADENCE, c->rec);
  RedisModuleString **rec = c->rec;
  if (!rec[C_EVERY] || !rec[C_JOB]) return 1;
  Str job = str_of(rec[C_JOB]);
  if (job.n != id.n || memcmp(job.p, id.p, id.n) != 0) return 1;
  c->registry = key3(s, cstr("repeat"), cstr(""), cstr(""));
  if (check && !expect_type(s, c->registry, REDISMODULE_KEYTYPE_ZSET)) return 0;
  RedisModuleCallReply *score = RedisModule_Call(s->ctx, "ZSCORE", "sb", c->registry, c->name.p, c->name.n);
  int have_at = 0;
  if (score && RedisModule_CallReplyType(score) == REDISMODULE_REPLY_STRING) {
    Str v;
    v.p = RedisModule_CallReplyStringPtr(score, &v.n);
    have_at = lua_number(v, &c->at);
  }
  if (score) RedisModule_FreeCallReply(score);
  double every;
  if (!have_at || !lua_number(str_of(rec[C_EVERY]), &every) || every < 1) return 1;
  long long runs;
  if (check && rec[C_RUNS] && !redis_integer(str_of(rec[C_RUNS]), &runs))
    return refuse(s, "ERR hash value is not an integer");
  if (check && !rec[C_TEMPLATE]) return refuse(s, "ERR a Repeat record has no template");
  if (check && !(expect_type(s, schedule, REDISMODULE_KEYTYPE_ZSET) &&
                 expect_type(s, K->events, REDISMODULE_KEYTYPE_STREAM) &&
                 expect_type(s, K->wake, REDISMODULE_KEYTYPE_STREAM)))
    return 0;
  double n = c->at + every, now = (double)s->now;
  int all = rec[C_CATCH_UP] && str_eq(str_of(rec[C_CATCH_UP]), "all");
  if (!all && n < now && n + every <= now) n = n + (floor((now - n) / every) + 1) * every;
  c->next_at = n;
  c->make = 1;
  return 1;
}

int repeat_follow_ok(Sweep *s, const QueueKeys *K, RedisModuleString *schedule, Str id) {
  Cadence c;
  return cadence_plan(s, K, schedule, id, &c, 1);
}

void repeat_follow(Sweep *s, const QueueKeys *K, RedisModuleString *schedule, Str id) {
  Cadence c;
  if (!cadence_plan(s, K, schedule, id, &c, 0) || !c.make) return;
  RedisModuleString **rec = c.rec;
  RedisModuleCallReply *r;
  Str last = number_text(s, c.at);
  r = WRITE(s, "HSET", "scb", c.record_key, "last", last.p, last.n);
  if (!r) return;
  RedisModule_FreeCallReply(r);
  r = WRITE(s, "HINCRBY", "scc", c.record_key, "runs", "1");
  if (!r) return;
  RedisModule_FreeCallReply(r);
  /* repeat_make: the occurrence at next_at, unless its row exists. */
  Str nid = occurrence_id(s, 'r', c.name, c.next_at);
  Str at = number_text(s, c.next_at);
  RedisModuleString *jk = job_key(s, nid);
  if (key_type(s, jk) == REDISMODULE_KEYTYPE_EMPTY) {
    Str now = number_text(s, (double)s->now);
    if (rec[C_MAX])
      r = WRITE(s, "HSET", "scccscbcbcbcs", jk, "state", "scheduled", "payload", rec[C_TEMPLATE], "created", now.p,
                now.n, "runat", at.p, at.n, "name", c.name.p, c.name.n, "max", rec[C_MAX]);
    else
      r = WRITE(s, "HSET", "scccscbcbcb", jk, "state", "scheduled", "payload", rec[C_TEMPLATE], "created", now.p,
                now.n, "runat", at.p, at.n, "name", c.name.p, c.name.n);
    if (!r) return;
    RedisModule_FreeCallReply(r);
    r = WRITE(s, "ZADD", "sbb", schedule, at.p, at.n, nid.p, nid.n);
    if (!r) return;
    RedisModule_FreeCallReply(r);
    add_event(s, K->events, "delayed", nid, "name", c.name, "at", at);
    if (s->failure) return;
    RedisModuleCallReply *head = RedisModule_Call(s->ctx, "ZRANGE", "scc", schedule, "0", "0");
    int first = 0;
    if (head && RedisModule_CallReplyType(head) == REDISMODULE_REPLY_ARRAY && RedisModule_CallReplyLength(head) > 0) {
      Str h = member_at(head, 0);
      first = h.n == nid.n && memcmp(h.p, nid.p, nid.n) == 0;
    }
    if (head) RedisModule_FreeCallReply(head);
    if (first) {
      r = WRITE(s, "XADD", "scccccc", K->wake, "MAXLEN", "~", "100", "*", "w", "s"); /* the head moved */
      if (!r) return;
      RedisModule_FreeCallReply(r);
    }
  }
  r = WRITE(s, "HSET", "scb", c.record_key, "job", nid.p, nid.n);
  if (!r) return;
  RedisModule_FreeCallReply(r);
  r = WRITE(s, "ZADD", "sbb", c.registry, at.p, at.n, c.name.p, c.name.n);
  if (r) RedisModule_FreeCallReply(r);
}
