/* Jumps of the server clock: protocol/lib/jump.lua's clock_follow, see jump.c. */
#ifndef EMQ_JUMP_H
#define EMQ_JUMP_H
#include "host.h"

/* The call's clock reading against the one kept in meta's `field`: back by more than
 * JUMP_MIN_MS, or ahead by more than `expected` (< 0: ahead is never a jump) + JUMP_MIN_MS, is a
 * jump, and every member of `zset` scored after the kept instant moves by it. Writes the field.
 * Returns the jump in ms (0: none); a failed write is left in s->failure. Call it once meta and
 * `zset` are known to be of their types. */
long long clock_follow(Sweep *s, RedisModuleString *meta, const char *field, long long expected,
                       RedisModuleString *zset);

/* Back: every member of `zset` scored after now moves by `jump` (ZINCRBY, in score order). */
void jump_after_now(Sweep *s, RedisModuleString *zset, long long jump);
#endif
