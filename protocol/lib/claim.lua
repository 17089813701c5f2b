-- Claim up to n jobs: the ring's lanes (one job per group per turn) interleaved with flat
-- pending (lowest priority score first, then mint order). Each claimed job gets attempts + 1,
-- a fresh lease token, state active and its lease deadline as its score in active.
-- Returns the flat 7-per-job array (id token attempts max payload name backoff) and, when
-- fewer than n were claimed, the wake stream's last id to block on ('' when full).
local function claim(p, K, n, lease, now, emax)
  local jobs, got = {}, 0
  local paused = redis.call('HGET', K.meta, 'paused') == '1'
  local function take(id)
    local jk = p .. 'job:' .. id
    local row = redis.call('HMGET', jk, 'state', 'payload', 'name', 'max', 'backoff', 'attempts', 'token')
    if row[1] ~= 'pending' then return false end -- a ghost or a moved row: skip it
    -- One read and one write per job: redis.call count, not bytes, sets the cost.
    local attempts = tonumber(row[6] or '0') + 1
    local token = tonumber(row[7] or '0') + 1
    redis.call('HSET', jk, 'state', 'active', 'started', now, 'attempts', attempts, 'token', token)
    redis.call('ZADD', K.active, now + lease, id)
    redis.call('XADD', K.events, 'MAXLEN', '~', emax, '*', 'event', 'active', 'id', id, 'attempt', attempts)
    local b = got * 7
    jobs[b + 1], jobs[b + 2], jobs[b + 3], jobs[b + 4] = id, token, attempts, row[4] or '1'
    jobs[b + 5], jobs[b + 6], jobs[b + 7] = row[2], row[3] or '', row[5] or ''
    got = got + 1
    return true
  end
  while not paused and got < n do
    local moved = false
    if redis.call('ZCARD', K.ring) > 0 then
      local head = redis.call('ZPOPMIN', K.ring)
      local group = head[1]
      moved = true -- the ring shrank: a group whose lane emptied simply drops out
      local popped = redis.call('ZPOPMIN', lane_key(p, group))
      if popped[1] then
        local running = tonumber(redis.call('HGET', p .. 'lanes:running', group) or '0')
        if take(popped[1]) then
          running = redis.call('HINCRBY', p .. 'lanes:running', group, 1)
        end
        if redis.call('ZCARD', lane_key(p, group)) > 0 then ring_offer(p, K, group, running) end
      end
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
  local wid = ''
  if got < n then
    local last = redis.call('XREVRANGE', K.wake, '+', '-', 'COUNT', 1)
    wid = last[1] and last[1][1] or '0-0'
    -- This call took the last claimable job: the queue is drained.
    if got > 0 and not paused then
      redis.call('XADD', K.events, 'MAXLEN', '~', emax, '*', 'event', 'drained', 'id', '')
    end
  end
  return jobs, wid
end
