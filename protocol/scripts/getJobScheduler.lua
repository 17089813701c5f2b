-- getJobScheduler: read one scheduler, or list the schedulers whose occurrence was released.
-- KEYS: schedulers
-- ARGV: prefix mode arg
--   mode 'one': arg is a scheduler id. mode 'due': arg is a batch limit; lists the schedulers
--   due for a hand-off: scored at or before now (their occurrence's instant has come) whose
--   occurrence no longer waits in schedule for its first run (promoted, claimed, finished,
--   retried, cancelled or removed). The caller computes each one's next instant and calls
--   updateJobScheduler.
-- REPLY: 'one': {now_ms, next, fields, job_state, waiting}: next is the member's score as
--   text ('' when there is no such scheduler, 'inf' when it has ended); fields the record as
--   a flat field/value list ({} when none); job_state the state of the record's occurrence
--   row ('' when it has none or the row is gone); waiting 1 when that occurrence still waits
--   for its first run (state scheduled, attempts absent or 0), else 0.
--   'due': {now_ms, next_due_ms or -1, flat list, 5 entries per scheduler: id job next count
--   repeat, topups}; next_due is the earliest instant after now at which a scheduler becomes
--   due; topups the cron schedulers whose lookahead runs low (P schedulers:topup, soonest to
--   run out first, at most batch), 6 entries each: id job last count repeat left, with last
--   the lookahead's last instant (the current occurrence's when it holds none), count the
--   record's, left how many instants it still holds. The caller computes the instants after
--   last (with count + left runs made) and calls updateJobScheduler with next 'more'.
-- ERRORS: EMQINPUT mode unknown
-- EVENTS: none (a read)
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
if #ARGV < 3 or (ARGV[2] == 'due' and not whole(ARGV[3], 1)) then
  return refuse('getJobScheduler', "prefix mode arg; arg a scheduler id, or a batch >= 1 for mode 'due'")
end
local p, mode = ARGV[1], ARGV[2]
local t = redis.call('TIME')
local now = t[1] * 1000 + math.floor(t[2] / 1000)

local function waits(row)
  return row[1] == 'scheduled' and (row[2] or '0') == '0'
end

if mode == 'one' then
  local id = ARGV[3]
  local fields = redis.call('HGETALL', p .. 'scheduler:' .. id)
  local score = redis.call('ZSCORE', KEYS[1], id) or ''
  local state, waiting = '', 0
  local job = redis.call('HGET', p .. 'scheduler:' .. id, 'job')
  if job then
    local row = redis.call('HMGET', p .. 'job:' .. job, 'state', 'attempts')
    state = row[1] or ''
    if waits(row) then waiting = 1 end
  end
  return { now, score, fields, state, waiting }
elseif mode ~= 'due' then
  return redis.error_reply('EMQINPUT getJobScheduler mode must be one or due')
end

local due = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now, 'WITHSCORES', 'LIMIT', 0, tonumber(ARGV[3]))
local out = {}
for i = 1, #due, 2 do
  local id = due[i]
  local rec = redis.call('HMGET', p .. 'scheduler:' .. id, 'job', 'count', 'repeat')
  if rec[1] and rec[3] then
    local row = redis.call('HMGET', p .. 'job:' .. rec[1], 'state', 'attempts')
    if not waits(row) then
      out[#out + 1] = id
      out[#out + 1] = rec[1]
      out[#out + 1] = due[i + 1]
      out[#out + 1] = rec[2] or '0'
      out[#out + 1] = rec[3]
    end
  end
end
local head = redis.call('ZRANGEBYSCORE', KEYS[1], '(' .. now, '+inf', 'WITHSCORES', 'LIMIT', 0, 1)
local next_due = -1
if head[2] and head[2] ~= 'inf' and head[2] ~= '+inf' then next_due = tonumber(head[2]) end
local low = redis.call('ZRANGE', KEYS[1] .. ':topup', 0, tonumber(ARGV[3]) - 1, 'WITHSCORES')
local topups = {}
for i = 1, #low, 2 do
  local rec = redis.call('HMGET', p .. 'scheduler:' .. low[i], 'job', 'count', 'repeat', 'ahead', 'ended')
  if rec[1] and rec[3] and not rec[5] then
    local left = 0
    for _ in string.gmatch(rec[4] or '', '%d+') do left = left + 1 end
    for _, v in ipairs({ low[i], rec[1], low[i + 1], rec[2] or '0', rec[3], left }) do topups[#topups + 1] = v end
  end
end
return { now, next_due, out, topups }
