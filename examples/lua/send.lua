#!lua
-- imid example: send one message into a conversation, atomically.
-- EVALSHA <sha> numkeys KEYS... ARGV...   (or FCALL imid_send, built from this file)
--
-- KEYS[1]   {conv:<id>}                   the conversation's tag, the target of MSGID.GEN and
--                                         UID.GEN; they declare it as a key (for cluster
--                                         routing), it is never read or written
-- KEYS[2]   {conv:<id>}:seq               the conversation sequence (imid SEQ type)
-- KEYS[3]   {conv:<id>}:dedup:<sender>:<client_msg_id>
--                                         "seq msgid uid" of the first send, expires after
--                                         ARGV[5] s
-- KEYS[4..] pairs, one per recipient:
--           {conv:<id>}:inbox:<user>      ZSET, score = seq, member = "msgid|uid|sender|body"
--           {conv:<id>}:trimmed:<user>    SEQ: highest seq the cap dropped from that inbox
-- ARGV[1]   channel_type, 0..15 (MSGID.GEN)
-- ARGV[2]   sender, without '|' (it separates the member's fields)
-- ARGV[3]   body, any bytes
-- ARGV[4]   inbox cap, an integer >= 1: each inbox keeps the newest cap messages
-- ARGV[5]   dedup TTL in seconds, an integer >= 1
-- Reply:    {seq, msgid, duplicate, uid}: duplicate is 1 when this was a retry of a send
--           already stored (the reply is then the original seq, msgid and uid, and nothing was
--           written); uid is the message's 64-bit UID as decimal text, for a BIGINT primary key
--           in the application's database
--
-- Every key shares the {conv:<id>} hash tag, so the script runs unchanged on Redis Cluster.

-- At most 15 digits: seqs travel through ZSET scores and Lua numbers, both doubles, exact
-- only below 2^53.
local function int_arg(s, name)
  if not string.match(s, '^%d+$') or #s > 15 then
    return nil, redis.error_reply('ERR ' .. name .. ' must be an integer in 0..999999999999999')
  end
  return tonumber(s)
end

if #KEYS < 5 or (#KEYS - 3) % 2 ~= 0 then
  return redis.error_reply('ERR send: expected KEYS tag, seq, dedup, then inbox/trimmed pairs')
end
local channel_type, sender, body = ARGV[1], ARGV[2], ARGV[3]
local cap, err = int_arg(ARGV[4] or '', 'inbox cap')
if not cap then return err end
local ttl
ttl, err = int_arg(ARGV[5] or '', 'dedup ttl')
if not ttl then return err end
if cap < 1 or ttl < 1 then
  return redis.error_reply('ERR inbox cap and dedup ttl must be at least 1')
end
if string.find(sender, '|', 1, true) then
  return redis.error_reply("ERR sender must not contain '|'")
end

-- A retry of a send that went through (same sender and client message id within the TTL)
-- gets the first answer and stores nothing: clients retry on timeouts, and the first attempt
-- may well have succeeded.
local seen = redis.call('GET', KEYS[3])
if seen then
  local seq, msgid, uid = string.match(seen, '^(%d+) (%S+) (%d+)$')
  return {tonumber(seq), msgid, 1, uid}
end

-- MSGID.GEN and UID.GEN first: they fail only on bad arguments, before anything is written.
-- If SEQ.NEXT then fails (WRONGTYPE), two IDs went unused, which costs nothing.
local msgid = redis.call('MSGID.GEN', channel_type, KEYS[1])
-- STRING: the UID as decimal text. An integer reply would become a Lua number (a double) and
-- lose the UID's low bits: UIDs lie far above 2^53.
local uid = redis.call('UID.GEN', KEYS[1], 'STRING')
local seq = redis.call('SEQ.NEXT', KEYS[2])
-- Integers go back to Redis as '%d' text: Lua numbers are doubles and would otherwise be
-- formatted with an exponent once large.
local seq_text = string.format('%d', seq)
local member = msgid .. '|' .. uid .. '|' .. sender .. '|' .. body

for i = 4, #KEYS, 2 do
  redis.call('ZADD', KEYS[i], seq_text, member)
  local excess = redis.call('ZCARD', KEYS[i]) - cap
  if excess > 0 then
    -- ZPOPMIN replies member, score pairs, lowest first: the last score is the newest dropped.
    local dropped = redis.call('ZPOPMIN', KEYS[i], excess)
    redis.call('SEQ.ADVANCE', KEYS[i + 1], dropped[#dropped])
  end
end

redis.call('SET', KEYS[3], seq_text .. ' ' .. msgid .. ' ' .. uid, 'EX', ttl)
return {seq, msgid, 0, uid}
