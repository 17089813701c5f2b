-- Recover expired leases (shared by reap and sweep_stalled): each active member whose lease
-- deadline has passed leaves active; a cancel request ends it cancelled; otherwise its
-- `stalled` count goes up and it returns to claimable work, unless max_stalled is given and
-- the count passes it, when it is dead-lettered. Ghosts leave active and are not resurrected;
-- a row in another state goes to its own set when that lacks it, and one whose stalled or
-- prio is not a whole number (or whose state is unknown) is dead-lettered as EMQDATA, unlisted.
-- A job that ends here frees its dedupe lock and tells its parent (needs lib/dedupe.lua and
-- lib/flow.lua embedded before this block).
local RECOVER_NUMBERS = { 'stalled', 7, counter_text, 'prio', 3, whole_text }
local function recover(p, K, batch, now, emax, max_stalled)
  local recovered, dead, woke = {}, {}, false
  local expired = redis.call('ZRANGEBYSCORE', K.active, '-inf', now, 'LIMIT', 0, batch)
  for _, id in ipairs(expired) do
    redis.call('ZREM', K.active, id)
    local jk = p .. 'job:' .. id
    local row = redis.call('HMGET', jk, 'state', 'group', 'prio', 'cancel', 'dedupe', 'parent', 'stalled', 'slot')
    local field, value = bad_number(row, RECOVER_NUMBERS)
    if row[1] ~= 'active' then
      if rehome(p, K, id, row[1], now, emax) then woke = true end
    elseif field then
      if left_active(p, K, jk, row[2], row[8]) then woke = true end
      if quarantine(p, K, id, field, value, now, emax) then woke = true end
    else
      if left_active(p, K, jk, row[2], row[8]) then woke = true end
      local stalled = redis.call('HINCRBY', jk, 'stalled', 1)
      local ended = nil
      if row[4] == '1' then
        ended = 'cancelled'
        redis.call('HSET', jk, 'state', 'cancelled', 'finished', now)
        redis.call('ZADD', K.cancelled, now, id)
        redis.call('XADD', K.events, 'MAXLEN', '~', emax, '*', 'event', 'failed', 'id', id, 'reason', 'cancelled')
      elseif max_stalled and stalled > max_stalled then
        ended = 'dead'
        redis.call('HSET', jk, 'state', 'dead', 'finished', now,
          'error', 'job stalled more than max_stalled (' .. max_stalled .. ') times')
        redis.call('ZADD', K.dead, now, id)
        redis.call('XADD', K.events, 'MAXLEN', '~', emax, '*', 'event', 'failed', 'id', id, 'reason', 'stalled')
        dead[#dead + 1] = id
      else
        redis.call('HSET', jk, 'state', 'pending')
        if release(p, K, id, row[2], row[3] or '0') then woke = true end
        redis.call('XADD', K.events, 'MAXLEN', '~', emax, '*', 'event', 'stalled', 'id', id)
        recovered[#recovered + 1] = id
      end
      if ended then
        if row[5] then dedupe_release(p, row[5], id) end
        if row[6] and child_ended(p, K, row[6], id, ended, '', now, emax) then woke = true end
      end
    end
  end
  if woke then wake(K) end
  return recovered, dead
end
