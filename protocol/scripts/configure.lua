-- configure: change queue-wide settings kept in meta.
-- KEYS: meta wake
-- ARGV: field value pairs; fields: rate_max rate_ms (queue rate limit: at most rate_max claims
--   in any rate_ms window; rate_max 0 = none), events_max (events stream cap, approximate),
--   keep_completed keep_completed_ms keep_dead keep_dead_ms (retention: count and age in ms;
--   age -1 = no age limit); value '-' removes the field (back to its default)
-- REPLY: 1
-- ERRORS: EMQINPUT an unknown field or a value that is not a whole number (nothing is written)
-- EVENTS: none
local allowed = { rate_max = true, rate_ms = true, events_max = true, keep_completed = true,
  keep_completed_ms = true, keep_dead = true, keep_dead_ms = true }
for i = 1, #ARGV, 2 do
  if not allowed[ARGV[i]] then return redis.error_reply('EMQINPUT unknown setting ' .. ARGV[i]) end
  if ARGV[i + 1] ~= '-' and not string.match(ARGV[i + 1], '^-?%d+$') then
    return redis.error_reply('EMQINPUT setting ' .. ARGV[i] .. ' must be a whole number')
  end
end
for i = 1, #ARGV, 2 do
  if ARGV[i + 1] == '-' then redis.call('HDEL', KEYS[1], ARGV[i])
  else redis.call('HSET', KEYS[1], ARGV[i], ARGV[i + 1]) end
end
-- A lifted rate limit may free work that parked consumers are waiting on.
redis.call('XADD', KEYS[2], 'MAXLEN', '1', '*', 'w', '1')
return 1
