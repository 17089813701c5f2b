-- cancel: end a waiting job at once, or ask a running one to stop.
-- KEYS: job schedule pending cancelled events meta
-- ARGV: prefix id
-- REPLY: 'cancelled' (it was scheduled or pending: now cancelled), 'requested' (it is active:
--   the next lease checkpoint reports the request; the job ends cancelled when its handler
--   gives up, or when its lease is recovered)
-- ERRORS: EMQNOJOB no such row; EMQSTATE it already ended (completed, dead or cancelled)
-- EVENTS: failed (id, reason cancelled) when cancelled at once; none for a request
-- >>> lib/retention.lua
-- Retention: keep at most `keep` members of a terminal set and none older than `age` ms,
-- deleting their rows too. Bounded work per call: trims at most 1000 rows by count and
-- 100 by age, so a long backlog is trimmed over several calls, never in one long one.
local function trim(p, set, keep, age, now)
  local excess = redis.call('ZCARD', set) - keep
  local old = {}
  if excess > 0 then
    old = redis.call('ZRANGE', set, 0, math.min(excess, 1000) - 1)
  elseif age >= 0 then
    old = redis.call('ZRANGEBYSCORE', set, '-inf', now - age, 'LIMIT', 0, 100)
  end
  if #old > 0 then
    local rows = {}
    for i, id in ipairs(old) do rows[i] = p .. 'job:' .. id end
    redis.call('DEL', unpack(rows))
    redis.call('ZREM', set, unpack(old))
  end
end
-- <<< lib/retention.lua
local p, id = ARGV[1], ARGV[2]
local row = redis.call('HMGET', KEYS[1], 'state', 'group')
local state = row[1]
if not state then return redis.error_reply('EMQNOJOB no job ' .. id) end
if state == 'active' then
  redis.call('HSET', KEYS[1], 'cancel', '1')
  return 'requested'
end
if state == 'scheduled' then
  redis.call('ZREM', KEYS[2], id)
elseif state == 'pending' then
  -- A lane left empty stays in the ring until claim pops it and finds nothing.
  redis.call('ZREM', row[2] and (p .. 'g:' .. row[2] .. ':pending') or KEYS[3], id)
else
  return redis.error_reply('EMQSTATE job ' .. id .. ' already ended ' .. state)
end
local t = redis.call('TIME')
local now = t[1] * 1000 + math.floor(t[2] / 1000)
redis.call('HSET', KEYS[1], 'state', 'cancelled', 'finished', now)
redis.call('ZADD', KEYS[4], now, id)
local s = redis.call('HMGET', KEYS[6], 'events_max', 'keep_dead', 'keep_dead_ms')
local emax = s[1] or '10000'
trim(p, KEYS[4], tonumber(s[2] or '10000'), tonumber(s[3] or '604800000'), now)
redis.call('XADD', KEYS[5], 'MAXLEN', '~', emax, '*', 'event', 'failed', 'id', id, 'reason', 'cancelled')
return 'cancelled'
