#!lua flags=allow-oom
-- unregister: remove a registered cadence; occurrences already released stay ordinary jobs.
-- KEYS: repeat
-- ARGV: prefix name
-- REPLY: 1 removed, 0 no such name
-- ERRORS: none
-- EVENTS: removed (id, prev scheduled) for the upcoming occurrence the record scheduled (its `job`, still in
--   state scheduled), which goes with it (row deleted, out of P schedule). Wakes: 'w r' on
--   P wake (built from prefix) when removed.
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
if #ARGV < 2 then return refuse('unregister', 'prefix name') end
local p = ARGV[1]
local rk = p .. 'repeat:' .. ARGV[2]
local job = redis.call('HGET', rk, 'job')
if job and redis.call('HGET', p .. 'job:' .. job, 'state') == 'scheduled' then
  redis.call('ZREM', p .. 'schedule', job)
  redis.call('DEL', p .. 'job:' .. job)
  local emax = redis.call('HGET', p .. 'meta', 'events_max') or '10000'
  redis.call('XADD', p .. 'events', 'MAXLEN', '~', emax, '*', 'event', 'removed', 'id', job, 'prev', 'scheduled')
end
local had = redis.call('DEL', rk)
local member = redis.call('ZREM', KEYS[1], ARGV[2])
if had + member > 0 then
  redis.call('XADD', ARGV[1] .. 'wake', 'MAXLEN', '~', '100', '*', 'w', 'r') -- consumers re-read their timers
  return 1
end
return 0
