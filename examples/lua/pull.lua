#!lua flags=no-writes
-- imid example: the incremental pull. A client keeps, per kind of data, the seq it has pulled
-- up to; it sends them all, and gets back only the kinds that changed since, with their
-- changes. Read-only: runs on replicas too.
-- EVALSHA_RO <sha> numkeys KEYS... ARGV...   (or FCALL_RO imid_pull, built from this file)
--
-- KEYS[1]     app:seq:{<user>}             the user's sync sequences (imid sequence map)
-- KEYS[2]     app:trimmed:{<user>}         per kind, the highest seq the log cap dropped
-- KEYS[2+i]   app:log:{<user>}:<kind i>    the change log of the i-th kind asked about
-- ARGV[2i-1]  the i-th kind
-- ARGV[2i]    the seq the client holds for it (0 for none)
-- Reply:      {kind, seq, reset, {seq, change, seq, change, ...}, kind, ...}: four elements per
--             kind whose seq is above the client's (other kinds are left out: nothing to pull)
--   seq       the kind's seq now: the client's new local copy once it applied the changes
--   reset     1 when the log cap dropped changes after the client's seq: the client reloads
--             that kind in full (from the application's database) instead of applying changes
--   changes   every change after the client's seq, oldest first, each as its seq and its text
--
-- One SEQ.HMGET compares every kind at once: what a client sends on every reconnect costs one
-- key read, however many kinds there are. A log read is checked against its kind (change.lua
-- records it, "kind|<kind>" at +inf): the logs go in the order of the kinds, and a log paired
-- with another kind is refused rather than read as this one's.

if #KEYS < 3 or #ARGV ~= 2 * (#KEYS - 2) then
  return redis.error_reply('ERR pull: expected KEYS seqs, trimmed, one log per kind, ' ..
    'and ARGV kind, seq per kind')
end
local kinds, held = {}, {}
for i = 1, #KEYS - 2 do
  local kind, text = ARGV[2 * i - 1], ARGV[2 * i]
  -- At most 15 digits: seqs travel through ZSET scores and Lua numbers, both doubles, exact
  -- only below 2^53.
  if not string.match(text, '^%d+$') or #text > 15 then
    return redis.error_reply('ERR pull seq must be an integer in 0..999999999999999')
  end
  kinds[i], held[i] = kind, tonumber(text)
end
for i = 1, #kinds do
  if #kinds[i] == 0 or #kinds[i] > 256 then
    return redis.error_reply('ERR kind must be 1..256 bytes')
  end
end

local now = redis.call('SEQ.HMGET', KEYS[1], unpack(kinds))
local trimmed = redis.call('SEQ.HMGET', KEYS[2], unpack(kinds))
local out = {}
for i = 1, #kinds do
  if now[i] > held[i] then
    local top = redis.call('ZRANGE', KEYS[2 + i], '+inf', '+inf', 'BYSCORE', 'LIMIT', 0, 1)[1]
    if top and top ~= 'kind|' .. kinds[i] then
      if string.sub(top, 1, 5) == 'kind|' then top = string.sub(top, 6) end
      return redis.error_reply(string.format('ERR pull: log %d of %d records the kind %s, not %s ' ..
        '(give the logs in the order of the kinds)', i, #kinds, top, kinds[i]))
    end
    local changes = {}
    -- The log holds every change up to now[i] (change.lua writes both in one script) except
    -- what the cap dropped, so (held, now] is the whole delta.
    local rows = redis.call('ZRANGE', KEYS[2 + i], string.format('(%d', held[i]),
      string.format('%d', now[i]), 'BYSCORE', 'WITHSCORES')
    for j = 1, #rows, 2 do
      local seq = tonumber(rows[j + 1])
      changes[#changes + 1] = seq
      changes[#changes + 1] = string.sub(rows[j], #string.format('%d', seq) + 2)
    end
    local reset = 0
    if trimmed[i] > held[i] then reset = 1 end
    out[#out + 1] = kinds[i]
    out[#out + 1] = now[i]
    out[#out + 1] = reset
    out[#out + 1] = changes
  end
end
return out
