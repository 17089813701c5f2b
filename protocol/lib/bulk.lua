-- One command for many members instead of one per job (redis.call count sets a script's
-- cost), in slices Lua's unpack can take. `args` holds whole member groups (pairs for ZADD).
local function bulk(cmd, key, args)
  for i = 1, #args, 4000 do
    redis.call(cmd, key, unpack(args, i, math.min(i + 3999, #args)))
  end
end
