#!lua flags=no-writes
-- imid example: incremental pull of one user's inbox in a conversation.
-- EVALSHA_RO <sha> 3 KEYS... ARGV...   (or FCALL_RO imid_sync, built from this file); read-only,
-- so it also runs on replicas.
--
-- KEYS[1]  {conv:<id>}:seq                the conversation sequence
-- KEYS[2]  {conv:<id>}:inbox:<user>       the user's inbox ZSET (score = seq)
-- KEYS[3]  {conv:<id>}:trimmed:<user>     highest seq the inbox cap dropped
-- ARGV[1]  last seq the client holds (0 for none)
-- ARGV[2]  page size limit, an integer >= 1
-- Reply:   {max_seq, cursor, complete, trimmed_through, {seq, member, seq, member, ...}}
--   max_seq          the conversation's current seq
--   cursor           pass it as ARGV[1] next time: the seq of the last message returned, or,
--                    when complete, max(max_seq, ARGV[1]) (nothing for this user lies between);
--                    ARGV[1] when the inbox does not exist (a misspelled key, or a user nothing
--                    was sent to yet: no cursor moves past messages it may still get)
--   complete         1 when no message after the page remains in the inbox
--   trimmed_through  when greater than ARGV[1], the cap dropped messages the client never got
--   messages         oldest first, at most limit, each as its seq and its "msgid|uid|sender|body"

-- At most 15 digits: seqs travel through ZSET scores and Lua numbers, both doubles, exact
-- only below 2^53.
local function int_arg(s, name)
  if not string.match(s, '^%d+$') or #s > 15 then
    return nil, redis.error_reply('ERR ' .. name .. ' must be an integer in 0..999999999999999')
  end
  return tonumber(s)
end

if #KEYS ~= 3 then
  return redis.error_reply('ERR sync: expected KEYS seq, inbox, trimmed')
end
local last, err = int_arg(ARGV[1] or '', 'last seq')
if not last then return err end
local limit
limit, err = int_arg(ARGV[2] or '', 'limit')
if not limit then return err end
if limit < 1 then
  return redis.error_reply('ERR limit must be at least 1')
end

local max_seq = redis.call('SEQ.GET', KEYS[1])
local trimmed = redis.call('SEQ.GET', KEYS[3])
-- One row more than the page tells whether anything remains after it.
local rows = redis.call('ZRANGE', KEYS[2], '(' .. ARGV[1], '+inf', 'BYSCORE',
  'LIMIT', 0, limit + 1, 'WITHSCORES')

local messages = {}
local cursor = last
local n = math.min(#rows, 2 * limit)
for i = 1, n, 2 do
  local seq = tonumber(rows[i + 1])
  messages[#messages + 1] = seq
  messages[#messages + 1] = rows[i]
  cursor = seq
end
local complete = 0
if #rows <= 2 * limit then
  complete = 1
  if #rows > 0 or redis.call('EXISTS', KEYS[2]) == 1 then
    cursor = math.max(cursor, max_seq)
  end
end
return {max_seq, cursor, complete, trimmed, messages}
