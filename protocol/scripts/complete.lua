#!lua flags=allow-oom
-- complete: finish active jobs with their results, fenced by lease token, and claim the next.
-- KEYS: active completed events wake meta ring pending
-- ARGV: prefix lease_ms claim_n, then one triple per job: id token result, then [consumer]
--   result: the encoded result ('' for none); claim_n: how many jobs to claim afterwards;
--   consumer (optional, after the last triple; '' = not recorded): as claim's, for its claim
-- REPLY: {statuses, jobs, wake_id, wait_ms, now_ms, next_due_ms}: statuses[i] 'OK' (also for
--   a repeat of an acknowledgement already applied: completed with the same token) or
--   'EMQLEASE' (the token is no longer the job's, or the job is not active: that job is left
--   unchanged); jobs, wake_id, wait_ms, now_ms and next_due_ms as in claim, and claim's
--   optional timeouts entry after them.
-- ERRORS: none (a stale token is a per-job status, so one zombie does not fail a batch)
-- EVENTS: completed: one entry for the call's completed jobs (id, and ids when several; see
--   lib/bulk.lua emit_batch); then claim's events. Counts completions per minute in
--   stats:<epoch minute> (hash field completed, kept 2 hours) for tools. Retention trims completed by
--   meta keep_completed (count, default 1000; in batches: up to a tenth, at most 100, over it
--   before a trim back to it) and keep_completed_ms (age, default 1 day), keeping meta
--   completed_floor (the oldest member's finish after a trim) so the age probe runs only when
--   the oldest could be old.
--   A job with a dedupe lock (row field dedupe) frees it; a job with a parent counts down its
--   parent (lib/flow.lua): waiting (parent) when that was the last child.
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
-- >>> lib/bulk.lua
-- One command for many members instead of one per job (redis.call count sets a script's
-- cost), in slices Lua's unpack can take. `args` holds whole member groups (pairs for ZADD).
local function bulk(cmd, key, args)
  for i = 1, #args, 4000 do
    redis.call(cmd, key, unpack(args, i, math.min(i + 3999, #args)))
  end
end

-- One events entry for the jobs a call moved together (lean events: one XADD per call, not
-- per job). A single job gets the plain entry (event, id[, field]); several get event, id (the
-- first), field (the first's value), ids (every id, space-separated) and, with a field, its
-- plural (every value, space-separated, in ids order) unless `shared` (the one value is every
-- job's, as added's name). `tail` (optional): field, value pairs every job of the entry shares
-- (claim's consumer), copied at the end as they are. Readers expand it into one event a job.
local function emit_batch(K, emax, event, ids, field, values, shared, tail)
  if #ids == 0 then return end
  local entry = { 'XADD', K.events, 'MAXLEN', '~', emax, '*', 'event', event, 'id', ids[1] }
  if field then
    entry[#entry + 1] = field
    entry[#entry + 1] = values[1]
  end
  if #ids > 1 then
    entry[#entry + 1] = 'ids'
    entry[#entry + 1] = table.concat(ids, ' ')
    if field and not shared then
      entry[#entry + 1] = field .. 's'
      entry[#entry + 1] = table.concat(values, ' ')
    end
  end
  if tail then
    for i = 1, #tail do entry[#entry + 1] = tail[i] end
  end
  redis.call(unpack(entry))
end
-- <<< lib/bulk.lua
-- >>> lib/clock.lua
-- The server's clock, read once per call (TIME): now in epoch ms, and in epoch µs for lease
-- tokens (a token at least the claim's µs instant is one no server could have handed out
-- before that instant, so a promoted replica never repeats a token its old primary gave).
local function server_clock()
  local t = redis.call('TIME')
  local s, us = t[1] + 0, t[2] + 0 -- digits: one conversion each (tonumber converts twice)
  return s * 1000 + math.floor(us / 1000), s * 1000000 + us
end
-- <<< lib/clock.lua
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
-- >>> lib/claim.lua
-- Claim up to n jobs: the ring's lanes (one job per group per turn) interleaved with flat
-- pending (lowest priority score first, then mint order). Each claimed job gets attempts + 1,
-- a fresh lease token, state active and its lease deadline as its score in active.
-- The token is the larger of the job's previous token + 1 and `now_us`, the call's server
-- instant in µs: it grows on every claim of the job, and a server promoted after a failover
-- (whose copy of the row may lack the old primary's last claims) hands out a token the old
-- primary never did, so a superseded holder's writes are refused (SPEC section 8).
-- Rate limits are sliding logs of claim instants (the queue's in `limiter`, a lane's in
-- `lanes:log:<group>`): at most max claims in any window of per ms, so no burst at edges.
-- A lane over its limit leaves the ring for `lanes:limited`, scored by when it may run again.
-- A queue-wide cap (meta `concurrency`) lets a claim take at most concurrency - running jobs;
-- each taken row is marked `slot` 1 and meta `running` counts them (lib/lanes.lua left_active
-- gives each back once). A handler's rate limit (rate_limit.lua) holds the whole queue (meta
-- `held_until`: nothing is claimed before it, wait_ms says when) or one lane (`lanes:held`, and
-- `lanes:limited` to bring it back): a held lane popped off the ring goes back to limited.
-- A ghost (an id whose row is gone) or a moved row (not pending) is dropped and the call pops
-- on, so a claim never comes back short while claimable work remains; after SKIP_MAX such
-- drops it stops and replies as if full, so the consumer claims again at once (bounded work
-- per call, and eviction's leftovers drain at full speed). A moved row goes to the set its
-- state names when that set lacks it, and a row whose attempts, token or max is not a whole
-- number (or whose state is unknown) is dead-lettered as EMQDATA (lib/quarantine.lua): both
-- count as drops, and neither stops the claim of the others.
-- Returns the flat 7-per-job array (id token attempts max payload name backoff); when fewer
-- than n were claimed and nothing claimable is left, the wake stream's last id to block on
-- ('' when full, or when cut at SKIP_MAX: claim again); the ms until a rate limit lets more be
-- claimed (-1: no limit is holding work back); and the schedule's earliest run-at (-1: empty),
-- read in the same atomic call as the wake id, so a consumer that parks after that id has
-- seen every 'w s' written before it; and `timeouts`, a flat id, timeout_ms pair for each job
-- taken whose row has a `timeout` (empty for most calls: the scripts reply it only when not).
-- `consumer` (nil: not recorded): the claiming consumer's id, written on each taken row in the
-- write the claim makes anyway and named once on the call's active entry, so tools can say
-- which consumer ran an attempt at no extra call.
local SKIP_MAX = 1000
-- A rate log's entries stamped after now were written before the server clock stepped back:
-- they count from now, so the window reopens rate_ms from now and not the step later (SPEC 2.1).
local function rate_settle(log, now)
  for _, member in ipairs(redis.call('ZRANGEBYSCORE', log, '(' .. now, '+inf')) do
    redis.call('ZADD', log, now, member)
  end
end

local CLAIM_NUMBERS = { 'attempts', 6, whole_text, 'token', 7, whole_text, 'max', 4, whole_text }
-- The meta fields claim reads. A script that reads meta for itself too asks for these after
-- its own fields and hands claim their values (`m`, in this order): one meta read per call.
local CLAIM_META = { 'paused', 'rate_max', 'rate_ms', 'concurrency', 'running', 'held_until', 'version' }
local function claim(p, K, n, lease, now, now_us, emax, m, consumer, now_s)
  local jobs, got, wait, asked, skipped, woke = {}, 0, -1, n, 0, false
  local leases = {} -- deadline, id pairs: one ZADD to active for the whole call
  local claimed, tries = {}, {} -- ids and attempts: one active entry for the whole call
  -- The queue's settings in the one meta read every claim makes (CLAIM_META): pause, rate
  -- limit, the queue-wide concurrency cap with its running count, and a handler's hold.
  m = m or redis.call('HMGET', K.meta, unpack(CLAIM_META))
  local timeouts = {} -- id, timeout_ms of the jobs taken that have one
  local paused = m[1] == '1'
  local rate_max, rate_ms = num(m[2], 0), num(m[3], 0)
  local cap = num(m[4], 0) or 0
  -- The attempts of a row without max: 1 under protocol version 1, 3 from version 2 (SPEC 5).
  local unset_max = (num(m[7], 1) or 1) >= 2 and '3' or '1'
  -- What each taken row gets besides the claim's own fields: `slot` 1 under a queue-wide cap
  -- (given back once when the job leaves active), and the consumer, also on the active entry.
  local marks, by = {}, nil
  if cap > 0 then marks = { 'slot', '1' } end
  if consumer then
    marks[#marks + 1], marks[#marks + 2] = 'consumer', consumer
    by = { 'consumer', consumer }
  end
  local held = num(m[6], 0) or 0
  local on_hold = held > now and not paused
  local log = {}
  -- Numbers the hot path hands redis.call are passed as text made once per call: Redis turns
  -- a Lua number argument into text with a printf of its own every time (the costly part of a
  -- 13-digit instant), a string it takes as is. '%d' (a C long: 64 bits where Redis runs) is
  -- exact for every whole number below 2^53 and costs about half of '%.0f''s float printf.
  -- `now_s` (optional): a caller that made now's text already hands it over (one printf less).
  now_s = now_s or string.format('%d', now)
  local deadline_s = string.format('%d', now + lease)
  local now_us_s -- now_us's text, made by the first job whose token it is
  if rate_max > 0 and not paused then
    local limiter = p .. 'limiter'
    redis.call('ZREMRANGEBYSCORE', limiter, '-inf', now - rate_ms)
    rate_settle(limiter, now)
    local room = rate_max - redis.call('ZCARD', limiter)
    if room < n then n = math.max(room, 0) end
  end
  local rate_n = n -- what the rate window allows, before the cap and a hold cut it further
  if cap > 0 then n = math.max(math.min(n, cap - (num(m[5], 0) or 0)), 0) end
  if on_hold then
    n, wait = 0, held - now -- a handler's rate limit holds the queue until then
  elseif held > 0 and held <= now then
    redis.call('HDEL', K.meta, 'held_until')
  end
  -- Lanes whose rate window (or hold) has passed rejoin the ring. A queue with no lane waiting
  -- (the ring and the limited set both empty: one EXISTS) takes the flat path below.
  local limited, holds = p .. 'lanes:limited', p .. 'lanes:held'
  local lanes = not paused and redis.call('EXISTS', K.ring, limited) > 0
  local holding = false -- some lane is held by a handler's rate limit: served lanes check theirs
  if lanes and redis.call('ZCARD', limited) > 0 then
    for _, group in ipairs(redis.call('ZRANGEBYSCORE', limited, '-inf', now)) do
      redis.call('ZREM', limited, group)
      if redis.call('ZCARD', lane_key(p, group)) > 0 then
        ring_offer(p, K, group, tonumber(redis.call('HGET', p .. 'lanes:running', group) or '0'))
      end
    end
    redis.call('ZREMRANGEBYSCORE', holds, '-inf', now)
    holding = redis.call('EXISTS', holds) == 1
  end
  local function take(id)
    local jk = p .. 'job:' .. id
    local row = redis.call('HMGET', jk, 'state', 'payload', 'name', 'max', 'backoff', 'attempts', 'token',
      'timeout')
    if row[1] ~= 'pending' then -- a ghost or a moved row: drop it and pop on
      skipped = skipped + 1
      if row[1] and rehome(p, K, id, row[1], now, emax) then woke = true end
      return nil
    end
    local field, value = bad_number(row, CLAIM_NUMBERS)
    if field then
      skipped = skipped + 1
      if quarantine(p, K, id, field, value, now, emax) then woke = true end
      return nil
    end
    -- One read and one write per job: redis.call count, not bytes, sets the cost.
    local attempts = num(row[6], 0) + 1
    local token = math.max(num(row[7], 0) + 1, now_us)
    -- 16 digits: Lua's own tostring would round it. A token is the call's µs instant unless
    -- the row's last one is newer: every job of a batch shares that text, made once.
    local text
    if token == now_us then
      now_us_s = now_us_s or string.format('%d', now_us)
      text = now_us_s
    else
      text = string.format('%d', token)
    end
    -- One text for the row and the active entry ('1' as is for a first attempt: no printf).
    local attempt = row[6] and string.format('%d', attempts) or '1'
    redis.call('HSET', jk, 'state', 'active', 'started', now_s, 'attempts', attempt, 'token', text, unpack(marks))
    leases[#leases + 1] = deadline_s
    leases[#leases + 1] = id
    claimed[#claimed + 1] = id
    tries[#tries + 1] = attempt
    local b = got * 7
    jobs[b + 1], jobs[b + 2], jobs[b + 3], jobs[b + 4] = id, token, attempts, row[4] or unset_max
    jobs[b + 5], jobs[b + 6], jobs[b + 7] = row[2], row[3] or '', row[5] or ''
    got = got + 1
    if row[8] then
      timeouts[#timeouts + 1] = id
      timeouts[#timeouts + 1] = row[8]
    end
    if rate_max > 0 then -- the queue's rate log: only a rate-limited queue keeps one
      log[#log + 1] = now
      log[#log + 1] = id .. ':' .. text
    end
    return text
  end
  -- Serve one job of the ring's head group, if its concurrency and rate limit allow.
  local function serve_lane()
    local group = redis.call('ZPOPMIN', K.ring)[1]
    if holding then -- held by a handler's rate limit: off the ring, back from limited when it ends
      local until_ms = tonumber(redis.call('ZSCORE', holds, group) or '0')
      if until_ms > now then
        redis.call('ZADD', limited, until_ms, group)
        return
      end
    end
    local c = redis.call('HMGET', p .. 'lanes:concurrency', group, '*')
    local limit = tonumber(c[1] or c[2] or '0')
    local running = tonumber(redis.call('HGET', p .. 'lanes:running', group) or '0')
    if limit > 0 and running >= limit then return end -- re-offered when a job of it ends
    local r = redis.call('HMGET', p .. 'lanes:rate', group, '*')
    local spec = r[1] or r[2]
    local lane_log = p .. 'lanes:log:' .. group
    if spec then
      local max, per = string.match(spec, '^(%d+):(%d+)$')
      max, per = tonumber(max), tonumber(per)
      redis.call('ZREMRANGEBYSCORE', lane_log, '-inf', now - per)
      rate_settle(lane_log, now)
      if redis.call('ZCARD', lane_log) >= max then
        local oldest = redis.call('ZRANGE', lane_log, 0, 0, 'WITHSCORES')
        redis.call('ZADD', limited, tonumber(oldest[2]) + per + 1, group)
        return
      end
    end
    local popped = redis.call('ZPOPMIN', lane_key(p, group))
    local token = popped[1] and take(popped[1])
    if token then
      running = redis.call('HINCRBY', p .. 'lanes:running', group, 1)
      if spec then
        redis.call('ZADD', lane_log, now, popped[1] .. ':' .. token)
        redis.call('PEXPIRE', lane_log, 86400000)
      end
    end
    if redis.call('ZCARD', lane_key(p, group)) > 0 then ring_offer(p, K, group, running) end
  end
  while not lanes and not paused and got < n and skipped < SKIP_MAX do
    local want = n - got
    local flat = redis.call('ZPOPMIN', K.pending, want == 1 and '1' or string.format('%d', want))
    if #flat == 0 then break end
    for i = 1, #flat, 2 do take(flat[i]) end
  end
  while lanes and got < n and skipped < SKIP_MAX do
    local moved = false
    if redis.call('ZCARD', K.ring) > 0 then
      moved = true -- the ring shrank or turned: progress either way
      serve_lane()
    end
    if got < n then
      -- With no lanes waiting, pop every free slot's worth in one call.
      local want = (redis.call('ZCARD', K.ring) == 0) and (n - got) or 1
      local flat = redis.call('ZPOPMIN', K.pending, want)
      for i = 1, #flat, 2 do
        moved = true
        take(flat[i])
      end
    end
    if not moved then break end
  end
  -- Redis keeps a sorted set of up to 128 members (zset-max-listpack-entries) as a listpack,
  -- where every insert and removal scans the whole set: with tens to a hundred jobs running,
  -- active's scans were a fifth of what a claim and its completion cost Redis. A member longer
  -- than zset-max-listpack-value (64 bytes) turns a set into a skiplist (O(log n) inserts), and
  -- Redis never turns one back while the key lives; so a claim of several jobs that finds
  -- active a listpack (or absent) adds such a placeholder before the leases and removes it
  -- after, in this same call: no reader sees it, only the encoding changes. (pcall: a user
  -- whose ACL lacks object|encoding gets an error table here and the plain ZADD.)
  local widen = false
  if got > 1 then
    local encoding = redis.pcall('OBJECT', 'ENCODING', K.active) -- false: no such key yet
    widen = encoding == false or encoding == 'listpack' or encoding == 'ziplist'
  end
  local wide = widen and string.rep('~', 200)
  if wide then redis.call('ZADD', K.active, '0', wide) end
  bulk('ZADD', K.active, leases)
  if wide then redis.call('ZREM', K.active, wide) end
  if cap > 0 and got > 0 then redis.call('HINCRBY', K.meta, 'running', got) end
  emit_batch(K, emax, 'active', claimed, 'attempt', tries, false, by)
  if woke then wake(K) end -- a dead-lettered child released its flow parent
  if rate_max > 0 and #log > 0 then
    redis.call('ZADD', p .. 'limiter', unpack(log))
    redis.call('PEXPIRE', p .. 'limiter', rate_ms + 1000)
  end
  -- The window's room is used up while work remains: say when it reopens (else consumers
  -- would learn of it only at their next beat). With no work waiting, nothing holds work back.
  if rate_max > 0 and not paused and not on_hold and rate_n < asked and got >= rate_n and
      (redis.call('ZCARD', K.pending) > 0 or redis.call('ZCARD', K.ring) > 0) then
    local oldest = redis.call('ZRANGE', p .. 'limiter', 0, 0, 'WITHSCORES')
    wait = math.max(1, tonumber(oldest[2]) + rate_ms - now + 1)
  end
  if lanes and not on_hold and redis.call('ZCARD', limited) > 0 then
    local soonest = redis.call('ZRANGE', limited, 0, 0, 'WITHSCORES')
    local lane_wait = math.max(1, tonumber(soonest[2]) - now)
    if wait < 0 or lane_wait < wait then wait = lane_wait end
  end
  local wid = ''
  if got < asked and skipped < SKIP_MAX then
    local last = redis.call('XREVRANGE', K.wake, '+', '-', 'COUNT', '1')
    wid = last[1] and last[1][1] or '0-0'
  end
  -- This call took the last waiting job: the queue is drained. Lanes off the ring still hold
  -- jobs when they wait out a rate window, or their concurrency limit (they have jobs running).
  local function drained()
    if redis.call('EXISTS', K.pending, K.ring, limited) > 0 then return false end
    for _, group in ipairs(redis.call('HKEYS', p .. 'lanes:running')) do
      if redis.call('ZCARD', lane_key(p, group)) > 0 then return false end
    end
    return true
  end
  if got > 0 and drained() then
    redis.call('XADD', K.events, 'MAXLEN', '~', emax, '*', 'event', 'drained', 'id', '')
  end
  local head = redis.call('ZRANGE', p .. 'schedule', '0', '0', 'WITHSCORES')
  return jobs, wid, wait, head[2] and tonumber(head[2]) or -1, timeouts
end
-- <<< lib/claim.lua
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
local tail = (#ARGV - 3) % 3 -- 1: a consumer id follows the triples
local lease, claim_n = whole(ARGV[2], 1), whole(ARGV[3], 0)
if #ARGV < 3 or tail == 2 or not lease or not claim_n then
  return refuse('complete', 'prefix lease_ms claim_n (whole numbers >= 1 and >= 0), then id token result triples'
    .. ', then an optional consumer')
end
local p = ARGV[1]
local K = { active = KEYS[1], completed = KEYS[2], events = KEYS[3], wake = KEYS[4], meta = KEYS[5],
  ring = KEYS[6], pending = KEYS[7] }
local now, now_us = server_clock()
local now_s = string.format('%d', now) -- one text for every write below (see lib/claim.lua)
local s = redis.call('HMGET', K.meta, 'events_max', 'keep_completed', 'keep_completed_ms', 'keep_ids_ms',
  'completed_floor', unpack(CLAIM_META)) -- claim's fields too: one meta read for the whole call
local emax = s[1] or '10000'
local statuses, woke, done = {}, false, 0
local gone, finished = {}, {} -- leave active and join completed in one call each, not per job
local after = {} -- completed jobs with a lane, a dedupe lock or a flow parent to tell
for i = 4, #ARGV - tail, 3 do
  local id = ARGV[i]
  local jk = p .. 'job:' .. id
  local row = redis.call('HMGET', jk, 'state', 'token', 'group', 'dedupe', 'parent', 'retain_completed', 'slot')
  if row[1] == 'completed' and row[2] == ARGV[i + 1] then
    -- The same acknowledgement again (a client resent it after a lost reply): already done.
    statuses[#statuses + 1] = 'OK'
  elseif row[1] ~= 'active' or row[2] ~= ARGV[i + 1] then
    statuses[#statuses + 1] = 'EMQLEASE'
  else
    gone[#gone + 1] = id
    finished[#finished + 1] = now_s
    finished[#finished + 1] = id
    if ARGV[i + 2] ~= '' then
      redis.call('HSET', jk, 'state', 'completed', 'finished', now_s, 'result', ARGV[i + 2])
    else
      redis.call('HSET', jk, 'state', 'completed', 'finished', now_s)
    end
    if row[3] or row[4] or row[5] or row[6] or row[7] then after[#after + 1] = { id, row, ARGV[i + 2] } end
    statuses[#statuses + 1] = 'OK'
    done = done + 1
  end
end
bulk('ZREM', K.active, gone)
bulk('ZADD', K.completed, finished)
emit_batch(K, emax, 'completed', gone)
-- What a completion sets off (a lane's or the queue's free slot, a dedupe lock, a flow parent) follows the
-- completed entry, so readers see the cause before its effects.
for _, a in ipairs(after) do
  local id, row = a[1], a[2]
  if left_active(p, K, p .. 'job:' .. id, row[3], row[7]) then woke = true end
  if row[4] then dedupe_release(p, row[4], id) end
  if row[5] and child_ended(p, K, row[5], id, 'completed', a[3], now, emax) then woke = true end
end
-- Per-minute throughput for tools: one counter write per call, not per job.
if done > 0 then
  local stats = p .. 'stats:' .. string.format('%d', math.floor(now / 60000))
  -- The ttl is set when the field is new (its first write this minute), not on every call.
  local by = done == 1 and '1' or string.format('%d', done) -- text: no printf of a Lua number
  if redis.call('HINCRBY', stats, 'completed', by) == done then redis.call('PEXPIRE', stats, '7200000') end
end
trim_floored(p, K.completed, num(s[2], 1000), num(s[3], 86400000), now, ids_window(s[4]), K.meta,
  'completed_floor', s[5])
for _, a in ipairs(after) do -- the jobs' own retention
  if a[2][6] then retain(p, K.completed, a[1], a[2][6], now, ids_window(s[4])) end
end
if woke then wake(K) end
-- Claim reuses the meta read above unless a completion gave back a queue-wide slot (its
-- running count changed since): then it reads meta afresh.
local freed = false
for _, a in ipairs(after) do
  if a[2][7] == '1' then freed = true end
end
local consumer = tail == 1 and ARGV[#ARGV] ~= '' and ARGV[#ARGV] or nil
local jobs, wid, wait, head, timeouts = claim(p, K, claim_n, lease, now, now_us, emax,
  not freed and { unpack(s, 6, 5 + #CLAIM_META) } or nil, consumer, now_s)
if #timeouts > 0 then return { statuses, jobs, wid, wait, now, head, timeouts } end -- as claim's
return { statuses, jobs, wid, wait, now, head }
