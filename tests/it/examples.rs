//! The examples against real servers: the send/sync/read scripts and the Functions library
//! built from them (retries through IDMP, inbox caps, paging, read cursors in one map, the
//! incremental pull of per-kind sync sequences, EVALSHA = FCALL, primary = replica), the
//! segment allocator, the UID cache, and the example programs (Rust, Python, Node.js) exiting 0.
use crate::common;
use common::*;

#[path = "../../examples/segment_allocator/allocator.rs"]
mod allocator;
#[path = "../../examples/uid_cache/cache.rs"]
mod cache;
#[path = "../../examples/im_flow/im.rs"]
mod im;
#[path = "../../examples/user_sync/seqs.rs"]
mod seqs;

use allocator::SegmentAllocator;
use cache::UidCache;
use im::{Conv, Im, Page, Sent, Via};
use seqs::{Local, User};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// `TYPE` of an imid sequence map.
const MAP_TYPE: &str = "imidsmap1";
/// What IM.READ and read.lua reply to a negative ack: the error names the argument.
const READ_SEQ_ERROR: &str = "ERR upto must be an integer in 0..9223372036854775807";

/// Every way of calling the flow, each loaded on `con`'s server: the scripts by EVALSHA and by
/// FCALL, and the send through the native IM.SEND (what send.lua does; tests/it/im_send.rs
/// compares the two in depth).
fn vias(con: &mut Connection) -> Vec<Via> {
    vec![
        Via::load_scripts(con).expect("SCRIPT LOAD"),
        Via::load_functions(con).expect("FUNCTION LOAD"),
        Via::load_native(con).expect("SCRIPT LOAD"),
    ]
}

fn flow(via: Via, cap: u64) -> Im {
    Im {
        via,
        inbox_cap: cap,
    }
}

/// Per way of calling the scripts ([`vias`]): its name, the flow with inbox cap `cap`, and a
/// conversation `<conv>-<name>` of channel type `channel_type`.
fn flows(
    con: &mut Connection,
    cap: u64,
    conv: &str,
    channel_type: u8,
) -> Vec<(&'static str, Im, Conv)> {
    vias(con)
        .into_iter()
        .map(|via| {
            let name = via.name();
            (
                name,
                flow(via, cap),
                Conv::new(&format!("{conv}-{name}"), channel_type),
            )
        })
        .collect()
}

/// The IDs of a new message (a send that is not a retry always has both).
fn ids(s: &Sent) -> (String, i64) {
    (s.msgid.clone().unwrap(), s.uid.unwrap())
}

/// A retry's reply: the original send's, marked as a duplicate.
fn assert_retry_of(again: &Sent, original: &Sent, name: &str) {
    let want = Sent {
        duplicate: true,
        ..original.clone()
    };
    assert_eq!(again, &want, "{name}");
}

/// `user`'s read cursor: a field of the conversation's cursor map (0 when never acked).
fn cursor(con: &mut Connection, conv: &Conv, user: &str) -> i64 {
    int_reply(con, &["SEQ.HGET", &conv.read(), user])
}

fn zcard(con: &mut Connection, key: &str) -> i64 {
    int_reply(con, &["ZCARD", key])
}

/// ZRANGE key 0 -1 WITHSCORES as (member, score) pairs.
fn zrange(con: &mut Connection, key: &str) -> Vec<(String, i64)> {
    cmd(con, &["ZRANGE", key, "0", "-1", "WITHSCORES"]).unwrap()
}

#[test]
fn functions_library_is_built_from_the_scripts() {
    let built = run(Command::new("sh").arg(root().join("examples/functions/build.sh")));
    let committed = std::fs::read_to_string(root().join("examples/functions/imid_im.lua")).unwrap();
    assert!(
        built == committed,
        "examples/functions/imid_im.lua is stale: run \
         `sh examples/functions/build.sh > examples/functions/imid_im.lua`"
    );
}

#[test]
fn duplicate_send_returns_the_original_and_stores_nothing() {
    let s = Server::start();
    let mut con = s.client();
    for (name, im, conv) in flows(&mut con, 100, "dup", 2) {
        let first = im
            .send(&mut con, &conv, "alice", &["bob", "carol"], "c1", "hi")
            .unwrap();
        assert!(!first.duplicate);
        im.send(&mut con, &conv, "alice", &["bob", "carol"], "c2", "there")
            .unwrap();
        let dbsize = int_reply(&mut con, &["DBSIZE"]);
        let digest: String = cmd(&mut con, &["DEBUG", "DIGEST"]).unwrap();
        let seq = int_reply(&mut con, &["SEQ.GET", &conv.seq()]);
        // A retry is the same message: the original seq and IDs, read back from the inbox;
        // nothing written (the digest covers every key's value). Naming some of the first
        // send's recipients, in another order, is a retry too.
        for to in [&["bob", "carol"][..], &["carol", "bob"], &["carol"]] {
            let again = im.send(&mut con, &conv, "alice", to, "c1", "hi").unwrap();
            assert_retry_of(&again, &first, name);
        }
        // The client message id reused for another body, or a retry naming an inbox the first
        // send did not: refused, nothing written.
        let e = im
            .send(&mut con, &conv, "alice", &["bob", "carol"], "c1", "edited")
            .unwrap_err();
        assert!(
            err_text(&e)
                .starts_with("ERR send: client_msg_id already used for seq 1 with another body"),
            "{name}: {e}"
        );
        let e = im
            .send(&mut con, &conv, "alice", &["bob", "dave"], "c1", "hi")
            .unwrap_err();
        assert!(
            err_text(&e).contains(&format!("which {} did not get", conv.inbox("dave"))),
            "{name}: {e}"
        );
        assert_eq!(
            int_reply(&mut con, &["DBSIZE"]),
            dbsize,
            "{name}: keys added"
        );
        let after: String = cmd(&mut con, &["DEBUG", "DIGEST"]).unwrap();
        assert_eq!(after, digest, "{name}: a retry changed the dataset");
        assert_eq!(
            int_reply(&mut con, &["SEQ.GET", &conv.seq()]),
            seq,
            "{name}"
        );
        assert_eq!(zcard(&mut con, &conv.inbox("dave")), 0, "{name}");
        // No dedup key: the tokens live in the sequence key.
        let keys: Vec<String> = cmd(&mut con, &["KEYS", &format!("{}*", conv.tag())]).unwrap();
        assert!(keys.iter().all(|k| !k.contains("dedup")), "{keys:?}");
        // Client message ids are per sender: bob's c1 is another message.
        let bobs = im
            .send(&mut con, &conv, "bob", &["alice"], "c1", "hi")
            .unwrap();
        assert!(!bobs.duplicate && bobs.seq == seq + 1, "{name}: {bobs:?}");
        assert!(bobs.uid > first.uid && bobs.msgid > first.msgid, "{name}");
    }
}

