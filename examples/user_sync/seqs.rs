//! Client side of the incremental pull: a user's sync sequences, one field per kind of data
//! in one imid sequence map (`app:seq:{<user>}`), the native IM.CHANGE and IM.PULL (what
//! `examples/lua/change.lua` and `pull.lua`, also in the `imid_im` library, do), and the
//! client's local copy that pulls only the kinds that changed. Used by the `user_sync` example
//! and by `tests/examples.rs`.
#![allow(dead_code)]

use redis::{Connection, RedisResult, Value};
use std::collections::BTreeMap;

pub const LIBRARY: &str = include_str!("../functions/imid_im.lua");

/// FUNCTION LOAD REPLACE the `imid_im` library (it persists and replicates with the dataset).
pub fn load_library(con: &mut Connection) -> RedisResult<()> {
    let _: String = redis::cmd("FUNCTION")
        .arg("LOAD")
        .arg("REPLACE")
        .arg(LIBRARY)
        .query(con)?;
    Ok(())
}

/// One user's keys. They carry the hash tag `{<user>}`, so a script touching several of them
/// runs on one Redis Cluster node.
#[derive(Clone, Debug)]
pub struct User {
    pub id: String,
}

impl User {
    pub fn new(id: &str) -> User {
        User { id: id.to_owned() }
    }
    /// The sync sequences: a sequence map, field = kind, value = the kind's last change.
    pub fn seqs(&self) -> String {
        format!("app:seq:{{{}}}", self.id)
    }
    /// Per kind, the highest seq the log cap dropped (sequence map).
    pub fn trimmed(&self) -> String {
        format!("app:trimmed:{{{}}}", self.id)
    }
    /// A kind's change log: ZSET, score = seq, member = `seq|change`.
    pub fn log(&self, kind: &str) -> String {
        format!("app:log:{{{}}}:{kind}", self.id)
    }

    /// Records a change of `kind` (IM.CHANGE: change.lua's keys and arguments, without
    /// numkeys); replies its seq. Each log keeps the newest `cap` changes.
    pub fn change(
        &self,
        con: &mut Connection,
        kind: &str,
        change: &str,
        cap: u64,
    ) -> RedisResult<i64> {
        redis::cmd("IM.CHANGE")
            .arg(self.seqs())
            .arg(self.trimmed())
            .arg(self.log(kind))
            .arg(kind)
            .arg(change)
            .arg(cap)
            .query(con)
    }

    /// The kinds among `held` whose seq is above the one held (IM.PULL, pull.lua's keys and
    /// arguments without numkeys: read-only, replicas serve it too), with their changes since.
    pub fn pull(
        &self,
        con: &mut Connection,
        held: &BTreeMap<String, i64>,
    ) -> RedisResult<Vec<Delta>> {
        let mut c = redis::cmd("IM.PULL");
        c.arg(self.seqs()).arg(self.trimmed());
        for kind in held.keys() {
            c.arg(self.log(kind));
        }
        for (kind, seq) in held {
            c.arg(kind).arg(seq);
        }
        let flat: Vec<Value> = c.query(con)?;
        let mut out = Vec::with_capacity(flat.len() / 4);
        let mut it = flat.into_iter();
        while let (Some(kind), Some(seq), Some(reset), Some(changes)) =
            (it.next(), it.next(), it.next(), it.next())
        {
            let changes: Vec<Value> = redis::from_redis_value(changes)?;
            let mut pairs = Vec::with_capacity(changes.len() / 2);
            let mut c = changes.into_iter();
            while let (Some(s), Some(text)) = (c.next(), c.next()) {
                pairs.push((redis::from_redis_value(s)?, redis::from_redis_value(text)?));
            }
            out.push(Delta {
                kind: redis::from_redis_value(kind)?,
                seq: redis::from_redis_value(seq)?,
                reset: redis::from_redis_value::<i64>(reset)? == 1,
                changes: pairs,
            });
        }
        Ok(out)
    }

    /// Every kind's seq on the server (SEQ.HGETALL): what a client compares with its copy.
    pub fn server_seqs(&self, con: &mut Connection) -> RedisResult<BTreeMap<String, i64>> {
        let flat: Vec<(String, i64)> = redis::cmd("SEQ.HGETALL").arg(self.seqs()).query(con)?;
        Ok(flat.into_iter().collect())
    }
}

/// What changed of one kind since the client's seq.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Delta {
    pub kind: String,
    /// The kind's seq now: the client's new local seq once it applied `changes`.
    pub seq: i64,
    /// The log cap dropped changes the client never got: reload the kind in full.
    pub reset: bool,
    /// Every change after the client's seq still in the log, oldest first: (seq, text).
    pub changes: Vec<(i64, String)>,
}

/// A client's local copy: per kind, the seq pulled up to and the changes applied.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Local {
    pub seqs: BTreeMap<String, i64>,
    pub changes: BTreeMap<String, Vec<(i64, String)>>,
}

impl Local {
    /// A client that knows `kinds` and has pulled nothing yet.
    pub fn new(kinds: &[&str]) -> Local {
        Local {
            seqs: kinds.iter().map(|k| ((*k).to_owned(), 0)).collect(),
            changes: BTreeMap::new(),
        }
    }

    /// Pulls and applies what changed; replies the kinds pulled (the others cost nothing but
    /// their field in one SEQ.HMGET). A kind marked `reset` is dropped and rebuilt from the
    /// changes the log still holds, as a real client would reload it from its database.
    pub fn sync(&mut self, con: &mut Connection, user: &User) -> RedisResult<Vec<Delta>> {
        let deltas = user.pull(con, &self.seqs)?;
        for d in &deltas {
            let mine = self.changes.entry(d.kind.clone()).or_default();
            if d.reset {
                mine.clear();
            }
            mine.extend(d.changes.iter().cloned());
            self.seqs.insert(d.kind.clone(), d.seq);
        }
        Ok(deltas)
    }
}
