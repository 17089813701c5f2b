-- register: register a fixed cadence under a name, idempotently (the seeds' @register).
-- KEYS: repeat
-- ARGV: name every_ms template first_run prefix [catch_up max]
--   The seeds' four first: name (1-200 characters, no braces, whitespace or control
--   characters); every_ms: the period, a whole number of ms >= 1; template: the payload every
--   occurrence is minted with; first_run: the first occurrence's instant in epoch ms, or
--   'next' for server now + every_ms (TIME). Then: prefix 'emq:{<queue>}:' (the record
--   P repeat:<name> is built from it, as promote builds job keys); catch_up: 'once'
--   (default, '' too) or 'all', the missed-run policy the pump applies (see pump.lua);
--   max: attempts each occurrence may make ('' = absent on the row, claim's default 1).
-- REPLY: 1 registered, 0 exists (a live name is already registered; nothing changes, even
--   when the period or template differ: unregister first to change it)
-- ERRORS: EMQINPUT every_ms not a whole number >= 1, first_run neither a whole number >= 0
--   nor 'next', catch_up unknown
-- EVENTS: none (a registration is not a job transition; each occurrence emits added). Wakes:
--   'w r' on P wake (built from prefix) when registered, so parked consumers pump at once.
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
-- The name is the registry member, scored by its next occurrence's instant.
redis.call('ZADD', KEYS[1], first, name)
-- Parked consumers pump at once and learn the new slot ('w r'): its first run is on time.
redis.call('XADD', p .. 'wake', 'MAXLEN', '~', '100', '*', 'w', 'r')
return 1
