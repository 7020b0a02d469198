//! A command against its reference script in examples/lua/ (tests/it/im_send.rs, im_read.rs):
//! one call in script terms ([`Call`]: KEYS and ARGV; the command takes the same without
//! numkeys), run as EVALSHA ([`lua`]) or as the command ([`native`]), and [`Pair`]: two
//! test-hooks servers with their clocks frozen at [`T0`], the scripts on one, the commands on
//! the other, every call on both, the replies and then the data compared.

use super::*;

/// The instant both servers' clocks are frozen at (2026-09-21).
pub const T0: u64 = 1_790_000_000_000;

/// A reference script and the command it is the reference of.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Script {
    Send,
    Sync,
    Read,
    Pull,
    Change,
}

impl Script {
    pub const ALL: [Script; 5] = [
        Script::Send,
        Script::Sync,
        Script::Read,
        Script::Pull,
        Script::Change,
    ];

    pub fn command(self) -> &'static str {
        match self {
            Script::Send => "IM.SEND",
            Script::Sync => "IM.SYNC",
            Script::Read => "IM.READ",
            Script::Pull => "IM.PULL",
            Script::Change => "IM.CHANGE",
        }
    }

    fn source(self) -> &'static str {
        match self {
            Script::Send => include_str!("../../../examples/lua/send.lua"),
            Script::Sync => include_str!("../../../examples/lua/sync.lua"),
            Script::Read => include_str!("../../../examples/lua/read.lua"),
            Script::Pull => include_str!("../../../examples/lua/pull.lua"),
            Script::Change => include_str!("../../../examples/lua/change.lua"),
        }
    }

    /// Run with EVALSHA_RO: the read-only two (as their headers say).
    fn read_only(self) -> bool {
        matches!(self, Script::Sync | Script::Pull)
    }
}

/// A reply, or the error text as a client sees it, without the suffix (" script: <sha>, on
/// @user_script:<line>.") that errors raised inside redis.call carry.
pub type Reply = Result<Value, String>;

pub fn reply(r: redis::RedisResult<Value>) -> Reply {
    r.map_err(|e| {
        let t = err_text(&e);
        t.split(" script:").next().unwrap_or_default().to_owned()
    })
}

