-- schedule: admit a job fenced out of pending until its run-at score (the seeds' @schedule).
-- KEYS: job schedule events wake meta
-- ARGV: id payload mode value [priority group name max backoff dedupe_key dedupe_spec
--   retain_completed retain_dead tags timeout_ms] (the last four as in enqueue's 14-field
--   tuples)
--   mode 'at': value is the absolute run-at ms; mode 'in': value is a delay in ms added to
--   the SERVER clock (TIME), never the caller's. The bracketed fields are as in enqueue.
-- REPLY: 1 scheduled, 0 duplicate (the id exists, or ended within the idempotency window:
--   nothing written), or the kept job's id (a
--   string) when deduplicated (nothing of the new job is written)
-- ERRORS: EMQKIND id not JOB-namespaced; EMQINPUT mode unknown or value not a whole number
--   (or a negative delay), or a malformed dedupe_spec
-- EVENTS: delayed (id, name, at); when deduplicated instead: deduplicated (id = the kept id,
--   key), and for a debounce that moved the kept job: delayed (id, at)
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
if #ARGV < 4 or not whole(ARGV[4], -9007199254740991) or (ARGV[5] and ARGV[5] ~= '' and not whole(ARGV[5], 0))
    or (ARGV[8] and ARGV[8] ~= '' and not whole(ARGV[8], 1)) then
  return refuse('schedule', 'id payload mode value [priority group name max backoff dedupe_key dedupe_spec]; '
    .. 'value and priority whole numbers, priority >= 0, max empty or >= 1')
end
for i = 12, 13 do
  local c, a = string.match(ARGV[i] or '', '^(%-?%d+):(%-?%d+)$')
  if ARGV[i] and ARGV[i] ~= '' and not (c and whole(c, -1) and whole(a, -1)) then
    return refuse('schedule', "retain specs '' or <count>:<age_ms> (whole numbers >= -1)")
  end
end
if ARGV[15] and ARGV[15] ~= '' and not whole(ARGV[15], 1) then
  return refuse('schedule', "a timeout_ms '' or a whole number >= 1")
end
if string.sub(ARGV[1], 1, 3) ~= 'JOB' then
  return redis.error_reply('EMQKIND job id must be JOB-namespaced')
end
if redis.call('EXISTS', KEYS[1]) == 1 then
  return 0
end
local value = tonumber(ARGV[4])
if not value or value ~= math.floor(value) or (ARGV[3] ~= 'in' and ARGV[3] ~= 'at') then
  return redis.error_reply('EMQINPUT mode must be at|in and value a whole number of ms')
end
local dkey, mode, ttl = ARGV[10] or '', nil, nil
if dkey ~= '' then
  mode, ttl = dedupe_spec(ARGV[11] or '')
  if not mode then
    return redis.error_reply('EMQINPUT dedupe_spec must be throttle or debounce, optionally :<ttl_ms>')
  end
end
local t = redis.call('TIME')
local now = t[1] * 1000 + math.floor(t[2] / 1000)
-- An id that ended within the idempotency window (its row deleted since) is a duplicate too.
local window = ids_window(redis.call('HGET', KEYS[5], 'keep_ids_ms'))
if remembered(string.sub(KEYS[5], 1, -5), { ARGV[1] }, now, window)[ARGV[1]] then return 0 end
local score
if ARGV[3] == 'in' then
  if value < 0 then return redis.error_reply('EMQINPUT delay must be >= 0 ms') end
  score = now + value
else
  score = value
end
local emax = redis.call('HGET', KEYS[5], 'events_max') or '10000'
if dkey ~= '' then
  local p = string.sub(KEYS[5], 1, -5) -- the meta key is P .. 'meta'
  local K = { pending = p .. 'pending', ring = p .. 'ring', events = KEYS[3], wake = KEYS[4], meta = KEYS[5] }
  local kept = dedupe_admit(p, K, dkey, mode, ttl, ARGV[2], score, now, emax)
  if kept then return kept end
  dedupe_lock(p, KEYS[1], ARGV[1], dkey, ttl)
end
-- attempts is left out until the first claim (absent = 0), as enqueue does: a field less per row.
-- created stays even for a minted id (unlike enqueue): runat is created + the delay, both on the
-- server's clock, while the id's instant is the caller's clock (up to 60 s off, SPEC 5).
redis.call('HSET', KEYS[1], 'state', 'scheduled', 'payload', ARGV[2], 'created', now, 'runat', score)
local prio, group, name = ARGV[5] or '0', ARGV[6] or '', ARGV[7] or ''
if prio ~= '0' and prio ~= '' then redis.call('HSET', KEYS[1], 'prio', prio) end
if group ~= '' then redis.call('HSET', KEYS[1], 'group', group) end
if name ~= '' then redis.call('HSET', KEYS[1], 'name', name) end
-- From protocol version 2 a row without max allows 3 attempts: a max of 3 is not written.
if ARGV[8] and ARGV[8] ~= '' and not (ARGV[8] == '3' and
    (tonumber(redis.call('HGET', KEYS[5], 'version') or '1') or 1) >= 2) then
  redis.call('HSET', KEYS[1], 'max', ARGV[8])
end
if ARGV[9] and ARGV[9] ~= '' then redis.call('HSET', KEYS[1], 'backoff', ARGV[9]) end
for i, field in ipairs({ 'retain_completed', 'retain_dead', 'tags', 'timeout' }) do
  if ARGV[11 + i] and ARGV[11 + i] ~= '' then redis.call('HSET', KEYS[1], field, ARGV[11 + i]) end
end
redis.call('ZADD', KEYS[2], score, ARGV[1])
redis.call('XADD', KEYS[3], 'MAXLEN', '~', emax, '*', 'event', 'delayed', 'id', ARGV[1], 'name', name,
  'at', score)
-- A new earliest run-at moves every parked consumer's due timer: wake them to re-read it.
local head = redis.call('ZRANGE', KEYS[2], 0, 0)
if head[1] == ARGV[1] then redis.call('XADD', KEYS[4], 'MAXLEN', '~', '100', '*', 'w', 's') end
return 1
