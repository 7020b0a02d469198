#!lua
-- imid example: send one message into a conversation, atomically, at most once per client
-- message id.
-- EVALSHA <sha> numkeys KEYS... ARGV...   (or FCALL imid_send, built from this file)
--
-- KEYS[1]   {conv:<id>}                   the conversation's tag, the target of MSGID.GEN and
--                                         UID.GEN; they declare it as a key (for cluster
--                                         routing), it is never read or written
-- KEYS[2]   {conv:<id>}:seq               the conversation sequence (imid SEQ type); it also
--                                         keeps the IDMP tokens of recent sends
-- KEYS[3..] pairs, one per recipient:
--           {conv:<id>}:inbox:<user>      ZSET, score = seq, member = "msgid|uid|sender|body"
--           {conv:<id>}:trimmed:<user>    SEQ: highest seq the cap dropped from that inbox
-- ARGV[1]   channel_type, 0..15 (MSGID.GEN)
-- ARGV[2]   sender, without '|' (it separates the member's fields)
-- ARGV[3]   client message id: the id the sending client made up for this message and reuses
--           on retries (any bytes)
-- ARGV[4]   body, any bytes
-- ARGV[5]   inbox cap, an integer >= 1: each inbox keeps the newest cap messages
-- Reply:    {seq, msgid, duplicate, uid}: duplicate is 1 when this was a retry of a send
--           already stored; nothing is written then, seq is the original seq, and msgid and
--           uid are read back from the first of the given inboxes that still holds the
--           message (nil when none does: the cap dropped it). A retry must repeat its
--           message: an error when an inbox given holds another body at that seq, or holds
--           nothing there although its cap did not drop it (the first send did not name it).
--           uid is the message's 64-bit UID as decimal text, for a BIGINT primary key in the
--           application's database.
--
-- Every key shares the {conv:<id>} hash tag, so the script runs unchanged on Redis Cluster.
-- Retries are recognised for as long as the sequence key keeps the token: the configs
-- imid.seq-idmp-ttl and imid.seq-idmp-max bound that window (docs/commands.md, IM.SEND: the
-- retry window, and what `duplicate` means for side effects).

-- At most 15 digits: seqs travel through ZSET scores and Lua numbers, both doubles, exact
-- only below 2^53.
local function int_arg(s, name)
  if not string.match(s, '^%d+$') or #s > 15 then
    return nil, redis.error_reply('ERR ' .. name .. ' must be an integer in 0..999999999999999')
  end
  return tonumber(s)
end

if #KEYS < 4 or (#KEYS - 2) % 2 ~= 0 then
  return redis.error_reply('ERR send: expected KEYS tag, seq, then inbox/trimmed pairs')
end
local channel_type, sender, client_msg_id, body = ARGV[1], ARGV[2], ARGV[3] or '', ARGV[4]
local cap, err = int_arg(ARGV[5] or '', 'inbox cap')
if not cap then return err end
if cap < 1 then
  return redis.error_reply('ERR inbox cap must be at least 1')
end
if string.find(sender, '|', 1, true) then
  return redis.error_reply("ERR sender must not contain '|'")
end
if client_msg_id == '' then
  return redis.error_reply('ERR client message id must not be empty')
end

-- MSGID.GEN and UID.GEN first: they fail only on bad arguments, and everything that can fail
-- must come before SEQ.NEXT ... IDMP takes the token (a token taken by a send that then failed
-- would make its retry a duplicate of a message never stored). On a retry the two IDs go
-- unused, which costs nothing.
local msgid = redis.call('MSGID.GEN', channel_type, KEYS[1])
-- STRING: the UID as decimal text. An integer reply would become a Lua number (a double) and
-- lose the UID's low bits: UIDs lie far above 2^53.
local uid = redis.call('UID.GEN', KEYS[1], 'STRING')

-- The IDMP token names the message: client message ids are unique per sending client only,
-- so the token is the sender and the id together (the sender has no '|'), hashed to 40 hex
-- digits to fit IDMP's 1..64-byte tokens whatever their lengths.
local token = redis.sha1hex(sender .. '|' .. client_msg_id)
local r = redis.call('SEQ.NEXT', KEYS[2], 'IDMP', token)
local seq, duplicate = r[1], r[2]
-- Integers go back to Redis as '%d' text: Lua numbers are doubles and would otherwise be
-- formatted with an exponent once large.
local seq_text = string.format('%d', seq)

if duplicate == 1 then
  -- A retry of a send that went through (clients retry on timeouts, and the first attempt
  -- may well have succeeded): SEQ.NEXT reserved nothing; reply the stored message's IDs,
  -- once every inbox given shows it is the same message (a client message id reused for
  -- another body, or a retry naming an inbox the first send did not, is refused).
  local id, u
  for i = 3, #KEYS, 2 do
    local m = redis.call('ZRANGE', KEYS[i], seq_text, seq_text, 'BYSCORE', 'LIMIT', 0, 1)
    if m[1] then
      local mid, muid, msender, mbody = string.match(m[1], '^([^|]*)|([^|]*)|([^|]*)|(.*)$')
      if msender ~= sender or mbody ~= body then
        return redis.error_reply('ERR send: client_msg_id already used for seq ' .. seq_text ..
          ' with another body (a retry repeats its message; a new message needs a new client_msg_id)')
      end
      if not id then id, u = mid, muid end
    elseif redis.call('SEQ.GET', KEYS[i + 1]) < seq then
      return redis.error_reply('ERR send: client_msg_id already used for seq ' .. seq_text ..
        ', which ' .. KEYS[i] .. " did not get (a retry names the first send's inboxes, or some of them)")
    end
  end
  return {seq, id or false, 1, u or false}
end

local member = msgid .. '|' .. uid .. '|' .. sender .. '|' .. body
for i = 3, #KEYS, 2 do
  redis.call('ZADD', KEYS[i], seq_text, member)
  local excess = redis.call('ZCARD', KEYS[i]) - cap
  if excess > 0 then
    -- ZPOPMIN replies member, score pairs, lowest first: the last score is the newest dropped.
    local dropped = redis.call('ZPOPMIN', KEYS[i], excess)
    redis.call('SEQ.ADVANCE', KEYS[i + 1], dropped[#dropped])
  end
end
return {seq, msgid, 0, uid}