pub fn strs(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

/// One call in script terms: the script, its KEYS and its ARGV; the native command takes the
/// same without numkeys.
#[derive(Clone, Debug)]
pub struct Call {
    pub script: Script,
    pub keys: Vec<String>,
    pub args: Vec<String>,
}

impl Call {
    /// A send in send.lua's terms: KEYS (tag, seq, then inbox/trimmed pairs) and ARGV
    /// (channel_type sender client_msg_id body cap).
    pub fn send(
        conv: &str,
        to: &[&str],
        ct: u8,
        sender: &str,
        cid: &str,
        body: &str,
        cap: &str,
    ) -> Call {
        let tag = format!("{{conv:{conv}}}");
        let mut keys = vec![tag.clone(), format!("{tag}:seq")];
        for u in to {
            keys.push(format!("{tag}:inbox:{u}"));
            keys.push(format!("{tag}:trimmed:{u}"));
        }
        Call {
            script: Script::Send,
            keys,
            args: strs(&[&ct.to_string(), sender, cid, body, cap]),
        }
    }

    pub fn sync(conv: &str, user: &str, last: &str, limit: &str) -> Call {
        let tag = format!("{{conv:{conv}}}");
        Call {
            script: Script::Sync,
            keys: vec![
                format!("{tag}:seq"),
                format!("{tag}:inbox:{user}"),
                format!("{tag}:trimmed:{user}"),
            ],
            args: strs(&[last, limit]),
        }
    }

    pub fn read(conv: &str, user: &str, upto: &str) -> Call {
        let tag = format!("{{conv:{conv}}}");
        Call {
            script: Script::Read,
            keys: vec![
                format!("{tag}:read"),
                format!("{tag}:inbox:{user}"),
                format!("{tag}:seq"),
            ],
            args: strs(&[user, upto]),
        }
    }

    pub fn change(user: &str, kind: &str, change: &str, cap: &str) -> Call {
        Call {
            script: Script::Change,
            keys: vec![
                format!("app:seq:{{{user}}}"),
                format!("app:trimmed:{{{user}}}"),
                format!("app:log:{{{user}}}:{kind}"),
            ],
            args: strs(&[kind, change, cap]),
        }
    }

    pub fn pull(user: &str, held: &[(&str, &str)]) -> Call {
        let mut keys = vec![
            format!("app:seq:{{{user}}}"),
            format!("app:trimmed:{{{user}}}"),
        ];
        let mut args = Vec::new();
        for (kind, seq) in held {
            keys.push(format!("app:log:{{{user}}}:{kind}"));
            args.push(kind.to_string());
            args.push(seq.to_string());
        }
        Call {
            script: Script::Pull,
            keys,
            args,
        }
    }

    pub fn native_argv(&self) -> Vec<String> {
        let mut v = vec![self.script.command().to_owned()];
        v.extend(self.keys.iter().cloned());
        v.extend(self.args.iter().cloned());
        v
    }
}

/// `c` the command's way.
pub fn native(con: &mut Connection, c: &Call) -> Reply {
    reply(cmd(con, &c.native_argv()))
}

/// The scripts loaded on one server (SCRIPT LOAD), each with its SHA.
pub struct Loaded(Vec<(Script, String)>);

pub fn load_scripts(con: &mut Connection, scripts: &[Script]) -> Loaded {
    Loaded(
        scripts
            .iter()
            .map(|s| (*s, cmd(con, &["SCRIPT", "LOAD", s.source()]).unwrap()))
            .collect(),
    )
}

/// `c` the script's way: EVALSHA, or EVALSHA_RO for the read-only two; its script among
/// `loaded`.
pub fn lua(con: &mut Connection, loaded: &Loaded, c: &Call) -> Reply {
    let sha = loaded
        .0
        .iter()
        .find(|(s, _)| *s == c.script)
        .map(|(_, sha)| sha.as_str())
        .unwrap_or_else(|| panic!("{:?} not loaded", c.script));
    let n = c.keys.len().to_string();
    let mut argv = vec![
        if c.script.read_only() {
            "EVALSHA_RO"
        } else {
            "EVALSHA"
        },
        sha,
        n.as_str(),
    ];
    argv.extend(c.keys.iter().map(String::as_str));
    argv.extend(c.args.iter().map(String::as_str));
    reply(cmd(con, &argv))
}

/// A test-hooks server with its clock frozen at `at`.
pub fn frozen(at: u64, extra: &[&str]) -> Server {
    let s = Server::build().hooked().args(extra).start();
    freeze(&mut s.client(), at);
    s
}

/// The two servers of a comparison, both frozen at [`T0`]: `lua` runs the scripts, `native`
/// the commands.
pub struct Pair {
    pub lua: Server,
    pub native: Server,
    loaded: Loaded,
    pub cl: Connection,
    pub cn: Connection,
}

impl Pair {
    /// The pair with `scripts` loaded on `lua`, both servers started with `extra`.
    pub fn new(scripts: &[Script], extra: &[&str]) -> Pair {
        let lua = frozen(T0, extra);
        let native = frozen(T0, extra);
        let mut cl = lua.client();
        let loaded = load_scripts(&mut cl, scripts);
        let cn = native.client();
        Pair {
            lua,
            native,
            loaded,
            cl,
            cn,
        }
    }

    /// Runs `c` both ways; the replies must be equal; returns the native one.
    pub fn run(&mut self, c: &Call) -> Reply {
        let a = lua(&mut self.cl, &self.loaded, c);
        let b = native(&mut self.cn, c);
        assert_eq!(
            b,
            a,
            "{} and its script differ on {c:?}",
            c.script.command()
        );
        b
    }

    /// Runs `args` on both servers.
    pub fn both(&mut self, args: &[&str]) {
        let _: Value = cmd(&mut self.cl, args).unwrap();
        let _: Value = cmd(&mut self.cn, args).unwrap();
    }

    /// Freezes both servers' clocks at `at`.
    pub fn clock(&mut self, at: u64) {
        let t = at.to_string();
        self.both(&["IMID.TEST-CLOCK", "FREEZE", &t]);
    }

    /// Same keys, same contents ([`keyspace`]), same digest (which covers every token window
    /// too).
    pub fn assert_same_state(&mut self) {
        assert_eq!(keyspace(&mut self.cn), keyspace(&mut self.cl));
        assert_eq!(digest(&self.native), digest(&self.lua), "DEBUG DIGEST");
    }
}
