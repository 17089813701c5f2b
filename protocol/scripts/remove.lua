-- remove: delete a job that is not running, from whichever set holds it, and its row.
-- KEYS: job schedule pending completed dead cancelled events meta
-- ARGV: prefix id
-- REPLY: 1 removed, 0 no such job
-- ERRORS: EMQSTATE the job is active (cancel it first, or wait for it to end)
-- EVENTS: removed (id, prev)
local p, id = ARGV[1], ARGV[2]
local row = redis.call('HMGET', KEYS[1], 'state', 'group')
local state = row[1]
if not state then return 0 end
if state == 'active' then
  return redis.error_reply('EMQSTATE job ' .. id .. ' is active: cancel it first, or wait for it to end')
end
local sets = { scheduled = KEYS[2], pending = KEYS[3], completed = KEYS[4], dead = KEYS[5], cancelled = KEYS[6] }
if state == 'pending' and row[2] then
  redis.call('ZREM', p .. 'g:' .. row[2] .. ':pending', id)
elseif sets[state] then
  redis.call('ZREM', sets[state], id)
end
redis.call('DEL', KEYS[1])
local emax = redis.call('HGET', KEYS[8], 'events_max') or '10000'
redis.call('XADD', KEYS[7], 'MAXLEN', '~', emax, '*', 'event', 'removed', 'id', id, 'prev', state)
return 1
