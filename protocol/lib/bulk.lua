-- One command for many members instead of one per job (redis.call count sets a script's
-- cost), in slices Lua's unpack can take. `args` holds whole member groups (pairs for ZADD).
local function bulk(cmd, key, args)
  for i = 1, #args, 4000 do
    redis.call(cmd, key, unpack(args, i, math.min(i + 3999, #args)))
  end
end

-- One events entry for the jobs a call moved together (lean events: one XADD per call, not
-- per job). A single job gets the plain entry (event, id[, field]); several get event, id (the
-- first), field (the first's value), ids (every id, space-separated) and, with a field, its
-- plural (every value, space-separated, in ids order) unless `shared` (the one value is every
-- job's, as added's name). `tail` (optional): field, value pairs every job of the entry shares
-- (claim's consumer), copied at the end as they are. Readers expand it into one event a job.
local function emit_batch(K, emax, event, ids, field, values, shared, tail)
  if #ids == 0 then return end
  local entry = { 'XADD', K.events, 'MAXLEN', '~', emax, '*', 'event', event, 'id', ids[1] }
  if field then
    entry[#entry + 1] = field
    entry[#entry + 1] = values[1]
  end
  if #ids > 1 then
    entry[#entry + 1] = 'ids'
    entry[#entry + 1] = table.concat(ids, ' ')
    if field and not shared then
      entry[#entry + 1] = field .. 's'
      entry[#entry + 1] = table.concat(values, ' ')
    end
  end
  if tail then
    for i = 1, #tail do entry[#entry + 1] = tail[i] end
  end
  redis.call(unpack(entry))
end
