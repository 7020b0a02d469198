//! The load: client threads pipelining `SEQ.NEXT`, `MSGID.GEN` and `UID.GEN` on the
//! conversations, IDMP clients (`SEQ.NEXT key IDMP token`) and IM.SEND clients (one message
//! to two recipients, on keys of their own per conversation) that retry a token or a client
//! message id after a timeout, a refusal or a broken connection until answered, and once more
//! 2–20 s after its first answer. Each client reaches the
//! nodes one of three ways ([`Via`]): straight to one address (the primary that gets cut off,
//! as a client with a stale config), through the Sentinels (asking them for the primary again
//! after every failure), or by the cluster's slots (`CLUSTER SLOTS`, again after `MOVED` or a
//! failure). Every successful reply is recorded with the term of the node that sent it: the
//! node's address, its run id and its replication ID (a promotion takes a new one), looked up
//! when the connection is made and again every second. Calls refused (NOREPLICAS, other
//! errors) or timed out from the fault on are counted.
//!
//! Every reply is checked against its own command as it arrives (`common::Checked`): one of
//! another shape, or of the right shape but not the command's layout, is misplaced (the
//! connection no longer pairs replies with commands); it is counted, and the connection
//! dropped.
//!
//! Every loop is bounded: by the run's deadline, by a count of rounds, and by what one client
//! may receive.
use super::node::{identity, int};
use crate::common::{Checked, PipelineError, Shape};
use redis::{Connection, Value};
use std::collections::{BinaryHeap, HashMap};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How often a client following the Sentinels or the slots asks them again.
const REFRESH: Duration = Duration::from_secs(1);

/// No client makes more rounds than this (a round: one batch to each node it routes to).
const MAX_ROUNDS: u64 = 5_000_000;

/// One conversation: its sequence key, its message target (MSGID.GEN and UID.GEN, IM.SEND's
/// tag), its IDMP key, IM.SEND's sequence and two recipients' inbox and trimmed marker (keys
/// no other client touches), all with the same hash tag, and its slot.
pub struct Conv {
    pub seq: String,
    pub target: String,
    pub idmp: String,
    pub im_seq: String,
    pub inboxes: [(String, String); 2],
    pub slot: u16,
}

pub fn slot_of(tag: &str) -> u16 {
    const CRC16: crc::Crc<u16> = crc::Crc::<u16>::new(&crc::CRC_16_XMODEM);
    CRC16.checksum(tag.as_bytes()) & 0x3FFF
}

impl Conv {
    pub fn new(tag: &str) -> Conv {
        Conv {
            seq: format!("{{{tag}}}:seq"),
            target: format!("{{{tag}}}"),
            idmp: format!("{{{tag}}}:idmp"),
            im_seq: format!("{{{tag}}}:im:seq"),
            inboxes: ["u1", "u2"].map(|u| {
                (
                    format!("{{{tag}}}:inbox:{u}"),
                    format!("{{{tag}}}:trimmed:{u}"),
                )
            }),
            slot: slot_of(tag),
        }
    }
}

/// One node as a primary from one moment on (see the module doc).
#[derive(Clone, Debug)]
pub struct Term {
    pub node: String,
    pub run_id: String,
    pub replid: String,
    /// When a client first met it (ms since the run's start).
    pub first_ms: u32,
}

impl Term {
    pub fn label(&self) -> String {
        format!(
            "{} (run {}, replid {})",
            self.node,
            self.run_id.get(..8).unwrap_or(&self.run_id),
            self.replid.get(..8).unwrap_or(&self.replid)
        )
    }
}

/// What a plain reply was.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug)]
pub enum Kind {
    Seq,
    MsgId,
    Uid,
}

/// One successful reply of the plain load.
#[derive(Clone, Copy, Debug)]
pub struct Rec {
    pub kind: Kind,
    /// The conversation.
    pub conv: u16,
    pub term: u16,
    /// ms since the run's start, when the batch was sent.
    pub at_ms: u32,
    /// The value; a message ID as a number that sorts as the ID does.
    pub v: u128,
}

/// What a client that retries under a token sends.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Tokened {
    /// `SEQ.NEXT idmp-key IDMP t<token>`.
    Idmp,
    /// `IM.SEND tag im-seq inbox trimmed inbox trimmed 1 u1 m<token> <body> 1000`.
    ImSend,
}

/// One successful reply of a call under a token: an IDMP call (its value) or an IM.SEND (its
/// seq, message ID and UID, the client message id as the token).
#[derive(Clone, Copy, Debug)]
pub struct TokenRec {
    pub conv: u16,
    pub token: u64,
    pub term: u16,
    pub at_ms: u32,
    pub value: i64,
    pub duplicate: bool,
    /// IM.SEND's message ID ([`msgid_value`]) and UID; None for IDMP, and for a retry whose
    /// message is no longer in the first inbox (nil, nil).
    pub msgid: Option<u128>,
    pub uid: Option<u128>,
}

