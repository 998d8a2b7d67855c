-- holders.lua: the holders of one host that hold live leases. P:holders also keeps holders
-- whose last lease was settled (see _lib.lua): those without a P:hold:<holder> set are left
-- out. Reads only.
-- KEYS[1] = P:seq
-- Keys used (P = '{prefix}', one hash slot; layout and fields in _lib.lua): P:holders,
--   P:hold:<holder> (reads only)
-- ARGV: the host ('<hostname>/<boot id>', a Holder's host)
-- Returns their ids.
local prefix = ARGV[1] .. '|'
local out = {}
for _, h in ipairs(redis.call('SMEMBERS', P .. ':holders')) do
  if string.sub(h, 1, #prefix) == prefix and redis.call('EXISTS', P .. ':hold:' .. h) == 1 then
    table.insert(out, h)
  end
end
return out
