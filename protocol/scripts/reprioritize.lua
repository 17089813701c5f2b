-- reprioritize: change the priority of a job that has not started.
-- KEYS: job pending events meta
-- ARGV: prefix id priority
--   priority: a whole number >= 0 (0 = none; lower runs first)
-- REPLY: 1
-- ERRORS: EMQNOJOB no such row; EMQSTATE the job is running or ended: nothing changes
-- EVENTS: updated (id, what 'priority', priority)
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
-- >>> lib/change.lua
-- Changing a job that has not started (promote_job, reschedule, reprioritize, update_data): read
-- the fields a change needs and refuse, before anything is written, a job that is gone
-- (EMQNOJOB) or in a state the verb does not apply to (EMQSTATE: it started in between, say).
-- `allowed` maps the states the verb applies to to true; `what` says what the verb needs.
local function row_to_change(jk, id, allowed, what)
  local row = redis.call('HMGET', jk, 'state', 'group', 'prio', 'token')
  if not row[1] then return nil, redis.error_reply('EMQNOJOB no job ' .. id) end
  if not allowed[row[1]] then
    return nil, redis.error_reply('EMQSTATE job ' .. id .. ' is ' .. row[1] .. ': ' .. what)
  end
  return row
end

-- The set a waiting job's id sits in: its lane or flat pending (pending), or the schedule.
local function waiting_set(p, K, state, group)
  if state == 'scheduled' then return K.schedule end
  if group then return p .. 'g:' .. group .. ':pending' end
  return K.pending
end
-- <<< lib/change.lua
if #ARGV < 3 then return refuse('reprioritize', 'prefix id priority') end
local p, id = ARGV[1], ARGV[2]
local prio = whole(ARGV[3], 0)
if not prio then return refuse('reprioritize', 'a priority that is a whole number >= 0') end
local K = { job = KEYS[1], pending = KEYS[2], events = KEYS[3], meta = KEYS[4] }
local row, err = row_to_change(K.job, id, { scheduled = true, pending = true, waiting_children = true },
  'only a job that has not started can be reprioritized')
if not row then return err end
-- A pending job takes its new place in its lane or pending at once (XX: an id that is not in
-- the set is not put there); a scheduled or waiting one is released by the new priority later.
if row[1] == 'pending' then redis.call('ZADD', waiting_set(p, K, 'pending', row[2]), 'XX', prio, id) end
if prio == 0 then redis.call('HDEL', K.job, 'prio') else redis.call('HSET', K.job, 'prio', prio) end
local emax = redis.call('HGET', K.meta, 'events_max') or '10000'
redis.call('XADD', K.events, 'MAXLEN', '~', emax, '*', 'event', 'updated', 'id', id, 'what', 'priority',
  'priority', prio)
return 1
