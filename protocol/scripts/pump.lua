-- pump: release every due occurrence of the registered cadences (server clock).
-- KEYS: repeat pending events wake meta ring
-- ARGV: prefix batch
--   batch: at most this many occurrences are released (or found released) per call
-- REPLY: {released ids, now_ms, next_due_ms or -1 when nothing is registered}; next_due is
--   <= now_ms when the batch ran out before everything due was released (call again)
-- ERRORS: none
-- EVENTS: waiting (id) per scheduled occurrence released, added (id, name) per occurrence
--   minted straight to pending (below), delayed (id, name, at) per next occurrence scheduled
--
-- An occurrence of name N due at instant T is the job
--   'JOB' .. T as 10 Crockford base32 characters (0-9 A-Z without I L O U, most significant
--   first: the time part of a minted id) .. ':r:' .. N
-- with payload = the template, name = N, runat = T (and max when the record has one). The id
-- is a function of (N, T) alone, so an occurrence is made once however many callers race.
--
-- A cadence's upcoming occurrence exists already: register schedules the first, and the call
-- that releases one (promote, normally, at its instant; or this pump) schedules the next
-- (lib/recurrence.lua). The pump is the backstop for a cadence whose slot came without a
-- release: per due slot, the record's scheduled occurrence is released to pending; an
-- occurrence the record never scheduled (a record written before the hand-off existed) is
-- minted pending; one the record scheduled that is gone or no longer scheduled (removed or
-- cancelled before it ran) is left as it is. Then the next slot's occurrence is scheduled.
--
-- Missed runs. When nothing released a name for several periods, several of its slots are due:
--   catch_up 'once' (the default): one occurrence, for the slot it was due at (its score),
--     then the name moves to its next slot; when that one and the one after it have passed
--     too (two or more missed: an outage), to the first slot of its cadence after now. No
--     burst, and a release late by less than a period skips nothing.
--   catch_up 'all': every due slot, oldest first, while the batch lasts; the name moves to the
--     first slot not released, so the next call goes on where this one stopped.
-- Slots stay on the grid first_run + k * every_ms either way.
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
if not ARGV[1] or not whole(ARGV[2], 1) then return refuse('pump', 'prefix batch; batch a whole number >= 1') end
-- >>> lib/recurrence.lua
-- Recurrence: the id of an occurrence is derived from what it is an occurrence of and its
-- instant: 'JOB' + the instant as 10 Crockford base32 characters (like a minted id's time
-- part, so occurrences sort by due time among minted ids) + ':' + tag ('r' repeat, 's'
-- scheduler) + ':' + the name. Two writers racing on one occurrence make the same id, and
-- the second finds the row already there.
local B32 = '0123456789ABCDEFGHJKMNPQRSTVWXYZ'
local function occurrence_id(tag, name, at)
  local s, rest = '', at
  for _ = 1, 10 do
    local d = rest % 32
    s = string.sub(B32, d + 1, d + 1) .. s
    rest = (rest - d) / 32
  end
  return 'JOB' .. s .. ':' .. tag .. ':' .. name
end

-- Job schedulers. A record P scheduler:<id> keeps exactly one upcoming occurrence, its `job`,
-- scored in P schedulers by the occurrence's instant. scheduler_make writes an occurrence from
-- the record's template (t: data name prio group max backoff, each false when absent) unless
-- its row exists, and points the record at it. A new earliest run-at wakes parked consumers.
-- An occurrence's row has no `attempts` (absent = 0: still waiting, SPEC 5 and 15), about 50
-- bytes less per occurrence; it keeps `created`, since its id holds its instant, not when it
-- was made.
local function scheduler_make(p, K, schedulers, sid, t, count, at, now, emax)
  local id = occurrence_id('s', sid, at)
  local jk = p .. 'job:' .. id
  local status = 'exists'
  if redis.call('EXISTS', jk) == 0 then
    status = 'created'
    redis.call('HSET', jk, 'state', 'scheduled', 'payload', t[1] or '', 'created', now, 'runat', at)
    if t[2] then redis.call('HSET', jk, 'name', t[2]) end
    if t[3] then redis.call('HSET', jk, 'prio', t[3]) end
    if t[4] then redis.call('HSET', jk, 'group', t[4]) end
    if t[5] then redis.call('HSET', jk, 'max', t[5]) end
    if t[6] then redis.call('HSET', jk, 'backoff', t[6]) end
    redis.call('ZADD', K.schedule, at, id)
    redis.call('XADD', K.events, 'MAXLEN', '~', emax, '*', 'event', 'delayed', 'id', id, 'name', t[2] or '',
      'at', at)
    if redis.call('ZRANGE', K.schedule, 0, 0)[1] == id then
      redis.call('XADD', K.wake, 'MAXLEN', '~', '100', '*', 'w', 's') -- 's': the schedule's head moved
    end
  end
  redis.call('HSET', p .. 'scheduler:' .. sid, 'job', id, 'count', count + 1)
  redis.call('ZADD', schedulers, at, sid)
  return status, id