#[test]
fn retries_are_known_for_imid_seq_idmp_max_sends() {
    // The window of a conversation's retries is its sequence key's IDMP window: with room for
    // 2 tokens, a third send forgets the first, whose retry is then a new message.
    let s = Server::start();
    let mut con = s.client();
    config_set(&mut con, "imid.seq-idmp-max", "2");
    for (name, im, conv) in flows(&mut con, 100, "window", 1) {
        let sent: Vec<Sent> = (1..=3)
            .map(|i| {
                im.send(&mut con, &conv, "alice", &["bob"], &format!("c{i}"), "x")
                    .unwrap()
            })
            .collect();
        for (i, s) in sent.iter().enumerate().skip(1) {
            let client_id = format!("c{}", i + 1);
            let again = im.send(&mut con, &conv, "alice", &["bob"], &client_id, "x");
            assert_retry_of(&again.unwrap(), s, name);
        }
        let late = im
            .send(&mut con, &conv, "alice", &["bob"], "c1", "x")
            .unwrap();
        assert!(!late.duplicate && late.seq == 4, "{name}: {late:?}");
        assert_eq!(zcard(&mut con, &conv.inbox("bob")), 4, "{name}");
    }
}

#[test]
fn evalsha_reloads_the_script_after_script_flush() {
    // The script cache is not persisted or replicated: after a restart, a failover or a
    // SCRIPT FLUSH, EVALSHA answers NOSCRIPT, and the client loads the script again.
    let s = Server::start();
    let mut con = s.client();
    let im = flow(Via::load_scripts(&mut con).unwrap(), 10);
    let conv = Conv::new("flush", 1);
    let a = im
        .send(&mut con, &conv, "alice", &["bob"], "c1", "x")
        .unwrap();
    let _: String = cmd(&mut con, &["SCRIPT", "FLUSH"]).unwrap();
    let b = im
        .send(&mut con, &conv, "alice", &["bob"], "c2", "y")
        .unwrap();
    assert_eq!((a.seq, b.seq), (1, 2));
    let page = im.sync(&mut con, &conv, "bob", 0, 10).unwrap();
    assert_eq!(page.messages.len(), 2);
}

#[test]
fn inbox_cap_keeps_the_newest() {
    let s = Server::start();
    let mut con = s.client();
    for via in vias(&mut con) {
        let name = via.name();
        for cap in [1u64, 5] {
            let im = flow(via.clone(), cap);
            let conv = Conv::new(&format!("cap-{name}-{cap}"), 1);
            let mut sent = Vec::new();
            for i in 0..12 {
                let s = im
                    .send(
                        &mut con,
                        &conv,
                        "alice",
                        &["bob", "carol"],
                        &format!("c{i}"),
                        &format!("m{i}"),
                    )
                    .unwrap();
                sent.push(s);
            }
            for user in ["bob", "carol"] {
                let inbox = zrange(&mut con, &conv.inbox(user));
                assert_eq!(inbox.len() as u64, cap, "{name} {user}");
                // exactly the newest `cap`, in seq order
                let keep = &sent[sent.len() - cap as usize..];
                let want: Vec<(String, i64)> = keep
                    .iter()
                    .map(|s| {
                        let (msgid, uid) = ids(s);
                        (format!("{msgid}|{uid}|alice|m{}", s.seq - 1), s.seq)
                    })
                    .collect();
                assert_eq!(inbox, want, "{name} {user}");
                let dropped = sent[sent.len() - cap as usize - 1].seq;
                assert_eq!(
                    int_reply(&mut con, &["SEQ.GET", &conv.trimmed(user)]),
                    dropped
                );
                // sync tells a client that missed dropped messages about them
                let page = im.sync(&mut con, &conv, user, 0, 100).unwrap();
                assert_eq!(page.trimmed_through, dropped);
                assert_eq!(page.messages.len() as u64, cap);
                assert!(page.complete);
            }
        }
    }
}

