#!lua flags=allow-oom
-- obliterate: delete every key of the queue, a bounded batch per call, the meta key last.
-- KEYS: meta active
-- ARGV: prefix cursor batch force
--   cursor: '0' on the first call, then the cursor the previous call replied; batch: keys
--   looked at per call (SCAN COUNT, >= 1); force: '1' to go on while jobs are active
-- REPLY: [deleted, cursor]: deleted the keys deleted in this call; cursor '0' once every key
--   (meta included) is gone, else the cursor to call again with
-- ERRORS: EMQSTATE on the first call (cursor '0') while jobs are active and force is not '1':
--   nothing is written
-- EVENTS: none (the events stream is one of the keys it deletes)
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
if #ARGV < 4 then return refuse('obliterate', 'prefix cursor batch force') end
local p, cursor = ARGV[1], ARGV[2]
local batch = whole(ARGV[3], 1, 100000)
-- A cursor as SCAN replies one: 0, or digits without a leading zero up to 2^64 - 1 (SCAN's own
-- refusal, ERR invalid cursor, would not say what the script takes). Compared as text: a Lua
-- number cannot hold 2^64 - 1 exactly, and texts of one length order as their numbers.
local function scan_cursor(v)
  if v ~= '0' and not string.match(v, '^[1-9]%d*$') then return false end
  return #v < 20 or (#v == 20 and v <= '18446744073709551615')
end
if not batch or not scan_cursor(cursor) or (ARGV[4] ~= '0' and ARGV[4] ~= '1') then
  return refuse('obliterate',
    "a cursor as SCAN replies it (0, or 1 to 18446744073709551615 without a leading zero), a batch from 1 to "
    .. "100000 and force '0' or '1'")
end
local K = { meta = KEYS[1], active = KEYS[2] }
if cursor == '0' then
  local active = redis.call('ZCARD', K.active)
  if active > 0 and ARGV[4] ~= '1' then
    return redis.error_reply('EMQSTATE ' .. active .. ' jobs are active: wait for them, or force it')
  end
  -- Consumers stop claiming while the keys go; the flag goes with meta at the end.
  redis.call('HSET', K.meta, 'paused', '1')
end
-- The prefix as a SCAN pattern: glob characters in a queue name match only themselves.
local pattern = string.gsub(p, '[%*%?%[%]\\]', '\\%0') .. '*'
local scan = redis.call('SCAN', cursor, 'MATCH', pattern, 'COUNT', batch)
local keys, deleted = {}, 0
for _, key in ipairs(scan[2]) do
  if key ~= K.meta then keys[#keys + 1] = key end
end
for i = 1, #keys, 1000 do
  deleted = deleted + redis.call('DEL', unpack(keys, i, math.min(i + 999, #keys)))
end
if scan[1] == '0' then deleted = deleted + redis.call('DEL', K.meta) end
return { deleted, scan[1] }
