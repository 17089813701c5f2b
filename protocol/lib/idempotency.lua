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
