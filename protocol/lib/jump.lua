-- Jumps of the server clock (SPEC section 2.1). A sweep keeps the last instant it read in a
-- meta field and compares. Back (now < seen): the clock was stepped back by seen - now. Ahead
-- by more than the caller's `expected` gap: the clock was stepped forward, or the server was
-- paused (SIGSTOP, a long command, DEBUG SLEEP) and nobody could call meanwhile. Either way
-- the members of `zset` still ahead at the last sweep move by the jump before the sweep
-- compares them with now: what was n ms ahead then is n ms ahead now (give or take the
-- expected gap), so a step is not felt and a pause does not count against a lease.
-- Jumps under JUMP_MIN_MS are noise (a slow reply, NTP's small corrections) and ignored.
-- Returns the jump in ms (negative: back; 0: none).
local JUMP_MIN_MS = 500
local function clock_follow(meta, field, now, expected, zset)
  local seen = tonumber(redis.call('HGET', meta, field) or '')
  local jump = 0
  if seen and now - seen < -JUMP_MIN_MS then jump = now - seen
  elseif seen and expected and now - seen - expected > JUMP_MIN_MS then jump = now - seen - expected end
  if jump ~= 0 then
    local m = redis.call('ZRANGEBYSCORE', zset, '(' .. seen, '+inf', 'WITHSCORES')
    for i = 1, #m, 2 do redis.call('ZADD', zset, tonumber(m[i + 1]) + jump, m[i]) end
  end
  redis.call('HSET', meta, field, now)
  return jump
end
