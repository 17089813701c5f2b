-- pause: stop claiming from the whole queue, or from one lane; enqueue still works and
-- running jobs finish.
-- KEYS: meta events ring
-- ARGV: prefix [group]
--   group: pause only this lane (it leaves the ring until resumed); absent: the whole queue
-- REPLY: 1 paused now, 0 it was paused already
-- ERRORS: none
-- EVENTS: paused (id '', group when a lane)
local p, group = ARGV[1], ARGV[2]
local changed
if group and group ~= '' then
  changed = redis.call('SADD', p .. 'lanes:paused', group)
  redis.call('ZREM', KEYS[3], group)
else
  group = ''
  changed = redis.call('HSET', KEYS[1], 'paused', '1') -- 1 only when the field is new
  if changed == 0 and redis.call('HGET', KEYS[1], 'paused') ~= '1' then changed = 1 end
end
if changed == 1 then
  local emax = redis.call('HGET', KEYS[1], 'events_max') or '10000'
  redis.call('XADD', KEYS[2], 'MAXLEN', '~', emax, '*', 'event', 'paused', 'id', '', 'group', group)
end
return changed
