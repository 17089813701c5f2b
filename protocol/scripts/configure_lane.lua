-- configure_lane: set a lane's concurrency and rate limit, or the default for every lane.
-- KEYS: meta ring wake
-- ARGV: prefix group concurrency rate
--   group: the lane, or '*' for the default of lanes without their own setting;
--   concurrency: jobs of the lane running at once across all consumers, '0' = unlimited,
--   '' = leave as is, '-' = remove the setting; rate: 'max:per_ms' (at most max claims in any
--   per_ms window), '' = leave as is, '-' = remove
-- REPLY: 1
-- ERRORS: EMQINPUT a malformed concurrency or rate
-- EVENTS: none
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
-- True when claimable work went from none to some. `bulk_flat`: a caller releasing many flat
-- jobs checks pending's emptiness once itself, so no ZCARD per job.
local function release(p, K, id, group, prio, bulk_flat)
  if group then
    redis.call('ZADD', lane_key(p, group), prio, id)
    redis.call('SADD', p .. 'lanes', group) -- the registry of groups, for counts and tools
    return ring_offer(p, K, group, tonumber(redis.call('HGET', p .. 'lanes:running', group) or '0'))
  end
  redis.call('ZADD', K.pending, prio, id)
  if bulk_flat then return false end
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

-- A job left active (complete, fail, recovery, handback, snooze, rate_limit): free its lane
-- slot and, when its claim took a queue-wide slot (row field `slot` = 1, written by a claim
-- under meta `concurrency`), that slot: meta `running` - 1 (removed at 0) and the row's mark
-- removed, so a slot is given back once per claim (callers are fenced by the lease token).
-- True when that made claimable work appear: a freed lane offered to an empty ring, or a
-- queue that was at its cap (parked consumers claim again; spurious when nothing waits).
local function left_active(p, K, jk, group, slot)
  local woke = false
  if slot == '1' then
    redis.call('HDEL', jk, 'slot')
    local running = redis.call('HINCRBY', K.meta, 'running', -1)
    if running <= 0 then redis.call('HDEL', K.meta, 'running') end
    local cap = tonumber(redis.call('HGET', K.meta, 'concurrency') or '0') or 0
    woke = cap > 0 and running + 1 >= cap
  end
  if group and lane_done(p, K, group) then woke = true end
  return woke
end

-- One entry on the wake stream: every consumer blocked on it returns and claims. Entries are
-- 'w' '1' (claimable work appeared) or 'w' 's' (the schedule's earliest run-at moved); the
-- stream keeps ~100 so a consumer reading after its last id sees every kind since.
local function wake(K)
  redis.call('XADD', K.wake, 'MAXLEN', '~', '100', '*', 'w', '1')
end
-- <<< lib/lanes.lua
-- >>> lib/args.lua
-- Argument checks, made before anything is read or written: malformed ARGV (too few
-- arguments, a number that is not a whole number in range) is refused with an EMQINPUT error
-- reply, never left to fail halfway through with a Lua runtime error.
-- The whole number a decimal text stands for when it lies in [min, max] (max default 2^53 - 1),
-- else nil: floats, exponents, hex, 'nan' and 'inf' are refused.
local function whole(v, min, max)
  if type(v) ~= 'string' or #v > 17 or not string.match(v, '^%-?%d+$') then return nil end
  local n = v + 0 -- the text is digits: one conversion (tonumber converts twice)
  if n < min or n > (max or 9007199254740991) then return nil end
  return n
end

local function refuse(script, expects)
  return redis.error_reply('EMQINPUT ' .. script .. ' takes ' .. expects)
end
-- <<< lib/args.lua
if #ARGV < 4 then return refuse('configure_lane', 'prefix group concurrency rate') end
local p, group, conc, rate = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
local K = { meta = KEYS[1], ring = KEYS[2], wake = KEYS[3] }
if conc ~= '' and conc ~= '-' and not string.match(conc, '^%d+$') then
  return redis.error_reply('EMQINPUT concurrency must be a whole number >= 0')
end
if rate ~= '' and rate ~= '-' and not string.match(rate, '^[1-9]%d*:[1-9]%d*$') then
  return redis.error_reply('EMQINPUT rate must be max:per_ms with both >= 1')
end
if conc == '-' then redis.call('HDEL', p .. 'lanes:concurrency', group)
elseif conc ~= '' then redis.call('HSET', p .. 'lanes:concurrency', group, conc) end
if rate == '-' then redis.call('HDEL', p .. 'lanes:rate', group)
elseif rate ~= '' then redis.call('HSET', p .. 'lanes:rate', group, rate) end
-- A raised limit may make waiting lanes servable now: offer them to the ring.
local groups = group == '*' and redis.call('SMEMBERS', p .. 'lanes') or { group }
local woke = false
for _, g in ipairs(groups) do
  if redis.call('ZCARD', lane_key(p, g)) > 0 and
      ring_offer(p, K, g, tonumber(redis.call('HGET', p .. 'lanes:running', g) or '0')) then
    woke = true
  end
end
if woke then wake(K) end
return 1