/// The cap of IM.SEND's inboxes.
const INBOX_CAP: &str = "1000";

/// The load of the clients of one [`Tokened`] kind.
#[derive(Clone, Copy, Debug)]
pub struct TokenLoad {
    /// New tokens per batch, and the sleep after one.
    pub batch: usize,
    pub pause: Duration,
    /// This share (%) of the new tokens goes to the hot conversations.
    pub hot_percent: u64,
}

/// A message ID ("D1VO-8H8O-0006-D3E6", base32hex) as a number with the same order.
pub fn msgid_value(id: &[u8]) -> Option<u128> {
    let mut v: u128 = 0;
    let mut n = 0;
    for &c in id {
        let d = match c {
            b'-' => continue,
            b'0'..=b'9' => c - b'0',
            b'A'..=b'Z' => c - b'A' + 10,
            _ => return None,
        };
        v = (v << 6) | u128::from(d);
        n += 1;
    }
    (n == 16).then_some(v)
}

/// The time field (Unix ms) of a message ID held as [`msgid_value`] made it: the 16 base32hex
/// digits are the 80-bit ID, whose top 42 bits are the time.
pub fn msgid_time_ms(v: u128) -> i64 {
    let mut n: u128 = 0;
    for i in (0..16).rev() {
        n = (n << 5) | ((v >> (6 * i)) & 0x1F);
    }
    i64::try_from(n >> 38).unwrap_or(i64::MAX)
}

/// Everything the clients share.
pub struct Shared {
    pub convs: Vec<Conv>,
    /// Conversations 0..hot are hot: `hot_percent` of the plain load goes to them.
    pub hot: usize,
    pub hot_percent: u64,
    /// Sleep after each plain batch (None: unthrottled).
    pub throttle: Option<Duration>,
    /// Triples per plain batch.
    pub batch: usize,
    /// No plain client receives more triples than this (a bound on memory).
    pub max_triples: u64,
    pub idmp: TokenLoad,
    pub im_send: TokenLoad,
    /// No token client makes more tokens than this.
    pub max_tokens: u64,
    /// A token is asked again this long after its first answer (uniform in the range).
    pub late_retry: (Duration, Duration),
    pub start: Instant,
    /// No loop runs past this.
    pub deadline: Instant,
    /// Plain clients stop.
    pub stop: AtomicBool,
    /// IDMP clients make no new tokens, finish their retries and stop.
    pub stop_tokens: AtomicBool,
    pub terms: Mutex<Vec<Term>>,
    /// Successful plain triples, and answers to token clients, so far (progress).
    pub triples: AtomicU64,
    pub answers: AtomicU64,
    /// When the fault began (ms since the start; `u32::MAX` before), and the calls refused
    /// with NOREPLICAS, refused otherwise (READONLY, CLUSTERDOWN, MOVED, ...) and timed out
    /// (or their connection broke) since.
    pub fault_ms: AtomicU32,
    pub noreplicas: AtomicU64,
    pub refused: AtomicU64,
    pub timed_out: AtomicU64,
    /// Replies that were not their command's (whenever they came), and the first few.
    pub misplaced: AtomicU64,
    pub misplaced_examples: Mutex<Vec<String>>,
}

impl Shared {
    pub fn ms(&self) -> u32 {
        u32::try_from(self.start.elapsed().as_millis()).unwrap_or(u32::MAX)
    }

    fn term(&self, node: &str, run_id: String, replid: String) -> u16 {
        let mut terms = self.terms.lock().unwrap();
        if let Some(i) = terms
            .iter()
            .position(|t| t.node == node && t.run_id == run_id && t.replid == replid)
        {
            return i as u16;
        }
        terms.push(Term {
            node: node.to_owned(),
            run_id,
            replid,
            first_ms: self.ms(),
        });
        (terms.len() - 1) as u16
    }

    fn over(&self) -> bool {
        Instant::now() > self.deadline
    }

    /// The fault begins now: returns when (ms since the start, and Unix ms).
    pub fn fault_begins(&self) -> (u32, i64) {
        let at = (self.ms(), super::nemesis::now_ms());
        self.fault_ms.store(at.0, Ordering::Relaxed);
        at
    }

    /// A reply from `addr` that was not its command's.
    fn misplaced(&self, addr: &str, what: String) {
        if self.misplaced.fetch_add(1, Ordering::Relaxed) < 8 {
            if let Ok(mut e) = self.misplaced_examples.lock() {
                e.push(format!("{addr} at {} ms: {what}", self.ms()));
            }
        }
    }

