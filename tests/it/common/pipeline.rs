//! A pipeline whose every reply is checked against its own command, as it arrives: a reply of
//! another shape than its command's, or the closing `ECHO` arriving early (a reply lost before
//! it), is a [`Misplaced`] reply: the connection no longer pairs replies with commands, as a
//! pipelining or multiplexing client (ioredis, Lettuce, redis-rs's multiplexed connection,
//! GLIDE) would then hand every later reply to the wrong caller.

use redis::{Connection, Value};
use std::sync::atomic::{AtomicU64, Ordering};

/// What a command's reply must be when it is not an error (any error reply is passed on for
/// the caller to judge).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Shape {
    Int,
    Bulk,
    Array,
}

impl Shape {
    fn fits(self, v: &Value) -> bool {
        matches!(
            (self, v),
            (Shape::Int, Value::Int(_))
                | (Shape::Bulk, Value::BulkString(_))
                | (Shape::Array, Value::Array(_))
        )
    }
}

/// A reply that does not belong to its command: the `index`-th command of the pipeline (its
/// name) got `got`.
#[derive(Debug)]
pub struct Misplaced {
    pub index: usize,
    pub command: String,
    pub got: Value,
}

/// Why a checked pipeline gave no replies.
#[derive(Debug)]
pub enum PipelineError {
    /// The connection failed (closed, timed out).
    Io(redis::RedisError),
    /// A reply did not belong to its command; the connection must be dropped.
    Misplaced(Misplaced),
}

/// A pipeline of commands, each with the shape of its reply.
#[derive(Default)]
pub struct Checked {
    cmds: Vec<(redis::Cmd, Shape, String)>,
}

impl Checked {
    pub fn new() -> Checked {
        Checked::default()
    }

    /// Adds `args` (the first is the command's name), whose reply must be `shape` or an error.
    pub fn add<T: redis::ToRedisArgs>(&mut self, shape: Shape, args: &[T]) -> &mut Checked {
        let mut c = redis::Cmd::new();
        for a in args {
            c.arg(a);
        }
        self.push(shape, c)
    }

    /// Adds a command made with `redis::cmd`, whose reply must be `shape` or an error.
    pub fn push(&mut self, shape: Shape, c: redis::Cmd) -> &mut Checked {
        let name = c
            .args_iter()
            .next()
            .map(|a| match a {
                redis::Arg::Simple(b) => String::from_utf8_lossy(b).into_owned(),
                _ => String::new(),
            })
            .unwrap_or_default();
        self.cmds.push((c, shape, name));
        self
    }

    /// How many commands (the closing `ECHO` left out).
    pub fn count(&self) -> usize {
        self.cmds.len()
    }

    /// Sends the commands and a closing `ECHO` with a token of its own, then reads the replies
    /// one by one, each checked against its command; the `ECHO`'s must be last and its own.
    /// The replies of the commands, in order.
    pub fn send(&self, con: &mut Connection) -> Result<Vec<Value>, PipelineError> {
        static TOKENS: AtomicU64 = AtomicU64::new(0);
        let token = format!(
            "checked-{}-{}",
            std::process::id(),
            TOKENS.fetch_add(1, Ordering::Relaxed)
        );
        let mut packed = Vec::new();
        for (c, ..) in &self.cmds {
            c.write_packed_command(&mut packed);
        }
        redis::cmd("ECHO")
            .arg(&token)
            .write_packed_command(&mut packed);
        con.send_packed_command(&packed)
            .map_err(PipelineError::Io)?;
        let mut out = Vec::with_capacity(self.cmds.len());
        for (index, (_, shape, name)) in self.cmds.iter().enumerate() {
            let got = con.recv_response().map_err(PipelineError::Io)?;
            let echo = matches!(&got, Value::BulkString(b) if b == token.as_bytes());
            if echo || !(matches!(got, Value::ServerError(_)) || shape.fits(&got)) {
                return Err(PipelineError::Misplaced(Misplaced {
                    index,
                    command: name.clone(),
                    got,
                }));
            }
            out.push(got);
        }
        let last = con.recv_response().map_err(PipelineError::Io)?;
        if !matches!(&last, Value::BulkString(b) if b == token.as_bytes()) {
            return Err(PipelineError::Misplaced(Misplaced {
                index: self.cmds.len(),
                command: "ECHO".to_owned(),
                got: last,
            }));
        }
        Ok(out)
    }
}
