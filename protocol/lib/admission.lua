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
