-- Bad data: a row field that a script computes with (a number) or dispatches on (the state),
-- holding what no script writes (a hand edit, a foreign tool, a half-migrated store). Every
-- script checks the fields it relies on before its first write to the row, so a malformed
-- row never makes a script fail halfway (Redis keeps the writes before a Lua error): it is
-- taken out of circulation (lib/quarantine.lua) and the call goes on with the other jobs.
-- The number a field's text stands for (tonumber's), or `absent` when the field is absent
-- (HMGET's false): most meta and row fields a hot script reads are absent, and tonumber of a
-- text runs strtod twice (its check, then its value), about 800 instructions a field.
local function num(v, absent)
  if not v then return absent end
  return tonumber(v)
end

-- True when `v` is absent (HMGET's false) or decimal text of a whole number: what the ARGV
-- checks admit for prio and max, and what tonumber reads exactly.
local function whole_text(v)
  return not v or (#v <= 17 and string.find(v, '^%-?%d+$') ~= nil)
end

-- True when `v` is absent or an integer as Redis writes one (what HINCRBY takes: no leading
-- zero, no '-0'), for the counters the scripts HINCRBY: attempts in handback, stalled, children.
local function counter_text(v)
  return not v or v == '0' or (#v <= 17 and string.find(v, '^%-?[1-9]%d*$') ~= nil)
end

-- The first of `fields` (name, position in `row`, check triples) whose value fails its check:
-- its name and value, or nil when the row's numbers are sound.
local function bad_number(row, fields)
  for i = 1, #fields, 3 do
    local v = row[fields[i + 1]]
    if not fields[i + 2](v) then return fields[i], v end
  end
  return nil
end
