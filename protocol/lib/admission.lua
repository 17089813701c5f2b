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
