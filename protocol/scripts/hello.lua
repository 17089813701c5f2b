-- hello: stamp or check the protocol version a queue's keys are written in; asked with the
--   versions a runtime speaks, also say which one to speak here and what this server offers.
-- KEYS: meta
-- ARGV: version [lowest highest]
--   version: the version a queue without one is stamped with (the runtime's default for new
--     queues); lowest highest (level 2, both or neither): the versions the runtime speaks,
--     version among them; absent: it speaks version only
-- REPLY: without lowest highest: the version now stored (an integer), as at level 1. With
--   them: {version, level, features}: version the one now stored (an integer in [lowest,
--   highest]: the version to speak on this queue), level the feature level of these scripts
--   (an integer, SPEC 22.2), features a flat list of the server's optional commands found
--   (strings: 'emq.promote', 'emq.stalled.check' when the native module is loaded, and
--   'emq.timers' when its timers run on this primary, EMQ.TIMERS.RUNNING). Later
--   levels may add entries after these: readers ignore what they do not know (SPEC 22.1).
-- ERRORS: EMQPROTOCOL when the stored version is not one the runtime speaks (nothing written)
-- EVENTS: none
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
local LEVEL = 2
-- The native module's commands a runtime may send instead of scripts (SPEC 26).
local MODULE_COMMANDS = { 'emq.promote', 'emq.stalled.check' }
local version = whole(ARGV[1], 1)
if not version then return refuse('hello', 'the protocol version, a whole number >= 1') end
local ranged = ARGV[2] ~= nil
local lowest, highest = version, version
if ranged then
  lowest, highest = whole(ARGV[2], 1), whole(ARGV[3], 1)
  if not lowest or not highest or lowest > version or version > highest then
    return refuse('hello', 'version lowest highest, whole numbers with lowest <= version <= highest')
  end
end
local stored = redis.call('HGET', KEYS[1], 'version')
if not stored then
  redis.call('HSET', KEYS[1], 'version', ARGV[1])
  stored = ARGV[1]
end
local n = tonumber(stored)
-- Compared as text for a runtime that speaks one version (level 1 did), by range otherwise.
if (not ranged and stored ~= ARGV[1]) or (ranged and not (n and n >= lowest and n <= highest)) then
  local speaks = ranged and (lowest .. ' to ' .. highest) or ARGV[1]
  return redis.error_reply('EMQPROTOCOL queue keys are protocol version ' .. stored ..
    ', this runtime speaks ' .. speaks)
end
if not ranged then return n end
local features = {}
local ok, info = pcall(redis.call, 'COMMAND', 'INFO', unpack(MODULE_COMMANDS))
if ok and type(info) == 'table' then
  for i, name in ipairs(MODULE_COMMANDS) do
    if type(info[i]) == 'table' then features[#features + 1] = name end
  end
end
-- The module's timers move time on this primary (SPEC 26.1): a runtime that sees 'emq.timers'
-- may drop its promote and recovery legs to a backstop. Asked only where the module's commands
-- are, and under pcall: a server without the command, or a user whose ACL does not allow it,
-- gets the reply it got before.
if #features > 0 then
  local on, running = pcall(redis.call, 'EMQ.TIMERS.RUNNING')
  if on and running == 1 then features[#features + 1] = 'emq.timers' end
end
return { n, LEVEL, features }
