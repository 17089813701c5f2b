-- heartbeat: a consumer says it is alive (once a beat), for tools that list consumers.
-- KEYS: consumers
-- ARGV: prefix consumer_id info
--   info: a small JSON object (host, pid, concurrency, running) shown by the tools
-- REPLY: the number of consumers seen in the last minute
-- ERRORS: none
-- EVENTS: none (not a job transition)
local t = redis.call('TIME')
local now = t[1] * 1000 + math.floor(t[2] / 1000)
local info = ARGV[1] .. 'consumers:info'
redis.call('ZADD', KEYS[1], now, ARGV[2])
redis.call('HSET', info, ARGV[2], ARGV[3])
-- Forget consumers silent for an hour (at most 100 per call).
local gone = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now - 3600000, 'LIMIT', 0, 100)
if #gone > 0 then
  redis.call('ZREM', KEYS[1], unpack(gone))
  redis.call('HDEL', info, unpack(gone))
end
return redis.call('ZCOUNT', KEYS[1], now - 60000, '+inf')
