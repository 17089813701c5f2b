-- updateJobScheduler: the hand-off: make the next occurrence once the current one was released.
-- KEYS: schedulers schedule events wake meta
-- ARGV: prefix id expected_job next ended
--   expected_job: the occurrence the caller computed from (getJobScheduler 'due' lists it),
--   a compare-and-set: of callers racing on one occurrence, one advances the scheduler;
--   next: the next occurrence's instant in epoch ms, computed by the caller (cron lives above
--   the wire) from the released occurrence's instant, never before server now (see SPEC:
--   missed runs); '' when the schedule is over;
--   ended: why it is over ('limit', 'endDate', or 'done' for a single run made)
-- REPLY: {status, next or '', occurrence id or ''}, status: 'created' (the next occurrence
--   is scheduled); 'exists' (its row exists already; the record now points at it); 'ended'
--   (no next occurrence: the record stays, marked ended, scored +inf); 'stale' (the record no
--   longer points at expected_job: another caller advanced it or an upsert replaced it;
--   nothing written); 'waiting' (expected_job still waits for its first run: nothing
--   written); 'gone' (no such scheduler)
-- ERRORS: EMQINPUT next not a whole number >= 0
-- EVENTS: delayed (id, name, at) for the created occurrence
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
if #ARGV < 5 or (ARGV[4] ~= '' and not whole(ARGV[4], 0)) then
  return refuse('updateJobScheduler', 'prefix id expected_job next ended; next epoch ms or empty')
end
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
-- <<< lib/recurrence.lua

local p, sid, expected = ARGV[1], ARGV[2], ARGV[3]
local K = { schedulers = KEYS[1], schedule = KEYS[2], events = KEYS[3], wake = KEYS[4], meta = KEYS[5] }
local sk = p .. 'scheduler:' .. sid
local rec = redis.call('HMGET', sk, 'repeat', 'job', 'count', 'ended', 'data', 'name', 'prio', 'group', 'max',
  'backoff')
if not rec[1] then return { 'gone', '', '' } end
if (rec[2] or '') ~= expected then return { 'stale', '', '' } end
if rec[4] then return { 'ended', '', expected } end
local row = redis.call('HMGET', p .. 'job:' .. expected, 'state', 'attempts')
if row[1] == 'scheduled' and (row[2] or '0') == '0' then return { 'waiting', '', expected } end

if ARGV[4] == '' then
  redis.call('HSET', sk, 'ended', ARGV[5] ~= '' and ARGV[5] or 'done')
  redis.call('ZADD', K.schedulers, 'inf', sid)
  return { 'ended', '', expected }
end
local next_at = tonumber(ARGV[4])
if not next_at or next_at < 0 or next_at ~= math.floor(next_at) then
  return redis.error_reply('EMQINPUT next must be epoch ms (a whole number >= 0) or empty')
end

local t = redis.call('TIME')
local now = t[1] * 1000 + math.floor(t[2] / 1000)
local id = occurrence_id('s', sid, next_at)
local jk = p .. 'job:' .. id
local status = 'exists'
if redis.call('EXISTS', jk) == 0 then
  status = 'created'
  redis.call('HSET', jk, 'state', 'scheduled', 'attempts', '0', 'payload', rec[5] or '', 'created', now,
    'runat', next_at)
  if rec[6] then redis.call('HSET', jk, 'name', rec[6]) end
  if rec[7] then redis.call('HSET', jk, 'prio', rec[7]) end
  if rec[8] then redis.call('HSET', jk, 'group', rec[8]) end
  if rec[9] then redis.call('HSET', jk, 'max', rec[9]) end
  if rec[10] then redis.call('HSET', jk, 'backoff', rec[10]) end
  redis.call('ZADD', K.schedule, next_at, id)
  local emax = redis.call('HGET', K.meta, 'events_max') or '10000'
  redis.call('XADD', K.events, 'MAXLEN', '~', emax, '*', 'event', 'delayed', 'id', id, 'name', rec[6] or '',
    'at', next_at)
  -- A new earliest run-at moves every parked consumer's due timer: wake them to re-read it.
  if redis.call('ZRANGE', K.schedule, 0, 0)[1] == id then
    redis.call('XADD', K.wake, 'MAXLEN', '~', '100', '*', 'w', 's') -- 's': the schedule's head moved
  end
end
redis.call('HSET', sk, 'job', id, 'count', tonumber(rec[3] or '0') + 1)
redis.call('ZADD', K.schedulers, next_at, sid)
return { status, next_at, id }
