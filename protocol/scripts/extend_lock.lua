-- extend_lock: a lease checkpoint: push the lease deadlines of jobs this consumer holds.
-- KEYS: active
-- ARGV: prefix lease_ms, then one pair per job: id token
-- REPLY: one status per job: 'ok' (extended to server now + lease_ms), 'cancel' (extended,
--   and a cancel was requested: stop the handler), 'lost' (the token is not the job's or
--   the job is not active any more: the lease was taken over; nothing changes)
-- ERRORS: none
-- EVENTS: none (a checkpoint is not a transition)
local p = ARGV[1]
local t = redis.call('TIME')
local deadline = t[1] * 1000 + math.floor(t[2] / 1000) + tonumber(ARGV[2])
local out = {}
for i = 3, #ARGV, 2 do
  local id = ARGV[i]
  local row = redis.call('HMGET', p .. 'job:' .. id, 'state', 'token', 'cancel')
  if row[1] == 'active' and row[2] == ARGV[i + 1] then
    redis.call('ZADD', KEYS[1], 'XX', deadline, id)
    out[#out + 1] = row[3] == '1' and 'cancel' or 'ok'
  else
    out[#out + 1] = 'lost'
  end
end
return out
