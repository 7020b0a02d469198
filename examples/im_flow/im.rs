//! Client side of the IM flow: the key model and typed calls to send, sync and read: through the
//! native `IM.SEND`, `IM.SYNC` and `IM.READ` (what `examples/lua/send.lua`, `sync.lua` and
//! `read.lua` do, without the script engine), or through the scripts (`examples/lua/`, the way to change the storage model) by EVALSHA or
//! the `imid_im` Functions library built from the same sources. Used by the `im_flow` example
//! and by `tests/it/examples.rs`.
#![allow(dead_code)]

use redis::{Connection, RedisResult, Value};

pub const SEND_LUA: &str = include_str!("../lua/send.lua");
pub const SYNC_LUA: &str = include_str!("../lua/sync.lua");
pub const READ_LUA: &str = include_str!("../lua/read.lua");
pub const LIBRARY: &str = include_str!("../functions/imid_im.lua");

/// One conversation. Every key it names carries the hash tag `{conv:<id>}`, so a script that
/// touches several of them runs on one Redis Cluster node.
#[derive(Clone, Debug)]
pub struct Conv {
    pub id: String,
    /// MSGID.GEN's channel_type, 0..15 (e.g. 1 private, 2 group).
    pub channel_type: u8,
}

impl Conv {
    pub fn new(id: &str, channel_type: u8) -> Conv {
        Conv {
            id: id.to_owned(),
            channel_type,
        }
    }
    /// `{conv:<id>}`: MSGID.GEN's target (declared as a key by MSGID.GEN, never stored).
    pub fn tag(&self) -> String {
        format!("{{conv:{}}}", self.id)
    }
    /// The conversation sequence (SEQ type).
    pub fn seq(&self) -> String {
        format!("{}:seq", self.tag())
    }
    /// A recipient's inbox: ZSET, score = seq, member = `msgid|uid|sender|body`.
    pub fn inbox(&self, user: &str) -> String {
        format!("{}:inbox:{user}", self.tag())
    }
    /// The highest seq the inbox cap dropped from `user`'s inbox (SEQ type).
    pub fn trimmed(&self, user: &str) -> String {
        format!("{}:trimmed:{user}", self.tag())
    }
    /// Every member's read cursor: one sequence map, field = user, moved only forward and
    /// never past the conversation's seq (SEQ.HADVANCE ... LIMIT).
    pub fn read(&self) -> String {
        format!("{}:read", self.tag())
    }
}

/// How the flow is invoked.
#[derive(Clone, Debug)]
pub enum Via {
    /// The native commands: `IM.SEND`, `IM.SYNC`, `IM.READ` (each with its script's keys and
    /// arguments, without numkeys).
    Native,
    /// EVALSHA with the SHA1s from SCRIPT LOAD (sync as EVALSHA_RO).
    Scripts {
        send: String,
        sync: String,
        read: String,
    },
    /// FCALL on the `imid_im` library (sync as FCALL_RO).
    Functions,
}

impl Via {
    /// SCRIPT LOAD the three scripts; later calls send only the SHA1.
    pub fn load_scripts(con: &mut Connection) -> RedisResult<Via> {
        Ok(Via::Scripts {
            send: script_load(con, SEND_LUA)?,
            sync: script_load(con, SYNC_LUA)?,
            read: script_load(con, READ_LUA)?,
        })
    }

    /// The native commands: nothing to load (the module is).
    pub fn load_native(_con: &mut Connection) -> RedisResult<Via> {
        Ok(Via::Native)
    }

    /// FUNCTION LOAD REPLACE the library (it persists and replicates with the dataset).
    pub fn load_functions(con: &mut Connection) -> RedisResult<Via> {
        let _: String = redis::cmd("FUNCTION")
            .arg("LOAD")
            .arg("REPLACE")
            .arg(LIBRARY)
            .query(con)?;
        Ok(Via::Functions)
    }

