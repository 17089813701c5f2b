-- The server's clock, read once per call (TIME): now in epoch ms, and in epoch µs for lease
-- tokens (a token at least the claim's µs instant is one no server could have handed out
-- before that instant, so a promoted replica never repeats a token its old primary gave).
local function server_clock()
  local t = redis.call('TIME')
  local s, us = t[1] + 0, t[2] + 0 -- digits: one conversion each (tonumber converts twice)
  return s * 1000 + math.floor(us / 1000), s * 1000000 + us
end
