-- register: register a fixed cadence under a name, idempotently (the seeds' @register).
-- KEYS: repeat
-- ARGV: name every_ms template first_run prefix [catch_up max]
--   The seeds' four first: name (1-200 characters, no braces, whitespace or control
--   characters); every_ms: the period, a whole number of ms >= 1; template: the payload every
--   occurrence is minted with; first_run: the first occurrence's instant in epoch ms, or
--   'next' for server now + every_ms (TIME). Then: prefix 'emq:{<queue>}:' (the record
--   P repeat:<name> is built from it, as promote builds job keys); catch_up: 'once'
--   (default, '' too) or 'all', the missed-run policy the pump applies (see pump.lua);
--   max: attempts each occurrence may make ('' = absent on the row: 1 at protocol version 1, 3 from 2).
-- REPLY: 1 registered, 0 exists (a live name is already registered; nothing changes, even
--   when the period or template differ: unregister first to change it)
-- ERRORS: EMQINPUT every_ms not a whole number >= 1, first_run neither a whole number >= 0
--   nor 'next', catch_up unknown
-- EVENTS: delayed (id, name, at) for the first occurrence, scheduled at first_run (a row
--   P job:<occurrence id> in state scheduled, in P schedule; the record's `job`; see
--   lib/recurrence.lua), unless that occurrence's row exists already. Wakes (keys built from
--   prefix): 'w s' when the occurrence heads the schedule, so parked consumers promote it at its
--   instant, and 'w r' when registered (consumers re-read their recurrence timers).
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
if #ARGV < 5 or not whole(ARGV[2], 1) or (ARGV[4] ~= 'next' and not whole(ARGV[4], 0))
    or (ARGV[7] and ARGV[7] ~= '' and not whole(ARGV[7], 1)) then
  return refuse('register', "name every_ms template first_run prefix [catch_up max]; every_ms >= 1, first_run epoch ms or 'next', max >= 1")
end
local name, p = ARGV[1], ARGV[5]
local rk = p .. 'repeat:' .. name
if redis.call('EXISTS', rk) == 1 then
  return 0
end
local every = tonumber(ARGV[2])
if not every or every < 1 or every ~= math.floor(every) then
  return redis.error_reply('EMQINPUT every_ms must be a whole number of ms >= 1')
end
local catch_up = ARGV[6] or ''
if catch_up ~= '' and catch_up ~= 'once' and catch_up ~= 'all' then
  return redis.error_reply('EMQINPUT catch_up must be once or all')
end
local t = redis.call('TIME')
local now = t[1] * 1000 + math.floor(t[2] / 1000)
local first
if ARGV[4] == 'next' then
  first = now + every
else
  first = tonumber(ARGV[4])
  if not first or first < 0 or first ~= math.floor(first) then
    return redis.error_reply("EMQINPUT first_run must be epoch ms (a whole number >= 0) or 'next'")
  end
end
-- The record carries the period and the payload template the pump stamps (the seeds' two
-- fields), and what the pump needs beside them.
redis.call('HSET', rk, 'every_ms', ARGV[2], 'template', ARGV[3], 'created', now, 'runs', '0')
if catch_up == 'all' then redis.call('HSET', rk, 'catch_up', 'all') end
if ARGV[7] and ARGV[7] ~= '' then redis.call('HSET', rk, 'max', ARGV[7]) end
-- The name is the registry member, scored by its next occurrence's instant, and that
-- occurrence exists from now on: promote releases it at its instant, on time for a consumer
-- parked or busy, and makes the next.
redis.call('ZADD', KEYS[1], first, name)
repeat_make(p, p .. 'schedule', p .. 'events', p .. 'wake', name, { ARGV[2], ARGV[3], false,
  (ARGV[7] and ARGV[7] ~= '') and ARGV[7] or false }, first, now, redis.call('HGET', p .. 'meta', 'events_max')
  or '10000')
redis.call('XADD', p .. 'wake', 'MAXLEN', '~', '100', '*', 'w', 'r')
return 1
