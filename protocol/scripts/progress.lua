-- progress: store a running job's progress on its row, fenced by lease token.
-- KEYS: job events meta
-- ARGV: id token progress
--   progress: the encoded progress (a number or a JSON object, as the caller encodes it)
-- REPLY: 1
-- ERRORS: EMQNOJOB no such row; EMQLEASE the token is not the job's or it is not active
-- EVENTS: progress (id, progress)
local row = redis.call('HMGET', KEYS[1], 'state', 'token')
if not row[1] then return redis.error_reply('EMQNOJOB no job ' .. ARGV[1]) end
if row[1] ~= 'active' or row[2] ~= ARGV[2] then
  return redis.error_reply('EMQLEASE lease token is stale: the job was recovered or finished elsewhere')
end
redis.call('HSET', KEYS[1], 'progress', ARGV[3])
local emax = redis.call('HGET', KEYS[3], 'events_max') or '10000'
redis.call('XADD', KEYS[2], 'MAXLEN', '~', emax, '*', 'event', 'progress', 'id', ARGV[1], 'progress', ARGV[3])
return 1
