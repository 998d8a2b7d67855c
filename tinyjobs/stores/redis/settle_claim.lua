-- settle_claim.lua: settle_and_claim in one atomic step: settle.lua, then claim.lua (the worker's
-- cycle: one round trip and one script run instead of two). The claim counts limits after the
-- settlements, so a place they freed can be taken at once. scripts.py (COMPOSED) puts the two
-- bodies before this text as settle_main(ARGV) and claim_main(ARGV).
-- KEYS[1] = P:seq
-- ARGV: now ('' = server TIME), the settlements as settle.lua's ARGV[2] (or '' and one
--   settlement's 7 values), then claim.lua's ARGV from its second value on (holder id, hostname,
--   pid, token base, limit, handover flag, 8 values per queue)
-- Returns {settle.lua's reply, claim.lua's reply}.
-- One clock read for both parts: the server's TIME once (num keeps the text exact, %.17g), where
-- each part read it on its own.
local at = ARGV[1]
if at == '' then at = num(clock(at)) end
if ARGV[2] == '' then
  return {settle_main({at, '', unpack(ARGV, 3, 9)}), claim_main({at, unpack(ARGV, 10)})}
end
return {settle_main({at, ARGV[2]}), claim_main({at, unpack(ARGV, 3)})}
