-- enqueue: admit jobs into pending (flat) or their group's lane, idempotent on the id.
-- KEYS: pending events wake meta ring
-- ARGV: prefix, then one 9-tuple per job: id payload priority group name max backoff
--   dedupe_key dedupe_spec (the 7-field form, without the last two, stays accepted; every
--   tuple of a call has the same width)
--   priority: an integer >= 0 (0 = none; lower runs first, none before any)
--   group: '' or the lane name; name, max (attempts allowed), backoff (JSON): '' when absent
--   dedupe_key: '' or the key jobs are deduplicated by (P dedupe:<key>); dedupe_spec:
--   'throttle' | 'debounce', optionally ':<ttl_ms>' (see lib/dedupe.lua)
--   or the marker '#14' and 14-field tuples: the 13, then timeout_ms ('' or a whole number
--   >= 1: the job's execution timeout per attempt, kept on the row as `timeout`; claim
--   replies it)
-- REPLY: one entry per job: 1 enqueued, 0 duplicate (the id exists, or ended within the
--   idempotency window, lib/idempotency.lua; nothing written), or the
--   kept job's id (a string) when deduplicated (nothing of the new job is written)
-- ERRORS: EMQKIND when any id is not JOB-namespaced; EMQINPUT a tuple count that fits neither
--   width, or a malformed dedupe_spec (either way nothing at all is written)
-- ROWS: state pending, payload, created now, and the optional fields given. created is left out
--   for a minted id (JOB + 20 Crockford base32 characters, the first 10 its mint instant in ms)
--   minted at most 60 s before now and not after it: readers take the id's instant.
-- EVENTS: added (id, name): one entry for the call's admitted jobs when they share a name
--   (ids listed; see lib/bulk.lua emit_batch), else one per job; deduplicated (id = the kept id, key) per
--   deduplicated one, and for a debounce that moved the kept job: waiting (id) or delayed
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
-- >>> lib/admission.lua
-- Admission fields shared by enqueue and flow_add.
-- A job's own retention spec: '' or '<count>:<age_ms>', each a whole number >= -1.
local function retain_ok(spec)
  if spec == '' then return true end
  local c, a = string.match(spec, '^(%-?%d+):(%-?%d+)$')
  return c ~= nil and whole(c, -1) ~= nil and whole(a, -1) ~= nil
end

-- LIFO: a score just below the priority, lower for each newer LIFO job (meta lifo_seq / 2^33),
-- so it is claimed before the jobs of its priority that wait already and after every lower
-- priority. Exact while the priority is below 2^19 and for the first 2^33 LIFO jobs.
local function lifo_score(K, prio)
  local seq = redis.call('HINCRBY', K.meta, 'lifo_seq', 1) % 8589934592
  return tonumber(prio) - seq / 8589934592
end

