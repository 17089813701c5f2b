/* A job scheduler's hand-off in promote, as protocol/lib/recurrence.lua has it
 * (scheduler_follow): releasing a scheduler's current occurrence makes its next one (or ends
 * the scheduler) in the same call, for `every` and `immediately` schedulers. */
#ifndef EMQ_RECURRENCE_H
#define EMQ_RECURRENCE_H

#include "lanes.h"

/* Read pass: the keys and the record's repeat options the hand-off for released `id` would
 * use are such that its writes cannot fail. Replies the refusal and returns 0 otherwise. */
int follow_ok(Sweep *s, const QueueKeys *K, RedisModuleString *schedule, Str id);

/* Write pass: scheduler_follow(p, K, id, now, emax). */
void scheduler_follow(Sweep *s, const QueueKeys *K, RedisModuleString *schedule, Str id);

#endif
