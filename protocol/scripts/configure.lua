-- configure: change queue-wide settings kept in meta.
-- KEYS: meta wake
-- ARGV: field value pairs; fields: rate_max rate_ms (queue rate limit: at most rate_max claims
--   in any rate_ms window; rate_max 0 = none), events_max (events stream cap, approximate),
--   keep_completed keep_completed_ms keep_dead keep_dead_ms (retention: count and age in ms;
--   age -1 = no age limit), keep_ids_ms (the idempotency window: ids of ended jobs stay known
--   this long after they ended, 0 = not kept), concurrency (the queue-wide cap on running jobs,
--   across all consumers, >= 1; claim enforces it), recovery (reap, stalled or off: how the native
--   module's lease timers recover the queue's expired leases, SPEC 26.1) and max_stalled (>= 0, with
--   recovery stalled); value '-' removes the field (back to its default)
-- REPLY: 1
-- ERRORS: EMQINPUT an unknown field, a value that is not a whole number, or a recovery mode that is not
--   reap, stalled or off (nothing is written)
-- EVENTS: none
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
local allowed = { rate_max = true, rate_ms = true, events_max = true, keep_completed = true,
  keep_completed_ms = true, keep_dead = true, keep_dead_ms = true, keep_ids_ms = true, concurrency = true,
  recovery = true, max_stalled = true }
-- The one setting that is a word, not a number: the module's lease timers read it (SPEC 26.1).
local modes = { reap = true, stalled = true, off = true }
-- The least value of each setting (a negative events_max would break every later XADD).
local least = { rate_max = 0, rate_ms = 1, events_max = 1, keep_completed = 0, keep_completed_ms = -1,
  keep_dead = 0, keep_dead_ms = -1, keep_ids_ms = 0, concurrency = 1, max_stalled = 0 }
if #ARGV % 2 ~= 0 then return refuse('configure', 'field value pairs') end
for i = 1, #ARGV, 2 do
  if not allowed[ARGV[i]] then return redis.error_reply('EMQINPUT unknown setting ' .. ARGV[i]) end
  if ARGV[i] == 'recovery' then
    if ARGV[i + 1] ~= '-' and not modes[ARGV[i + 1]] then
      return redis.error_reply('EMQINPUT setting recovery must be reap, stalled or off')
    end
  elseif ARGV[i + 1] ~= '-' and not whole(ARGV[i + 1], least[ARGV[i]]) then
    return redis.error_reply('EMQINPUT setting ' .. ARGV[i] .. ' must be a whole number >= ' .. least[ARGV[i]])
  end
end
for i = 1, #ARGV, 2 do
  if ARGV[i + 1] == '-' then redis.call('HDEL', KEYS[1], ARGV[i])
  else redis.call('HSET', KEYS[1], ARGV[i], ARGV[i + 1]) end
end
-- A lifted rate limit (or a raised or removed concurrency cap) may free work that parked consumers are waiting on.
redis.call('XADD', KEYS[2], 'MAXLEN', '~', '100', '*', 'w', '1')
return 1
