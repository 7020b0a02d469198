#!lua
-- imid example: a user has read a conversation up to a seq; reply the unread count.
-- EVALSHA <sha> 3 KEYS... ARGV...   (or FCALL imid_read, built from this file)
--
-- KEYS[1]  {conv:<id>}:read               every member's read cursor of the conversation, one
--                                         field per user (imid sequence map)
-- KEYS[2]  {conv:<id>}:inbox:<user>       the user's inbox ZSET (score = seq)
-- KEYS[3]  {conv:<id>}:seq                the conversation sequence
-- ARGV[1]  the user
-- ARGV[2]  the seq read up to (0 just asks for the count)
-- Reply:   {cursor, unread}
--   cursor  max(previous cursor, min(ARGV[2], max_seq)), done by the server in one command
--           (SEQ.HADVANCE ... LIMIT): late or out-of-order acks never move it back, and an ack
--           past the conversation's max seq is clamped, so a buggy client cannot hide messages
--           that have not been sent yet
--   unread  the messages in this user's inbox with seq > cursor that the user did not send
--           (the member's sender is not ARGV[1]; messages the inbox cap has dropped are not
--           counted; messages addressed to other users are not in this inbox). The newest
--           1000 above the cursor are looked at one by one; beyond them every message counts,
--           whoever sent it (IM.READ and IM.UNREAD count the same way)
--
-- One map holds the cursors of all members (a 10,000-member group costs one key, not 10,000).
-- The user and the ack are checked first, each error naming its argument (IM.READ's rules:
-- a field name of 1..256 bytes, an integer in 0..2^63-1 as Redis reads one).

if #KEYS ~= 3 then
  return redis.error_reply('ERR read: expected KEYS read, inbox, seq')
end
local user, upto = ARGV[1] or '', ARGV[2] or ''
if #user == 0 or #user > 256 then
  return redis.error_reply('ERR user must be 1..256 bytes')
end
if not (upto == '0' or string.match(upto, '^[1-9]%d*$')) or #upto > 19
    or (#upto == 19 and upto > '9223372036854775807') then
  return redis.error_reply('ERR upto must be an integer in 0..9223372036854775807')
end
local cursor = redis.call('SEQ.HADVANCE', KEYS[1], user, upto, 'LIMIT', KEYS[3])
-- The cursor is at most the conversation's seq, so exact as a Lua number (below 2^53).
local min = string.format('(%d', cursor)
local rows = redis.call('ZRANGE', KEYS[2], '+inf', min, 'BYSCORE', 'REV', 'LIMIT', 0, 1000)
local unread = 0
for i = 1, #rows do
  -- msgid|uid|sender|body: the user's own messages are not unread
  if string.match(rows[i], '^[^|]*|[^|]*|([^|]*)|') ~= user then unread = unread + 1 end
end
if #rows == 1000 then
  unread = unread + redis.call('ZCOUNT', KEYS[2], min, '+inf') - 1000
end
return {cursor, unread}
