/* The recurrence hand-offs in promote, as protocol/lib/recurrence.lua has them: releasing a
 * job scheduler's current occurrence makes its next one (or ends the scheduler) in the same
 * call, for `every` and `immediately` schedulers (scheduler_follow); releasing a Repeat
 * cadence's occurrence schedules its next slot's (repeat_follow). */
#ifndef EMQ_RECURRENCE_H
#define EMQ_RECURRENCE_H

#include "lanes.h"

/* Read pass: the keys and the record's repeat options the hand-off for released `id` would
 * use are such that its writes cannot fail. Replies the refusal and returns 0 otherwise. */
int follow_ok(Sweep *s, const QueueKeys *K, RedisModuleString *schedule, Str id);

/* Write pass: scheduler_follow(p, K, id, now, emax); 1 when the released occurrence is left to a
 * runtime's hand-off (cron, options the module cannot read). */
int scheduler_follow(Sweep *s, const QueueKeys *K, RedisModuleString *schedule, Str id);

/* A Repeat cadence's hand-off (lib/recurrence.lua repeat_follow): releasing the occurrence its
 * record points at counts the run and schedules the next slot's occurrence. The read pass's
 * check, then the write pass. */
int repeat_follow_ok(Sweep *s, const QueueKeys *K, RedisModuleString *schedule, Str id);
void repeat_follow(Sweep *s, const QueueKeys *K, RedisModuleString *schedule, Str id);

#endif
