-- fail: record a failed attempt, fenced by lease token, and retry, dead-letter or cancel it.
-- KEYS: job active schedule dead cancelled events wake meta ring pending
-- ARGV: prefix id token message stack delay_ms
--   message, stack: the error (already size-limited by the caller; stack '' for none);
--   delay_ms: the retry delay computed above the wire by Backoff; '-1' = never retry
--   (an unrecoverable error). The retry runs at server now + delay_ms.
-- REPLY: 'retry' (scheduled, or pending when delay_ms is 0), 'dead' (no attempts left, or
--   never retry), 'cancelled' (a cancel was requested while it ran)
-- ERRORS: EMQNOJOB no such row; EMQLEASE the token is not the job's or the job is not active
--   (nothing changes)
-- EVENTS: failed (id, attempt, reason) then delayed (id, at) | waiting (id) |
--   retries_exhausted (id, attempt); a cancelled job: failed (id, reason cancelled) only.
--   Counts failures per minute in stats:<epoch minute> (hash field failed, kept 2 hours).
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
local K = { job = KEYS[1], active = KEYS[2], schedule = KEYS[3], dead = KEYS[4], cancelled = KEYS[5],
  events = KEYS[6], wake = KEYS[7], meta = KEYS[8], ring = KEYS[9], pending = KEYS[10] }
local row = redis.call('HMGET', K.job, 'state', 'token', 'attempts', 'max', 'group', 'cancel', 'prio')
if not row[1] then return redis.error_reply('EMQNOJOB no job ' .. id) end
if row[1] ~= 'active' or row[2] ~= ARGV[3] then
  return redis.error_reply('EMQLEASE lease token is stale: the job was recovered or finished elsewhere')
end
local t = redis.call('TIME')
local now = t[1] * 1000 + math.floor(t[2] / 1000)
local s = redis.call('HMGET', K.meta, 'events_max', 'keep_dead', 'keep_dead_ms')
local emax = s[1] or '10000'
local woke = false
redis.call('ZREM', K.active, id)
if row[5] and lane_done(p, K, row[5]) then woke = true end
local stats = p .. 'stats:' .. math.floor(now / 60000) -- per-minute failures, for tools
redis.call('HINCRBY', stats, 'failed', 1)
redis.call('PEXPIRE', stats, 7200000)
redis.call('HSET', K.job, 'error', ARGV[4])
if ARGV[5] ~= '' then redis.call('HSET', K.job, 'stack', ARGV[5]) else redis.call('HDEL', K.job, 'stack') end
local attempts, max, delay = tonumber(row[3]), tonumber(row[4] or '1'), tonumber(ARGV[6])
local reply
if row[6] == '1' then
  redis.call('HSET', K.job, 'state', 'cancelled', 'finished', now)
  redis.call('ZADD', K.cancelled, now, id)
  redis.call('XADD', K.events, 'MAXLEN', '~', emax, '*', 'event', 'failed', 'id', id, 'attempt', attempts,
    'reason', 'cancelled')
  trim(p, K.cancelled, tonumber(s[2] or '10000'), tonumber(s[3] or '604800000'), now)
  reply = 'cancelled'
elseif delay < 0 or attempts >= max then
  redis.call('HSET', K.job, 'state', 'dead', 'finished', now)
  redis.call('ZADD', K.dead, now, id)
  redis.call('XADD', K.events, 'MAXLEN', '~', emax, '*', 'event', 'failed', 'id', id, 'attempt', attempts,
    'reason', delay < 0 and 'unrecoverable' or 'error')
  redis.call('XADD', K.events, 'MAXLEN', '~', emax, '*', 'event', 'retries_exhausted', 'id', id,
    'attempt', attempts)
  trim(p, K.dead, tonumber(s[2] or '10000'), tonumber(s[3] or '604800000'), now)
  reply = 'dead'
else
  redis.call('XADD', K.events, 'MAXLEN', '~', emax, '*', 'event', 'failed', 'id', id, 'attempt', attempts,
    'reason', 'error')
  if delay == 0 then
    redis.call('HSET', K.job, 'state', 'pending')
    if release(p, K, id, row[5], row[7] or '0') then woke = true end
    redis.call('XADD', K.events, 'MAXLEN', '~', emax, '*', 'event', 'waiting', 'id', id)
  else
    redis.call('HSET', K.job, 'state', 'scheduled', 'runat', now + delay)
    redis.call('ZADD', K.schedule, now + delay, id)
    redis.call('XADD', K.events, 'MAXLEN', '~', emax, '*', 'event', 'delayed', 'id', id, 'at', now + delay)
    -- A new earliest run-at moves parked consumers' due timers.
    if redis.call('ZRANGE', K.schedule, 0, 0)[1] == id then woke = true end
  end
  reply = 'retry'
end
if woke then wake(K) end
return reply
