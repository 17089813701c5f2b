#!lua flags=allow-oom
-- fail: record a failed attempt, fenced by lease token, and retry, dead-letter or cancel it.
-- KEYS: job active schedule dead cancelled events wake meta ring pending
-- ARGV: prefix id token message stack delay_ms [reason]
--   message, stack: the error (already size-limited by the caller; stack '' for none);
--   delay_ms: the retry delay computed above the wire by Backoff; '-1' = never retry
--   (an unrecoverable error). The retry runs at server now + delay_ms.
--   reason (optional): 'error' (the default) or 'timeout' (the attempt ran past its
--   execution timeout): the failed event's reason when the attempt is not unrecoverable
-- REPLY: 'retry' (scheduled, or pending when delay_ms is 0), 'dead' (no attempts left, or
--   never retry, or bad data: attempts, max or prio not a whole number, dead-lettered as
--   EMQDATA, event failed reason data), 'cancelled' (a cancel was requested while it ran)
-- ERRORS: EMQNOJOB no such row; EMQLEASE the token is not the job's or the job is not active
--   (nothing changes); EMQINPUT a reason other than 'error' or 'timeout'
-- EVENTS: failed (id, attempt, reason, error) then delayed (id, at) | waiting (id) |
--   retries_exhausted (id, attempt); a cancelled job: failed (id, attempt, reason cancelled,
--   error) only. error: the message's first 200 bytes (cut at a character, ended with '…'), so
--   each attempt's error outlives the row's, which keeps the latest failure's alone.
--   Counts failures per minute in stats:<epoch minute> (hash field failed, kept 2 hours).
--   A job that ends (dead or cancelled) frees its dedupe lock, and fails its waiting parent
--   unless that parent continues on child failure (lib/flow.lua: failed (parent, reason
--   child) or waiting (parent)).
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
-- >>> lib/retention.lua
-- Retention: keep at most `keep` members of a terminal set and none older than `age` ms,
-- deleting their rows (and a parent's P job:<id>:results, :failures, :deps and :processed, a job's P job:<id>:logs) too. Bounded work per call: trims at most 1000 rows by count and
-- 100 by age, so a long backlog is trimmed over several calls, never in one long one.
-- The count is kept in batches: the set may run `trim_slack(keep)` over `keep` (a tenth, at
-- most 100; 0 below 10) before a call trims it back to `keep`, so a steady stream of single
-- completions pays the trim's calls (pop, DEL, the ids' window) once per batch, not per job.
-- The ids deleted stay known for the idempotency `window` (lib/idempotency.lua, embedded before).
local function trim_slack(keep)
  return math.min(100, math.floor(keep / 10))
end

