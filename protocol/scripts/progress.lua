-- progress: store a running job's progress on its row, fenced by lease token.
-- KEYS: job events meta
-- ARGV: id token progress
--   progress: the encoded progress (a number or a JSON object, as the caller encodes it)
-- REPLY: 1
-- ERRORS: EMQNOJOB no such row; EMQLEASE the token is not the job's or it is not active
-- EVENTS: progress (id, progress)
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
if #ARGV < 3 then return refuse('progress', 'id token progress') end
local row = redis.call('HMGET', KEYS[1], 'state', 'token')
if not row[1] then return redis.error_reply('EMQNOJOB no job ' .. ARGV[1]) end
if row[1] ~= 'active' or row[2] ~= ARGV[2] then
  return redis.error_reply('EMQLEASE lease token is stale: the job was recovered or finished elsewhere')
end
redis.call('HSET', KEYS[1], 'progress', ARGV[3])
local emax = redis.call('HGET', KEYS[3], 'events_max') or '10000'
redis.call('XADD', KEYS[2], 'MAXLEN', '~', emax, '*', 'event', 'progress', 'id', ARGV[1], 'progress', ARGV[3])
return 1
