-- log: append log lines to running jobs' logs, fenced by lease token, keeping the newest lines.
-- KEYS: meta
-- ARGV: prefix max_lines, then per job: id token n line_1 ... line_n
--   max_lines: the lines a job's log keeps (>= 1; older ones are trimmed first); n >= 0; each
--   line as the caller wrote it (already size-limited by the caller)
-- REPLY: one status per job: 'OK' (its lines appended to P job:<id>:logs), 'EMQLEASE' (no row,
--   or the token is not the job's latest: its lines are dropped)
-- ERRORS: none beyond EMQINPUT (a malformed job entry: nothing is written)
-- EVENTS: none (a log line is not a transition)
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
if #ARGV < 2 then return refuse('log', 'prefix max_lines, then id token n line...') end
local p = ARGV[1]
local max = whole(ARGV[2], 1)
if not max then return refuse('log', 'a max_lines that is a whole number >= 1') end
-- Every entry is checked before anything is written, so a malformed call writes nothing.
local i = 3
while i <= #ARGV do
  local n = whole(ARGV[i + 2], 0)
  if not n or i + 2 + n > #ARGV then return refuse('log', 'per job: id token n, then n lines') end
  i = i + 3 + n
end
local out = {}
i = 3
while i <= #ARGV do
  local id, token, n = ARGV[i], ARGV[i + 1], tonumber(ARGV[i + 2])
  local jk = p .. 'job:' .. id
  -- The token fences a zombie holder; any state is fine, since a job's lines travel just
  -- before its acknowledgement and a resent one may find it completed already.
  if redis.call('HGET', jk, 'token') == token then
    if n > 0 then
      redis.call('RPUSH', jk .. ':logs', unpack(ARGV, i + 3, i + 2 + n))
      redis.call('LTRIM', jk .. ':logs', -max, -1)
    end
    out[#out + 1] = 'OK'
  else
    out[#out + 1] = 'EMQLEASE'
  end
  i = i + 3 + n
end
return out
