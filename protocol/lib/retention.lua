-- Retention: keep at most `keep` members of a terminal set and none older than `age` ms,
-- deleting their rows (and a parent's P job:<id>:results, a job's P job:<id>:logs) too. Bounded work per call: trims at most 1000 rows by count and
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
      local jk = p .. 'job:' .. id
      rows[3 * i - 2], rows[3 * i - 1], rows[3 * i] = jk, jk .. ':results', jk .. ':logs'
    end
    redis.call('DEL', unpack(rows))
    redis.call('ZREM', set, unpack(old))
  end
end
