-- retry: return dead, cancelled or completed jobs to claimable work, their attempts reset to 0.
-- KEYS: dead cancelled pending events wake meta ring
-- ARGV: prefix, then the ids to retry (one call takes a batch the caller chose, e.g. 500)
-- REPLY: one status per id: 'OK' (now pending, in its lane when it has a group, with attempts
--   0; its error moved to last_error and last_stack), 'EMQNOJOB' (no such row; a member of
--   dead, cancelled or completed without a row leaves the set), 'EMQSTATE' (the job has not
--   ended: nothing changes for it), 'EMQDATA' (its prio, token or max is not a whole number:
--   it could not run; nothing changes for it until the field is corrected)
-- ERRORS: none (a job in another state is a per-job status, so one stale id does not fail a batch)
-- EVENTS: waiting (id) per retried job
-- >>> lib/rows.lua
-- Bad data: a row field that a script computes with (a number) or dispatches on (the state),
-- holding what no script writes (a hand edit, a foreign tool, a half-migrated store). Every
-- script checks the fields it relies on before its first write to the row, so a malformed
-- row never makes a script fail halfway (Redis keeps the writes before a Lua error): it is
-- taken out of circulation (lib/quarantine.lua) and the call goes on with the other jobs.
-- The number a field's text stands for (tonumber's), or `absent` when the field is absent
-- (HMGET's false): most meta and row fields a hot script reads are absent, and tonumber of a
-- text runs strtod twice (its check, then its value), about 800 instructions a field.
local function num(v, absent)
  if not v then return absent end
  return tonumber(v)
end

-- True when `v` is absent (HMGET's false) or decimal text of a whole number: what the ARGV
-- checks admit for prio and max, and what tonumber reads exactly.
local function whole_text(v)
  return not v or (#v <= 17 and string.find(v, '^%-?%d+$') ~= nil)
end

-- True when `v` is absent or an integer as Redis writes one (what HINCRBY takes: no leading
-- zero, no '-0'), for the counters the scripts HINCRBY: attempts in handback, stalled, children.
local function counter_text(v)
  return not v or v == '0' or (#v <= 17 and string.find(v, '^%-?[1-9]%d*$') ~= nil)
end

-- The first of `fields` (name, position in `row`, check triples) whose value fails its check:
-- its name and value, or nil when the row's numbers are sound.
local function bad_number(row, fields)
  for i = 1, #fields, 3 do
    local v = row[fields[i + 1]]
    if not fields[i + 2](v) then return fields[i], v end
  end
  return nil
end
-- <<< lib/rows.lua
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
if #ARGV < 1 then return refuse('retry', 'prefix, then ids') end
local p = ARGV[1]
-- completed is derived (a reprocess is an operator's rare action; the KEYS stay as they were).
local K = { dead = KEYS[1], cancelled = KEYS[2], pending = KEYS[3], events = KEYS[4], wake = KEYS[5],
  meta = KEYS[6], ring = KEYS[7], completed = p .. 'completed' }
local emax = redis.call('HGET', K.meta, 'events_max') or '10000'
local out, woke = {}, false
for i = 2, #ARGV do
  local id = ARGV[i]
  local jk = p .. 'job:' .. id
  local row = redis.call('HMGET', jk, 'state', 'group', 'prio', 'error', 'stack', 'token', 'max')
  local state = row[1]
  local ended = state == 'dead' or state == 'cancelled' or state == 'completed'
  if ended and bad_number(row, { 'prio', 3, whole_text, 'token', 6, whole_text, 'max', 7, whole_text }) then
    out[i - 1] = 'EMQDATA'
  elseif ended then
    redis.call('ZREM', K[state], id)
    -- The token stays: claim increments it, so a lease from the old run stays stale.
    redis.call('HDEL', jk, 'error', 'stack', 'finished', 'started', 'cancel', 'stalled', 'progress', 'result')
    redis.call('HSET', jk, 'state', 'pending', 'attempts', '0')
    if row[4] then
      redis.call('HSET', jk, 'last_error', row[4])
      if row[5] then redis.call('HSET', jk, 'last_stack', row[5]) else redis.call('HDEL', jk, 'last_stack') end
    end
    if release(p, K, id, row[2], row[3] or '0') then woke = true end
    redis.call('XADD', K.events, 'MAXLEN', '~', emax, '*', 'event', 'waiting', 'id', id)
    out[i - 1] = 'OK'
  elseif not state then
    redis.call('ZREM', K.dead, id)
    redis.call('ZREM', K.cancelled, id)
    redis.call('ZREM', K.completed, id)
    out[i - 1] = 'EMQNOJOB'
  else
    out[i - 1] = 'EMQSTATE'
  end
end
if woke then wake(K) end
return out