-- `floor` (optional): a lower bound of the set's scores (a finish instant no member is older
-- than). Above now - age no member can be old, so the age probe is skipped; one above `now` is
-- no bound (the clock stepped back, and this call's members score below it). True when the
-- call looked at the set's oldest members (popped or probed), so the caller's floor is stale.
local function trim(p, set, keep, age, now, window, floor)
  local excess = redis.call('ZCARD', set) - keep
  local old = {}
  local looked = true
  if excess > trim_slack(keep) then
    old = redis.call('ZPOPMIN', set, math.min(excess, 1000)) -- member, score pairs, oldest first
  elseif age >= 0 and not (floor and floor > now - age and floor <= now) then
    old = redis.call('ZRANGEBYSCORE', set, '-inf', string.format('%d', now - age), 'WITHSCORES', 'LIMIT', '0', '100')
  else
    looked = false
  end
  if #old > 0 then
    local rows, ids, ended = {}, {}, {}
    for i = 1, #old, 2 do
      local id = old[i]
      local jk = p .. 'job:' .. id
      rows[#rows + 1], rows[#rows + 2], rows[#rows + 3], rows[#rows + 4] = jk, jk .. ':results', jk .. ':logs',
        jk .. ':failures'
      rows[#rows + 1], rows[#rows + 2] = jk .. ':deps', jk .. ':processed'
      ids[#ids + 1] = id
      ended[i], ended[i + 1] = old[i + 1], id
    end
    redis.call('DEL', unpack(rows))
    if excess <= trim_slack(keep) then redis.call('ZREM', set, unpack(ids)) end -- ZPOPMIN took them
    remember(p, ended, now, window)
  end
  return looked
end

-- trim with its floor kept in meta `field` (text, as HMGET read it; nil: none): a steady stream
-- of completions, whose oldest member is far younger than the age bound, pays no age probe per
-- call, only a ZRANGE and a meta write per trim. The floor is the oldest member's score after a
-- trim, so it stays a lower bound while members only join at the current instant (complete is
-- the set's one writer) and leave (retention, clean, remove).
local function trim_floored(p, set, keep, age, now, window, meta, field, floor)
  if not trim(p, set, keep, age, now, window, tonumber(floor)) then return end
  local head = redis.call('ZRANGE', set, '0', '0', 'WITHSCORES')
  if head[2] then
    if head[2] ~= floor then redis.call('HSET', meta, field, head[2]) end
  elseif floor then
    redis.call('HDEL', meta, field)
  end
end

-- A job's own retention, kept on its row as '<count>:<age_ms>' (retain_completed, retain_dead;
-- -1 = no such bound) and applied by the call that ends it: count 0 deletes the job at once
-- (it never stays in the set); otherwise the set is trimmed by these bounds too, beside the
-- queue's. An absent or malformed spec does nothing.
local function retain(p, set, id, spec, now, window)
  local count, age = string.match(spec or '', '^(%-?%d+):(%-?%d+)$')
  count, age = tonumber(count), tonumber(age)
  if not count or not age then return end
  if count == 0 then
    local jk = p .. 'job:' .. id
    redis.call('ZREM', set, id)
    redis.call('DEL', jk, jk .. ':results', jk .. ':logs', jk .. ':failures', jk .. ':deps', jk .. ':processed')
    remember(p, { now, id }, now, window)
    return
  end
  if count > 0 then trim(p, set, count, -1, now, window) end
  if age >= 0 then trim(p, set, 9007199254740991, age, now, window) end
end
-- <<< lib/retention.lua
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
if #ARGV < 6 or not whole(ARGV[6], -1) then
  return refuse('fail', 'prefix id token message stack delay_ms; delay_ms a whole number >= -1')
end
local why = ARGV[7] or 'error' -- the failed event's reason for an attempt that may be retried
if why ~= 'error' and why ~= 'timeout' then
  return refuse('fail', "a reason 'error' or 'timeout' (or none) after delay_ms")
end
local p, id = ARGV[1], ARGV[2]
local K = { job = KEYS[1], active = KEYS[2], schedule = KEYS[3], dead = KEYS[4], cancelled = KEYS[5],
  events = KEYS[6], wake = KEYS[7], meta = KEYS[8], ring = KEYS[9], pending = KEYS[10] }
local row = redis.call('HMGET', K.job, 'state', 'token', 'attempts', 'max', 'group', 'cancel', 'prio',
  'dedupe', 'parent', 'retain_dead', 'slot')
if not row[1] then return redis.error_reply('EMQNOJOB no job ' .. id) end
if row[1] ~= 'active' or row[2] ~= ARGV[3] then
  return redis.error_reply('EMQLEASE lease token is stale: the job was recovered or finished elsewhere')
end
local t = redis.call('TIME')
local now = t[1] * 1000 + math.floor(t[2] / 1000)
local s = redis.call('HMGET', K.meta, 'events_max', 'keep_dead', 'keep_dead_ms', 'keep_ids_ms', 'version')
local emax = s[1] or '10000'
local woke = false
-- The failed event's error: a bounded copy (events are many and capped by count, not bytes).
local said = ARGV[4]
if #said > 200 then
  local cut = 200 -- back to a character's first byte, so the copy stays valid UTF-8
  while cut > 0 and string.byte(said, cut + 1) >= 128 and string.byte(said, cut + 1) < 192 do
    cut = cut - 1
  end
  said = string.sub(said, 1, cut) .. '…'
end
redis.call('ZREM', K.active, id)
if left_active(p, K, K.job, row[5], row[11]) then woke = true end
-- Checked before the row is written: a malformed count or priority could neither be compared
-- nor released, so the job is dead-lettered as bad data instead (the caller's error is kept
-- in the events' stead: the row's error names the field).
local field, value = bad_number(row, { 'attempts', 3, whole_text, 'max', 4, whole_text, 'prio', 7, whole_text })
if field then
  if quarantine(p, K, id, field, value, now, emax) then woke = true end
  if woke then wake(K) end
  return 'dead'
end
local stats = p .. 'stats:' .. math.floor(now / 60000) -- per-minute failures, for tools
-- The ttl is set when the field is new (its first write this minute), not on every call.
if redis.call('HINCRBY', stats, 'failed', 1) == 1 then redis.call('PEXPIRE', stats, 7200000) end
redis.call('HSET', K.job, 'error', ARGV[4])
if ARGV[5] ~= '' then redis.call('HSET', K.job, 'stack', ARGV[5]) else redis.call('HDEL', K.job, 'stack') end
-- A row without max allows 1 attempt under protocol version 1, 3 from version 2 (SPEC 5).
local unset_max = (tonumber(s[5] or '1') or 1) >= 2 and 3 or 1
local attempts, max, delay = tonumber(row[3]), tonumber(row[4]) or unset_max, tonumber(ARGV[6])
local reply
if row[6] == '1' then
  redis.call('HSET', K.job, 'state', 'cancelled', 'finished', now)
  redis.call('ZADD', K.cancelled, now, id)
  redis.call('XADD', K.events, 'MAXLEN', '~', emax, '*', 'event', 'failed', 'id', id, 'attempt', attempts,
    'reason', 'cancelled', 'error', said)
  trim(p, K.cancelled, tonumber(s[2] or '10000'), tonumber(s[3] or '604800000'), now, ids_window(s[4]))
  reply = 'cancelled'
elseif delay < 0 or attempts >= max then
  redis.call('HSET', K.job, 'state', 'dead', 'finished', now)
  redis.call('ZADD', K.dead, now, id)
  redis.call('XADD', K.events, 'MAXLEN', '~', emax, '*', 'event', 'failed', 'id', id, 'attempt', attempts,
    'reason', delay < 0 and 'unrecoverable' or why, 'error', said)
  redis.call('XADD', K.events, 'MAXLEN', '~', emax, '*', 'event', 'retries_exhausted', 'id', id,
    'attempt', attempts)
  trim(p, K.dead, tonumber(s[2] or '10000'), tonumber(s[3] or '604800000'), now, ids_window(s[4]))
  reply = 'dead'
else
  redis.call('XADD', K.events, 'MAXLEN', '~', emax, '*', 'event', 'failed', 'id', id, 'attempt', attempts,
    'reason', why, 'error', said)
  if delay == 0 then
    redis.call('HSET', K.job, 'state', 'pending')
    if release(p, K, id, row[5], row[7] or '0') then woke = true end
    redis.call('XADD', K.events, 'MAXLEN', '~', emax, '*', 'event', 'waiting', 'id', id)
  else
    redis.call('HSET', K.job, 'state', 'scheduled', 'runat', now + delay)
    redis.call('ZADD', K.schedule, now + delay, id)
    redis.call('XADD', K.events, 'MAXLEN', '~', emax, '*', 'event', 'delayed', 'id', id, 'at', now + delay)
    -- A new earliest run-at moves parked consumers' due timers.
    if redis.call('ZRANGE', K.schedule, 0, 0)[1] == id then
      redis.call('XADD', K.wake, 'MAXLEN', '~', '100', '*', 'w', 's') -- 's': the schedule's head moved
    end
  end
  reply = 'retry'
end
if reply ~= 'retry' then
  if row[8] then dedupe_release(p, row[8], id) end
  if row[9] and child_ended(p, K, row[9], id, reply, '', now, emax) then woke = true end
  if reply == 'dead' and row[10] then retain(p, K.dead, id, row[10], now, ids_window(s[4])) end -- its own
end
if woke then wake(K) end
return reply
