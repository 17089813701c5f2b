-- removeJobScheduler: remove a scheduler and its occurrence that still waits for its first run.
-- KEYS: schedulers schedule events meta
-- ARGV: prefix id
-- REPLY: 1 removed, 0 no such scheduler
-- ERRORS: none
-- EVENTS: removed (id, prev) for the waiting occurrence; an occurrence already released (or
--   retrying) runs on as an ordinary job. Wakes: 'w s' on P wake (built from prefix) when
--   the removed occurrence was the schedule's earliest, so parked consumers re-arm their timers.
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
if #ARGV < 2 then return refuse('removeJobScheduler', 'prefix id') end
local p, sid = ARGV[1], ARGV[2]
local sk = p .. 'scheduler:' .. sid
local job = redis.call('HGET', sk, 'job')
if job then
  local jk = p .. 'job:' .. job
  local row = redis.call('HMGET', jk, 'state', 'attempts')
  if row[1] == 'scheduled' and (row[2] or '0') == '0' then
    -- The schedule's head leaves: parked consumers re-read it ('w s') instead of waking for nothing.
    local head = redis.call('ZRANGE', KEYS[2], 0, 0)[1] == job
    redis.call('ZREM', KEYS[2], job)
    if head then redis.call('XADD', p .. 'wake', 'MAXLEN', '~', '100', '*', 'w', 's') end
    redis.call('DEL', jk)
    local emax = redis.call('HGET', KEYS[4], 'events_max') or '10000'
    redis.call('XADD', KEYS[3], 'MAXLEN', '~', emax, '*', 'event', 'removed', 'id', job, 'prev', 'scheduled')
  end
end
local had = redis.call('DEL', sk)
local member = redis.call('ZREM', KEYS[1], sid)
redis.call('ZREM', KEYS[1] .. ':topup', sid) -- a lookahead waiting for a top-up goes with it
if had + member > 0 then return 1 end
return 0
