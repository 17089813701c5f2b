-- schedule: admit a job fenced out of pending until its run-at score (the seeds' @schedule).
-- KEYS: job schedule events wake meta
-- ARGV: id payload mode value [priority group name max backoff]
--   mode 'at': value is the absolute run-at ms; mode 'in': value is a delay in ms added to
--   the SERVER clock (TIME), never the caller's. The bracketed fields are as in enqueue.
-- REPLY: 1 scheduled, 0 duplicate (the id exists; nothing written)
-- ERRORS: EMQKIND id not JOB-namespaced; EMQINPUT mode unknown or value not a whole number
--   (or a negative delay)
-- EVENTS: delayed (id, name, at)
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
local t = redis.call('TIME')
local now = t[1] * 1000 + math.floor(t[2] / 1000)
local score
if ARGV[3] == 'in' then
  if value < 0 then return redis.error_reply('EMQINPUT delay must be >= 0 ms') end
  score = now + value
else
  score = value
end
redis.call('HSET', KEYS[1], 'state', 'scheduled', 'attempts', '0', 'payload', ARGV[2],
  'created', now, 'runat', score)
local prio, group, name = ARGV[5] or '0', ARGV[6] or '', ARGV[7] or ''
if prio ~= '0' and prio ~= '' then redis.call('HSET', KEYS[1], 'prio', prio) end
if group ~= '' then redis.call('HSET', KEYS[1], 'group', group) end
if name ~= '' then redis.call('HSET', KEYS[1], 'name', name) end
if ARGV[8] and ARGV[8] ~= '' then redis.call('HSET', KEYS[1], 'max', ARGV[8]) end
if ARGV[9] and ARGV[9] ~= '' then redis.call('HSET', KEYS[1], 'backoff', ARGV[9]) end
redis.call('ZADD', KEYS[2], score, ARGV[1])
local emax = redis.call('HGET', KEYS[5], 'events_max') or '10000'
redis.call('XADD', KEYS[3], 'MAXLEN', '~', emax, '*', 'event', 'delayed', 'id', ARGV[1], 'name', name,
  'at', score)
-- A new earliest run-at moves every parked consumer's due timer: wake them to re-read it.
local head = redis.call('ZRANGE', KEYS[2], 0, 0)
if head[1] == ARGV[1] then redis.call('XADD', KEYS[4], 'MAXLEN', '1', '*', 'w', '1') end
return 1
