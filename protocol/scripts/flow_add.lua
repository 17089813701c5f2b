-- flow_add: admit a flow at once: a parent waiting for its children (state waiting_children)
-- and the children, nested to any depth; every leaf is claimable at once, each parent is
-- released when its last child completes (lib/flow.lua). One queue holds the whole flow.
-- KEYS: pending events wake meta ring
-- ARGV: prefix, then one 9-tuple per job, each parent before its children: id payload priority
--   group name max backoff parent continue
--   parent: '' for the first tuple (the root), else the id of an earlier tuple; continue: '1'
--   when the job runs even if a child of it fails (else a failed child fails it), 'ignore' when
--   it also records the failure (P job:<id>:failures), '' otherwise;
--   the other fields as in enqueue
-- REPLY: 1 admitted, 0 duplicate (the root's id exists; nothing written)
-- ERRORS: EMQKIND any id not JOB-namespaced; EMQINPUT a malformed tuple list (a parent that is
--   not an earlier tuple, a repeated id); EMQSTATE the id of a job other than the root exists
--   already (a job is in one flow only). Nothing at all is written on an error.
-- EVENTS: waiting_children (id, name) per parent, added (id, name) per leaf
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
-- >>> lib/idempotency.lua
-- The idempotency window: ids of ended jobs stay known for `keep_ids_ms` (meta, default a day)
-- after they ended, also once retention or clean deleted their rows, so a producer retrying an
-- enqueue after a timeout gets `duplicate` instead of running the job twice. What is kept is
-- only the id, scored by its end instant, in P ids:ended (a zset: no row, no payload).
local IDS_ENDED = 'ids:ended'

-- The window in ms from meta's keep_ids_ms text (absent: a day; 0: ids are not kept).
local function ids_window(v)
  return tonumber(v or '86400000') or 86400000
end

-- Rows are being deleted: remember `pairs` (end instant, id, ...) of those that ended within
-- the window, and forget the ids whose window has passed. The key expires a window after its
-- last write, so an idle queue keeps none.
local function remember(p, pairs, now, window)
  if window <= 0 or #pairs == 0 then return end
  local key = p .. IDS_ENDED
  for i = 1, #pairs, 4000 do
    redis.call('ZADD', key, unpack(pairs, i, math.min(i + 3999, #pairs)))
  end
  redis.call('ZREMRANGEBYSCORE', key, '-inf', '(' .. string.format('%.0f', now - window))
  redis.call('PEXPIRE', key, window)
end

-- The ids among `ids` (a list) that ended within the window: a set id -> true. One call for
-- the list: a single id is looked up at once (ZMSCORE on an absent key answers nil), several
-- only when the key exists (one EXISTS spares a long ZMSCORE when nothing is remembered).
local function remembered(p, ids, now, window)
  local known = {}
  if window <= 0 or #ids == 0 or (#ids > 1 and redis.call('EXISTS', p .. IDS_ENDED) == 0) then return known end
  local scores = redis.call('ZMSCORE', p .. IDS_ENDED, unpack(ids))
  for i, score in ipairs(scores) do
    if score and tonumber(score) >= now - window then known[ids[i]] = true end
  end
  return known
end
-- <<< lib/idempotency.lua
-- >>> lib/args.lua
-- Argument checks, made before anything is read or written: malformed ARGV (too few
-- arguments, a number that is not a whole number in range) is refused with an EMQINPUT error
-- reply, never left to fail halfway through with a Lua runtime error.
-- The whole number a decimal text stands for when it lies in [min, max] (max default 2^53 - 1),
-- else nil: floats, exponents, hex, 'nan' and 'inf' are refused.
local function whole(v, min, max)
  if type(v) ~= 'string' or #v > 17 or not string.match(v, '^%-?%d+$') then return nil end
  local n = tonumber(v)
  if n < min or n > (max or 9007199254740991) then return nil end
  return n
end

local function refuse(script, expects)
  return redis.error_reply('EMQINPUT ' .. script .. ' takes ' .. expects)
end
-- <<< lib/args.lua
local p = ARGV[1]
local K = { pending = KEYS[1], events = KEYS[2], wake = KEYS[3], meta = KEYS[4], ring = KEYS[5] }
local W = 9
if #ARGV < 1 + W or (#ARGV - 1) % W ~= 0 then
  return redis.error_reply('EMQINPUT flow_add takes the prefix, then 9 fields per job')
end
local n = (#ARGV - 1) / W
local children = {}
for i = 0, n - 1 do
  local b = 2 + i * W
  local id, parent = ARGV[b], ARGV[b + 7]
  if string.sub(id, 1, 3) ~= 'JOB' then return redis.error_reply('EMQKIND job id must be JOB-namespaced') end
  if children[id] then return redis.error_reply('EMQINPUT job ' .. id .. ' appears twice in the flow') end
  if not whole(ARGV[b + 2], 0) or (ARGV[b + 5] ~= '' and not whole(ARGV[b + 5], 1)) then
    return refuse('flow_add', 'a priority that is a whole number >= 0 and a max that is empty or >= 1')
  end
  if (i == 0) ~= (parent == '') or (i > 0 and not children[parent]) then
    return redis.error_reply('EMQINPUT the first job is the root; every other names an earlier one as parent')
  end
  children[id] = 0
  if parent ~= '' then children[parent] = children[parent] + 1 end
end
if redis.call('EXISTS', p .. 'job:' .. ARGV[2]) == 1 then return 0 end
for i = 1, n - 1 do
  if redis.call('EXISTS', p .. 'job:' .. ARGV[2 + i * W]) == 1 then
    return redis.error_reply('EMQSTATE job ' .. ARGV[2 + i * W] .. ' exists already: a job is in one flow only')
  end
end
local t = redis.call('TIME')
local now = t[1] * 1000 + math.floor(t[2] / 1000)
local m = redis.call('HMGET', K.meta, 'events_max', 'keep_ids_ms')
local emax = m[1] or '10000'
-- A root that ended within the idempotency window (its row deleted since) is a duplicate too.
if remembered(p, { ARGV[2] }, now, ids_window(m[2]))[ARGV[2]] then return 0 end
local woke = false
for i = 0, n - 1 do
  local b = 2 + i * W
  local id, prio, group, name, parent = ARGV[b], ARGV[b + 2], ARGV[b + 3], ARGV[b + 4], ARGV[b + 7]
  local jk = p .. 'job:' .. id
  local waiting = children[id] > 0
  redis.call('HSET', jk, 'state', waiting and 'waiting_children' or 'pending', 'payload', ARGV[b + 1],
    'created', now)
  if prio ~= '0' then redis.call('HSET', jk, 'prio', prio) end
  if group ~= '' then redis.call('HSET', jk, 'group', group) else group = nil end
  if name ~= '' then redis.call('HSET', jk, 'name', name) end
  if ARGV[b + 5] ~= '' then redis.call('HSET', jk, 'max', ARGV[b + 5]) end
  if ARGV[b + 6] ~= '' then redis.call('HSET', jk, 'backoff', ARGV[b + 6]) end
  if parent ~= '' then redis.call('HSET', jk, 'parent', parent) end
  if waiting then
    redis.call('HSET', jk, 'children', children[id])
    if ARGV[b + 8] == '1' or ARGV[b + 8] == 'ignore' then redis.call('HSET', jk, 'continue', ARGV[b + 8]) end
    redis.call('ZADD', p .. 'waiting_children', now, id)
    redis.call('XADD', K.events, 'MAXLEN', '~', emax, '*', 'event', 'waiting_children', 'id', id, 'name', name)
  else
    if release(p, K, id, group, prio) then woke = true end
    redis.call('XADD', K.events, 'MAXLEN', '~', emax, '*', 'event', 'added', 'id', id, 'name', name)
  end
end
if woke then wake(K) end
return 1
