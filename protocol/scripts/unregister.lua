-- unregister: remove a registered cadence; occurrences already minted stay ordinary jobs.
-- KEYS: repeat
-- ARGV: prefix name
-- REPLY: 1 removed, 0 no such name
-- ERRORS: none
-- EVENTS: none (no job changes)
local rk = ARGV[1] .. 'repeat:' .. ARGV[2]
local had = redis.call('DEL', rk)
local member = redis.call('ZREM', KEYS[1], ARGV[2])
if had + member > 0 then return 1 end
return 0