#[test]
fn sync_pages_through_10000_messages() {
    let s = Server::start();
    let mut con = s.client();
    for (name, im, conv) in flows(&mut con, 20_000, "page", 2) {
        // Every 10th message goes to carol only, so bob's seqs are not dense.
        let mut want = Vec::new();
        let send = |con: &mut Connection, i: usize, want: &mut Vec<i64>| {
            let to: &[&str] = if i % 10 == 9 { &["carol"] } else { &["bob"] };
            let s = im
                .send(
                    con,
                    &conv,
                    "alice",
                    to,
                    &format!("c{i}"),
                    &format!("body {i}"),
                )
                .unwrap();
            if to == ["bob"] {
                want.push(s.seq);
            }
        };
        let mut i = 0;
        while want.len() < 10_000 {
            send(&mut con, i, &mut want);
            i += 1;
        }
        let mut got: Vec<i64> = Vec::new();
        let mut last = 0;
        let mut pages = 0;
        loop {
            let page: Page = im.sync(&mut con, &conv, "bob", last, 333).unwrap();
            pages += 1;
            assert!(page.messages.len() <= 333);
            for m in &page.messages {
                assert_eq!(m.sender, "alice");
                assert_eq!(m.body, format!("body {}", m.seq - 1), "{name}");
            }
            got.extend(page.messages.iter().map(|m| m.seq));
            if let Some(m) = page.messages.last() {
                if !page.complete {
                    assert_eq!(page.cursor, m.seq);
                }
            }
            // Messages sent while the client is paging arrive at the end.
            if pages == 10 {
                for _ in 0..5 {
                    send(&mut con, i, &mut want);
                    i += 1;
                }
            }
            if page.complete {
                let max = int_reply(&mut con, &["SEQ.GET", &conv.seq()]);
                assert_eq!((page.cursor, page.max_seq), (max, max), "{name}");
                assert_eq!(page.trimmed_through, 0);
                break;
            }
            assert!(pages < 100, "{name}: sync never completed");
            last = page.cursor;
        }
        assert_eq!(got.len(), want.len(), "{name}: lost or repeated");
        assert_eq!(got, want, "{name}: order");
        // caught up: the next sync is empty and complete at once
        let page = im
            .sync(&mut con, &conv, "bob", *want.last().unwrap(), 333)
            .unwrap();
        assert!(page.complete && page.messages.is_empty());
    }
}

#[test]
fn unread_counts_and_cursor_never_moves_back() {
    let s = Server::start();
    let mut con = s.client();
    for (name, im, conv) in flows(&mut con, 100, "unread", 2) {
        let mut n = 0;
        let mut send = |con: &mut Connection, to: &[&str]| {
            n += 1;
            im.send(con, &conv, "alice", to, &format!("c{n}"), "x")
                .unwrap()
                .seq
        };
        for _ in 0..10 {
            send(&mut con, &["bob"]); // seqs 1..10
        }
        for _ in 0..3 {
            send(&mut con, &["carol"]); // 11..13: not bob's
        }
        for _ in 0..2 {
            send(&mut con, &["bob", "carol"]); // 14, 15
        }
        let read = |con: &mut Connection, seq: i64| {
            let r = im.read(con, &conv, "bob", seq).unwrap();
            (r.cursor, r.unread)
        };
        assert_eq!(read(&mut con, 0), (0, 12), "{name}");
        assert_eq!(read(&mut con, 4), (4, 8), "{name}");
        assert_eq!(
            read(&mut con, 2),
            (4, 8),
            "{name}: an older ack moved the cursor"
        );
        assert_eq!(read(&mut con, 12), (12, 2), "{name}");
        assert_eq!(read(&mut con, 9), (12, 2), "{name}");
        // an ack past the conversation's max is clamped to it
        assert_eq!(read(&mut con, 1000), (15, 0), "{name}");
        assert_eq!(cursor(&mut con, &conv, "bob"), 15);
        send(&mut con, &["bob"]);
        assert_eq!(read(&mut con, 0), (15, 1), "{name}");
        assert_eq!(im.read(&mut con, &conv, "carol", 12).unwrap().unread, 3);
        // a bad ack is refused (by SEQ.HADVANCE) and changes nothing
        let e = im.read(&mut con, &conv, "bob", -1).unwrap_err();
        assert!(err_text(&e).starts_with("ERR "), "{e}");
        assert_eq!(cursor(&mut con, &conv, "bob"), 15);
        // every member's cursor in one key: the conversation's map, one field per reader
        let t: String = cmd(&mut con, &["TYPE", &conv.read()]).unwrap();
        assert_eq!(t, MAP_TYPE, "{name}");
        assert_eq!(
            int_reply(&mut con, &["SEQ.HLEN", &conv.read()]),
            2,
            "{name}"
        );
        let keys: Vec<String> = cmd(&mut con, &["KEYS", &format!("{}:read*", conv.tag())]).unwrap();
        assert_eq!(keys, [conv.read()], "{name}");

        // Messages the cap dropped are not unread any more: only the inbox's are counted.
        let capped = Im {
            inbox_cap: 3,
            ..im.clone()
        };
        let conv2 = Conv::new(&format!("unread-cap-{name}"), 1);
        for i in 0..6 {
            capped
                .send(&mut con, &conv2, "alice", &["bob"], &format!("c{i}"), "x")
                .unwrap();
        }
        let r = capped.read(&mut con, &conv2, "bob", 1).unwrap();
        assert_eq!((r.cursor, r.unread), (1, 3), "{name}");
        let r = capped.read(&mut con, &conv2, "bob", 5).unwrap();
        assert_eq!((r.cursor, r.unread), (5, 1), "{name}");
    }
}

