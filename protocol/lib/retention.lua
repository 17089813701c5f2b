-- Retention: keep at most `keep` members of a terminal set and none older than `age` ms,
-- deleting their rows (and a parent's P job:<id>:results, :failures, :deps and :processed, a job's P job:<id>:logs) too. Bounded work per call: trims at most 1000 rows by count and
-- 100 by age, so a long backlog is trimmed over several calls, never in one long one.
-- The count is kept in batches: the set may run `trim_slack(keep)` over `keep` (a tenth, at
-- most 100; 0 below 10) before a call trims it back to `keep`, so a steady stream of single
-- completions pays the trim's calls (pop, DEL, the ids' window) once per batch, not per job.
-- The ids deleted stay known for the idempotency `window` (lib/idempotency.lua, embedded before).
local function trim_slack(keep)
  return math.min(100, math.floor(keep / 10))
end

-- `floor` (optional): a lower bound of the set's scores (a finish instant no member is older
-- than). Above now - age no member can be old, so the age probe is skipped; one above `now` is
-- no bound (the clock stepped back, and this call's members score below it). True when the
-- call looked at the set's oldest members (popped or probed), so the caller's floor is stale.
local function trim(p, set, keep, age, now, window, floor)
  local excess = redis.call('ZCARD', set) - keep
  local old = {}
  local looked = true
  if excess > trim_slack(keep) then
    old = redis.call('ZPOPMIN', set, math.min(excess, 1000)) -- member, score pairs, oldest first
  elseif age >= 0 and not (floor and floor > now - age and floor <= now) then
    old = redis.call('ZRANGEBYSCORE', set, '-inf', string.format('%d', now - age), 'WITHSCORES', 'LIMIT', '0', '100')
  else
    looked = false
  end
  if #old > 0 then
    local rows, ids, ended = {}, {}, {}
    for i = 1, #old, 2 do
      local id = old[i]
      local jk = p .. 'job:' .. id
      rows[#rows + 1], rows[#rows + 2], rows[#rows + 3], rows[#rows + 4] = jk, jk .. ':results', jk .. ':logs',
        jk .. ':failures'
      rows[#rows + 1], rows[#rows + 2] = jk .. ':deps', jk .. ':processed'
      ids[#ids + 1] = id
      ended[i], ended[i + 1] = old[i + 1], id
    end
    redis.call('DEL', unpack(rows))
    if excess <= trim_slack(keep) then redis.call('ZREM', set, unpack(ids)) end -- ZPOPMIN took them
    remember(p, ended, now, window)
  end
  return looked
end

-- trim with its floor kept in meta `field` (text, as HMGET read it; nil: none): a steady stream
-- of completions, whose oldest member is far younger than the age bound, pays no age probe per
-- call, only a ZRANGE and a meta write per trim. The floor is the oldest member's score after a
-- trim, so it stays a lower bound while members only join at the current instant (complete is
-- the set's one writer) and leave (retention, clean, remove).
local function trim_floored(p, set, keep, age, now, window, meta, field, floor)
  if not trim(p, set, keep, age, now, window, tonumber(floor)) then return end
  local head = redis.call('ZRANGE', set, '0', '0', 'WITHSCORES')
  if head[2] then
    if head[2] ~= floor then redis.call('HSET', meta, field, head[2]) end
  elseif floor then
    redis.call('HDEL', meta, field)
  end
end

-- A job's own retention, kept on its row as '<count>:<age_ms>' (retain_completed, retain_dead;
-- -1 = no such bound) and applied by the call that ends it: count 0 deletes the job at once
-- (it never stays in the set); otherwise the set is trimmed by these bounds too, beside the
-- queue's. An absent or malformed spec does nothing.
local function retain(p, set, id, spec, now, window)
  local count, age = string.match(spec or '', '^(%-?%d+):(%-?%d+)$')
  count, age = tonumber(count), tonumber(age)
  if not count or not age then return end
  if count == 0 then
    local jk = p .. 'job:' .. id
    redis.call('ZREM', set, id)
    redis.call('DEL', jk, jk .. ':results', jk .. ':logs', jk .. ':failures', jk .. ':deps', jk .. ':processed')
    remember(p, { now, id }, now, window)
    return
  end
  if count > 0 then trim(p, set, count, -1, now, window) end
  if age >= 0 then trim(p, set, 9007199254740991, age, now, window) end
end
