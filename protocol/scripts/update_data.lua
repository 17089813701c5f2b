-- update_data: replace the data of a job that has not started, or of a running job by its holder.
-- KEYS: job events meta
-- ARGV: prefix id payload [token]
--   payload: the encoded data (size-limited by the caller); token: the holder's lease token,
--   given only by a running job's handler (ctx.update)
-- REPLY: 1
-- ERRORS: EMQNOJOB no such row; without a token EMQSTATE the job is running or ended; with a
--   token EMQLEASE the job is not active under that token. Nothing changes on an error.
-- EVENTS: updated (id, what 'data')
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
if #ARGV < 3 then return refuse('update_data', 'prefix id payload [token]') end
local id, token = ARGV[2], ARGV[4]
local K = { job = KEYS[1], events = KEYS[2], meta = KEYS[3] }
local row, err = row_to_change(K.job, id,
  token and { active = true, scheduled = true, pending = true, waiting_children = true,
    completed = true, dead = true, cancelled = true }
  or { scheduled = true, pending = true, waiting_children = true },
  'only a job that has not started can be updated (a running one by its handler)')
if not row then return err end
if token and (row[1] ~= 'active' or row[4] ~= token) then
  return redis.error_reply('EMQLEASE lease token is stale: the job was recovered or finished elsewhere')
end
redis.call('HSET', K.job, 'payload', ARGV[3])
local emax = redis.call('HGET', K.meta, 'events_max') or '10000'
redis.call('XADD', K.events, 'MAXLEN', '~', emax, '*', 'event', 'updated', 'id', id, 'what', 'data')
return 1