#[test]
fn bad_arguments_are_refused_alike_and_change_nothing() {
    let s = Server::start();
    let mut con = s.client();
    // The scripts' errors (IM.SEND's own table is in tests/it/im_send.rs).
    let scripts = Via::load_scripts(&mut con).unwrap();
    let functions = Via::load_functions(&mut con).unwrap();
    let errors = |via: Via, con: &mut Connection| -> Vec<String> {
        let conv = Conv::new("bad", 1);
        let ok = flow(via, 10);
        let mut out = Vec::new();
        let mut push = |r: redis::RedisResult<String>| {
            let e = r.expect_err("an error");
            // Errors raised inside redis.call name the script or function and its line.
            let t = err_text(&e);
            out.push(t.split(" script:").next().unwrap_or("").to_owned());
        };
        let zero_cap = Im {
            inbox_cap: 0,
            ..ok.clone()
        };
        push(
            zero_cap
                .send(con, &conv, "a", &["b"], "c", "x")
                .map(|s| s.seq.to_string()),
        );
        push(
            ok.send(con, &conv, "a", &["b"], "", "x")
                .map(|s| s.seq.to_string()),
        );
        push(
            ok.send(con, &conv, "a|b", &["b"], "c", "x")
                .map(|s| s.seq.to_string()),
        );
        push(
            ok.send(con, &conv, "a", &[], "c", "x")
                .map(|s| s.seq.to_string()),
        );
        let bad_type = Conv::new("bad", 16);
        push(
            ok.send(con, &bad_type, "a", &["b"], "c", "x")
                .map(|s| s.seq.to_string()),
        );
        push(ok.sync(con, &conv, "b", 0, 0).map(|p| format!("{p:?}")));
        push(ok.sync(con, &conv, "b", -5, 10).map(|p| format!("{p:?}")));
        push(ok.read(con, &conv, "b", -1).map(|r| format!("{r:?}")));
        out
    };
    let a = errors(scripts, &mut con);
    let b = errors(functions, &mut con);
    assert_eq!(a, b);
    assert_eq!(
        a,
        [
            "ERR inbox cap must be at least 1",
            "ERR client message id must not be empty",
            "ERR sender must not contain '|'",
            "ERR send: expected KEYS tag, seq, then inbox/trimmed pairs",
            "ERR channel_type must be an integer in 0..15",
            "ERR limit must be at least 1",
            "ERR last seq must be an integer in 0..999999999999999",
            READ_SEQ_ERROR,
        ]
    );
    assert_eq!(
        int_reply(&mut con, &["DBSIZE"]),
        0,
        "an error left keys behind"
    );
}

/// Replaces message IDs (which carry the clock) by their order of first appearance, so runs
/// on different servers or at different times compare equal.
#[derive(Default)]
struct Norm(HashMap<String, usize>);

impl Norm {
    fn id(&mut self, msgid: &str) -> String {
        let n = self.0.len();
        format!("#{}", self.0.entry(msgid.to_owned()).or_insert(n))
    }
    /// A send's reply as `<what> seq msgid uid duplicate`, both IDs normalized.
    fn sent(&mut self, what: &str, s: &Sent) -> String {
        let (msgid, uid) = ids(s);
        let (msgid, uid) = (self.id(&msgid), self.id(&uid.to_string()));
        format!("{what} {} {msgid} {uid} {}", s.seq, s.duplicate)
    }
    /// `msgid|uid|sender|body` with both IDs normalized (UIDs carry the clock too).
    fn member(&mut self, member: &str) -> String {
        match member.splitn(3, '|').collect::<Vec<_>>().as_slice() {
            [id, uid, rest] => format!("{}|{}|{rest}", self.id(id), self.id(uid)),
            _ => member.to_owned(),
        }
    }
    fn page(&mut self, p: &Page) -> String {
        let msgs: Vec<String> = p
            .messages
            .iter()
            .map(|m| {
                format!(
                    "{}:{}|{}|{}|{}",
                    m.seq,
                    self.id(&m.msgid),
                    self.id(&m.uid.to_string()),
                    m.sender,
                    m.body
                )
            })
            .collect();
        format!(
            "max {} cursor {} complete {} trimmed {} [{}]",
            p.max_seq,
            p.cursor,
            p.complete,
            p.trimmed_through,
            msgs.join(", ")
        )
    }
}

const USERS: [&str; 3] = ["alice", "bob", "carol"];

/// A mixed sequence of sends (with retries), syncs and reads, its replies normalized.
fn scenario(im: &Im, con: &mut Connection, conv: &Conv, norm: &mut Norm) -> Vec<String> {
    let mut out = Vec::new();
    let mut cursors: HashMap<&str, i64> = HashMap::new();
    for i in 0..60usize {
        let sender = USERS[i % 3];
        let mut to: Vec<&str> = USERS.iter().copied().filter(|u| *u != sender).collect();
        if i % 5 == 0 {
            to.push(sender); // a copy for the sender's other devices
        }
        let body = format!("b{i}|with|bars");
        let s = im
            .send(con, conv, sender, &to, &format!("c{i}"), &body)
            .unwrap();
        out.push(norm.sent("send", &s));
        if i % 6 == 5 {
            // a retry of the send three back, to its recipients
            let j = i - 3;
            let (snd, b) = (USERS[j % 3], format!("b{j}|with|bars"));
            let mut to: Vec<&str> = USERS.iter().copied().filter(|u| *u != snd).collect();
            if j % 5 == 0 {
                to.push(snd);
            }
            let s = im.send(con, conv, snd, &to, &format!("c{j}"), &b).unwrap();
            out.push(norm.sent("retry", &s));
        }
        if i % 10 == 9 {
            for u in USERS {
                let last = cursors.get(u).copied().unwrap_or(0);
                let p = im.sync(con, conv, u, last, 3).unwrap();
                out.push(format!("sync {u} {}", norm.page(&p)));
                cursors.insert(u, p.cursor);
                let r = im.read(con, conv, u, p.cursor).unwrap();
                out.push(format!("read {u} {} {}", r.cursor, r.unread));
                let r = im.read(con, conv, u, p.cursor / 2).unwrap();
                out.push(format!("late read {u} {} {}", r.cursor, r.unread));
            }
        }
    }
    out
}