-- A minted id (JOB, 10 Crockford base32 characters of its mint instant in epoch ms, 10 random
-- ones) already holds when the job was made: its row leaves `created` out when that instant is
-- at most MINTED_SLACK ms before now (and not after it), and readers take the id's instant. A
-- row per waiting job is a hash table (a 100-byte payload is over Redis's listpack limit), in
-- which every field costs about 50 bytes. Any other id, or an instant outside that, gets `created`.
local MINTED_SLACK = 60000
-- Decoded without a table built per call (building one cost more than the rest of a single
-- job's admission): the 20 characters are checked by one pattern, and a Crockford letter's
-- value is its byte less 55, less one for each of I, L, O and U (not digits) below it.
local function minted_at(id)
  if #id ~= 23 or not string.find(id, '^JOB[0-9A-HJKMNP-TV-Z]+$') then return nil end
  local t, b = 0, { string.byte(id, 4, 13) }
  for i = 1, 10 do
    local c = b[i]
    if c < 58 then
      t = t * 32 + c - 48
    else
      t = t * 32 + c - 55 - (c > 73 and 1 or 0) - (c > 76 and 1 or 0) - (c > 79 and 1 or 0) - (c > 85 and 1 or 0)
    end
  end
  return t
end

-- True when a job admitted at `now` with id `id` needs `created` on its row: its id is not
-- minted, or was minted outside the MINTED_SLACK before now.
local function needs_created(id, now)
  local minted = minted_at(id)
  return not minted or minted > now or minted < now - MINTED_SLACK
end
-- <<< lib/admission.lua

if #ARGV < 8 then return refuse('enqueue', 'the prefix, then 9 (or 7) fields per job') end
local p = ARGV[1]
local K = { pending = KEYS[1], events = KEYS[2], wake = KEYS[3], meta = KEYS[4], ring = KEYS[5] }
-- The marker '#13' (never a job id) after the prefix announces 13-field tuples: the 9 fields,
-- then retain_completed retain_dead tags lifo. Else width 9 unless only 7 fits: where both fit,
-- the second tuple's id (ARGV[11]) decides.
local first, w = 2, 7 -- the ARGV index of the first tuple, and the tuple width
if ARGV[2] == '#13' then
  first, w = 3, 13
elseif ARGV[2] == '#14' then
  first, w = 3, 14
elseif (#ARGV - 1) % 9 == 0 and ((#ARGV - 1) % 7 ~= 0 or string.sub(ARGV[11], 1, 3) == 'JOB') then
  w = 9
end
if (#ARGV - first + 1) % w ~= 0 or #ARGV < first + w - 1 then
  return redis.error_reply('EMQINPUT enqueue takes the prefix, then 9 (or 7) fields per job, or #13 and 13, or #14 and 14')
end
local n = (#ARGV - first + 1) / w
for i = 0, n - 1 do
  local b = first + i * w
  if string.sub(ARGV[b], 1, 3) ~= 'JOB' then
    return redis.error_reply('EMQKIND job id must be JOB-namespaced')
  end
  if not whole(ARGV[b + 2], 0) or (ARGV[b + 5] ~= '' and not whole(ARGV[b + 5], 1)) then
    return refuse('enqueue', 'a priority that is a whole number >= 0 and a max that is empty or >= 1')
  end
  if w >= 9 and ARGV[b + 7] ~= '' and not dedupe_spec(ARGV[b + 8]) then
    return redis.error_reply('EMQINPUT dedupe_spec must be throttle or debounce, optionally :<ttl_ms>')
  end
  if w >= 13 and (not retain_ok(ARGV[b + 9]) or not retain_ok(ARGV[b + 10])
      or (ARGV[b + 12] ~= '' and ARGV[b + 12] ~= '1')) then
    return refuse('enqueue', "retain specs '' or <count>:<age_ms> (whole numbers >= -1) and lifo '' or '1'")
  end
  if w == 14 and ARGV[b + 13] ~= '' and not whole(ARGV[b + 13], 1) then
    return refuse('enqueue', "a timeout_ms '' or a whole number >= 1")
  end
end
local t = redis.call('TIME')
local now = t[1] * 1000 + math.floor(t[2] / 1000)
local m = redis.call('HMGET', K.meta, 'events_max', 'keep_ids_ms', 'version')
-- From protocol version 2 a row without max allows 3 attempts: a max of 3 is not written.
local unset_max = (num(m[3], 1) or 1) >= 2 and '3' or nil
local emax = m[1] or '10000'
-- Ids that ended within the idempotency window (their rows deleted since) are duplicates too.
local ids = {}
for i = 0, n - 1 do ids[i + 1] = ARGV[first + i * w] end
local known = remembered(p, ids, now, ids_window(m[2]))
-- Claimable work goes from none to some at most once per call: check pending once, not per job,
-- in the first job's existence check (below).
local woke = false
local was_empty
local out = {}
local added, names = {}, {} -- one added entry per call when every job shares its name
-- A call with dedupe keys writes deduplicated entries as it goes: its added entries go one by
-- one in step with them, so a reader never sees a kept id before it was added.
local batched = true
for i = 0, n - 1 do
  if w >= 9 and ARGV[first + i * w + 7] ~= '' then batched = false end
end
-- A call of several jobs without dedupe keys sends its flat jobs to pending in one ZADD after
-- the loop (score, id pairs; the same members and scores as one ZADD a job): nothing in the loop
-- reads pending but the first EXISTS, made before any write. A single job keeps its own ZADD,
-- so the serial add builds no table for it.
local flat = (batched and n > 1) and {} or nil
for i = 0, n - 1 do
  local b = first + i * w
  local id, prio, group, name = ARGV[b], ARGV[b + 2], ARGV[b + 3], ARGV[b + 4]
  local jk = p .. 'job:' .. id
  local dkey, mode, ttl = w >= 9 and ARGV[b + 7] or '', nil, nil
  if dkey ~= '' then mode, ttl = dedupe_spec(ARGV[b + 8]) end
  local exists
  if i == 0 then
    -- One EXISTS answers both, before anything is written: EXISTS counts a key named twice
    -- twice, so the reply is 2 * (the row exists) + (pending exists).
    local c = redis.call('EXISTS', jk, jk, K.pending)
    exists, was_empty = c >= 2, c % 2 == 0
  else
    exists = not known[id] and redis.call('EXISTS', jk) == 1
  end
  if known[id] or exists then
    out[i + 1] = 0
  elseif dkey ~= '' then
    out[i + 1] = dedupe_admit(p, K, dkey, mode, ttl, ARGV[b + 1], nil, now, emax) -- the kept id, or nil
  end
  if not out[i + 1] then
    if dkey ~= '' then dedupe_lock(p, jk, id, dkey, ttl) end
    -- attempts is left out until the first claim (absent = 0): a smaller row per waiting job
    -- One HSET for the whole row: the optional fields join it only when present.
    local row = { 'state', 'pending', 'payload', ARGV[b + 1] }
    if needs_created(id, now) then row[#row + 1], row[#row + 2] = 'created', now end
    if prio ~= '0' then row[#row + 1], row[#row + 2] = 'prio', prio end
    if group ~= '' then row[#row + 1], row[#row + 2] = 'group', group else group = nil end
    if name ~= '' then row[#row + 1], row[#row + 2] = 'name', name end
    if ARGV[b + 5] ~= '' and ARGV[b + 5] ~= unset_max then row[#row + 1], row[#row + 2] = 'max', ARGV[b + 5] end
    if ARGV[b + 6] ~= '' then row[#row + 1], row[#row + 2] = 'backoff', ARGV[b + 6] end
    local score = prio
    if w >= 13 then
      if ARGV[b + 9] ~= '' then row[#row + 1], row[#row + 2] = 'retain_completed', ARGV[b + 9] end
      if ARGV[b + 10] ~= '' then row[#row + 1], row[#row + 2] = 'retain_dead', ARGV[b + 10] end
      if ARGV[b + 11] ~= '' then row[#row + 1], row[#row + 2] = 'tags', ARGV[b + 11] end
      if ARGV[b + 12] == '1' then score = lifo_score(K, prio) end
      if w == 14 and ARGV[b + 13] ~= '' then row[#row + 1], row[#row + 2] = 'timeout', ARGV[b + 13] end
    end
    redis.call('HSET', jk, unpack(row))
    if flat and not group then
      flat[#flat + 1], flat[#flat + 2] = score, id
    elseif release(p, K, id, group, score, true) then
      woke = true
    end
    if not group and was_empty then woke = true end
    if batched then
      added[#added + 1] = id
      names[#names + 1] = name
    else
      redis.call('XADD', K.events, 'MAXLEN', '~', emax, '*', 'event', 'added', 'id', id, 'name', name)
    end
    out[i + 1] = 1
  end
end
if flat and #flat > 0 then bulk('ZADD', K.pending, flat) end
local same = batched
for j = 2, #names do
  if names[j] ~= names[1] then same = false end
end
if same then
  emit_batch(K, emax, 'added', added, 'name', names, true)
else
  for j = 1, #added do
    redis.call('XADD', K.events, 'MAXLEN', '~', emax, '*', 'event', 'added', 'id', added[j], 'name', names[j])
  end
end
-- Wake parked consumers only when claimable work went from none to some: a consumer parks
-- only after a claim came back short, so while work is waiting nobody is parked.
if woke then wake(K) end
return out
