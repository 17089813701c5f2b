-- reschedule: move a job that has not started to a new run-at, on the server clock.
-- KEYS: job schedule pending events wake meta
-- ARGV: prefix id mode value
--   mode 'at': value is the run-at, epoch ms; mode 'in': value is a delay in ms (>= 0) added to
--   the server's now
-- REPLY: the new run-at, epoch ms (an integer)
-- ERRORS: EMQNOJOB no such row; EMQSTATE the job is neither scheduled nor pending (running,
--   ended or waiting for children): nothing changes
-- EVENTS: delayed (id, at)
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
if #ARGV < 4 then return refuse('reschedule', 'prefix id mode value') end
local p, id, mode = ARGV[1], ARGV[2], ARGV[3]
local value = whole(ARGV[4], 0)
if (mode ~= 'at' and mode ~= 'in') or not value then
  return refuse('reschedule', "mode 'at' with a run-at in epoch ms >= 0, or 'in' with a delay in ms >= 0")
end
local K = { job = KEYS[1], schedule = KEYS[2], pending = KEYS[3], events = KEYS[4], wake = KEYS[5],
  meta = KEYS[6] }
local row, err = row_to_change(K.job, id, { scheduled = true, pending = true },
  'only a scheduled or pending job can be rescheduled')
if not row then return err end
local t = redis.call('TIME')
local now = t[1] * 1000 + math.floor(t[2] / 1000)
local at = mode == 'in' and now + value or value
-- A pending job leaves its lane (or pending); its group stays on the ring until a claim finds
-- the lane empty, as after a cancel.
if row[1] == 'pending' then redis.call('ZREM', waiting_set(p, K, 'pending', row[2]), id) end
redis.call('ZADD', K.schedule, at, id)
redis.call('HSET', K.job, 'state', 'scheduled', 'runat', at)
if redis.call('ZRANGE', K.schedule, 0, 0)[1] == id then
  redis.call('XADD', K.wake, 'MAXLEN', '~', '100', '*', 'w', 's')
end
local emax = redis.call('HGET', K.meta, 'events_max') or '10000'
redis.call('XADD', K.events, 'MAXLEN', '~', emax, '*', 'event', 'delayed', 'id', id, 'at', at)
return at