    /// Sends `p` on `con` (of `addr`), each reply checked against its command: the replies, or
    /// `None` when the connection failed or a reply was misplaced (counted; the caller drops the
    /// connection).
    fn send(&self, p: &Checked, con: &mut Connection, addr: &str) -> Option<Vec<Value>> {
        match p.send(con) {
            Ok(v) => Some(v),
            Err(PipelineError::Io(_)) => None,
            Err(PipelineError::Misplaced(m)) => {
                self.misplaced(
                    addr,
                    format!(
                        "command {} ({}) of {} got {:?}",
                        m.index,
                        m.command,
                        p.count(),
                        m.got
                    ),
                );
                None
            }
        }
    }

    /// `calls` calls sent at `at_ms` failed so (counted from the fault on).
    fn count(&self, at_ms: u32, why: &Failure, calls: usize) {
        if at_ms < self.fault_ms.load(Ordering::Relaxed) {
            return;
        }
        let counter = match why {
            Failure::Broken => &self.timed_out,
            Failure::Refused(true) => &self.noreplicas,
            Failure::Refused(false) | Failure::Moved => &self.refused,
        };
        counter.fetch_add(calls as u64, Ordering::Relaxed);
    }
}

fn next(x: &mut u64) -> u64 {
    *x = x
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    *x >> 33
}

/// How a client reaches the nodes.
#[derive(Clone)]
pub enum Via {
    /// Always this address ("ip:port").
    Direct(String),
    /// This address while it serves as a primary (through timeouts and dropped connections);
    /// from its first refusal (NOREPLICAS, READONLY, MOVED, not a primary) on, the other way,
    /// as a client whose configuration names a node until that node turns it away.
    Pinned(String, Box<Via>),
    /// The primary the Sentinels at these addresses name for `master`.
    Sentinel(Vec<String>, String),
    /// The owners of the slots, as the nodes at these addresses say.
    Cluster(Vec<String>),
}

struct Conn {
    con: Connection,
    term: u16,
    checked: Instant,
}

/// A client's connections and where it sends what.
pub struct Router<'a> {
    via: Via,
    shared: &'a Shared,
    conns: HashMap<String, Conn>,
    /// Direct and Sentinel: the node to send to, once known.
    current: Option<String>,
    /// Cluster: the owner of each slot (an address), once known.
    slots: Vec<Option<String>>,
    /// When the Sentinels or the slots were last asked.
    resolved: Instant,
    seed: u64,
    read_timeout: Duration,
}

/// Why a batch was not answered.
enum Failure {
    /// The connection broke or timed out.
    Broken,
    /// An error reply such as NOREPLICAS (true), READONLY, CLUSTERDOWN.
    Refused(bool),
    /// MOVED or ASK: the slots changed.
    Moved,
}

fn ask(addr: &str, args: &[&str]) -> Option<Value> {
    let client = redis::Client::open(format!("redis://{addr}/")).ok()?;
    let mut con = client
        .get_connection_with_timeout(Duration::from_millis(500))
        .ok()?;
    con.set_read_timeout(Some(Duration::from_secs(1))).ok()?;
    let mut c = redis::cmd(args.first().copied().unwrap_or("PING"));
    for a in args.iter().skip(1) {
        c.arg(*a);
    }
    c.query(&mut con).ok()
}

