-- hello: stamp or check the protocol version a queue's keys are written in.
-- KEYS: meta
-- ARGV: version
-- REPLY: the version now stored (an integer)
-- ERRORS: EMQPROTOCOL when the queue was written by another protocol version
-- EVENTS: none
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
if not whole(ARGV[1], 1) then return refuse('hello', 'the protocol version, a whole number >= 1') end
local stored = redis.call('HGET', KEYS[1], 'version')
if not stored then
  redis.call('HSET', KEYS[1], 'version', ARGV[1])
  return tonumber(ARGV[1])
end
if stored ~= ARGV[1] then
  return redis.error_reply('EMQPROTOCOL queue keys are protocol version ' .. stored ..
    ', this runtime speaks ' .. ARGV[1])
end
return tonumber(stored)
