/* A malformed row taken out of circulation, as protocol/lib/quarantine.lua does it: dead-lettered
 * with an EMQDATA error naming the field (quarantine), or, found in a set its state does not
 * name, put in the set its state names when that lacks it (rehome). */
#ifndef EMQ_QUARANTINE_H
#define EMQ_QUARANTINE_H
#include "lanes.h"

/* Read pass: every key a quarantine (or a rehome) of the row at `jk` may touch has its type. */
int quarantine_keys_ok(Sweep *s, const QueueKeys *K, RedisModuleString *jk);
int rehome_keys_ok(Sweep *s, const QueueKeys *K, RedisModuleString *jk, RedisModuleString *state);

/* Write pass; each returns 1 when claimable work went from none to some (a wake is due). */
int quarantine(Sweep *s, const QueueKeys *K, RedisModuleString *jk, Str id, const char *field, Str value,
               long long *pending_card);
int rehome(Sweep *s, const QueueKeys *K, RedisModuleString *jk, Str id, RedisModuleString *state,
           long long *pending_card);
#endif
