-- Recurrence: the id of an occurrence is derived from what it is an occurrence of and its
-- instant: 'JOB' + the instant as 10 Crockford base32 characters (like a minted id's time
-- part, so occurrences sort by due time among minted ids) + ':' + tag ('r' repeat, 's'
-- scheduler) + ':' + the name. Two writers racing on one occurrence make the same id, and
-- the second finds the row already there.
local B32 = '0123456789ABCDEFGHJKMNPQRSTVWXYZ'
local function occurrence_id(tag, name, at)
  local s, rest = '', at
  for _ = 1, 10 do
    local d = rest % 32
    s = string.sub(B32, d + 1, d + 1) .. s
    rest = (rest - d) / 32
  end
  return 'JOB' .. s .. ':' .. tag .. ':' .. name
end