/// Everything the flow stored for `conv`: inboxes with scores, every SEQ key, the cursor map;
/// message IDs normalized through `norm`, or left as they are without one.
fn state(con: &mut Connection, conv: &Conv, norm: Option<&mut Norm>) -> Vec<String> {
    let mut keys: Vec<String> = cmd(con, &["KEYS", &format!("{}*", conv.tag())]).unwrap();
    keys.sort();
    let raw = norm.is_none();
    let mut scratch = Norm::default();
    let norm = norm.unwrap_or(&mut scratch);
    let mut out = Vec::new();
    for k in keys {
        let short = k.replace(&conv.tag(), "");
        let t: String = cmd(con, &["TYPE", &k]).unwrap();
        let v = match t.as_str() {
            "zset" => zrange(con, &k)
                .into_iter()
                .map(|(m, s)| format!("{s}:{}", if raw { m } else { norm.member(&m) }))
                .collect::<Vec<_>>()
                .join(", "),
            "imidseq01" => int_reply(con, &["SEQ.GET", &k]).to_string(),
            MAP_TYPE => {
                let mut fields: Vec<(String, i64)> = cmd(con, &["SEQ.HGETALL", &k]).unwrap();
                fields.sort();
                let f: Vec<String> = fields.iter().map(|(f, v)| format!("{f}={v}")).collect();
                f.join(", ")
            }
            other => panic!("unexpected {other} key {k}"),
        };
        out.push(format!("{short} {t} {v}"));
    }
    out
}

#[test]
fn evalsha_fcall_and_im_send_give_identical_results() {
    let a = Server::start();
    let b = Server::start();
    let c = Server::start();
    let (mut ca, mut cb, mut cc) = (a.client(), b.client(), c.client());
    let scripts = Via::load_scripts(&mut ca).unwrap();
    let functions = Via::load_functions(&mut cb).unwrap();
    let native = Via::load_native(&mut cc).unwrap();
    let conv = Conv::new("same", 2);
    let (mut na, mut nb, mut nc) = (Norm::default(), Norm::default(), Norm::default());
    let ra = scenario(&flow(scripts, 7), &mut ca, &conv, &mut na);
    let rb = scenario(&flow(functions, 7), &mut cb, &conv, &mut nb);
    let rc = scenario(&flow(native, 7), &mut cc, &conv, &mut nc);
    assert_eq!(ra.len(), rb.len());
    assert_eq!(ra.len(), rc.len());
    for ((x, y), z) in ra.iter().zip(&rb).zip(&rc) {
        assert_eq!(x, y);
        assert_eq!(x, z, "IM.SEND");
    }
    assert_eq!(
        state(&mut ca, &conv, Some(&mut na)),
        state(&mut cc, &conv, Some(&mut nc)),
        "IM.SEND"
    );
    // the scenario did exercise retries, trimming and partial pages
    assert!(ra
        .iter()
        .any(|l| l.starts_with("retry") && l.ends_with("true")));
    assert!(ra.iter().any(|l| l.contains("complete false")));
    let sa = state(&mut ca, &conv, Some(&mut na));
    let sb = state(&mut cb, &conv, Some(&mut nb));
    assert_eq!(sa, sb);
    assert!(sa
        .iter()
        .any(|l| l.contains(":trimmed:") && !l.ends_with(" 0")));
}

#[test]
fn replica_holds_the_primarys_state() {
    let primary = Server::start();
    let replica = primary.replica(&[]);
    let mut p = primary.client();
    let mut r = replica.client();
    let mut convs = Vec::new();
    for via in vias(&mut p) {
        let conv = Conv::new(&format!("repl-{}", via.name()), 2);
        let im = flow(via, 7);
        scenario(&im, &mut p, &conv, &mut Norm::default());
        convs.push((im, conv));
    }
    primary.wait_replica(&replica);
    let dp: String = cmd(&mut p, &["DEBUG", "DIGEST"]).unwrap();
    let dr: String = cmd(&mut r, &["DEBUG", "DIGEST"]).unwrap();
    assert_eq!(dp, dr, "DEBUG DIGEST differs");
    for (im, conv) in &convs {
        assert_eq!(state(&mut p, conv, None), state(&mut r, conv, None));
        assert!(int_reply(&mut r, &["SEQ.GET", &conv.seq()]) > 0);
        // sync is read-only (EVALSHA_RO / FCALL_RO): a replica serves it, with the same pages
        for u in USERS {
            for last in [0, 10, 40] {
                let a = im.sync(&mut p, conv, u, last, 4).unwrap();
                let b = im.sync(&mut r, conv, u, last, 4).unwrap();
                assert_eq!(a, b);
            }
            // send and read write: the replica refuses them
            let e = im.read(&mut r, conv, u, 1).unwrap_err();
            assert!(err_text(&e).starts_with("READONLY"), "{}", err_text(&e));
        }
    }
}

const KINDS: [&str; 5] = [
    "friendship",
    "group",
    "conversation",
    "profile",
    "blacklist",
];

