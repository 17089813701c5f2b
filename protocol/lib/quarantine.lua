-- Taking a malformed row out of circulation (lib/rows.lua says what is malformed). Needs
-- lib/rows.lua, lib/lanes.lua, lib/dedupe.lua and lib/flow.lua embedded before this block.
-- The set each state's id lives in (a grouped pending job: its lane, see rehome).
local STATE_SET = { scheduled = 'schedule', pending = 'pending', active = 'active',
  waiting_children = 'waiting_children', completed = 'completed', dead = 'dead', cancelled = 'cancelled' }

-- Dead-letter job `id` because its field `field` holds `value`: state dead, `finished`, an
-- `error` that starts EMQDATA and names the field, on `dead`, event failed (reason data,
-- field). Its dedupe lock is freed and its flow parent told, as for any job that ends dead.
-- The caller has taken the id off the set it was found in (and freed a lane slot it held).
-- True when that made claimable work appear (the caller wakes).
local function quarantine(p, K, id, field, value, now, emax)
  local jk = p .. 'job:' .. id
  local shown = string.sub(value, 1, 40) .. (#value > 40 and '…' or '')
  redis.call('HSET', jk, 'state', 'dead', 'finished', now, 'error', 'EMQDATA job ' .. id .. ': its field '
    .. field .. " holds '" .. shown .. "', which no script writes; it was dead-lettered: correct or remove "
    .. 'the field, then retry the job')
  redis.call('ZADD', p .. 'dead', now, id)
  redis.call('XADD', K.events, 'MAXLEN', '~', emax, '*', 'event', 'failed', 'id', id, 'reason', 'data',
    'field', field)
  local r = redis.call('HMGET', jk, 'dedupe', 'parent')
  if r[1] then dedupe_release(p, r[1], id) end
  return r[2] and child_ended(p, K, r[2], id, 'dead', '', now, emax) or false
end

-- A row found in a set its state does not name (its id was popped off that set): when the
-- set its state names does not hold it, put it there, so no row is left in no set. An active
-- row goes in with deadline now (recovery returns it); a pending one is released (its prio
-- checked first); an unknown state is bad data. Ghosts (no state) only leave. True on a wake.
local function rehome(p, K, id, state, now, emax)
  if not state then return false end
  local set = STATE_SET[state]
  if not set then return quarantine(p, K, id, 'state', state, now, emax) end
  local jk = p .. 'job:' .. id
  local r = redis.call('HMGET', jk, 'group', 'prio', 'runat', 'finished')
  if state == 'pending' and r[1] then set = lane_key(p, r[1]) else set = p .. set end
  if redis.call('ZSCORE', set, id) then return false end
  if state == 'pending' then
    if not whole_text(r[2]) then return quarantine(p, K, id, 'prio', r[2], now, emax) end
    return release(p, K, id, r[1], r[2] or '0')
  end
  local score = now
  if state == 'scheduled' and whole_text(r[3]) and r[3] then score = r[3] end
  if (state == 'completed' or state == 'dead' or state == 'cancelled') and whole_text(r[4]) and r[4] then
    score = r[4]
  end
  redis.call('ZADD', set, score, id)
  return false
end
