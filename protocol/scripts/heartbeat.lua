#!lua flags=allow-oom
-- heartbeat: a consumer says it is alive (once a beat), for tools that list consumers.
-- KEYS: consumers
-- ARGV: prefix consumer_id info
--   info: a small JSON object (host, pid, concurrency, running, beatMs) shown by the tools;
--         '' says the consumer is leaving (it closed): its entries are removed
-- REPLY: {seen, notices}: the number of consumers seen in the last minute, and how many flow
--   hand-offs wait in this queue (P notices, SPEC 14.1) for a runtime to deliver
-- ERRORS: none
-- EVENTS: none (not a job transition)
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
if #ARGV < 3 then return refuse('heartbeat', 'prefix consumer_id info') end
local t = redis.call('TIME')
local now = t[1] * 1000 + math.floor(t[2] / 1000)
local info = ARGV[1] .. 'consumers:info'
if ARGV[3] == '' then
  redis.call('ZREM', KEYS[1], ARGV[2])
  redis.call('HDEL', info, ARGV[2])
else
  redis.call('ZADD', KEYS[1], now, ARGV[2])
  redis.call('HSET', info, ARGV[2], ARGV[3])
end
-- Forget consumers silent for an hour (at most 100 per call).
local gone = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now - 3600000, 'LIMIT', 0, 100)
if #gone > 0 then
  redis.call('ZREM', KEYS[1], unpack(gone))
  redis.call('HDEL', info, unpack(gone))
end
return { redis.call('ZCOUNT', KEYS[1], now - 60000, '+inf'), redis.call('ZCARD', ARGV[1] .. 'notices') }
