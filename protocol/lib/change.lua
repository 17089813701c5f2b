-- Changing a job that has not started (promote_job, reschedule, reprioritize, update_data): read
-- the fields a change needs and refuse, before anything is written, a job that is gone
-- (EMQNOJOB) or in a state the verb does not apply to (EMQSTATE: it started in between, say).
-- `allowed` maps the states the verb applies to to true; `what` says what the verb needs.
local function row_to_change(jk, id, allowed, what)
  local row = redis.call('HMGET', jk, 'state', 'group', 'prio', 'token')
  if not row[1] then return nil, redis.error_reply('EMQNOJOB no job ' .. id) end
  if not allowed[row[1]] then
    return nil, redis.error_reply('EMQSTATE job ' .. id .. ' is ' .. row[1] .. ': ' .. what)
  end
  return row
end

-- The set a waiting job's id sits in: its lane or flat pending (pending), or the schedule.
local function waiting_set(p, K, state, group)
  if state == 'scheduled' then return K.schedule end
  if group then return p .. 'g:' .. group .. ':pending' end
  return K.pending
end
