-- hello: stamp or check the protocol version a queue's keys are written in.
-- KEYS: meta
-- ARGV: version
-- REPLY: the version now stored (an integer)
-- ERRORS: EMQPROTOCOL when the queue was written by another protocol version
-- EVENTS: none
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
