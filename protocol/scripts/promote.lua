#!lua flags=allow-oom
-- promote: release every due scheduled job to pending (or its lane), on the server clock.
-- KEYS: schedule pending events wake meta ring
-- ARGV: prefix batch [mode [elapsed_ms]]
--   prefix: the queue base root 'emq:{<queue>}:'; batch: at most this many members per call;
--   mode 'next': reply with the clock and the next due instant too (a consumer's timer), ''
--   for the plain reply; elapsed_ms: how long the caller lived since its own previous promote
--   (its monotonic clock). The server clock running ahead of it by more than that is a
--   forward jump; back is one always (SPEC 2.1): the jobs due inside it move by it first
-- REPLY: the number of due members selected, ghosts included (the seeds' reply); with mode
--   'next': {count, now_ms, next_due_ms or -1 when nothing is scheduled, handoffs}: handoffs
--   counts the released scheduler occurrences left to a runtime's hand-off (cron), so a
--   consumer runs it at once
-- ERRORS: none. A due row in another state goes to its own set when that lacks it; a
--   scheduled row whose prio is not a whole number is dead-lettered as EMQDATA (failed,
--   reason data, field prio).
-- EVENTS: waiting (id) per released job; delayed (id, name, at) per next scheduler occurrence
--   made. A released occurrence of an `every` (or `immediately`) job scheduler that the
--   record still points at hands off here (lib/recurrence.lua scheduler_follow): the next
--   occurrence is scheduled (or the scheduler ended) in this same call, before the released
--   one runs, with a wake 'w s' when it is the new earliest. Cron schedulers are handed off by
--   a runtime (getJobScheduler due, updateJobScheduler). A released occurrence of a Repeat
--   cadence that its record still points at (P repeat:<name> job) hands off the same way
--   (lib/recurrence.lua repeat_follow): the run is counted (runs, last) and the next slot's
--   occurrence scheduled, the name scored by it in P repeat.
-- >>> lib/rows.lua
-- Bad data: a row field that a script computes with (a number) or dispatches on (the state),
-- holding what no script writes (a hand edit, a foreign tool, a half-migrated store). Every
-- script checks the fields it relies on before its first write to the row, so a malformed
-- row never makes a script fail halfway (Redis keeps the writes before a Lua error): it is
-- taken out of circulation (lib/quarantine.lua) and the call goes on with the other jobs.
-- The number a field's text stands for (tonumber's), or `absent` when the field is absent
-- (HMGET's false): most meta and row fields a hot script reads are absent, and tonumber of a
-- text runs strtod twice (its check, then its value), about 800 instructions a field.
local function num(v, absent)
  if not v then return absent end
  return tonumber(v)
end

-- True when `v` is absent (HMGET's false) or decimal text of a whole number: what the ARGV
-- checks admit for prio and max, and what tonumber reads exactly.
local function whole_text(v)
  return not v or (#v <= 17 and string.find(v, '^%-?%d+$') ~= nil)
end

-- True when `v` is absent or an integer as Redis writes one (what HINCRBY takes: no leading
-- zero, no '-0'), for the counters the scripts HINCRBY: attempts in handback, stalled, children.
local function counter_text(v)
  return not v or v == '0' or (#v <= 17 and string.find(v, '^%-?[1-9]%d*$') ~= nil)
end

-- The first of `fields` (name, position in `row`, check triples) whose value fails its check:
-- its name and value, or nil when the row's numbers are sound.
local function bad_number(row, fields)
  for i = 1, #fields, 3 do
    local v = row[fields[i + 1]]
    if not fields[i + 2](v) then return fields[i], v end
  end
  return nil
end
-- <<< lib/rows.lua
-- >>> lib/lanes.lua
-- Lanes: a grouped job waits in P g:<group>:pending; the ring (a zset scored by a turn
-- sequence) holds the groups that can be served now, oldest turn first.
local function lane_key(p, group)
  return p .. 'g:' .. group .. ':pending'
end

-- Put the group at the ring's tail when it has a free slot and is not paused.
-- True when the ring went from empty to non-empty (parked consumers need a wake).
local function ring_offer(p, K, group, running)
  local c = redis.call('HMGET', p .. 'lanes:concurrency', group, '*')
  local limit = tonumber(c[1] or c[2] or '0')
  if limit > 0 and running >= limit then return false end
  if redis.call('SISMEMBER', p .. 'lanes:paused', group) == 1 then return false end
  local seq = redis.call('HINCRBY', K.meta, 'ring_seq', 1)
  return redis.call('ZADD', K.ring, 'NX', seq, group) == 1 and redis.call('ZCARD', K.ring) == 1
end

-- Release a job into claimable work: its lane (and the ring), or flat pending, by priority.
-- True when claimable work went from none to some. `bulk_flat`: a caller releasing many flat
-- jobs checks pending's emptiness once itself, so no ZCARD per job.
local function release(p, K, id, group, prio, bulk_flat)
  if group then
    redis.call('ZADD', lane_key(p, group), prio, id)
    redis.call('SADD', p .. 'lanes', group) -- the registry of groups, for counts and tools
    return ring_offer(p, K, group, tonumber(redis.call('HGET', p .. 'lanes:running', group) or '0'))
  end
  redis.call('ZADD', K.pending, prio, id)
  if bulk_flat then return false end
  return redis.call('ZCARD', K.pending) == 1
end

-- A grouped job left active: free its slot (callers guarantee once per claim), and re-wake
-- the ring for the lane when it still has jobs.
local function lane_done(p, K, group)
  local running = redis.call('HINCRBY', p .. 'lanes:running', group, -1)
  if running <= 0 then
    redis.call('HDEL', p .. 'lanes:running', group)
    running = 0
  end
  if redis.call('ZCARD', lane_key(p, group)) > 0 then return ring_offer(p, K, group, running) end
  return false
end

-- A job left active (complete, fail, recovery, handback, snooze, rate_limit): free its lane
-- slot and, when its claim took a queue-wide slot (row field `slot` = 1, written by a claim
-- under meta `concurrency`), that slot: meta `running` - 1 (removed at 0) and the row's mark
-- removed, so a slot is given back once per claim (callers are fenced by the lease token).
-- True when that made claimable work appear: a freed lane offered to an empty ring, or a
-- queue that was at its cap (parked consumers claim again; spurious when nothing waits).
local function left_active(p, K, jk, group, slot)
  local woke = false
  if slot == '1' then
    redis.call('HDEL', jk, 'slot')
    local running = redis.call('HINCRBY', K.meta, 'running', -1)
    if running <= 0 then redis.call('HDEL', K.meta, 'running') end
    local cap = tonumber(redis.call('HGET', K.meta, 'concurrency') or '0') or 0
    woke = cap > 0 and running + 1 >= cap
  end
  if group and lane_done(p, K, group) then woke = true end
  return woke
end

-- One entry on the wake stream: every consumer blocked on it returns and claims. Entries are
-- 'w' '1' (claimable work appeared) or 'w' 's' (the schedule's earliest run-at moved); the
-- stream keeps ~100 so a consumer reading after its last id sees every kind since.
local function wake(K)
  redis.call('XADD', K.wake, 'MAXLEN', '~', '100', '*', 'w', '1')
end
-- <<< lib/lanes.lua
-- >>> lib/dedupe.lua
-- Deduplication by a key apart from the job id: P dedupe:<key> holds the kept job's id, with
-- a PX ttl when one was given (a window), without one until the kept job ends (its row then
-- carries `dedupe` = <key> and the scripts that end it release the lock).
--   throttle: while the lock holds, a new job with the key is dropped; the kept one stays.
--   debounce: while the lock holds and the kept job has not started (no attempt yet), the new
--     job's data replaces the kept job's and its run time moves to the new one's (`at`; nil =
--     now); a lock with a ttl gets its ttl again. Once the kept job has started (a retry
--     waiting included), a new job is admitted and takes the lock.
-- A lock without a ttl whose job ended or whose row is gone is stale, and is taken over.
local function dedupe_spec(spec)
  local mode, ttl = string.match(spec, '^(%a+):?(%d*)$')
  if mode ~= 'throttle' and mode ~= 'debounce' then return nil end
  return mode, tonumber(ttl)
end

-- The kept job's id when the new job is deduplicated (nothing of it is written), else nil.
local function dedupe_admit(p, K, key, mode, ttl, payload, at, now, emax)
  local dk = p .. 'dedupe:' .. key
  local kept = redis.call('GET', dk)
  if not kept then return nil end
  local jk = p .. 'job:' .. kept
  local row = redis.call('HMGET', jk, 'state', 'group', 'prio', 'attempts')
  local state = row[1]
  local live = state == 'scheduled' or state == 'pending' or state == 'active' or state == 'waiting_children'
  if not live and redis.call('PTTL', dk) < 0 then return nil end -- stale: released late or row gone
  if mode == 'debounce' then
    -- Started (running, ended, or waiting to be retried): the new job is a job of its own. So
    -- is one whose attempts or prio is malformed: it is not touched here (the script that
    -- next moves it dead-letters it), and the new job takes the lock.
    if (state ~= 'scheduled' and state ~= 'pending') or bad_number(row, { 'attempts', 4, whole_text, 'prio', 3, whole_text })
        or tonumber(row[4] or '0') > 0 then
      return nil
    end
    if state == 'scheduled' then redis.call('ZREM', p .. 'schedule', kept)
    else redis.call('ZREM', row[2] and lane_key(p, row[2]) or K.pending, kept) end
    redis.call('HSET', jk, 'payload', payload)
    redis.call('XADD', K.events, 'MAXLEN', '~', emax, '*', 'event', 'deduplicated', 'id', kept, 'key', key)
    if at then
      redis.call('HSET', jk, 'state', 'scheduled', 'runat', at)
      redis.call('ZADD', p .. 'schedule', at, kept)
      redis.call('XADD', K.events, 'MAXLEN', '~', emax, '*', 'event', 'delayed', 'id', kept, 'at', at)
      if redis.call('ZRANGE', p .. 'schedule', 0, 0)[1] == kept then
        redis.call('XADD', K.wake, 'MAXLEN', '~', '100', '*', 'w', 's') -- the schedule's head moved
      end
    else
      redis.call('HSET', jk, 'state', 'pending')
      redis.call('HDEL', jk, 'runat')
      if release(p, K, kept, row[2], row[3] or '0') then wake(K) end
      if state == 'scheduled' then
        redis.call('XADD', K.events, 'MAXLEN', '~', emax, '*', 'event', 'waiting', 'id', kept)
      end
    end
    if ttl then redis.call('PEXPIRE', dk, ttl) end
    return kept
  end
  redis.call('XADD', K.events, 'MAXLEN', '~', emax, '*', 'event', 'deduplicated', 'id', kept, 'key', key)
  return kept
end

-- Takes the lock for a newly admitted job; without a ttl the row remembers the key.
local function dedupe_lock(p, jk, id, key, ttl)
  if ttl then
    redis.call('SET', p .. 'dedupe:' .. key, id, 'PX', ttl)
  else
    redis.call('SET', p .. 'dedupe:' .. key, id)
    redis.call('HSET', jk, 'dedupe', key)
  end
end

-- The job ended (completed, dead, cancelled or removed): free its lock, if still its own.
local function dedupe_release(p, key, id)
  local dk = p .. 'dedupe:' .. key
  if redis.call('GET', dk) == id then redis.call('DEL', dk) end
end
-- <<< lib/dedupe.lua
-- >>> lib/flow.lua
-- Flows: a parent waits in state waiting_children (in P waiting_children) with `children` =
-- how many of its children have not ended yet; each child's row names its `parent`: the id,
-- or '<parent prefix><id>' (emq:{<queue>}:JOB…) when the parent lives in another queue.
-- A completed child stores its result in P job:<parent>:results (child id -> result) and
-- counts down; at zero the parent is released to claimable work (event waiting). A child
-- that ends otherwise (dead, cancelled, removed) fails its parent (dead, event failed with
-- reason child), and that parent's parent in turn, unless the parent has `continue` = 1
-- (remove the dependency: it only counts down) or `continue` = ignore (it counts down and
-- records the failure in P job:<parent>:failures, child id -> '<outcome>: <error>'). A parent
-- that is no longer waiting ignores its children. A parent whose children or prio is not a
-- whole number (lib/rows.lua) cannot count down or be released: it fails as with a failed
-- child, its error EMQDATA naming the field. Each child is counted once: the parent keeps the
-- children it was told of in P job:<parent>:processed, and a second end of one is ignored.
-- A parent in another queue (another slot on a Cluster) is not touched here: the end is
-- recorded as a notice in this queue (P notices, P notice:<child>), which a runtime hands to
-- the parent's queue (child_notice.lua, SPEC 14.1).
-- True when claimable work went from none to some (the caller wakes parked consumers).
--   outcome: 'completed' (result: its encoded result) | 'dead' | 'cancelled' | 'removed'
--   err: the child's error when known (a notice carries it; false: none), nil to read its row
--   ref: the child's name in the parent's processed set when it is not in queue p (a notice)
local function child_ended(p, K, parent, id, outcome, result, now, emax, err, ref)
  local ok = outcome == 'completed'
  while parent do
    if string.sub(parent, 1, 3) ~= 'JOB' and string.find(parent, '}:', 1, true) then
      if not ok and err == nil then err = redis.call('HGET', p .. 'job:' .. id, 'error') end
      redis.call('HSET', p .. 'notice:' .. id, 'parent', parent, 'outcome', outcome, 'result', result,
        'error', err or '')
      redis.call('ZADD', p .. 'notices', now, id)
      return false
    end
    local pk = p .. 'job:' .. parent
    local row = redis.call('HMGET', pk, 'state', 'continue', 'group', 'prio', 'parent', 'children')
    if row[1] ~= 'waiting_children' then return false end
    if redis.call('SADD', pk .. ':processed', ref or id) == 0 then return false end
    local field = bad_number(row, { 'children', 6, counter_text, 'prio', 4, whole_text })
    if ok and not field then redis.call('HSET', pk .. ':results', id, result) end
    if not ok and row[2] == 'ignore' and not field then
      if err == nil then err = redis.call('HGET', p .. 'job:' .. id, 'error') end
      redis.call('HSET', pk .. ':failures', id, err and (outcome .. ': ' .. err) or outcome)
    end
    if (ok or row[2] == '1' or row[2] == 'ignore') and not field then
      if redis.call('HINCRBY', pk, 'children', -1) > 0 then return false end
      redis.call('ZREM', p .. 'waiting_children', parent)
      redis.call('HSET', pk, 'state', 'pending')
      local woke = release(p, K, parent, row[3], row[4] or '0')
      redis.call('XADD', K.events, 'MAXLEN', '~', emax, '*', 'event', 'waiting', 'id', parent)
      return woke
    end
    redis.call('ZREM', p .. 'waiting_children', parent)
    redis.call('HSET', pk, 'state', 'dead', 'finished', now, 'error', field and
      ('EMQDATA job ' .. parent .. ': its field ' .. field .. ' is not a whole number; it was dead-lettered '
        .. 'when its child ' .. id .. ' ended: correct or remove the field, then retry the job')
      or ('child ' .. id .. ' failed (' .. outcome .. ')'))
    redis.call('ZADD', p .. 'dead', now, parent)
    if field then
      redis.call('XADD', K.events, 'MAXLEN', '~', emax, '*', 'event', 'failed', 'id', parent, 'reason', 'data',
        'field', field, 'child', id)
    else
      redis.call('XADD', K.events, 'MAXLEN', '~', emax, '*', 'event', 'failed', 'id', parent, 'reason', 'child',
        'child', id)
    end
    id, parent, ok, outcome, err, ref = parent, row[5], false, 'dead', nil, nil
  end
  return false
end
-- <<< lib/flow.lua
-- >>> lib/quarantine.lua
-- Taking a malformed row out of circulation (lib/rows.lua says what is malformed). Needs
-- lib/rows.lua, lib/lanes.lua, lib/dedupe.lua and lib/flow.lua embedded before this block.
-- The set each state's id lives in (a grouped pending job: its lane, see rehome).
local STATE_SET = { scheduled = 'schedule', pending = 'pending', active = 'active',
  waiting_children = 'waiting_children', completed = 'completed', dead = 'dead', cancelled = 'cancelled' }

-- Dead-letter job `id` because its field `field` holds `value`: state dead, `finished`, an
-- `error` that starts EMQDATA and names the field, on `dead`, event failed (reason data,
-- field). Its dedupe lock is freed and its flow parent told, as for any job that ends dead.
-- The caller has taken the id off the set it was found in (and freed a lane slot it held).
-- True when that made claimable work appear (the caller wakes).
local function quarantine(p, K, id, field, value, now, emax)
  local jk = p .. 'job:' .. id
  local shown = string.sub(value, 1, 40) .. (#value > 40 and '…' or '')
  redis.call('HSET', jk, 'state', 'dead', 'finished', now, 'error', 'EMQDATA job ' .. id .. ': its field '
    .. field .. " holds '" .. shown .. "', which no script writes; it was dead-lettered: correct or remove "
    .. 'the field, then retry the job')
  redis.call('ZADD', p .. 'dead', now, id)
  redis.call('XADD', K.events, 'MAXLEN', '~', emax, '*', 'event', 'failed', 'id', id, 'reason', 'data',
    'field', field)
  local r = redis.call('HMGET', jk, 'dedupe', 'parent')
  if r[1] then dedupe_release(p, r[1], id) end
  return r[2] and child_ended(p, K, r[2], id, 'dead', '', now, emax) or false
end

-- A row found in a set its state does not name (its id was popped off that set): when the
-- set its state names does not hold it, put it there, so no row is left in no set. An active
-- row goes in with deadline now (recovery returns it); a pending one is released (its prio
-- checked first); an unknown state is bad data. Ghosts (no state) only leave. True on a wake.
local function rehome(p, K, id, state, now, emax)
  if not state then return false end
  local set = STATE_SET[state]
  if not set then return quarantine(p, K, id, 'state', state, now, emax) end
  local jk = p .. 'job:' .. id
  local r = redis.call('HMGET', jk, 'group', 'prio', 'runat', 'finished')
  if state == 'pending' and r[1] then set = lane_key(p, r[1]) else set = p .. set end
  if redis.call('ZSCORE', set, id) then return false end
  if state == 'pending' then
    if not whole_text(r[2]) then return quarantine(p, K, id, 'prio', r[2], now, emax) end
    return release(p, K, id, r[1], r[2] or '0')
  end
  local score = now
  if state == 'scheduled' and whole_text(r[3]) and r[3] then score = r[3] end
  if (state == 'completed' or state == 'dead' or state == 'cancelled') and whole_text(r[4]) and r[4] then
    score = r[4]
  end
  redis.call('ZADD', set, score, id)
  return false
end
-- <<< lib/quarantine.lua
-- >>> lib/recurrence.lua
-- Recurrence: the id of an occurrence is derived from what it is an occurrence of and its
-- instant: 'JOB' + the instant as 10 Crockford base32 characters (like a minted id's time
-- part, so occurrences sort by due time among minted ids) + ':' + tag ('r' repeat, 's'
-- scheduler) + ':' + the name. Two writers racing on one occurrence make the same id, and
-- the second finds the row already there.
local B32 = '0123456789ABCDEFGHJKMNPQRSTVWXYZ'
local function occurrence_id(tag, name, at)
  local s, rest = '', at
  for _ = 1, 10 do
    local d = rest % 32
    s = string.sub(B32, d + 1, d + 1) .. s
    rest = (rest - d) / 32
  end
  return 'JOB' .. s .. ':' .. tag .. ':' .. name
end

-- Job schedulers. A record P scheduler:<id> keeps exactly one upcoming occurrence, its `job`,
-- scored in P schedulers by the occurrence's instant. scheduler_make writes an occurrence from
-- the record's template (t: data name prio group max backoff, each false when absent) unless
-- its row exists, and points the record at it. A new earliest run-at wakes parked consumers.
-- An occurrence's row has no `attempts` (absent = 0: still waiting, SPEC 5 and 15), about 50
-- bytes less per occurrence; it keeps `created`, since its id holds its instant, not when it
-- was made.
local function scheduler_make(p, K, schedulers, sid, t, count, at, now, emax)
  local id = occurrence_id('s', sid, at)
  local jk = p .. 'job:' .. id
  local status = 'exists'
  if redis.call('EXISTS', jk) == 0 then
    status = 'created'
    redis.call('HSET', jk, 'state', 'scheduled', 'payload', t[1] or '', 'created', now, 'runat', at)
    if t[2] then redis.call('HSET', jk, 'name', t[2]) end
    if t[3] then redis.call('HSET', jk, 'prio', t[3]) end
    if t[4] then redis.call('HSET', jk, 'group', t[4]) end
    if t[5] then redis.call('HSET', jk, 'max', t[5]) end
    if t[6] then redis.call('HSET', jk, 'backoff', t[6]) end
    redis.call('ZADD', K.schedule, at, id)
    redis.call('XADD', K.events, 'MAXLEN', '~', emax, '*', 'event', 'delayed', 'id', id, 'name', t[2] or '',
      'at', at)
    if redis.call('ZRANGE', K.schedule, 0, 0)[1] == id then
      redis.call('XADD', K.wake, 'MAXLEN', '~', '100', '*', 'w', 's') -- 's': the schedule's head moved
    end
  end
  redis.call('HSET', p .. 'scheduler:' .. sid, 'job', id, 'count', count + 1)
  redis.call('ZADD', schedulers, at, sid)
  return status, id
end

-- The run after the one at `ref` with `count` runs made, for repeat options `r` (the record's
-- `repeat`, decoded) with `every`: the runtime's calculateNextMillis. nil once it is over.
local function every_after(r, ref, count)
  if r.limit and count >= r.limit then return nil end
  local n
  if r.startDate and r.startDate > ref then
    n = r.startDate
  elseif r.immediately and count == 0 then
    n = ref
  else
    n = ref + r.every
  end
  if r.endDate and n > r.endDate then return nil end
  return n
end

-- The next occurrence after the one at `prev`, judged at `now` (the runtime's nextOccurrence):
-- the next slot; that slot even though it passed when the one after it has not (late by less
-- than a period: it runs at once, nothing skipped); else, two or more slots missed (no
-- consumer promoted for that long: an outage), the first slot of the grid after now.
local function every_next(r, prev, count, now)
  local n = every_after(r, prev, count)
  if not n or n >= now then return n end
  local after = every_after(r, n, count + 1)
  if not after or after > now then return n end
  return every_after(r, prev + math.floor((now - prev) / r.every) * r.every, count)
end

local function end_reason(r, count)
  if r.limit and count >= r.limit then return 'limit' end
  if r.endDate then return 'endDate' end
  return 'done'
end

-- A cron scheduler's lookahead, the record's `ahead`: the instants that follow its current
-- occurrence, ascending, as decimal ms separated by spaces. Cron lives above the wire, so a
-- runtime computes them (upsert, its hand-off, a top-up) and promote takes the next one from
-- them: no cron slot waits for a runtime's hand-off. When fewer than AHEAD_LOW are left, the
-- scheduler is listed in P schedulers:topup (scored by its lookahead's last instant) for a
-- runtime's recurrence leg to top it up (updateJobScheduler 'more').
local AHEAD_LOW = 4

-- The lookahead's instants after `after` (older ones are stale: made, or skipped), as text.
local function ahead_list(text, after)
  local out = {}
  for v in string.gmatch(text or '', '%d+') do
    if tonumber(v) > after then out[#out + 1] = v end
  end
  return out
end

-- Which listed instant is the next occurrence at `now`: the hand-off rule (section 15) over
-- the instants a runtime listed. The first; the first although it passed when the second has
-- not (late by less than a period: it runs at once, nothing skipped); else (two or more
-- missed: an outage) the first listed instant after now. nil when the list cannot tell (empty;
-- only one, passed; every one passed): a runtime's hand-off decides then, as without a list.
local function ahead_next(list, now)
  if not list[1] then return nil end
  if tonumber(list[1]) >= now then return 1 end
  if not list[2] then return nil end
  if tonumber(list[2]) > now then return 1 end
  for i = 3, #list do
    if tonumber(list[i]) > now then return i end
  end
  return nil
end

-- The hand-off in the script that releases an occurrence (promote): when `id` is a scheduler's
-- current occurrence, make the next one now, before this one runs, so no slot waits for a
-- runtime. For `every` and `immediately` by arithmetic on the record's `repeat`; for a cron
-- pattern from the record's lookahead. When neither can tell (options this script cannot
-- read, a pattern without a usable lookahead), the record waits for a runtime's hand-off
-- (getJobScheduler due, updateJobScheduler). True when a runtime should act at once: that
-- hand-off, or a lookahead running low.
local function scheduler_follow(p, K, id, now, emax)
  if string.sub(id, 14, 16) ~= ':s:' then return false end
  local sid = string.sub(id, 17)
  local sk = p .. 'scheduler:' .. sid
  local rec = redis.call('HMGET', sk, 'repeat', 'job', 'count', 'ended', 'data', 'name', 'prio', 'group', 'max',
    'backoff', 'ahead')
  if not rec[1] or rec[2] ~= id or rec[4] then return false end
  local ok, r = pcall(cjson.decode, rec[1])
  if not ok or type(r) ~= 'table' then return true end
  if r.pattern == nil and r.every ~= nil and (type(r.every) ~= 'number' or r.every < 1) then return true end
  local schedulers = p .. 'schedulers'
  local at = tonumber(redis.call('ZSCORE', schedulers, sid) or '')
  local count = tonumber(rec[3] or '0')
  if not at or not count then return false end
  local next_at, rest
  if r.pattern ~= nil then
    if not (r.limit and count >= r.limit) then
      local list = ahead_list(rec[11], at)
      local i = ahead_next(list, now)
      if not i then return true end
      next_at, rest = tonumber(list[i]), { unpack(list, i + 1) }
    end
  elseif r.every then
    next_at = every_next(r, at, count, now)
  end
  if not next_at then
    redis.call('HSET', sk, 'ended', end_reason(r, count))
    redis.call('ZADD', schedulers, 'inf', sid)
    if r.pattern ~= nil then redis.call('ZREM', schedulers .. ':topup', sid) end
    return false
  end
  scheduler_make(p, K, schedulers, sid, { rec[5], rec[6], rec[7], rec[8], rec[9], rec[10] }, count, next_at, now,
    emax)
  if not rest then return false end
  if rest[1] then redis.call('HSET', sk, 'ahead', table.concat(rest, ' ')) else redis.call('HDEL', sk, 'ahead') end
  if #rest >= AHEAD_LOW then return false end
  redis.call('ZADD', schedulers .. ':topup', rest[#rest] or next_at, sid)
  return true
end

-- Repeat cadences (register, pump). A record P repeat:<name> (every_ms, template, catch_up,
-- max) is scored in P repeat by its upcoming slot, and that slot's occurrence already exists:
-- a scheduled row in the schedule, the record's `job`, released by promote at its instant like
-- any delayed job. The call that releases an occurrence (promote, or a pump) makes the next
-- one in the same call (repeat_follow), so no slot waits for a pump or a beat, and every
-- consumer's timer and every claim's reported head (the schedule's) cover it.

-- The slot after `at`: the next one; with catch_up 'once', when that one and the one after it
-- have passed too (two or more missed: nothing released it for that long, an outage), the
-- first slot of the grid after now. 'all' keeps every slot (each released in its turn).
local function repeat_next(every, catch_up, at, now)
  local n = at + every
  if catch_up ~= 'all' and n < now and n + every <= now then
    n = n + (math.floor((now - n) / every) + 1) * every
  end
  return n
end

-- Writes the occurrence of cadence `name` at `at` as a scheduled job unless its row exists
-- (rec: every_ms template catch_up max, as HMGET reads them), points the record at it and
-- scores the name by it. A new earliest run-at wakes parked consumers ('w s'). The row leaves
-- `attempts` out and keeps `created`, as scheduler_make's.
local function repeat_make(p, schedule, events, wake, name, rec, at, now, emax)
  local id = occurrence_id('r', name, at)
  local jk = p .. 'job:' .. id
  if redis.call('EXISTS', jk) == 0 then
    redis.call('HSET', jk, 'state', 'scheduled', 'payload', rec[2], 'created', now, 'runat', at, 'name', name)
    if rec[4] then redis.call('HSET', jk, 'max', rec[4]) end
    redis.call('ZADD', schedule, at, id)
    redis.call('XADD', events, 'MAXLEN', '~', emax, '*', 'event', 'delayed', 'id', id, 'name', name, 'at', at)
    if redis.call('ZRANGE', schedule, 0, 0)[1] == id then
      redis.call('XADD', wake, 'MAXLEN', '~', '100', '*', 'w', 's')
    end
  end
  redis.call('HSET', p .. 'repeat:' .. name, 'job', id)
  redis.call('ZADD', p .. 'repeat', at, name)
  return id
end

-- The hand-off in promote: when `id` is a cadence's current occurrence, count the run and
-- make the next occurrence now, before this one runs. An occurrence released again (a retry)
-- is no longer the record's `job` and hands nothing off.
local function repeat_follow(p, K, id, now, emax)
  if string.sub(id, 14, 16) ~= ':r:' then return end
  local name = string.sub(id, 17)
  local rk = p .. 'repeat:' .. name
  local rec = redis.call('HMGET', rk, 'every_ms', 'template', 'catch_up', 'max', 'job')
  if not rec[1] or rec[5] ~= id then return end
  local at = tonumber(redis.call('ZSCORE', p .. 'repeat', name) or '')
  local every = tonumber(rec[1])
  if not at or not every or every < 1 then return end
  redis.call('HSET', rk, 'last', at)
  redis.call('HINCRBY', rk, 'runs', 1)
  repeat_make(p, K.schedule, K.events, K.wake, name, rec, repeat_next(every, rec[3], at, now), now, emax)
end
-- <<< lib/recurrence.lua
-- >>> lib/jump.lua
-- Jumps of the server clock (SPEC section 2.1). A sweep keeps the last instant it read in a
-- meta field and compares. Back (now < seen): the clock was stepped back by seen - now. Ahead
-- by more than the caller's `expected` gap: the clock was stepped forward, or the server was
-- paused (SIGSTOP, a long command, DEBUG SLEEP) and nobody could call meanwhile. Either way
-- the members of `zset` still ahead at the last sweep move by the jump before the sweep
-- compares them with now: what was n ms ahead then is n ms ahead now (give or take the
-- expected gap), so a step is not felt and a pause does not count against a lease.
-- Jumps under JUMP_MIN_MS are noise (a slow reply, NTP's small corrections) and ignored.
-- Returns the jump in ms (negative: back; 0: none).
local JUMP_MIN_MS = 500
local function clock_follow(meta, field, now, expected, zset)
  local seen = tonumber(redis.call('HGET', meta, field) or '')
  local jump = 0
  if seen and now - seen < -JUMP_MIN_MS then jump = now - seen
  elseif seen and expected and now - seen - expected > JUMP_MIN_MS then jump = now - seen - expected end
  if jump ~= 0 then
    local m = redis.call('ZRANGEBYSCORE', zset, '(' .. seen, '+inf', 'WITHSCORES')
    for i = 1, #m, 2 do redis.call('ZADD', zset, tonumber(m[i + 1]) + jump, m[i]) end
  end
  redis.call('HSET', meta, field, now)
  return jump
end
-- <<< lib/jump.lua
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
if not ARGV[1] or not whole(ARGV[2], 1) or (ARGV[4] and not whole(ARGV[4], 0)) then
  return refuse('promote', 'prefix batch [mode [elapsed_ms]]; batch a whole number >= 1, elapsed_ms >= 0')
end
local p = ARGV[1]
local K = { schedule = KEYS[1], pending = KEYS[2], events = KEYS[3], wake = KEYS[4], meta = KEYS[5], ring = KEYS[6] }
local t = redis.call('TIME')
local now = t[1] * 1000 + math.floor(t[2] / 1000)
clock_follow(K.meta, 'clock_schedule', now, tonumber(ARGV[4] or ''), K.schedule)
local due = redis.call('ZRANGEBYSCORE', K.schedule, '-inf', now, 'LIMIT', 0, tonumber(ARGV[2]))
local emax = redis.call('HGET', K.meta, 'events_max') or '10000'
local woke, handoffs = false, 0
for _, id in ipairs(due) do
  redis.call('ZREM', K.schedule, id)
  local jk = p .. 'job:' .. id
  local row = redis.call('HMGET', jk, 'state', 'group', 'prio')
  -- A ghost (row gone) leaves the set and is not resurrected; only a scheduled row moves. A
  -- row in another state goes to its own set when that lacks it; a prio that is not a whole
  -- number (it could not be a score) dead-letters the job as bad data.
  if row[1] ~= 'scheduled' then
    if rehome(p, K, id, row[1], now, emax) then woke = true end
  elseif not whole_text(row[3]) then
    if quarantine(p, K, id, 'prio', row[3], now, emax) then woke = true end
  else
    redis.call('HSET', jk, 'state', 'pending')
    if release(p, K, id, row[2], row[3] or '0') then woke = true end
    redis.call('XADD', K.events, 'MAXLEN', '~', emax, '*', 'event', 'waiting', 'id', id)
    -- A recurring occurrence (a scheduler's, a cadence's): its next one exists before it runs.
    if scheduler_follow(p, K, id, now, emax) then handoffs = handoffs + 1 end
    repeat_follow(p, K, id, now, emax)
  end
end
if woke then wake(K) end
if ARGV[3] == 'next' then
  local head = redis.call('ZRANGE', K.schedule, 0, 0, 'WITHSCORES')
  return { #due, now, head[2] and tonumber(head[2]) or -1, handoffs }
end
return #due