    pub fn name(&self) -> &'static str {
        match self {
            Via::Native => "IM.SEND",
            Via::Scripts { .. } => "EVALSHA",
            Via::Functions => "FCALL",
        }
    }

    fn call(
        &self,
        con: &mut Connection,
        which: Which,
        keys: &[String],
        args: &[String],
    ) -> RedisResult<Value> {
        let mut c = match self {
            Via::Native => {
                // Each command takes its script's keys and arguments, without numkeys.
                let name = match which {
                    Which::Send => "IM.SEND",
                    Which::Sync => "IM.SYNC",
                    Which::Read => "IM.READ",
                };
                let mut c = redis::cmd(name);
                c.arg(keys).arg(args);
                return c.query(con);
            }
            Via::Scripts { send, sync, read } => {
                let (verb, sha) = match which {
                    Which::Send => ("EVALSHA", send),
                    Which::Sync => ("EVALSHA_RO", sync),
                    Which::Read => ("EVALSHA", read),
                };
                let mut c = redis::cmd(verb);
                c.arg(sha);
                c
            }
            Via::Functions => {
                let (verb, name) = match which {
                    Which::Send => ("FCALL", "imid_send"),
                    Which::Sync => ("FCALL_RO", "imid_sync"),
                    Which::Read => ("FCALL", "imid_read"),
                };
                let mut c = redis::cmd(verb);
                c.arg(name);
                c
            }
        };
        c.arg(keys.len()).arg(keys).arg(args);
        match c.query(con) {
            // The script cache is not persisted: after a restart, a failover or SCRIPT FLUSH
            // the server no longer knows the SHA1. Load the script again and retry once (the
            // SHA1 of the same source is the same).
            Err(e) if e.code() == Some("NOSCRIPT") => {
                let src = match which {
                    Which::Send => SEND_LUA,
                    Which::Sync => SYNC_LUA,
                    Which::Read => READ_LUA,
                };
                script_load(con, src)?;
                c.query(con)
            }
            r => r,
        }
    }
}

fn script_load(con: &mut Connection, src: &str) -> RedisResult<String> {
    redis::cmd("SCRIPT").arg("LOAD").arg(src).query(con)
}

#[derive(Clone, Copy)]
enum Which {
    Send,
    Sync,
    Read,
}

/// The reply of a send.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Sent {
    pub seq: i64,
    /// Always there for a new message; for a duplicate, read back from the first inbox of the
    /// retry that still holds the message (None when none does: the cap dropped it, or the
    /// retry names other recipients).
    pub msgid: Option<String>,
    /// A retry of a send already stored (SEQ.NEXT ... IDMP): nothing was written, `seq`,
    /// `msgid` and `uid` are the original ones.
    pub duplicate: bool,
    /// The message's 64-bit UID (UID.GEN), e.g. the BIGINT primary key of its database row;
    /// None in the same case as `msgid`.
    pub uid: Option<i64>,
}

/// One message as stored in an inbox.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Message {
    pub seq: i64,
    pub msgid: String,
    pub uid: i64,
    pub sender: String,
    pub body: String,
}

/// One page of a sync.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Page {
    /// The conversation's current seq.
    pub max_seq: i64,
    /// What to pass as `last_seq` next time.
    pub cursor: i64,
    /// Nothing after this page remains in the inbox.
    pub complete: bool,
    /// Highest seq the inbox cap dropped; above the `last_seq` passed, messages were lost.
    pub trimmed_through: i64,
    pub messages: Vec<Message>,
}

/// The reply of a read acknowledgement.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReadState {
    pub cursor: i64,
    /// Messages in the user's inbox with seq > cursor.
    pub unread: i64,
}

/// The IM flow on one server: how the scripts are called, and the send policy.
#[derive(Clone, Debug)]
pub struct Im {
    pub via: Via,
    /// Each inbox keeps the newest `inbox_cap` messages.
    pub inbox_cap: u64,
}

