-- Putting a running job back without spending its attempt: handback (a closing consumer),
-- snooze and rate_limit (its handler asks). Fenced like complete: only the lease holder may.
-- Needs lib/rows.lua, lib/lanes.lua and lib/quarantine.lua embedded before this block.
-- Returns the status and the row (state token group prio attempts slot) and whether claimable
-- work appeared (the caller wakes):
--   'OK': off active, lane and queue slots freed (left_active), attempts - 1; the caller sets
--     the state and releases or schedules it (group row[3], priority row[4]);
--   'EMQLEASE': not active under that token (or no row, row[1] nil): nothing written;
--   'EMQDATA': its attempts or prio is not a whole number, so its attempt could not be given
--     back nor the job released: off active, slots freed, dead-lettered as bad data.
local function put_back(p, K, id, token, now, emax)
  local jk = p .. 'job:' .. id
  local row = redis.call('HMGET', jk, 'state', 'token', 'group', 'prio', 'attempts', 'slot')
  if row[1] ~= 'active' or row[2] ~= token then return 'EMQLEASE', row, false end
  redis.call('ZREM', K.active, id)
  local woke = left_active(p, K, jk, row[3], row[6])
  local field, value = bad_number(row, { 'attempts', 5, counter_text, 'prio', 4, whole_text })
  if field then
    if quarantine(p, K, id, field, value, now, emax) then woke = true end
    return 'EMQDATA', row, woke
  end
  redis.call('HINCRBY', jk, 'attempts', -1)
  return 'OK', row, woke
end