#[test]
fn incremental_pull_returns_exactly_the_changed_kinds() {
    let s = Server::start();
    let replica = s.replica(&[]);
    let mut con = s.client();
    seqs::load_library(&mut con).unwrap();
    let user = User::new("u1");
    let mut phone = Local::new(&KINDS);
    // What the server was told, per kind: (seq, change) in order.
    let mut truth: BTreeMap<String, Vec<(i64, String)>> = BTreeMap::new();
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let mut pulled_nothing = 0;
    for round in 0..300 {
        let mut want: BTreeMap<String, Vec<(i64, String)>> = BTreeMap::new();
        for kind in KINDS {
            if rng.below(3) != 0 {
                continue;
            }
            for n in 0..=rng.below(3) {
                let text = format!("{kind} r{round} n{n}");
                let seq = user.change(&mut con, kind, &text, 1000).unwrap();
                let mine = truth.entry(kind.to_owned()).or_default();
                // per kind, strictly increasing: the next value of the kind's sequence
                assert_eq!(seq, mine.last().map_or(0, |l| l.0) + 1, "{kind}");
                mine.push((seq, text.clone()));
                want.entry(kind.to_owned()).or_default().push((seq, text));
            }
        }
        let deltas = phone.sync(&mut con, &user).unwrap();
        let got: BTreeMap<String, Vec<(i64, String)>> = deltas
            .iter()
            .map(|d| {
                assert!(!d.reset, "round {round}: {d:?}");
                assert_eq!(d.seq, d.changes.last().unwrap().0, "round {round}");
                (d.kind.clone(), d.changes.clone())
            })
            .collect();
        // exactly the kinds that changed since the last pull, with exactly their changes
        assert_eq!(got, want, "round {round}");
        if deltas.is_empty() {
            pulled_nothing += 1;
        }
    }
    assert!(
        pulled_nothing > 0,
        "no round without changes: the empty pull went untested"
    );
    assert_eq!(phone.changes, truth);
    // The phone's seqs are the server's, as SEQ.HGETALL shows them.
    let server = user.server_seqs(&mut con).unwrap();
    let held: BTreeMap<String, i64> = phone
        .seqs
        .clone()
        .into_iter()
        .filter(|(_, v)| *v > 0)
        .collect();
    assert_eq!(server, held);
    assert!(phone.sync(&mut con, &user).unwrap().is_empty());

    // A new device pulls everything, from a replica (imid_pull is no-writes).
    s.wait_replica(&replica);
    let mut r = replica.client();
    let mut tablet = Local::new(&KINDS);
    tablet.sync(&mut r, &user).unwrap();
    assert_eq!(tablet, phone);

    // The log cap dropped changes the phone never got: the pull says to reload the kind.
    for i in 0..5 {
        user.change(&mut con, "group", &format!("burst {i}"), 3)
            .unwrap();
    }
    let d = phone.sync(&mut con, &user).unwrap();
    assert_eq!(d.len(), 1);
    assert!(d[0].reset && d[0].kind == "group", "{d:?}");
    let kept: Vec<String> = d[0].changes.iter().map(|c| c.1.clone()).collect();
    assert_eq!(kept, ["burst 2", "burst 3", "burst 4"]);

    // Bad arguments are refused and write nothing.
    let dbsize = int_reply(&mut con, &["DBSIZE"]);
    let digest: String = cmd(&mut con, &["DEBUG", "DIGEST"]).unwrap();
    for (kind, cap) in [("group", 0), ("", 10)] {
        let e = user.change(&mut con, kind, "x", cap).unwrap_err();
        assert!(err_text(&e).starts_with("ERR "), "{e}");
    }
    assert_eq!(int_reply(&mut con, &["DBSIZE"]), dbsize);
    let after: String = cmd(&mut con, &["DEBUG", "DIGEST"]).unwrap();
    assert_eq!(after, digest);
}

/// The example program `name`, freshly built. `cargo test --all-targets` builds examples only
/// as test harnesses, so the test builds the programs themselves, once per run, into the same
/// target directory and profile as this test (`target/<profile>/examples/<name>`); when they
/// are up to date this costs a second.
fn example_bin(name: &str) -> PathBuf {
    static BUILT: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    let dir = BUILT.get_or_init(|| {
        let exe = std::env::current_exe().map_err(|e| e.to_string())?;
        // target/<profile>/deps/<this test>
        let profile_dir = exe
            .parent()
            .and_then(Path::parent)
            .ok_or("test executable is not in target/<profile>/deps")?;
        let target_dir = profile_dir.parent().ok_or("no target directory")?;
        let mut c = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
        c.current_dir(root())
            .args(["build", "--examples", "--target-dir"])
            .arg(target_dir);
        if profile_dir.ends_with("release") {
            c.arg("--release");
        }
        let st = c.status().map_err(|e| format!("run cargo: {e}"))?;
        if !st.success() {
            return Err(format!("cargo build --examples: {st}"));
        }
        Ok(profile_dir.join("examples"))
    });
    let bin = match dir {
        Ok(d) => d.join(name),
        Err(e) => panic!("building the examples failed: {e}"),
    };
    assert!(bin.exists(), "{} not built", bin.display());
    bin
}

/// `threads` threads each calling `next` `per_thread` times; what each got, in its order.
fn from_threads<T: Send>(
    threads: usize,
    per_thread: usize,
    next: impl Fn() -> T + Sync,
) -> Vec<Vec<T>> {
    std::thread::scope(|sc| {
        let handles: Vec<_> = (0..threads)
            .map(|_| sc.spawn(|| (0..per_thread).map(|_| next()).collect::<Vec<T>>()))
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    })
}

/// A server, and a redis-rs client of it for the example libraries (they open their own
/// connections).
fn server_and_client() -> (Server, redis::Client) {
    let s = Server::start();
    let client = redis::Client::open(s.url()).unwrap();
    (s, client)
}

fn run_example(name: &str, s: &Server) -> String {
    run(Command::new(example_bin(name)).env("IMID_URL", s.url()))
}

