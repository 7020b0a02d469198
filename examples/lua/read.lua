#!lua
-- imid example: a user has read a conversation up to a seq; reply the unread count.
-- EVALSHA <sha> 3 KEYS... ARGV...   (or FCALL imid_read, built from this file)
--
-- KEYS[1]  {conv:<id>}:read:<user>        the read cursor (imid SEQ type)
-- KEYS[2]  {conv:<id>}:inbox:<user>       the user's inbox ZSET (score = seq)
-- KEYS[3]  {conv:<id>}:seq                the conversation sequence
-- ARGV[1]  the seq read up to (0 just asks for the count)
-- Reply:   {cursor, unread}
--   cursor  max(previous cursor, min(ARGV[1], max_seq)): late or out-of-order acks never move
--           it back (SEQ.ADVANCE), and an ack past the conversation's max seq is clamped, so a
--           buggy client cannot hide messages that have not been sent yet
--   unread  the messages in this user's inbox with seq > cursor (messages the inbox cap has
--           dropped are not counted; messages addressed to other users are not in this inbox)

if #KEYS ~= 3 then
  return redis.error_reply('ERR read: expected KEYS read, inbox, seq')
end
-- At most 15 digits: seqs travel through ZSET scores and Lua numbers, both doubles, exact
-- only below 2^53.
local ack_text = ARGV[1] or ''
if not string.match(ack_text, '^%d+$') or #ack_text > 15 then
  return redis.error_reply('ERR read seq must be an integer in 0..999999999999999')
end
local ack = tonumber(ack_text)
local max_seq = redis.call('SEQ.GET', KEYS[3])
if ack > max_seq then ack = max_seq end
local cursor = redis.call('SEQ.ADVANCE', KEYS[1], string.format('%d', ack))
local unread = redis.call('ZCOUNT', KEYS[2], string.format('(%d', cursor), '+inf')
return {cursor, unread}
