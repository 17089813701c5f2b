-- sweep_stalled: the count-thresholded stalled check: recover expired leases, counting each
-- recovery on the row, and dead-letter a job once its count passes max_stalled.
-- KEYS: active pending dead events wake meta ring cancelled
-- ARGV: prefix max_stalled batch
-- REPLY: {{recovered ids}, {dead ids}}
-- ERRORS: none
-- EVENTS: stalled (id) per recovered job; failed (id, reason stalled) per dead one;
--   failed (id, reason cancelled) when a cancel was requested
-- >>> lib/lanes.lua
-- Lanes: a grouped job waits in P g:<group>:pending; the ring (a zset scored by a turn
-- sequence) holds the groups that can be served now, oldest turn first.
local function lane_key(p, group)
  return p .. 'g:' .. group .. ':pending'
end

-- Put the group at the ring's tail when it has a free slot and is not paused.
-- True when the ring went from empty to non-empty (parked consumers need a wake).
local function ring_offer(p, K, group, running)
  local c = redis.call('HMGET', p .. 'lanes:concurrency', group, '*')
  local limit = tonumber(c[1] or c[2] or '0')
  if limit > 0 and running >= limit then return false end
  if redis.call('SISMEMBER', p .. 'lanes:paused', group) == 1 then return false end
  local seq = redis.call('HINCRBY', K.meta, 'ring_seq', 1)
  return redis.call('ZADD', K.ring, 'NX', seq, group) == 1 and redis.call('ZCARD', K.ring) == 1
end

-- Release a job into claimable work: its lane (and the ring), or flat pending, by priority.
-- True when claimable work went from none to some.
local function release(p, K, id, group, prio)
  if group then
    redis.call('ZADD', lane_key(p, group), prio, id)
    redis.call('SADD', p .. 'lanes', group) -- the registry of groups, for counts and tools
    return ring_offer(p, K, group, tonumber(redis.call('HGET', p .. 'lanes:running', group) or '0'))
  end
  redis.call('ZADD', K.pending, prio, id)
  return redis.call('ZCARD', K.pending) == 1
end

-- A grouped job left active: free its slot (callers guarantee once per claim), and re-wake
-- the ring for the lane when it still has jobs.
local function lane_done(p, K, group)
  local running = redis.call('HINCRBY', p .. 'lanes:running', group, -1)
  if running <= 0 then
    redis.call('HDEL', p .. 'lanes:running', group)
    running = 0
  end
  if redis.call('ZCARD', lane_key(p, group)) > 0 then return ring_offer(p, K, group, running) end
  return false
end

-- One entry on the wake stream: every consumer blocked on it returns and claims.
local function wake(K)
  redis.call('XADD', K.wake, 'MAXLEN', '1', '*', 'w', '1')
end
-- <<< lib/lanes.lua
-- >>> lib/recover.lua
-- Recover expired leases (shared by reap and sweep_stalled): each active member whose lease
-- deadline has passed leaves active; a cancel request ends it cancelled; otherwise its
-- `stalled` count goes up and it returns to claimable work, unless max_stalled is given and
-- the count passes it, when it is dead-lettered. Ghosts leave active and are not resurrected.
local function recover(p, K, batch, now, emax, max_stalled)
  local recovered, dead, woke = {}, {}, false
  local expired = redis.call('ZRANGEBYSCORE', K.active, '-inf', now, 'LIMIT', 0, batch)
  for _, id in ipairs(expired) do
    redis.call('ZREM', K.active, id)
    local jk = p .. 'job:' .. id
    local row = redis.call('HMGET', jk, 'state', 'group', 'prio', 'cancel')
    if row[1] == 'active' then
      if row[2] and lane_done(p, K, row[2]) then woke = true end
      local stalled = redis.call('HINCRBY', jk, 'stalled', 1)
      if row[4] == '1' then
        redis.call('HSET', jk, 'state', 'cancelled', 'finished', now)
        redis.call('ZADD', K.cancelled, now, id)
        redis.call('XADD', K.events, 'MAXLEN', '~', emax, '*', 'event', 'failed', 'id', id, 'reason', 'cancelled')
      elseif max_stalled and stalled > max_stalled then
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
    end
  end
  if woke then wake(K) end
  return recovered, dead
end
-- <<< lib/recover.lua
local K = { active = KEYS[1], pending = KEYS[2], dead = KEYS[3], events = KEYS[4], wake = KEYS[5],
  meta = KEYS[6], ring = KEYS[7], cancelled = KEYS[8] }
local t = redis.call('TIME')
local now = t[1] * 1000 + math.floor(t[2] / 1000)
local emax = redis.call('HGET', K.meta, 'events_max') or '10000'
local recovered, dead = recover(ARGV[1], K, tonumber(ARGV[3]), now, emax, tonumber(ARGV[2]))
return { recovered, dead }