impl Im {
    /// Sends `body` from `sender` to each of `recipients` (include the sender to give the
    /// sender's other devices a copy). `client_msg_id` is the id the sending client made up
    /// for this message and reuses on retries: a retry while the conversation's sequence key
    /// still holds its IDMP token (imid.seq-idmp-ttl, imid.seq-idmp-max) stores nothing and
    /// replies the original message.
    pub fn send(
        &self,
        con: &mut Connection,
        conv: &Conv,
        sender: &str,
        recipients: &[&str],
        client_msg_id: &str,
        body: &str,
    ) -> RedisResult<Sent> {
        let mut keys = vec![conv.tag(), conv.seq()];
        for r in recipients {
            keys.push(conv.inbox(r));
            keys.push(conv.trimmed(r));
        }
        let args = [
            conv.channel_type.to_string(),
            sender.to_owned(),
            client_msg_id.to_owned(),
            body.to_owned(),
            self.inbox_cap.to_string(),
        ];
        let v = self.via.call(con, Which::Send, &keys, &args)?;
        // IM.SEND and the script reply the UID as decimal text (exact through Lua); parsed here.
        let (seq, msgid, dup, uid): (i64, Option<String>, i64, Option<String>) =
            redis::from_redis_value(v)?;
        Ok(Sent {
            seq,
            msgid,
            duplicate: dup == 1,
            uid: uid.as_deref().map(parse_uid).transpose()?,
        })
    }

    /// Up to `limit` messages of `user`'s inbox after `last_seq`, oldest first.
    pub fn sync(
        &self,
        con: &mut Connection,
        conv: &Conv,
        user: &str,
        last_seq: i64,
        limit: u64,
    ) -> RedisResult<Page> {
        let keys = [conv.seq(), conv.inbox(user), conv.trimmed(user)];
        let args = [last_seq.to_string(), limit.to_string()];
        let v = self.via.call(con, Which::Sync, &keys, &args)?;
        let (max_seq, cursor, complete, trimmed_through, flat): (i64, i64, i64, i64, Vec<Value>) =
            redis::from_redis_value(v)?;
        let mut messages = Vec::with_capacity(flat.len() / 2);
        let mut it = flat.into_iter();
        while let (Some(seq), Some(member)) = (it.next(), it.next()) {
            let seq: i64 = redis::from_redis_value(seq)?;
            let member: String = redis::from_redis_value(member)?;
            messages.push(parse_member(seq, &member)?);
        }
        Ok(Page {
            max_seq,
            cursor,
            complete: complete == 1,
            trimmed_through,
            messages,
        })
    }

    /// `user` has read up to `seq`; replies the cursor after the call (never back, never past
    /// the conversation's seq) and the unread count.
    pub fn read(
        &self,
        con: &mut Connection,
        conv: &Conv,
        user: &str,
        seq: i64,
    ) -> RedisResult<ReadState> {
        let keys = [conv.read(), conv.inbox(user), conv.seq()];
        let args = [user.to_owned(), seq.to_string()];
        let v = self.via.call(con, Which::Read, &keys, &args)?;
        let (cursor, unread): (i64, i64) = redis::from_redis_value(v)?;
        Ok(ReadState { cursor, unread })
    }
}

fn parse_uid(text: &str) -> RedisResult<i64> {
    text.parse().map_err(|_| {
        redis::RedisError::from((
            redis::ErrorKind::Parse,
            "uid is not a decimal integer",
            text.to_owned(),
        ))
    })
}

/// Splits an inbox member `msgid|uid|sender|body` (the body may itself contain `|`).
pub fn parse_member(seq: i64, member: &str) -> RedisResult<Message> {
    let mut parts = member.splitn(4, '|');
    match (parts.next(), parts.next(), parts.next(), parts.next()) {
        (Some(msgid), Some(uid), Some(sender), Some(body)) => Ok(Message {
            seq,
            msgid: msgid.to_owned(),
            uid: parse_uid(uid)?,
            sender: sender.to_owned(),
            body: body.to_owned(),
        }),
        _ => Err(redis::RedisError::from((
            redis::ErrorKind::Parse,
            "inbox member is not msgid|uid|sender|body",
            member.to_owned(),
        ))),
    }
}
