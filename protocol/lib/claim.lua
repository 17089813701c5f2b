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
