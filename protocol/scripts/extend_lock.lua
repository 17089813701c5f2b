#!lua flags=allow-oom
-- extend_lock: a lease checkpoint: push the lease deadlines of jobs this consumer holds.
-- KEYS: active
-- ARGV: prefix lease_ms, then one pair per job: id token
-- REPLY: one status per job: 'ok' (extended to server now + lease_ms), 'cancel' (extended,
--   and a cancel was requested: stop the handler), 'lost' (the token is not the job's or
--   the job is not active any more: the lease was taken over; nothing changes)
-- ERRORS: none
-- EVENTS: none (a checkpoint is not a transition)
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
if #ARGV < 2 or #ARGV % 2 ~= 0 or not whole(ARGV[2], 1) then
  return refuse('extend_lock', 'prefix lease_ms (a whole number >= 1), then id token pairs')
end
local p = ARGV[1]
local t = redis.call('TIME')
local deadline = t[1] * 1000 + math.floor(t[2] / 1000) + tonumber(ARGV[2])
local out = {}
for i = 3, #ARGV, 2 do
  local id = ARGV[i]
  local row = redis.call('HMGET', p .. 'job:' .. id, 'state', 'token', 'cancel')
  if row[1] == 'active' and row[2] == ARGV[i + 1] then
    redis.call('ZADD', KEYS[1], 'XX', deadline, id)
    out[#out + 1] = row[3] == '1' and 'cancel' or 'ok'
  else
    out[#out + 1] = 'lost'
  end
end
return out
