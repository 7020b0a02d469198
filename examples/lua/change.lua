#!lua
-- imid example: record one change of a user's data of some kind (friendship, group,
-- conversation, ...) for the incremental pull (pull.lua).
-- EVALSHA <sha> 3 KEYS... ARGV...   (or FCALL imid_change, built from this file)
--
-- KEYS[1]  app:seq:{<user>}               the user's sync sequences, one field per kind (imid
--                                         sequence map)
-- KEYS[2]  app:trimmed:{<user>}           per kind, the highest seq the log cap dropped
--                                         (imid sequence map)
-- KEYS[3]  app:log:{<user>}:<kind>        the kind's change log: ZSET, score = seq,
--                                         member = "seq|change"; and "kind|<kind>" at score
--                                         +inf, the kind the log belongs to
-- ARGV[1]  the kind, 1..256 bytes (a field name)
-- ARGV[2]  the change, any bytes (what the client needs to apply it, or a row id to fetch)
-- ARGV[3]  log cap, an integer >= 1: each log keeps the newest cap changes
-- Reply:   the change's seq: the kind's sequence after SEQ.HNEXT, strictly increasing per kind
--          and never reissued, so a late writer cannot move the kind backwards (a plain HSET
--          of the field could)
--
-- The user's keys share the {<user>} hash tag, so the script runs unchanged on Redis Cluster.
-- A log records its kind (its first change writes "kind|<kind>" at +inf, which the cap never
-- drops and no pull reads): a change of another kind into it is refused, before anything is
-- written, so that a kind paired with another kind's log is found at once.

if #KEYS ~= 3 then
  return redis.error_reply('ERR change: expected KEYS seqs, trimmed, log')
end
local kind, change = ARGV[1] or '', ARGV[2] or ''
local cap_text = ARGV[3] or ''
if not string.match(cap_text, '^%d+$') or #cap_text > 15 or tonumber(cap_text) < 1 then
  return redis.error_reply('ERR log cap must be an integer in 1..999999999999999')
end
local cap = tonumber(cap_text)
if #kind == 0 or #kind > 256 then
  return redis.error_reply('ERR kind must be 1..256 bytes')
end
local record = 'kind|' .. kind
local top = redis.call('ZRANGE', KEYS[3], '+inf', '+inf', 'BYSCORE', 'LIMIT', 0, 1)[1]
if top and top ~= record then
  if string.sub(top, 1, 5) == 'kind|' then top = string.sub(top, 6) end
  return redis.error_reply('ERR change: the log records the kind ' .. top .. ', not ' .. kind ..
    ' (each kind has a log of its own)')
end

-- Then the only call that can refuse (a map at its maximum, an overflow): nothing is written
-- before it.
local seq = redis.call('SEQ.HNEXT', KEYS[1], kind)
-- Integers go back to Redis as '%d' text: Lua numbers are doubles and would otherwise be
-- formatted with an exponent once large.
local seq_text = string.format('%d', seq)
redis.call('ZADD', KEYS[3], seq_text, seq_text .. '|' .. change, '+inf', record)
-- The cap counts changes, not the record of the kind.
local excess = redis.call('ZCARD', KEYS[3]) - 1 - cap
if excess > 0 then
  -- ZPOPMIN replies member, score pairs, lowest first: the last score is the newest dropped.
  local dropped = redis.call('ZPOPMIN', KEYS[3], excess)
  redis.call('SEQ.HADVANCE', KEYS[2], kind, dropped[#dropped])
end
return seq
