-- enqueue: admit jobs into pending (flat) or their group's lane, idempotent on the id.
-- KEYS: pending events wake meta ring
-- ARGV: prefix, then one 7-tuple per job: id payload priority group name max backoff
--   priority: an integer >= 0 (0 = none; lower runs first, none before any)
--   group: '' or the lane name; name, max (attempts allowed), backoff (JSON): '' when absent
-- REPLY: one integer per job: 1 enqueued, 0 duplicate (the id exists; nothing written)
-- ERRORS: EMQKIND when any id is not JOB-namespaced (then nothing at all is written)
-- EVENTS: added (id, name) per enqueued job
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
local p = ARGV[1]
local K = { pending = KEYS[1], events = KEYS[2], wake = KEYS[3], meta = KEYS[4], ring = KEYS[5] }
local n = (#ARGV - 1) / 7
for i = 0, n - 1 do
  if string.sub(ARGV[2 + i * 7], 1, 3) ~= 'JOB' then
    return redis.error_reply('EMQKIND job id must be JOB-namespaced')
  end
end
local t = redis.call('TIME')
local now = t[1] * 1000 + math.floor(t[2] / 1000)
local emax = redis.call('HGET', K.meta, 'events_max') or '10000'
local woke = false
local out = {}
for i = 0, n - 1 do
  local b = 2 + i * 7
  local id, prio, group, name = ARGV[b], ARGV[b + 2], ARGV[b + 3], ARGV[b + 4]
  local jk = p .. 'job:' .. id
  if redis.call('EXISTS', jk) == 1 then
    out[i + 1] = 0
  else
    -- attempts is left out until the first claim (absent = 0): a smaller row per waiting job
    redis.call('HSET', jk, 'state', 'pending', 'payload', ARGV[b + 1], 'created', now)
    if prio ~= '0' then redis.call('HSET', jk, 'prio', prio) end
    if group ~= '' then redis.call('HSET', jk, 'group', group) else group = nil end
    if name ~= '' then redis.call('HSET', jk, 'name', name) end
    if ARGV[b + 5] ~= '' then redis.call('HSET', jk, 'max', ARGV[b + 5]) end
    if ARGV[b + 6] ~= '' then redis.call('HSET', jk, 'backoff', ARGV[b + 6]) end
    if release(p, K, id, group, prio) then woke = true end
    redis.call('XADD', K.events, 'MAXLEN', '~', emax, '*', 'event', 'added', 'id', id, 'name', name)
    out[i + 1] = 1
  end
end
-- Wake parked consumers only when claimable work went from none to some: a consumer parks
-- only after a claim came back short, so while work is waiting nobody is parked.
if woke then wake(K) end
return out
