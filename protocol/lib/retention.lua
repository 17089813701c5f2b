-- Retention: keep at most `keep` members of a terminal set and none older than `age` ms,
-- deleting their rows (and a parent's P job:<id>:results) too. Bounded work per call: trims at most 1000 rows by count and
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
    for i, id in ipairs(old) do
      rows[2 * i - 1], rows[2 * i] = p .. 'job:' .. id, p .. 'job:' .. id .. ':results'
    end
    redis.call('DEL', unpack(rows))
    redis.call('ZREM', set, unpack(old))
  end
end