end

-- The run after the one at `ref` with `count` runs made, for repeat options `r` (the record's
-- `repeat`, decoded) with `every`: the runtime's calculateNextMillis. nil once it is over.
local function every_after(r, ref, count)
  if r.limit and count >= r.limit then return nil end
  local n
  if r.startDate and r.startDate > ref then
    n = r.startDate
  elseif r.immediately and count == 0 then
    n = ref
  else
    n = ref + r.every
  end
  if r.endDate and n > r.endDate then return nil end
  return n
end

-- The next occurrence after the one at `prev`, judged at `now` (the runtime's nextOccurrence):
-- the next slot; that slot even though it passed when the one after it has not (late by less
-- than a period: it runs at once, nothing skipped); else, two or more slots missed (no
-- consumer promoted for that long: an outage), the first slot of the grid after now.
local function every_next(r, prev, count, now)
  local n = every_after(r, prev, count)
  if not n or n >= now then return n end
  local after = every_after(r, n, count + 1)
  if not after or after > now then return n end
  return every_after(r, prev + math.floor((now - prev) / r.every) * r.every, count)
end

local function end_reason(r, count)
  if r.limit and count >= r.limit then return 'limit' end
  if r.endDate then return 'endDate' end
  return 'done'
end

-- A cron scheduler's lookahead, the record's `ahead`: the instants that follow its current
-- occurrence, ascending, as decimal ms separated by spaces. Cron lives above the wire, so a
-- runtime computes them (upsert, its hand-off, a top-up) and promote takes the next one from
-- them: no cron slot waits for a runtime's hand-off. When fewer than AHEAD_LOW are left, the
-- scheduler is listed in P schedulers:topup (scored by its lookahead's last instant) for a
-- runtime's recurrence leg to top it up (updateJobScheduler 'more').
local AHEAD_LOW = 4

-- The lookahead's instants after `after` (older ones are stale: made, or skipped), as text.
local function ahead_list(text, after)
  local out = {}
  for v in string.gmatch(text or '', '%d+') do
    if tonumber(v) > after then out[#out + 1] = v end
  end
  return out
end

-- Which listed instant is the next occurrence at `now`: the hand-off rule (section 15) over
-- the instants a runtime listed. The first; the first although it passed when the second has
-- not (late by less than a period: it runs at once, nothing skipped); else (two or more
-- missed: an outage) the first listed instant after now. nil when the list cannot tell (empty;
-- only one, passed; every one passed): a runtime's hand-off decides then, as without a list.
local function ahead_next(list, now)
  if not list[1] then return nil end
  if tonumber(list[1]) >= now then return 1 end
  if not list[2] then return nil end
  if tonumber(list[2]) > now then return 1 end
  for i = 3, #list do
    if tonumber(list[i]) > now then return i end
  end
  return nil
end

-- The hand-off in the script that releases an occurrence (promote): when `id` is a scheduler's
-- current occurrence, make the next one now, before this one runs, so no slot waits for a
-- runtime. For `every` and `immediately` by arithmetic on the record's `repeat`; for a cron
-- pattern from the record's lookahead. When neither can tell (options this script cannot
-- read, a pattern without a usable lookahead), the record waits for a runtime's hand-off
-- (getJobScheduler due, updateJobScheduler). True when a runtime should act at once: that
-- hand-off, or a lookahead running low.
local function scheduler_follow(p, K, id, now, emax)
  if string.sub(id, 14, 16) ~= ':s:' then return false end
  local sid = string.sub(id, 17)
  local sk = p .. 'scheduler:' .. sid
  local rec = redis.call('HMGET', sk, 'repeat', 'job', 'count', 'ended', 'data', 'name', 'prio', 'group', 'max',
    'backoff', 'ahead')
  if not rec[1] or rec[2] ~= id or rec[4] then return false end
  local ok, r = pcall(cjson.decode, rec[1])
  if not ok or type(r) ~= 'table' then return true end
  if r.pattern == nil and r.every ~= nil and (type(r.every) ~= 'number' or r.every < 1) then return true end
  local schedulers = p .. 'schedulers'
  local at = tonumber(redis.call('ZSCORE', schedulers, sid) or '')
  local count = tonumber(rec[3] or '0')
  if not at or not count then return false end
  local next_at, rest
  if r.pattern ~= nil then
    if not (r.limit and count >= r.limit) then
      local list = ahead_list(rec[11], at)
      local i = ahead_next(list, now)
      if not i then return true end
      next_at, rest = tonumber(list[i]), { unpack(list, i + 1) }
    end
  elseif r.every then
    next_at = every_next(r, at, count, now)
  end
  if not next_at then
    redis.call('HSET', sk, 'ended', end_reason(r, count))
    redis.call('ZADD', schedulers, 'inf', sid)
    if r.pattern ~= nil then redis.call('ZREM', schedulers .. ':topup', sid) end
    return false
  end
  scheduler_make(p, K, schedulers, sid, { rec[5], rec[6], rec[7], rec[8], rec[9], rec[10] }, count, next_at, now,
    emax)
  if not rest then return false end
  if rest[1] then redis.call('HSET', sk, 'ahead', table.concat(rest, ' ')) else redis.call('HDEL', sk, 'ahead') end
  if #rest >= AHEAD_LOW then return false end
  redis.call('ZADD', schedulers .. ':topup', rest[#rest] or next_at, sid)
  return true
end

-- Repeat cadences (register, pump). A record P repeat:<name> (every_ms, template, catch_up,
-- max) is scored in P repeat by its upcoming slot, and that slot's occurrence already exists:
-- a scheduled row in the schedule, the record's `job`, released by promote at its instant like
-- any delayed job. The call that releases an occurrence (promote, or a pump) makes the next
-- one in the same call (repeat_follow), so no slot waits for a pump or a beat, and every
-- consumer's timer and every claim's reported head (the schedule's) cover it.

-- The slot after `at`: the next one; with catch_up 'once', when that one and the one after it
-- have passed too (two or more missed: nothing released it for that long, an outage), the
-- first slot of the grid after now. 'all' keeps every slot (each released in its turn).
local function repeat_next(every, catch_up, at, now)
  local n = at + every
  if catch_up ~= 'all' and n < now and n + every <= now then
    n = n + (math.floor((now - n) / every) + 1) * every
  end
  return n
end

-- Writes the occurrence of cadence `name` at `at` as a scheduled job unless its row exists
-- (rec: every_ms template catch_up max, as HMGET reads them), points the record at it and
-- scores the name by it. A new earliest run-at wakes parked consumers ('w s'). The row leaves
-- `attempts` out and keeps `created`, as scheduler_make's.
local function repeat_make(p, schedule, events, wake, name, rec, at, now, emax)
  local id = occurrence_id('r', name, at)
  local jk = p .. 'job:' .. id
  if redis.call('EXISTS', jk) == 0 then
    redis.call('HSET', jk, 'state', 'scheduled', 'payload', rec[2], 'created', now, 'runat', at, 'name', name)
    if rec[4] then redis.call('HSET', jk, 'max', rec[4]) end
    redis.call('ZADD', schedule, at, id)
    redis.call('XADD', events, 'MAXLEN', '~', emax, '*', 'event', 'delayed', 'id', id, 'name', name, 'at', at)
    if redis.call('ZRANGE', schedule, 0, 0)[1] == id then
      redis.call('XADD', wake, 'MAXLEN', '~', '100', '*', 'w', 's')
    end
  end
  redis.call('HSET', p .. 'repeat:' .. name, 'job', id)
  redis.call('ZADD', p .. 'repeat', at, name)
  return id
end

-- The hand-off in promote: when `id` is a cadence's current occurrence, count the run and
-- make the next occurrence now, before this one runs. An occurrence released again (a retry)
-- is no longer the record's `job` and hands nothing off.
local function repeat_follow(p, K, id, now, emax)
  if string.sub(id, 14, 16) ~= ':r:' then return end
  local name = string.sub(id, 17)
  local rk = p .. 'repeat:' .. name
  local rec = redis.call('HMGET', rk, 'every_ms', 'template', 'catch_up', 'max', 'job')
  if not rec[1] or rec[5] ~= id then return end
  local at = tonumber(redis.call('ZSCORE', p .. 'repeat', name) or '')
  local every = tonumber(rec[1])
  if not at or not every or every < 1 then return end
  redis.call('HSET', rk, 'last', at)
  redis.call('HINCRBY', rk, 'runs', 1)
  repeat_make(p, K.schedule, K.events, K.wake, name, rec, repeat_next(every, rec[3], at, now), now, emax)
end
-- <<< lib/recurrence.lua

local p = ARGV[1]
local R = KEYS[1]
local K = { schedule = p .. 'schedule', pending = KEYS[2], events = KEYS[3], wake = KEYS[4], meta = KEYS[5],
  ring = KEYS[6] }
local t = redis.call('TIME')
local now = t[1] * 1000 + math.floor(t[2] / 1000)
local budget = tonumber(ARGV[2])
local emax = redis.call('HGET', K.meta, 'events_max') or '10000'
local due = redis.call('ZRANGEBYSCORE', R, '-inf', now, 'WITHSCORES', 'LIMIT', 0, budget)
local released, woke = {}, false

-- Releases the occurrence of `name` at `at` (see above); true when it was released here.
local function release_slot(name, rec, at)
  local id = occurrence_id('r', name, at)
  local jk = p .. 'job:' .. id
  local state = redis.call('HGET', jk, 'state')
  if state == 'scheduled' and rec[5] == id then
    redis.call('ZREM', K.schedule, id)
    redis.call('HSET', jk, 'state', 'pending')
    redis.call('XADD', K.events, 'MAXLEN', '~', emax, '*', 'event', 'waiting', 'id', id)
  elseif state == false and rec[5] ~= id then
    redis.call('HSET', jk, 'state', 'pending', 'payload', rec[2], 'created', now, 'runat', at, 'name', name)
    if rec[4] then redis.call('HSET', jk, 'max', rec[4]) end
    redis.call('XADD', K.events, 'MAXLEN', '~', emax, '*', 'event', 'added', 'id', id, 'name', name)
  else
    return false
  end
  if release(p, K, id, nil, '0') then woke = true end
  released[#released + 1] = id
  return true
end

for i = 1, #due, 2 do
  if budget <= 0 then break end
  local name, at = due[i], tonumber(due[i + 1])
  local rk = p .. 'repeat:' .. name
  local rec = redis.call('HMGET', rk, 'every_ms', 'template', 'catch_up', 'max', 'job')
  if not rec[1] then
    redis.call('ZREM', R, name) -- a ghost member (its record is gone) leaves the registry
  else
    local every = tonumber(rec[1])
    local runs, last = 0, at
    repeat
      if release_slot(name, rec, at) then runs = runs + 1 end
      last, budget = at, budget - 1
      at = repeat_next(every, rec[3], at, now)
    until rec[3] ~= 'all' or at > now or budget <= 0
    redis.call('HSET', rk, 'last', last)
    if runs > 0 then redis.call('HINCRBY', rk, 'runs', runs) end
    repeat_make(p, K.schedule, K.events, K.wake, name, rec, at, now, emax)
  end
end
if woke then wake(K) end
local head = redis.call('ZRANGE', R, 0, 0, 'WITHSCORES')
return { released, now, head[2] and tonumber(head[2]) or -1 }