#[test]
fn walkthrough_example_runs() {
    let s = Server::start();
    let out = run_example("walkthrough", &s);
    for line in ["IDMP alice|c1", "LIMIT"] {
        assert!(out.contains(line), "walkthrough skipped {line}:\n{out}");
    }
    for c in [
        "MSGID.GEN",
        "MSGID.DECODE",
        "MSGID.HASH",
        "MSGID.ENCODE",
        "MSGID.FLOOR",
        "SEQ.NEXT",
        "SEQ.GET",
        "SEQ.MGET",
        "SEQ.SET",
        "SEQ.ADVANCE",
        "SEQ.HNEXT",
        "SEQ.HGET",
        "SEQ.HMGET",
        "SEQ.HGETALL",
        "SEQ.HSCAN",
        "SEQ.HSET",
        "SEQ.HDEL",
        "SEQ.HLEN",
        "SEQ.HADVANCE",
        "OPENID.ENC",
        "OPENID.DEC",
        "UID.GEN",
        "UID.DECODE",
        "UID.ENCODE",
        "UID.FLOOR",
    ] {
        assert!(
            out.contains(&format!("> {c} ")),
            "walkthrough skipped {c}:\n{out}"
        );
    }
}

/// An im_flow example's output shows a part for each way of sending: IM.SEND, the script by
/// EVALSHA and the library by FCALL.
fn assert_sends_every_way(out: &str) {
    for way in ["IM.SEND", "EVALSHA", "FCALL"] {
        assert!(
            out.contains(&format!("== via {way}")),
            "no {way} part:\n{out}"
        );
    }
}

#[test]
fn im_flow_example_runs() {
    let s = Server::start();
    let out = run_example("im_flow", &s);
    assert_sends_every_way(&out);
    // per way of calling: the retry of c7 (IDs read back) and of c1 (dropped by the cap)
    assert_eq!(out.matches("duplicate true").count(), 6, "{out}");
}

#[test]
fn user_sync_example_runs() {
    let s = Server::start();
    let out = run_example("user_sync", &s);
    assert!(out.contains("pull: 2 kind(s) changed"), "{out}");
    assert!(out.contains("pull: 0 kind(s) changed"), "{out}");
    assert!(out.contains("phone up to date"), "{out}");
}

#[test]
fn segment_allocator_example_runs() {
    let s = Server::start();
    let out = run_example("segment_allocator", &s);
    assert!(out.contains("200000 ids with"), "{out}");
}

#[test]
fn segment_allocator_unique_and_increasing_across_threads() {
    const THREADS: usize = 8;
    const PER_THREAD: usize = 20_000;
    const STEP: u64 = 1000;
    let (s, client) = server_and_client();
    let key = "{ids:test}:seq";
    let mut alloc = SegmentAllocator::new(&client, key, STEP).unwrap();
    let per_thread = from_threads(THREADS, PER_THREAD, || alloc.next_id().expect("next_id"));
    // Stats after shutdown, which joins the refill thread: a prefetch still in flight when the
    // workers finish would otherwise land after the snapshot.
    alloc.shutdown();
    let stats = alloc.stats();
    let mut all = HashSet::new();
    let mut max = 0;
    for vals in &per_thread {
        assert!(
            vals.windows(2).all(|w| w[0] < w[1]),
            "not increasing in a thread"
        );
        for &v in vals {
            assert!(v >= 1);
            assert!(all.insert(v), "{v} handed out twice");
            max = max.max(v);
        }
    }
    let total = (THREADS * PER_THREAD) as u64;
    assert_eq!(all.len() as u64, total);
    assert_eq!(stats.handed_out, total);
    // One round trip per block, not per value; at most one block fetched ahead.
    let blocks = total.div_ceil(STEP);
    assert!(
        stats.round_trips >= blocks && stats.round_trips <= blocks + 1,
        "{stats:?} for {blocks} blocks"
    );
    let server = int_reply(&mut s.client(), &["SEQ.GET", key]) as u64;
    assert!(server >= max, "server {server} < handed out {max}");
    assert_eq!(server, stats.round_trips * STEP);
    assert!(alloc.next_id().is_err(), "handed out after shutdown");
}

#[test]
fn segment_allocator_refills_in_the_background() {
    const STEP: u64 = 100;
    let (s, client) = server_and_client();
    let mut con = s.client();
    // Another client takes values too: blocks need not be adjacent.
    int_reply(&mut con, &["SEQ.NEXT", "{ids:bg}:seq", "COUNT", "7"]);
    let alloc = SegmentAllocator::new(&client, "{ids:bg}:seq", STEP).unwrap();
    assert_eq!(alloc.stats().round_trips, 1);
    // Using half the block asks the background thread for the next one.
    let mut got: Vec<u64> = (0..51).map(|_| alloc.next_id().unwrap()).collect();
    wait_until("the next block", 30, || alloc.spare_ready());
    // Draining the first block and moving into the second costs no round trip and no wait.
    got.extend((0..60).map(|_| alloc.next_id().unwrap()));
    let st = alloc.stats();
    assert_eq!((st.round_trips, st.waits, st.handed_out), (2, 0, 111));
    let want: Vec<u64> = (8..=107).chain(108..=118).collect();
    assert_eq!(got, want);
}

#[test]
fn uid_cache_example_runs() {
    let s = Server::start();
    let out = run_example("uid_cache", &s);
    assert!(out.contains("800000 uids in"), "{out}");
    assert_eq!(s.imid_stat("uid_generated") % 10_000, 0, "whole batches");
}