impl<'a> Router<'a> {
    pub fn new(via: Via, shared: &'a Shared, seed: u64, read_timeout: Duration) -> Router<'a> {
        Router {
            via,
            shared,
            conns: HashMap::new(),
            current: None,
            slots: vec![None; 16384],
            resolved: Instant::now(),
            seed,
            read_timeout,
        }
    }

    fn resolve(&mut self) {
        self.resolved = Instant::now();
        match &self.via {
            Via::Direct(a) | Via::Pinned(a, _) => self.current = Some(a.clone()),
            Via::Sentinel(sentinels, master) => {
                self.current = None;
                let n = sentinels.len().max(1);
                let first = next(&mut self.seed) as usize % n;
                for i in 0..n {
                    let Some(s) = sentinels.get((first + i) % n) else {
                        continue;
                    };
                    if let Some(Value::Array(a)) =
                        ask(s, &["SENTINEL", "GET-MASTER-ADDR-BY-NAME", master])
                    {
                        if let (Some(Value::BulkString(ip)), Some(Value::BulkString(port))) =
                            (a.first(), a.get(1))
                        {
                            self.current = Some(format!(
                                "{}:{}",
                                String::from_utf8_lossy(ip),
                                String::from_utf8_lossy(port)
                            ));
                            return;
                        }
                    }
                }
            }
            Via::Cluster(seeds) => {
                // Ask the nodes in turn, from a random one: an isolated primary still claims
                // its slots, the others name the new owner.
                let n = seeds.len().max(1);
                let first = next(&mut self.seed) as usize % n;
                for i in 0..n {
                    let Some(s) = seeds.get((first + i) % n) else {
                        continue;
                    };
                    if let Some(Value::Array(ranges)) = ask(s, &["CLUSTER", "SLOTS"]) {
                        let mut slots = vec![None; 16384];
                        for r in &ranges {
                            let Value::Array(r) = r else { continue };
                            let (Some(a), Some(b), Some(Value::Array(owner))) =
                                (r.first().and_then(int), r.get(1).and_then(int), r.get(2))
                            else {
                                continue;
                            };
                            let (Some(Value::BulkString(ip)), Some(port)) =
                                (owner.first(), owner.get(1).and_then(int))
                            else {
                                continue;
                            };
                            let addr = format!("{}:{port}", String::from_utf8_lossy(ip));
                            for s in a.max(0)..=b.min(16383) {
                                if let Some(x) = slots.get_mut(s as usize) {
                                    *x = Some(addr.clone());
                                }
                            }
                        }
                        self.slots = slots;
                        return;
                    }
                }
            }
        }
    }

    /// The items (by their slots) grouped by the node to send them to. A client following the
    /// Sentinels or the slots asks them again every second, as clients that subscribe to
    /// Sentinel's `+switch-master` or refresh the cluster's topology do: so it moves to a new
    /// primary even while the old one still answers it.
    fn route(&mut self, slots: &[u16]) -> Vec<(String, Vec<usize>)> {
        if matches!(self.via, Via::Sentinel(..) | Via::Cluster(_))
            && self.resolved.elapsed() > REFRESH
        {
            self.resolve();
        }
        match self.via {
            Via::Cluster(_) => {
                if slots
                    .iter()
                    .any(|&s| self.slots.get(s as usize).is_none_or(Option::is_none))
                {
                    self.resolve();
                }
                let mut groups: Vec<(String, Vec<usize>)> = Vec::new();
                for (i, &s) in slots.iter().enumerate() {
                    let Some(Some(a)) = self.slots.get(s as usize) else {
                        continue;
                    };
                    match groups.iter_mut().find(|(g, _)| g == a) {
                        Some((_, v)) => v.push(i),
                        None => groups.push((a.clone(), vec![i])),
                    }
                }
                groups
            }
            _ => {
                if self.current.is_none() {
                    self.resolve();
                }
                match &self.current {
                    Some(a) => vec![(a.clone(), (0..slots.len()).collect())],
                    None => Vec::new(),
                }
            }
        }
    }

    /// The connection to `addr` and the term it serves: `Broken` when it does not answer (cut
    /// off, paused), `Refused` when it answers as a replica.
    fn conn(&mut self, addr: &str) -> Result<(&mut Connection, u16), Failure> {
        let stale = self
            .conns
            .get(addr)
            .is_some_and(|c| c.checked.elapsed() > Duration::from_secs(1));
        if stale {
            let c = self.conns.get_mut(addr).ok_or(Failure::Broken)?;
            let checked = identity(&mut c.con);
            match checked {
                Some((true, run_id, replid)) => {
                    c.term = self.shared.term(addr, run_id, replid);
                    c.checked = Instant::now();
                }
                Some((false, ..)) => {
                    self.conns.remove(addr);
                    return Err(Failure::Refused(false));
                }
                None => {
                    self.conns.remove(addr);
                    return Err(Failure::Broken);
                }
            }
        }
        if !self.conns.contains_key(addr) {
            let mut con = redis::Client::open(format!("redis://{addr}/"))
                .and_then(|c| c.get_connection_with_timeout(Duration::from_secs(1)))
                .map_err(|_| Failure::Broken)?;
            con.set_read_timeout(Some(self.read_timeout))
                .and_then(|()| con.set_write_timeout(Some(self.read_timeout)))
                .map_err(|_| Failure::Broken)?;
            let (primary, run_id, replid) = identity(&mut con).ok_or(Failure::Broken)?;
            if !primary {
                return Err(Failure::Refused(false));
            }
            let term = self.shared.term(addr, run_id, replid);
            self.conns.insert(
                addr.to_owned(),
                Conn {
                    con,
                    term,
                    checked: Instant::now(),
                },
            );
        }
        self.conns
            .get_mut(addr)
            .map(|c| (&mut c.con, c.term))
            .ok_or(Failure::Broken)
    }

    fn failed(&mut self, addr: &str, why: Failure) {
        if !matches!(why, Failure::Broken) {
            if let Via::Pinned(_, then) = &self.via {
                self.via = (**then).clone();
                self.conns.clear();
                self.current = None;
                return;
            }
        }
        match why {
            Failure::Broken => {
                self.conns.remove(addr);
                if matches!(self.via, Via::Sentinel(..)) {
                    self.current = None;
                }
            }
            Failure::Refused(_) => {
                // Ask again where to go (the Sentinels, the slots); a direct client stays.
                if !matches!(self.via, Via::Direct(_)) {
                    self.conns.remove(addr);
                }
                match self.via {
                    Via::Sentinel(..) => self.current = None,
                    Via::Cluster(_) => self.resolve(),
                    Via::Direct(_) | Via::Pinned(..) => {}
                }
            }
            Failure::Moved => self.resolve(),
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn classify(e: &redis::ServerError) -> Failure {
    match e.code() {
        "MOVED" | "ASK" => Failure::Moved,
        code => Failure::Refused(code == "NOREPLICAS"),
    }
}

/// A plain client: batches of `shared.batch` triples on conversations picked at random among
/// the first `only` (hot ones more often), until `stop`. Returns what it received.
pub fn plain(via: Via, shared: &Shared, seed: u64, only: usize) -> Vec<Rec> {
    let mut router = Router::new(via, shared, seed, Duration::from_secs(2));
    let mut x = seed.wrapping_mul(7919).wrapping_add(1);
    let mut out = Vec::new();
    let n = only.min(shared.convs.len()).max(1) as u64;
    let hot = shared.hot.min(n as usize) as u64;
    let mut rounds = 0;
    let mut triples = 0;
    while !shared.stop.load(Ordering::Relaxed)
        && !shared.over()
        && rounds < MAX_ROUNDS
        && triples < shared.max_triples
    {
        rounds += 1;
        let convs: Vec<usize> = (0..shared.batch)
            .map(|_| {
                let r = next(&mut x);
                if hot > 0 && r % 100 < shared.hot_percent {
                    (next(&mut x) % hot) as usize
                } else {
                    (next(&mut x) % n) as usize
                }
            })
            .collect();
        let slots: Vec<u16> = convs
            .iter()
            .filter_map(|&c| shared.convs.get(c).map(|c| c.slot))
            .collect();
        let groups = router.route(&slots);
        if groups.is_empty() {
            std::thread::sleep(Duration::from_millis(50));
        }
        for (addr, items) in groups {
            let mut p = Checked::new();
            for &i in &items {
                let Some(c) = convs.get(i).and_then(|&c| shared.convs.get(c)) else {
                    continue;
                };
                p.push(Shape::Int, redis::cmd("SEQ.NEXT").arg(&c.seq).clone());
                p.push(
                    Shape::Bulk,
                    redis::cmd("MSGID.GEN").arg(1).arg(&c.target).clone(),
                );
                p.push(Shape::Int, redis::cmd("UID.GEN").arg(&c.target).clone());
            }
            let at_ms = shared.ms();
            let result = match router.conn(&addr) {
                Err(f) => {
                    router.failed(&addr, f);
                    continue;
                }
                Ok((con, term)) => shared.send(&p, con, &addr).map(|v| (v, term)),
            };
            let Some((replies, term)) = result else {
                shared.count(at_ms, &Failure::Broken, 3 * items.len());
                router.failed(&addr, Failure::Broken);
                continue;
            };
            let mut failure = None;
            for (&i, triple) in items.iter().zip(replies.chunks(3)) {
                let conv = convs.get(i).copied().unwrap_or(0) as u16;
                let mut ok = 0;
                for (kind, v) in [Kind::Seq, Kind::MsgId, Kind::Uid].into_iter().zip(triple) {
                    let v = match (kind, v) {
                        (Kind::MsgId, Value::BulkString(id)) => {
                            let v = msgid_value(id);
                            if v.is_none() {
                                shared.misplaced(&addr, format!("MSGID.GEN got {v:?}"));
                                failure = Some(Failure::Broken);
                            }
                            v
                        }
                        (Kind::Seq | Kind::Uid, Value::Int(n)) => u128::try_from(*n).ok(),
                        (_, Value::ServerError(e)) => {
                            let why = classify(e);
                            shared.count(at_ms, &why, 1);
                            failure = Some(why);
                            None
                        }
                        // Checked::send let no other shape through.
                        (_, other) => {
                            shared.misplaced(&addr, format!("{kind:?} got {other:?}"));
                            failure = Some(Failure::Broken);
                            None
                        }
                    };
                    if let Some(v) = v {
                        out.push(Rec {
                            kind,
                            conv,
                            term,
                            at_ms,
                            v,
                        });
                        ok += 1;
                    }
                }
                if ok == 3 {
                    shared.triples.fetch_add(1, Ordering::Relaxed);
                    triples += 1;
                }
            }
            if let Some(f) = failure {
                router.failed(&addr, f);
            }
        }
        if let Some(t) = shared.throttle {
            std::thread::sleep(t);
        }
    }
    out
}

/// A token waiting to be sent (again).
#[derive(PartialEq, Eq, PartialOrd, Ord)]
struct Pending {
    /// When (the late retry), ms since the start; ordered first so that the heap yields the
    /// earliest.
    due_ms: u64,
    token: u64,
    conv: u16,
    /// The late retry was scheduled already.
    late: bool,
}

/// The call of `what` for token `token` on conversation `c` (both reply with an array).
fn token_call(p: &mut Checked, what: Tokened, c: &Conv, token: u64) {
    let mut cmd;
    match what {
        Tokened::Idmp => {
            cmd = redis::cmd("SEQ.NEXT");
            cmd.arg(&c.idmp).arg("IDMP").arg(format!("t{token:x}"));
        }
        Tokened::ImSend => {
            cmd = redis::cmd("IM.SEND");
            cmd.arg(&c.target).arg(&c.im_seq);
            for (inbox, trimmed) in &c.inboxes {
                cmd.arg(inbox).arg(trimmed);
            }
            cmd.arg(1)
                .arg("u1")
                .arg(format!("m{token:x}"))
                // The body is the client message id: a reader's page names the send it shows.
                .arg(format!("m{token:x}"))
                .arg(INBOX_CAP);
        }
    }
    p.push(Shape::Array, cmd);
}

/// A reply to a call under a token: the value (IM.SEND's seq), whether it was a retry's,
/// IM.SEND's message ID and UID (None when nil).
type Answer = (i64, bool, Option<u128>, Option<u128>);

/// The answer in a reply of `what`; None when the reply is not one (then the run fails: the
/// module answered oddly).
fn token_answer(what: Tokened, a: &[Value]) -> Option<Answer> {
    let (value, duplicate) = match what {
        Tokened::Idmp => (a.first()?, a.get(1)?),
        Tokened::ImSend => (a.first()?, a.get(2)?),
    };
    let (value, duplicate) = (int(value)?, int(duplicate)? == 1);
    if what == Tokened::Idmp {
        return Some((value, duplicate, None, None));
    }
    let id = |v: &Value, parse: fn(&[u8]) -> Option<u128>| match v {
        Value::Nil => Some(None),
        Value::BulkString(b) => parse(b).map(Some),
        _ => None,
    };
    let uid = |b: &[u8]| std::str::from_utf8(b).ok()?.parse().ok();
    Some((
        value,
        duplicate,
        id(a.get(1)?, msgid_value)?,
        id(a.get(3)?, uid)?,
    ))
}

/// A client of `what` (IDMP calls or IM.SENDs): new tokens (IDMP tokens, client message ids)
/// on conversations picked at random among the first `only` (the hot ones at `hot_percent`),
/// none while ten batches wait, each retried at once after a timeout or refusal until
/// answered, and asked once more 2–20 s after its first answer; until `stop_tokens` and every
/// retry answered (or the deadline).
pub fn tokens(
    what: Tokened,
    via: Via,
    shared: &Shared,
    client: u32,
    seed: u64,
    only: usize,
) -> Vec<TokenRec> {
    let load = match what {
        Tokened::Idmp => shared.idmp,
        Tokened::ImSend => shared.im_send,
    };
    let mut router = Router::new(via, shared, seed, Duration::from_secs(1));
    let mut x = seed.wrapping_mul(104_729).wrapping_add(7);
    let mut out = Vec::new();
    let mut made = 0u64;
    let mut now_retry: Vec<Pending> = Vec::new();
    let mut late: BinaryHeap<std::cmp::Reverse<Pending>> = BinaryHeap::new();
    let n = only.min(shared.convs.len()).max(1) as u64;
    let hot = shared.hot.min(n as usize) as u64;
    let (lo, hi) = (
        shared.late_retry.0.as_millis() as u64,
        shared.late_retry.1.as_millis() as u64,
    );
    let mut rounds = 0;
    while !shared.over() && rounds < MAX_ROUNDS {
        rounds += 1;
        let now = u64::from(shared.ms());
        let mut batch: Vec<Pending> = std::mem::take(&mut now_retry);
        while late.peek().is_some_and(|p| p.0.due_ms <= now) {
            if let Some(std::cmp::Reverse(p)) = late.pop() {
                batch.push(p);
            }
        }
        // Like an application whose sends back up, a client with ten batches unanswered
        // makes no new tokens until they are answered: a primary that refuses everything
        // for seconds would otherwise get ever longer pipelines of retries.
        let making = !shared.stop_tokens.load(Ordering::Relaxed)
            && made < shared.max_tokens
            && batch.len() < 10 * load.batch;
        if making {
            for _ in 0..load.batch {
                made += 1;
                let conv = if hot > 0 && next(&mut x) % 100 < load.hot_percent {
                    next(&mut x) % hot
                } else {
                    next(&mut x) % n
                };
                batch.push(Pending {
                    due_ms: now,
                    token: (u64::from(client) << 32) | made,
                    conv: conv as u16,
                    late: false,
                });
            }
        }
        if batch.is_empty() {
            if !making && late.is_empty() {
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
            continue;
        }
        let slots: Vec<u16> = batch
            .iter()
            .filter_map(|p| shared.convs.get(p.conv as usize).map(|c| c.slot))
            .collect();
        let groups = router.route(&slots);
        let mut sent = vec![false; batch.len()];
        for (addr, items) in groups {
            let mut p = Checked::new();
            for &i in &items {
                let (Some(b), Some(flag)) = (batch.get(i), sent.get_mut(i)) else {
                    continue;
                };
                let Some(c) = shared.convs.get(b.conv as usize) else {
                    continue;
                };
                *flag = true;
                token_call(&mut p, what, c, b.token);
            }
            let at_ms = shared.ms();
            let result = match router.conn(&addr) {
                Err(f) => Err(Some(f)),
                Ok((con, term)) => shared.send(&p, con, &addr).map(|v| (v, term)).ok_or(None),
            };
            let (replies, term) = match result {
                Ok(r) => r,
                Err(f) => {
                    if f.is_none() {
                        shared.count(at_ms, &Failure::Broken, items.len());
                    }
                    router.failed(&addr, f.unwrap_or(Failure::Broken));
                    for &i in &items {
                        if let Some(f) = sent.get_mut(i) {
                            *f = false;
                        }
                    }
                    continue;
                }
            };
            let mut failure = None;
            for (&i, reply) in items.iter().zip(replies.iter()) {
                let Some(b) = batch.get(i) else { continue };
                match reply {
                    Value::Array(a) => {
                        let Some((value, duplicate, msgid, uid)) = token_answer(what, a) else {
                            shared.misplaced(&addr, format!("{what:?} got {a:?}"));
                            failure = Some(Failure::Broken);
                            if let Some(f) = sent.get_mut(i) {
                                *f = false;
                            }
                            continue;
                        };
                        out.push(TokenRec {
                            conv: b.conv,
                            token: b.token,
                            term,
                            at_ms,
                            value,
                            duplicate,
                            msgid,
                            uid,
                        });
                        shared.answers.fetch_add(1, Ordering::Relaxed);
                        if !b.late {
                            let wait = lo + next(&mut x) % (hi - lo).max(1);
                            late.push(std::cmp::Reverse(Pending {
                                due_ms: now + wait,
                                token: b.token,
                                conv: b.conv,
                                late: true,
                            }));
                        }
                    }
                    Value::ServerError(e) => {
                        let why = classify(e);
                        shared.count(at_ms, &why, 1);
                        failure = Some(why);
                        if let Some(f) = sent.get_mut(i) {
                            *f = false;
                        }
                    }
                    // Checked::send let no other shape through.
                    other => {
                        shared.misplaced(&addr, format!("{what:?} got {other:?}"));
                        failure = Some(Failure::Broken);
                        if let Some(f) = sent.get_mut(i) {
                            *f = false;
                        }
                    }
                }
            }
            if let Some(f) = failure {
                router.failed(&addr, f);
            }
        }
        // Not answered (a timeout, a refusal, no primary known): the same token again.
        for (b, s) in batch.into_iter().zip(sent) {
            if !s {
                now_retry.push(b);
            }
        }
        if !load.pause.is_zero() {
            std::thread::sleep(load.pause);
        }
    }
    out
}

/// One message a reader was shown: conversation, inbox (0 or 1: `Conv::inboxes`), seq and
/// member, whether the node that showed it said it was a primary, its address's index in the
/// reader's node list, and when (ms since the start).
#[derive(Clone, Debug)]
pub struct Shown {
    pub conv: u16,
    pub inbox: u8,
    pub seq: i64,
    pub member: Vec<u8>,
    pub primary: bool,
    pub node: String,
    pub at_ms: u32,
}

/// The client message id (the token) an IM.SEND of this load wrote into `member`
/// (`msgid|uid|sender|body`, the body `m<token hex>`).
pub fn member_token(member: &[u8]) -> Option<u64> {
    let body = member.rsplit(|&b| b == b'|').next()?;
    let hex = std::str::from_utf8(body.strip_prefix(b"m")?).ok()?;
    u64::from_str_radix(hex, 16).ok()
}

/// Where a reader reads.
#[derive(Clone)]
pub struct ReadVia {
    /// The primary as the Sentinels name it, every other round (None: never).
    pub follow: Option<Via>,
    /// Data nodes, one picked at random in the other rounds, whatever its role.
    pub nodes: Vec<String>,
}

/// Conversations and inboxes per reader round, and the page size.
const READ_BATCH: usize = 10;
const READ_LIMIT: usize = 50;
/// No reader records more messages than this (a bound on memory).
const MAX_SHOWN: usize = 2_000_000;

/// A reader: rounds of `IM.SYNC` on `READ_BATCH` (conversation, inbox) pairs among the first
/// `only` conversations, each from the cursor the reader holds for it (the reply's, as a client
/// keeps it), on the node `via` picks for the round: the primary the Sentinels name in even
/// rounds, any data node in odd ones (a replica answers from its own data). Every message shown
/// is recorded with the node's role. Until `stop`, the deadline, `MAX_ROUNDS` or `MAX_SHOWN`.
pub fn reader(via: ReadVia, shared: &Shared, seed: u64, only: usize) -> Vec<Shown> {
    let mut router = via
        .follow
        .clone()
        .map(|f| Router::new(f, shared, seed, Duration::from_secs(2)));
    let mut x = seed.wrapping_mul(15_485_863).wrapping_add(3);
    let mut conns: HashMap<String, (Connection, bool, Instant)> = HashMap::new();
    let mut cursors: HashMap<(u16, u8), i64> = HashMap::new();
    let mut out: Vec<Shown> = Vec::new();
    let n = only.min(shared.convs.len()).max(1) as u64;
    let mut rounds = 0u64;
    while !shared.stop.load(Ordering::Relaxed)
        && !shared.over()
        && rounds < MAX_ROUNDS
        && out.len() < MAX_SHOWN
    {
        rounds += 1;
        let picks: Vec<(u16, u8)> = (0..READ_BATCH)
            .map(|_| ((next(&mut x) % n) as u16, (next(&mut x) % 2) as u8))
            .collect();
        let addr = match router.as_mut() {
            Some(r) if rounds.is_multiple_of(2) => {
                let slot = picks
                    .first()
                    .and_then(|&(c, _)| shared.convs.get(c as usize))
                    .map_or(0, |c| c.slot);
                r.route(&[slot]).into_iter().next().map(|(a, _)| a)
            }
            _ => {
                let k = via.nodes.len().max(1);
                via.nodes.get(next(&mut x) as usize % k).cloned()
            }
        };
        let Some(addr) = addr else {
            std::thread::sleep(Duration::from_millis(50));
            continue;
        };
        let stale = conns
            .get(&addr)
            .is_some_and(|c| c.2.elapsed() > Duration::from_secs(1));
        if stale || !conns.contains_key(&addr) {
            let con = conns.remove(&addr).map(|c| c.0).or_else(|| {
                let c = redis::Client::open(format!("redis://{addr}/")).ok()?;
                let con = c.get_connection_with_timeout(Duration::from_secs(1)).ok()?;
                con.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
                con.set_write_timeout(Some(Duration::from_secs(2))).ok()?;
                Some(con)
            });
            let Some(mut con) = con else {
                if let Some(r) = router.as_mut() {
                    r.failed(&addr, Failure::Broken);
                } else {
                    std::thread::sleep(Duration::from_millis(50));
                }
                continue;
            };
            let Some((primary, ..)) = identity(&mut con) else {
                std::thread::sleep(Duration::from_millis(50));
                continue;
            };
            conns.insert(addr.clone(), (con, primary, Instant::now()));
        }
        let Some((con, primary, _)) = conns.get_mut(&addr) else {
            continue;
        };
        let primary = *primary;
        let mut p = Checked::new();
        for &(c, i) in &picks {
            let Some(conv) = shared.convs.get(c as usize) else {
                continue;
            };
            let Some((inbox, trimmed)) = conv.inboxes.get(i as usize) else {
                continue;
            };
            let last = cursors.get(&(c, i)).copied().unwrap_or(0);
            let mut sync = redis::cmd("IM.SYNC");
            sync.arg(&conv.im_seq)
                .arg(inbox)
                .arg(trimmed)
                .arg(last)
                .arg(READ_LIMIT);
            p.push(Shape::Array, sync);
        }
        let at_ms = shared.ms();
        let Some(replies) = shared.send(&p, con, &addr) else {
            conns.remove(&addr);
            std::thread::sleep(Duration::from_millis(50));
            continue;
        };
        'replies: for (&(c, i), reply) in picks.iter().zip(&replies) {
            let Value::Array(a) = reply else {
                continue;
            };
            let (Some(cursor), Some(Value::Array(page))) = (a.get(1).and_then(int), a.get(4))
            else {
                shared.misplaced(&addr, format!("IM.SYNC got {a:?}"));
                conns.remove(&addr);
                break;
            };
            for pair in page.chunks(2) {
                let (Some(seq), Some(Value::BulkString(m))) =
                    (pair.first().and_then(int), pair.get(1))
                else {
                    shared.misplaced(&addr, format!("IM.SYNC's page {page:?}"));
                    conns.remove(&addr);
                    break 'replies;
                };
                out.push(Shown {
                    conv: c,
                    inbox: i,
                    seq,
                    member: m.clone(),
                    primary,
                    node: addr.clone(),
                    at_ms,
                });
            }
            cursors.insert((c, i), cursor);
        }
        if let Some(t) = shared.throttle.or(Some(Duration::from_millis(10))) {
            std::thread::sleep(t);
        }
    }
    out
}
