#!lua flags=allow-oom
-- clean: delete ended jobs of one state that ended at least older_than_ms ago, oldest first,
-- at most limit of them: their rows, their ids in the state's set (and a parent's P
-- job:<id>:results). Finish instants are read on the server clock.
-- KEYS: completed dead cancelled events meta
-- ARGV: prefix state older_than_ms limit
--   state: completed | dead | cancelled; older_than_ms: >= 0 (0 = every one); limit: >= 1
-- REPLY: the number of jobs deleted (a member whose row is in another state, or gone, leaves
--   the set without counting)
-- ERRORS: EMQINPUT an unknown state, or older_than_ms / limit not whole numbers in range
-- EVENTS: cleaned (id '', state, count), also when nothing was deleted
-- >>> lib/idempotency.lua
-- The idempotency window: ids of ended jobs stay known for `keep_ids_ms` (meta, default a day)
-- after they ended, also once retention or clean deleted their rows, so a producer retrying an
-- enqueue after a timeout gets `duplicate` instead of running the job twice. What is kept is
-- only the id, scored by its end instant, in P ids:ended (a zset: no row, no payload).
local IDS_ENDED = 'ids:ended'

-- The window in ms from meta's keep_ids_ms text (absent: a day; 0: ids are not kept).
local function ids_window(v)
  if not v then return 86400000 end -- absent: no tonumber (it converts a text twice)
  return tonumber(v) or 86400000
end

-- Rows are being deleted: remember `pairs` (end instant, id, ...) of those that ended within
-- the window, and forget the ids whose window has passed. The key expires a window after its
-- last write, so an idle queue keeps none.
local function remember(p, pairs, now, window)
  if window <= 0 or #pairs == 0 then return end
  local key = p .. IDS_ENDED
  for i = 1, #pairs, 4000 do
    redis.call('ZADD', key, unpack(pairs, i, math.min(i + 3999, #pairs)))
  end
  redis.call('ZREMRANGEBYSCORE', key, '-inf', '(' .. string.format('%d', now - window))
  redis.call('PEXPIRE', key, window)
end

-- The ids among `ids` (a list) that ended within the window: a set id -> true. One call for
-- the list: a single id is looked up at once (ZMSCORE on an absent key answers nil), several
-- only when the key exists (one EXISTS spares a long ZMSCORE when nothing is remembered).
local function remembered(p, ids, now, window)
  local known = {}
  if window <= 0 or #ids == 0 or (#ids > 1 and redis.call('EXISTS', p .. IDS_ENDED) == 0) then return known end
  local scores = redis.call('ZMSCORE', p .. IDS_ENDED, unpack(ids))
  for i, score in ipairs(scores) do
    if score and tonumber(score) >= now - window then known[ids[i]] = true end
  end
  return known
end
-- <<< lib/idempotency.lua
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
if #ARGV < 4 or not whole(ARGV[3], 0) or not whole(ARGV[4], 1) then
  return refuse('clean', 'prefix state older_than_ms limit: whole numbers >= 0 and >= 1')
end
local p, state = ARGV[1], ARGV[2]
local sets = { completed = KEYS[1], dead = KEYS[2], cancelled = KEYS[3] }
local set = sets[state]
if not set then return redis.error_reply('EMQINPUT state must be completed, dead or cancelled') end
local age, limit = tonumber(ARGV[3]), tonumber(ARGV[4])
if not age or age < 0 or age ~= math.floor(age) or not limit or limit < 1 or limit ~= math.floor(limit) then
  return redis.error_reply('EMQINPUT older_than_ms must be a whole number >= 0 and limit >= 1')
end
local t = redis.call('TIME')
local now = t[1] * 1000 + math.floor(t[2] / 1000)
local ids = redis.call('ZRANGEBYSCORE', set, '-inf', now - age, 'WITHSCORES', 'LIMIT', 0, limit)
local n, ended = 0, {}
for i = 1, #ids, 2 do
  local id = ids[i]
  local jk = p .. 'job:' .. id
  -- A member whose row moved on (retried, say) only leaves the set: a live row is never deleted.
  if redis.call('HGET', jk, 'state') == state then
    redis.call('DEL', jk, jk .. ':results', jk .. ':logs', jk .. ':failures', jk .. ':deps', jk .. ':processed')
    n = n + 1
    ended[#ended + 1], ended[#ended + 2] = ids[i + 1], id
  end
  redis.call('ZREM', set, id)
end
local m = redis.call('HMGET', KEYS[5], 'events_max', 'keep_ids_ms')
remember(p, ended, now, ids_window(m[2])) -- deleted, still known for the idempotency window
local emax = m[1] or '10000'
redis.call('XADD', KEYS[4], 'MAXLEN', '~', emax, '*', 'event', 'cleaned', 'id', '', 'state', state,
  'count', n)
return n
