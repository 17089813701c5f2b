-- child_notice: the second half of a hand-off between queues (SPEC 14.1): a child in another
-- queue ended, and the notice its queue recorded (notices.lua) is applied to its parent here,
-- as lib/flow.lua does for a child in the parent's own queue: each child counted exactly once
-- however often the notice is delivered (P job:<parent>:processed names the children counted).
-- KEYS: pending events wake meta ring
-- ARGV: prefix parent child outcome result error
--   parent: the parent's id (a job of this queue); child: '<its prefix><its id>'; outcome:
--   completed | dead | cancelled | removed; result: the child's encoded result ('' none);
--   error: the child's error ('' none)
-- REPLY: 1 counted; 0 ignored: the parent is not waiting for children (ended, removed, or no
--   such job) or counted this child before
-- ERRORS: EMQINPUT malformed arguments (nothing written)
-- EVENTS: as lib/flow.lua: waiting when the parent was released, failed (reason child) when the
--   child failed it
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
-- >>> lib/flow.lua
-- Flows: a parent waits in state waiting_children (in P waiting_children) with `children` =
-- how many of its children have not ended yet; each child's row names its `parent`: the id,
-- or '<parent prefix><id>' (emq:{<queue>}:JOB…) when the parent lives in another queue.
-- A completed child stores its result in P job:<parent>:results (child id -> result) and
-- counts down; at zero the parent is released to claimable work (event waiting). A child
-- that ends otherwise (dead, cancelled, removed) fails its parent (dead, event failed with
-- reason child), and that parent's parent in turn, unless the parent has `continue` = 1
-- (remove the dependency: it only counts down) or `continue` = ignore (it counts down and
-- records the failure in P job:<parent>:failures, child id -> '<outcome>: <error>'). A parent
-- that is no longer waiting ignores its children. A parent whose children or prio is not a
-- whole number (lib/rows.lua) cannot count down or be released: it fails as with a failed
-- child, its error EMQDATA naming the field. Each child is counted once: the parent keeps the
-- children it was told of in P job:<parent>:processed, and a second end of one is ignored.
-- A parent in another queue (another slot on a Cluster) is not touched here: the end is
-- recorded as a notice in this queue (P notices, P notice:<child>), which a runtime hands to
-- the parent's queue (child_notice.lua, SPEC 14.1).
-- True when claimable work went from none to some (the caller wakes parked consumers).
--   outcome: 'completed' (result: its encoded result) | 'dead' | 'cancelled' | 'removed'
--   err: the child's error when known (a notice carries it; false: none), nil to read its row
--   ref: the child's name in the parent's processed set when it is not in queue p (a notice)
local function child_ended(p, K, parent, id, outcome, result, now, emax, err, ref)
  local ok = outcome == 'completed'
  while parent do
    if string.sub(parent, 1, 3) ~= 'JOB' and string.find(parent, '}:', 1, true) then
      if not ok and err == nil then err = redis.call('HGET', p .. 'job:' .. id, 'error') end
      redis.call('HSET', p .. 'notice:' .. id, 'parent', parent, 'outcome', outcome, 'result', result,
        'error', err or '')
      redis.call('ZADD', p .. 'notices', now, id)
      return false
    end
    local pk = p .. 'job:' .. parent
    local row = redis.call('HMGET', pk, 'state', 'continue', 'group', 'prio', 'parent', 'children')
    if row[1] ~= 'waiting_children' then return false end
    if redis.call('SADD', pk .. ':processed', ref or id) == 0 then return false end
    local field = bad_number(row, { 'children', 6, counter_text, 'prio', 4, whole_text })
    if ok and not field then redis.call('HSET', pk .. ':results', id, result) end
    if not ok and row[2] == 'ignore' and not field then
      if err == nil then err = redis.call('HGET', p .. 'job:' .. id, 'error') end
      redis.call('HSET', pk .. ':failures', id, err and (outcome .. ': ' .. err) or outcome)
    end
    if (ok or row[2] == '1' or row[2] == 'ignore') and not field then
      if redis.call('HINCRBY', pk, 'children', -1) > 0 then return false end
      redis.call('ZREM', p .. 'waiting_children', parent)
      redis.call('HSET', pk, 'state', 'pending')
      local woke = release(p, K, parent, row[3], row[4] or '0')
      redis.call('XADD', K.events, 'MAXLEN', '~', emax, '*', 'event', 'waiting', 'id', parent)
      return woke
    end
    redis.call('ZREM', p .. 'waiting_children', parent)
    redis.call('HSET', pk, 'state', 'dead', 'finished', now, 'error', field and
      ('EMQDATA job ' .. parent .. ': its field ' .. field .. ' is not a whole number; it was dead-lettered '
        .. 'when its child ' .. id .. ' ended: correct or remove the field, then retry the job')
      or ('child ' .. id .. ' failed (' .. outcome .. ')'))
    redis.call('ZADD', p .. 'dead', now, parent)
    if field then
      redis.call('XADD', K.events, 'MAXLEN', '~', emax, '*', 'event', 'failed', 'id', parent, 'reason', 'data',
        'field', field, 'child', id)
    else
      redis.call('XADD', K.events, 'MAXLEN', '~', emax, '*', 'event', 'failed', 'id', parent, 'reason', 'child',
        'child', id)
    end
    id, parent, ok, outcome, err, ref = parent, row[5], false, 'dead', nil, nil
  end
  return false
end
-- <<< lib/flow.lua
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
local p, parent, child, outcome = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
local ok_outcome = { completed = true, dead = true, cancelled = true, removed = true }
if #ARGV < 6 or string.sub(parent or '', 1, 3) ~= 'JOB' or not ok_outcome[outcome]
    or not string.match(child, '^emq:{[^{}]+}:JOB') then
  return refuse('child_notice', 'prefix parent child outcome result error: a JOB parent id, the child as '
    .. '<prefix><id>, and an outcome completed|dead|cancelled|removed')
end
local pk = p .. 'job:' .. parent
if redis.call('HGET', pk, 'state') ~= 'waiting_children' then return 0 end
if redis.call('SISMEMBER', pk .. ':processed', child) == 1 then return 0 end
local K = { pending = KEYS[1], events = KEYS[2], wake = KEYS[3], meta = KEYS[4], ring = KEYS[5] }
local t = redis.call('TIME')
local now = t[1] * 1000 + math.floor(t[2] / 1000)
local emax = redis.call('HGET', K.meta, 'events_max') or '10000'
local id = string.sub(child, string.find(child, '}:', 1, true) + 2)
local err = ARGV[6] ~= '' and ARGV[6] or false
if child_ended(p, K, parent, id, outcome, ARGV[5], now, emax, err, child) then wake(K) end
return 1
