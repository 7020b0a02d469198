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
--   unread  the messages in this user's inbox with seq > cursor (messages the inbox cap has
--           dropped are not counted; messages addressed to other users are not in this inbox)
--
-- One map holds the cursors of all members (a 10,000-member group costs one key, not 10,000).
-- The ack is checked by SEQ.HADVANCE itself (an integer in 0..2^63-1).

if #KEYS ~= 3 then
  return redis.error_reply('ERR read: expected KEYS read, inbox, seq')
end
if (ARGV[1] or '') == '' then
  return redis.error_reply('ERR read: expected ARGV user, seq')
end
local cursor = redis.call('SEQ.HADVANCE', KEYS[1], ARGV[1], ARGV[2] or '', 'LIMIT', KEYS[3])
-- The cursor is at most the conversation's seq, so exact as a Lua number (below 2^53).
local unread = redis.call('ZCOUNT', KEYS[2], string.format('(%d', cursor), '+inf')
return {cursor, unread}
