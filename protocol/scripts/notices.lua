-- notices: the first half's record of a hand-off between queues (SPEC 14.1): a job of this
-- queue whose flow parent is in another queue ended, and lib/flow.lua kept a notice of it here
-- (P notices: child ids by end instant; P notice:<child>: parent, outcome, result, error).
-- A runtime lists them, applies each to the parent's queue (child_notice.lua), then drops the
-- ones it applied with its next call: a notice stays until it was applied, so a process that
-- stops between the halves loses nothing (the next delivery applies it again, counted once).
-- KEYS: notices
-- ARGV: prefix n [child ...]: drop the notices of these children first, then list up to n
-- REPLY: flat, 5 entries per notice, oldest first: child parent outcome result error (parent
--   as the row holds it: '<its prefix><its id>'); a member whose record is gone is dropped
-- ERRORS: EMQINPUT n not a whole number in 1..1000
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
local p = ARGV[1]
local n = whole(ARGV[2] or '', 1, 1000)
if not n then return refuse('notices', 'prefix n [child ...], n a whole number in 1..1000') end
for i = 3, #ARGV do
  redis.call('DEL', p .. 'notice:' .. ARGV[i])
  redis.call('ZREM', KEYS[1], ARGV[i])
end
local out = {}
for _, id in ipairs(redis.call('ZRANGE', KEYS[1], 0, n - 1)) do
  local r = redis.call('HMGET', p .. 'notice:' .. id, 'parent', 'outcome', 'result', 'error')
  if r[1] and r[2] then
    out[#out + 1], out[#out + 2], out[#out + 3], out[#out + 4], out[#out + 5] = id, r[1], r[2], r[3] or '', r[4] or ''
  else
    redis.call('ZREM', KEYS[1], id)
  end
end
return out
