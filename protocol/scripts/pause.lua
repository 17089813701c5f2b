-- pause: stop claiming from the whole queue, or from one lane; enqueue still works and
-- running jobs finish.
-- KEYS: meta events ring
-- ARGV: prefix [group]
--   group: pause only this lane (it leaves the ring until resumed); absent: the whole queue
-- REPLY: 1 paused now, 0 it was paused already
-- ERRORS: none
-- EVENTS: paused (id '', group when a lane)
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
if #ARGV < 1 then return refuse('pause', 'prefix [group]') end
local p, group = ARGV[1], ARGV[2]
local changed
if group and group ~= '' then
  changed = redis.call('SADD', p .. 'lanes:paused', group)
  redis.call('ZREM', KEYS[3], group)
else
  group = ''
  changed = redis.call('HSET', KEYS[1], 'paused', '1') -- 1 only when the field is new
  if changed == 0 and redis.call('HGET', KEYS[1], 'paused') ~= '1' then changed = 1 end
end
if changed == 1 then
  local emax = redis.call('HGET', KEYS[1], 'events_max') or '10000'
  redis.call('XADD', KEYS[2], 'MAXLEN', '~', emax, '*', 'event', 'paused', 'id', '', 'group', group)
end
return changed
