-- migrate: step a queue's keys up to the next protocol version while its fleet runs, once
--   every consumer beating on the queue says it speaks that version (SPEC 22.4).
-- KEYS: meta consumers
-- ARGV: prefix from to window_ms
--   from: the version the caller read (refused when another is stored: a migration already
--     made, or one in between); to: from + 1, at most the highest version these scripts know
--     (2); a step down is refused (rows written under `to` may rely on its rules)
--   window_ms: a consumer counts as alive when it beat within window_ms, or within three of
--     its own beats (the info's beatMs), whichever is longer; an alive consumer must list `to`
--     in its heartbeat info's `protocols` (absent: it speaks version 1 only)
-- REPLY: {version, alive}: the version now stored (an integer) and how many alive consumers
--   were checked (an integer)
-- ERRORS: EMQPROTOCOL when meta holds a version other than `from` (or none: a queue no
--   runtime has said hello to); EMQFLEET when an alive consumer does not speak `to`: the
--   message names it, its versions and its last beat; nothing is written
-- EVENTS: none (a queue-wide setting, as configure)
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
local HIGHEST = 2
if #ARGV < 4 then return refuse('migrate', 'prefix from to window_ms') end
local from, to, window = whole(ARGV[2], 1), whole(ARGV[3], 1), whole(ARGV[4], 0)
if not from or not to or not window then
  return refuse('migrate', 'from and to whole numbers >= 1 and window_ms a whole number >= 0')
end
if to ~= from + 1 or to > HIGHEST then
  return refuse('migrate', 'to = from + 1, at most ' .. HIGHEST .. ' (a step down is not made in place)')
end
local stored = redis.call('HGET', KEYS[1], 'version')
if stored ~= ARGV[2] then
  return redis.error_reply('EMQPROTOCOL queue keys are protocol version ' .. (stored or 'unset') ..
    ', not ' .. ARGV[2] .. ': nothing to migrate from')
end
local t = redis.call('TIME')
local now = t[1] * 1000 + math.floor(t[2] / 1000)
-- Every consumer that beat within the longest window any might have: then each by its own.
local info_key = ARGV[1] .. 'consumers:info'
local seen = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', '+inf', 'WITHSCORES')
local alive = 0
for i = 1, #seen, 2 do
  local id, beat = seen[i], tonumber(seen[i + 1])
  local ok, info = pcall(cjson.decode, redis.call('HGET', info_key, id) or '{}')
  if not ok or type(info) ~= 'table' then info = {} end
  local beat_ms = tonumber(info.beatMs) or 0
  if now - beat <= math.max(window, 3 * beat_ms) then
    alive = alive + 1
    local speaks = false
    local versions = type(info.protocols) == 'table' and info.protocols or { 1 }
    for _, v in ipairs(versions) do
      if tonumber(v) == to then speaks = true end
    end
    if not speaks then
      local said = {}
      for _, v in ipairs(versions) do said[#said + 1] = tostring(v) end
      return redis.error_reply('EMQFLEET consumer ' .. id .. ' (' .. tostring(info.host or '?') .. ' pid ' ..
        tostring(info.pid or '?') .. ') speaks protocol ' .. table.concat(said, ',') .. ', not ' .. to ..
        '; it beat ' .. (now - beat) .. ' ms ago: upgrade or stop it, then migrate again')
    end
  end
end
redis.call('HSET', KEYS[1], 'version', ARGV[3])
return { to, alive }