#[test]
fn uid_cache_unique_and_increasing_across_threads() {
    const THREADS: usize = 8;
    const PER_THREAD: usize = 20_000;
    const BATCH: usize = 1000;
    const CAPACITY: usize = 4000;
    let (s, client) = server_and_client();
    let mut cache = UidCache::new(&client, "{ids:test}", BATCH, CAPACITY).unwrap();
    let per_thread = from_threads(THREADS, PER_THREAD, || cache.next_uid().expect("next_uid"));
    // Stats after shutdown, which joins the refill thread.
    cache.shutdown();
    let stats = cache.stats();
    let mut all = HashSet::new();
    for uids in &per_thread {
        assert!(
            uids.windows(2).all(|w| w[0] < w[1]),
            "not increasing in a thread"
        );
        for &u in uids {
            assert!(u > 0);
            assert!(all.insert(u), "{u} handed out twice");
        }
    }
    let total = (THREADS * PER_THREAD) as u64;
    assert_eq!(all.len() as u64, total);
    assert_eq!(stats.handed_out, total);
    // One round trip per batch, not per UID; at most a ring's worth fetched ahead.
    let batches = total.div_ceil(BATCH as u64);
    let ahead = (CAPACITY / BATCH) as u64;
    assert!(
        stats.round_trips >= batches && stats.round_trips <= batches + ahead,
        "{stats:?} for {batches} batches"
    );
    assert_eq!(
        s.imid_stat("uid_generated") as u64,
        stats.round_trips * BATCH as u64
    );
    assert!(cache.next_uid().is_err(), "handed out after shutdown");
}

#[test]
fn uid_cache_refills_in_the_background() {
    const BATCH: usize = 100;
    let (s, client) = server_and_client();
    let cache = UidCache::new(&client, "{ids:bg}", BATCH, 3 * BATCH).unwrap();
    // The refill thread tops the ring up to its capacity without anyone asking.
    wait_until("the ring filled", 30, || cache.buffered() >= 3 * BATCH);
    assert_eq!(cache.stats().round_trips, 3);
    // Taking a batch's worth makes room: the thread fetches the next batch in the background.
    let mut got: Vec<i64> = (0..BATCH).map(|_| cache.next_uid().unwrap()).collect();
    wait_until("a background refill", 30, || {
        cache.stats().round_trips >= 4 && cache.buffered() >= 3 * BATCH
    });
    got.extend((0..3 * BATCH).map(|_| cache.next_uid().unwrap()));
    let st = cache.stats();
    assert_eq!(st.waits, 0, "every UID came from memory: {st:?}");
    assert_eq!(st.handed_out, 4 * BATCH as u64);
    assert!(got.windows(2).all(|w| w[0] < w[1]));
    // What the server issued, in order: the cache hands out exactly that.
    let more: i64 = cmd(&mut s.client(), &["UID.GEN", "{ids:bg}"]).unwrap();
    assert!(more > *got.last().unwrap());
}

#[test]
fn python_example_runs() {
    let Some(py) = python_with_redis() else {
        println!(
            "SKIPPED python_example_runs: no python3 with redis-py (apt-get install python3-redis)"
        );
        return;
    };
    let s = Server::start();
    let stdout = run(Command::new(&py)
        .arg(root().join("examples/python/im_flow.py"))
        .args(["--host", "127.0.0.1", "--port", &s.port.to_string()]));
    assert!(stdout.contains("duplicate True"), "{stdout}");
    assert!(
        stdout.contains("retry c2 through imid_send:") && !stdout.contains("duplicate False"),
        "{stdout}"
    );
    assert!(
        stdout.contains("pull: 2 kind(s) changed ['friendship', 'group']")
            && stdout.contains("pull: 0 kind(s) changed []"),
        "{stdout}"
    );
}

#[test]
fn the_guides_program_runs() {
    let Some(py) = python_with_redis() else {
        println!("SKIPPED the_guides_program_runs: no python3 with redis-py");
        return;
    };
    let s = Server::start();
    let dir = temp_dir("guide");
    let stdout = run(Command::new(&py)
        .arg(guide_program(&dir))
        .args(["--port", &s.port.to_string()]));
    let _ = std::fs::remove_dir_all(&dir);
    assert!(
        stdout.contains("ann's phone: 30 conversations changed, badge 32"),
        "{stdout}"
    );
    assert!(stdout.trim_end().ends_with("ok"), "{stdout}");
}

#[test]
fn node_example_runs() {
    // Skipped only where there is no node at all; with node installed, a missing `npm ci` or a
    // failing run fails the test.
    let Some(node) = node_for_example() else {
        println!("SKIPPED node_example_runs: no node on PATH (scripts/deps.sh installs it)");
        return;
    };
    let s = Server::start();
    let stdout = run(Command::new(&node)
        .arg(root().join("examples/node/im_flow.js"))
        .args(["--host", "127.0.0.1", "--port", &s.port.to_string()]));
    assert_sends_every_way(&stdout);
    assert_eq!(stdout.matches("duplicate true").count(), 3, "{stdout}");
    assert_eq!(stdout.matches("OPENID.DEC msgid").count(), 3, "{stdout}");
    assert_eq!(
        stdout
            .matches("pull: 2 kind(s) changed [friendship,group]")
            .count(),
        3,
        "{stdout}"
    );
    assert_eq!(
        stdout.matches("pull: 0 kind(s) changed []").count(),
        3,
        "{stdout}"
    );
    assert!(stdout.trim_end().ends_with("ok"), "{stdout}");
    // What the program wrote is on the server: three conversations of 5 messages each.
    let mut con = s.client();
    let seqs: Vec<String> = cmd(&mut con, &["KEYS", "*:seq"]).unwrap();
    assert_eq!(seqs.len(), 3, "{seqs:?}");
    for k in &seqs {
        assert_eq!(int_reply(&mut con, &["SEQ.GET", k]), 5, "{k}");
    }
}
