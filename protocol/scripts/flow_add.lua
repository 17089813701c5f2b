-- flow_add: admit a flow at once: a parent waiting for its children (state waiting_children)
-- and the children, nested to any depth; every leaf is claimable at once, each parent is
-- released when its last child completes (lib/flow.lua). One call admits every job it names
-- atomically; its jobs may be in several queues when the server lets one script reach them
-- all (one slot on a Cluster, any keys on a single server: SPEC 14.1).
-- KEYS: pending events wake meta ring
-- ARGV: prefix, then one 9-tuple per job, each parent before its children: id payload priority
--   group name max backoff parent continue; or prefix, the marker #15 and one 15-tuple per
--   job: queue_prefix id payload priority group name max backoff parent continue
--   retain_completed retain_dead tags lifo ref
--   queue_prefix: '' for the call's queue, else the prefix of the job's queue (emq:{<q>}:);
--   parent: '' for the root; for the first tuple also a parent in another queue, given as
--   '<its prefix><its id>' (a part of a flow admitted by the parent's own call before); else
--   the id of an earlier tuple; continue: '1' when the job runs even if a child of it fails
--   (else a failed child fails it), 'ignore' when it also records the failure
--   (P job:<id>:failures), '' otherwise; retain_*, tags, lifo as in enqueue's 13-tuples;
--   ref '1': the job is only named here (a child in a queue this call cannot reach, admitted by
--   a call of its own): it is counted and indexed under its parent, nothing else is written;
--   the other fields as in enqueue
-- REPLY: 1 admitted, 0 duplicate (the first tuple's id exists, or ended within the idempotency
--   window; nothing written)
-- ERRORS: EMQKIND any id not JOB-namespaced; EMQINPUT a malformed tuple list (a parent that is
--   not an earlier tuple, a repeated id, a bad prefix, number, retention spec or flag);
--   EMQSTATE the id of a job other than the first exists already (a job is in one flow only).
--   Nothing at all is written on an error.
-- EVENTS: waiting_children (id, name) per parent, added (id, name) per leaf, each on its own
--   queue's stream
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
local p = ARGV[1]
local first, W = 2, 9
if ARGV[2] == '#15' then first, W = 3, 15 end
if #ARGV < first + W - 1 or (#ARGV - first + 1) % W ~= 0 then
  return redis.error_reply('EMQINPUT flow_add takes the prefix, then 9 fields per job, or #15 and 15 per job')
end
local n = (#ARGV - first + 1) / W
local jobs, byid = {}, {}
for i = 0, n - 1 do
  local b = first + i * W
  local j
  if W == 9 then
    j = { prefix = p, id = ARGV[b], payload = ARGV[b + 1], prio = ARGV[b + 2], group = ARGV[b + 3],
      name = ARGV[b + 4], max = ARGV[b + 5], backoff = ARGV[b + 6], parent = ARGV[b + 7], cont = ARGV[b + 8],
      rc = '', rd = '', tags = '', lifo = '', ref = '' }
  else
    j = { prefix = ARGV[b] ~= '' and ARGV[b] or p, id = ARGV[b + 1], payload = ARGV[b + 2], prio = ARGV[b + 3],
      group = ARGV[b + 4], name = ARGV[b + 5], max = ARGV[b + 6], backoff = ARGV[b + 7], parent = ARGV[b + 8],
      cont = ARGV[b + 9], rc = ARGV[b + 10], rd = ARGV[b + 11], tags = ARGV[b + 12], lifo = ARGV[b + 13],
      ref = ARGV[b + 14] }
  end
  if string.sub(j.id, 1, 3) ~= 'JOB' then return redis.error_reply('EMQKIND job id must be JOB-namespaced') end
  if byid[j.id] then return redis.error_reply('EMQINPUT job ' .. j.id .. ' appears twice in the flow') end
  if not whole(j.prio, 0) or (j.max ~= '' and not whole(j.max, 1)) then
    return refuse('flow_add', 'a priority that is a whole number >= 0 and a max that is empty or >= 1')
  end
  if not retain_ok(j.rc) or not retain_ok(j.rd) or (j.lifo ~= '' and j.lifo ~= '1') or (j.ref ~= '' and j.ref ~= '1') then
    return refuse('flow_add', "retain specs '' or <count>:<age_ms> (whole numbers >= -1), lifo and ref '' or '1'")
  end
  if not string.match(j.prefix, '^emq:{[^{}]+}:$') then
    return refuse('flow_add', 'queue prefixes emq:{<queue>}:')
  end
  local up = byid[j.parent]
  if i == 0 then
    if j.ref == '1' or (j.parent ~= '' and not string.match(j.parent, '^emq:{[^{}]+}:JOB')) then
      return redis.error_reply('EMQINPUT the first job is the root, or names its parent in another queue as '
        .. '<prefix><id>; it is not a ref')
    end
  elseif not up or up.ref == '1' then
    return redis.error_reply('EMQINPUT the first job is the root; every other names an earlier one (not a ref) as parent')
  end
  j.children = 0
  if up then
    up.children = up.children + 1
    -- The row's parent: its id, or '<its prefix><its id>' when it lives in another queue.
    j.up = up.prefix == j.prefix and up.id or (up.prefix .. up.id)
    j.dep = up.prefix == j.prefix and j.id or (j.prefix .. j.id) -- the child's name in up's index
    j.deps = up.prefix .. 'job:' .. up.id .. ':deps'
  elseif j.parent ~= '' then
    j.up = j.parent
  end
  jobs[i + 1], byid[j.id] = j, j
end
local root = jobs[1]
if redis.call('EXISTS', root.prefix .. 'job:' .. root.id) == 1 then return 0 end
for i = 2, n do
  local j = jobs[i]
  if j.ref ~= '1' and redis.call('EXISTS', j.prefix .. 'job:' .. j.id) == 1 then
    return redis.error_reply('EMQSTATE job ' .. j.id .. ' exists already: a job is in one flow only')
  end
end
local t = redis.call('TIME')
local now = t[1] * 1000 + math.floor(t[2] / 1000)
-- Per queue of the call: its keys, its events cap, whether its claimable work went from none
-- to some (one wake each).
local queues = {}
local function queue(prefix)
  local q = queues[prefix]
  if not q then
    q = { K = { pending = prefix .. 'pending', events = prefix .. 'events', wake = prefix .. 'wake',
      meta = prefix .. 'meta', ring = prefix .. 'ring' }, woke = false }
    local m = redis.call('HMGET', q.K.meta, 'events_max', 'keep_ids_ms', 'version')
    q.emax, q.window = m[1] or '10000', m[2]
    -- From protocol version 2 a row without max allows 3 attempts: a max of 3 is not written.
    q.unset_max = (tonumber(m[3] or '1') or 1) >= 2 and '3' or nil
    queues[prefix] = q
  end
  return q
end
local rq = queue(root.prefix)
-- A root that ended within the idempotency window (its row deleted since) is a duplicate too.
if remembered(root.prefix, { root.id }, now, ids_window(rq.window))[root.id] then return 0 end
local order = {}
for i = 1, n do
  local j = jobs[i]
  if j.deps then redis.call('ZADD', j.deps, i - 1, j.dep) end
  if j.ref ~= '1' then
    local q = queue(j.prefix)
    local events, emax = q.K.events, q.emax
    if not q.seen then q.seen, order[#order + 1] = true, j.prefix end
    local waiting = j.children > 0
    local row = { 'state', waiting and 'waiting_children' or 'pending', 'payload', j.payload }
    -- created as enqueue writes it: left out for an id minted within the minute before now.
    if needs_created(j.id, now) then row[#row + 1], row[#row + 2] = 'created', now end
    local group = j.group ~= '' and j.group or nil
    if j.prio ~= '0' then row[#row + 1], row[#row + 2] = 'prio', j.prio end
    if group then row[#row + 1], row[#row + 2] = 'group', group end
    if j.name ~= '' then row[#row + 1], row[#row + 2] = 'name', j.name end
    if j.max ~= '' and j.max ~= q.unset_max then row[#row + 1], row[#row + 2] = 'max', j.max end
    if j.backoff ~= '' then row[#row + 1], row[#row + 2] = 'backoff', j.backoff end
    if j.up then row[#row + 1], row[#row + 2] = 'parent', j.up end
    if j.rc ~= '' then row[#row + 1], row[#row + 2] = 'retain_completed', j.rc end
    if j.rd ~= '' then row[#row + 1], row[#row + 2] = 'retain_dead', j.rd end
    if j.tags ~= '' then row[#row + 1], row[#row + 2] = 'tags', j.tags end
    if waiting then
      row[#row + 1], row[#row + 2] = 'children', j.children
      if j.cont == '1' or j.cont == 'ignore' then row[#row + 1], row[#row + 2] = 'continue', j.cont end
    end
    redis.call('HSET', j.prefix .. 'job:' .. j.id, unpack(row))
    if waiting then
      redis.call('ZADD', j.prefix .. 'waiting_children', now, j.id)
      redis.call('XADD', events, 'MAXLEN', '~', emax, '*', 'event', 'waiting_children', 'id', j.id,
        'name', j.name)
    else
      local score = j.lifo == '1' and lifo_score(q.K, j.prio) or j.prio
      if release(j.prefix, q.K, j.id, group, score) then q.woke = true end
      redis.call('XADD', events, 'MAXLEN', '~', emax, '*', 'event', 'added', 'id', j.id, 'name', j.name)
    end
  end
end
for _, prefix in ipairs(order) do
  if queues[prefix].woke then wake(queues[prefix].K) end
end
return 1
