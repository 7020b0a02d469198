//! imid through the clients many teams start with today: Valkey GLIDE (its Python and Node.js
//! bindings; one Rust core, which its Java and Go bindings share) and node-redis, against one
//! server and a Redis Cluster (3 primaries, 3 replicas). The programs in tests/clients/ make the
//! calls docs/clients.md shows and print what they got; this file checks each line against the
//! servers: the values and IDs (the server's own MSGID.DECODE of each message ID, the inbox
//! IM.SEND wrote, its UID exact as text), the errors as each client renders them, standalone a
//! call the fence makes wait against the client's timeout, and in a Cluster the node that served
//! each call (INFO commandstats and errorstats of every node: no MOVED or ASK anywhere, the
//! writes on the owner, SEQ.GET served by the replica of its key's slot).
//!
//! The routing check must fail with a wrong route, so the Cluster test also runs each program
//! once so: GLIDE without its route arguments, node-redis with the command's first argument as
//! the first key.
//!
//! Packages pinned in tests/clients/ (package-lock.json, requirements.txt), installed by
//! scripts/deps.sh (`npm ci` there, a venv under target/clients-py); a missing one fails these
//! tests, it never skips them.
use crate::common;
use common::cluster::{create, NODE_ARGS};
use common::*;
use std::collections::HashMap;
use std::io::Read;
use std::ops::RangeInclusive;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

#[derive(Clone, Copy, Debug, PartialEq)]
enum Client {
    /// `valkey-glide` (PyPI), tests/clients/imid_glide.py.
    GlidePython,
    /// `@valkey/valkey-glide` (npm), tests/clients/imid_glide.js.
    GlideNode,
    /// `redis` (npm), tests/clients/imid_node_redis.js.
    NodeRedis,
}

const CLIENTS: [Client; 3] = [Client::GlidePython, Client::GlideNode, Client::NodeRedis];

/// What GLIDE (either binding: the text comes from its Rust core) and node-redis make of two of
/// imid's errors: (class, message).
const GLIDE_WRONGTYPE: (&str, &str) = (
    "RequestError",
    "WRONGTYPE: Operation against a key holding the wrong kind of value",
);
const GLIDE_IDMP: (&str, &str) = (
    "RequestError",
    "An error was signalled by the server: - ResponseError: IDMP token already used on this \
     key with another COUNT (a retry must repeat its request)",
);
const NODE_REDIS_WRONGTYPE: (&str, &str) = (
    "SimpleError",
    "WRONGTYPE Operation against a key holding the wrong kind of value",
);
const NODE_REDIS_IDMP: (&str, &str) = (
    "SimpleError",
    "ERR IDMP token already used on this key with another COUNT (a retry must repeat its \
     request)",
);
/// The fence's answer to a call the replicas did not acknowledge in time, after the error code.
const NOT_ACKNOWLEDGED: &str =
    "imid: not acknowledged within 1000 ms by every replica of this primary's term";

impl Client {
    fn name(self) -> &'static str {
        match self {
            Client::GlidePython => "GLIDE for Python",
            Client::GlideNode => "GLIDE for Node.js",
            Client::NodeRedis => "node-redis",
        }
    }

    /// Prefix of the conversation tags this client's run uses (each run its own keys).
    fn prefix(self) -> &'static str {
        match self {
            Client::GlidePython => "gp",
            Client::GlideNode => "gn",
            Client::NodeRedis => "nr",
        }
    }

    /// The program, run by its interpreter (checked installed).
    fn command(self) -> Command {
        let dir = root().join("tests/clients");
        let mut c = match self {
            Client::GlidePython => {
                let py = root().join("target/clients-py/venv/bin/python");
                assert!(
                    py.exists(),
                    "{} missing: run scripts/deps.sh test (it installs tests/clients/requirements.txt)",
                    py.display()
                );
                let mut c = Command::new(py);
                c.arg(dir.join("imid_glide.py"));
                c
            }
            Client::GlideNode | Client::NodeRedis => {
                node_with_packages();
                let mut c = Command::new("node");
                c.arg(dir.join(if self == Client::GlideNode {
                    "imid_glide.js"
                } else {
                    "imid_node_redis.js"
                }));
                c
            }
        };
        c.current_dir(dir);
        c
    }

    /// The wrong routing its Cluster run is checked to catch (`--routes`).
    fn wrong_routes(self) -> &'static str {
        match self {
            Client::GlidePython | Client::GlideNode => "none",
            Client::NodeRedis => "first-arg",
        }
    }

    fn errors(self) -> [(&'static str, (&'static str, &'static str)); 2] {
        match self {
            Client::GlidePython | Client::GlideNode => {
                [("wrongtype", GLIDE_WRONGTYPE), ("idmp", GLIDE_IDMP)]
            }
            Client::NodeRedis => [
                ("wrongtype", NODE_REDIS_WRONGTYPE),
                ("idmp", NODE_REDIS_IDMP),
            ],
        }
    }
}

/// `node` (20 or later: node-redis 6 needs it) with tests/clients/node_modules installed.
fn node_with_packages() {
    let out = Command::new("node")
        .arg("--version")
        .output()
        .expect("node not found: scripts/deps.sh test installs it");
    let v = String::from_utf8_lossy(&out.stdout);
    let major: u32 = v
        .trim()
        .trim_start_matches('v')
        .split('.')
        .next()
        .and_then(|m| m.parse().ok())
        .unwrap_or(0);
    assert!(
        major >= 20,
        "node {v}: node-redis 6 needs Node.js 20 or later"
    );
    let modules = root().join("tests/clients/node_modules");
    for p in ["@valkey/valkey-glide", "redis"] {
        assert!(
            modules.join(p).is_dir(),
            "{} lacks {p}: run scripts/deps.sh test (npm ci in tests/clients)",
            modules.display()
        );
    }
}

/// What a program run printed; every line `<what> <tag or case> <values...>`.
struct Report {
    client: Client,
    ok: bool,
    stdout: String,
    stderr: String,
}

impl Report {
    /// The rest of each line that starts with `what` and `tag`, in order.
    fn lines(&self, what: &str, tag: &str) -> Vec<&str> {
        let head = format!("{what} {tag} ");
        self.stdout
            .lines()
            .filter_map(|l| l.strip_prefix(&head))
            .collect()
    }

    /// The rest of the one line that starts with `what` and `tag`.
    fn rest(&self, what: &str, tag: &str) -> &str {
        let l = self.lines(what, tag);
        assert_eq!(
            l.len(),
            1,
            "{}: `{what} {tag}` lines: {l:?}\n{self}",
            self.client.name()
        );
        l[0]
    }

    /// The words of the one line that starts with `what` and `tag`.
    fn words(&self, what: &str, tag: &str) -> Vec<&str> {
        self.rest(what, tag).split_whitespace().collect()
    }
}

impl std::fmt::Display for Report {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "stdout:\n{}\nstderr:\n{}", self.stdout, self.stderr)
    }
}

/// Runs `client`'s program with `args`; killed (and the test failed) after two minutes.
fn run_client(client: Client, args: &[String]) -> Report {
    let mut c = client.command();
    c.args(args).stdout(Stdio::piped()).stderr(Stdio::piped());
    let mut child = c.spawn().unwrap_or_else(|e| panic!("{c:?}: {e}"));
    let read = |mut r: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut s = String::new();
            let _ = r.read_to_string(&mut s);
            s
        })
    };
    let out = read(Box::new(child.stdout.take().unwrap()));
    let err = read(Box::new(child.stderr.take().unwrap()));
    let deadline = Instant::now() + Duration::from_secs(120);
    let status = loop {
        if let Some(st) = child.try_wait().unwrap() {
            break Some(st);
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let r = Report {
        client,
        ok: status.is_some_and(|s| s.success()),
        stdout: out.join().unwrap(),
        stderr: err.join().unwrap(),
    };
    assert!(
        status.is_some(),
        "{c:?} still running after 120 s: killed\n{r}"
    );
    r
}

/// The checks every conversation `tag` gets, standalone and in a Cluster: `con` is a
/// connection to the primary that owns it (so each key read here is one the call wrote there).
fn check_conversation(r: &Report, tag: &str, con: &mut Connection, cluster: bool) {
    let who = r.client.name();
    let t = format!("{{{tag}}}");
    // SEQ.NEXT ... IDMP: the first call reserves, the retry gets its value marked a duplicate.
    assert_eq!(r.words("seq.next", tag), ["1", "0"], "{who}\n{r}");
    assert_eq!(r.words("seq.retry", tag), ["1", "1"], "{who}\n{r}");

    // MSGID.GEN, and the client's parse of MSGID.DECODE's map against the server's own.
    let msgid = r.words("msgid.gen", tag)[0].to_owned();
    assert_eq!(msgid.len(), 19, "{who}: {msgid}");
    let server: Vec<String> = reply_pairs(con, &["MSGID.DECODE", &msgid])
        .unwrap()
        .into_iter()
        .map(|(_, v)| v)
        .collect();
    assert_eq!(r.words("msgid.decode", tag), server, "{who}: {msgid}");
    assert_eq!(server[2], "1", "{who}: channel type");
    let hash = int_reply(con, &["MSGID.HASH", &t]);
    assert_eq!(server[3], hash.to_string(), "{who}: the target's hash");

    // UIDs: exact (as text in Node.js), increasing, each of the target's slot in a Cluster.
    let uid: u64 = r.words("uid.gen", tag)[0].parse().unwrap();
    let count: Vec<u64> = r
        .words("uid.count", tag)
        .iter()
        .map(|u| u.parse().unwrap())
        .collect();
    assert_eq!(count.len(), 3, "{who}");
    assert!(
        uid < count[0] && count[0] < count[1] && count[1] < count[2],
        "{who}: {uid} {count:?}"
    );
    if r.client != Client::GlidePython {
        // Integer replies become JavaScript numbers, exact only below 2^53: what STRING and
        // node-redis's type mapping are for.
        assert_eq!(
            r.words("uid.number", tag),
            ["number:false"; 3],
            "{who}: UIDs as numbers"
        );
    }

    // IM.SEND: [seq, msgid, duplicate, uid], the retry the same marked a duplicate, and the
    // inbox member holds exactly those IDs (the UID's text as the client kept it).
    let send = r.words("im.send", tag);
    assert_eq!((send[0], send[2]), ("2", "0"), "{who}: {send:?}");
    assert!(
        send[1].len() == 19 && *send[1] > *msgid.as_str(),
        "{who}: {send:?}"
    );
    let send_uid: u64 = send[3].parse().unwrap();
    assert!(send_uid > count[2], "{who}: {send_uid} after {count:?}");
    assert_eq!(
        r.words("im.retry", tag),
        [send[0], send[1], "1", send[3]],
        "{who}"
    );
    let inbox: Vec<(String, i64)> = cmd(
        con,
        &["ZRANGE", &format!("{t}:inbox:bob"), "0", "-1", "WITHSCORES"],
    )
    .unwrap();
    assert_eq!(
        inbox,
        [(format!("{}|{}|alice|hi", send[1], send[3]), 2)],
        "{who}"
    );
    if cluster {
        for u in [uid, count[0], count[1], count[2], send_uid] {
            let f = reply_pairs(con, &["UID.DECODE", &u.to_string()]).unwrap();
            assert_eq!(
                f[1],
                ("node".to_owned(), slot(&t).to_string()),
                "{who}: {u}"
            );
        }
    }

    // SEQ.GET (from a replica in a Cluster, after WAIT) and on the owner: IM.SEND's seq.
    assert_eq!(r.lines("seq.get", tag), ["2", "2"], "{who}");
    assert_eq!(
        int_reply(con, &["SEQ.GET", &format!("{t}:seq")]),
        2,
        "{who}"
    );

    // Each error as the client renders it: imid's text, which for WRONGTYPE goes on to name
    // the key and what it holds.
    for (what, (class, message)) in r.client.errors() {
        let got = r.rest(&format!("error.{what}"), tag);
        assert!(
            got.starts_with(&format!("{class} {message}")),
            "{who}: the {what} error: {got}"
        );
    }
}

// ---- Standalone: a primary with the fence on and its replica ----

/// `fence <case> <class or ok> <ms> <rest>`: (class, ms, rest).
fn fence_line<'a>(r: &'a Report, case: &str) -> (&'a str, u64, &'a str) {
    let mut w = r.rest("fence", case).splitn(3, ' ');
    let class = w.next().unwrap();
    let ms = w.next().unwrap().parse().unwrap();
    (class, ms, w.next().unwrap_or(""))
}

/// The retry after a fenced call, with the same token: the value recorded for it, a duplicate.
fn fence_retry(r: &Report, case: &str) -> i64 {
    let w = r.words("fence.retry", case);
    assert_eq!(w[1], "1", "{}: {case}: {w:?}\n{r}", r.client.name());
    w[0].parse().unwrap()
}

fn standalone(client: Client) {
    let p = Server::with(&["--imid.fence-replicas", "1"]);
    let replica = p.replica(&[]);
    p.wait_replica(&replica);
    let mut con = p.client();
    // After a full sync the first call that waits may wait up to ~1 s, until the replica's
    // first acknowledgement (docs/durability.md, "A replica's first second"): that one here.
    wait_until("the fence answers", 30, || {
        cmd::<Value>(&mut con, &["SEQ.NEXT", "{warm}:seq", "IDMP", "w"]).is_ok()
    });
    let tag = format!("{}-standalone", client.prefix());
    let r = run_client(
        client,
        &[
            "--host".into(),
            "127.0.0.1".into(),
            "--port".into(),
            p.port.to_string(),
            "--replica-port".into(),
            replica.port.to_string(),
            "--tags".into(),
            tag.clone(),
        ],
    );
    assert!(
        r.ok && r.stdout.trim_end().ends_with("ok"),
        "{}\n{r}",
        client.name()
    );
    check_conversation(&r, &tag, &mut con, false);

    // A call the fence makes wait (its replica asleep): a client timeout below
    // imid.fence-timeout gives up first, though the server goes on and hands the value out
    // once the replica is back; a retry with the same token gets it. Above it, the client gets
    // imid's NOREPLICAS.
    let who = client.name();
    let last = match client {
        Client::GlidePython | Client::GlideNode => {
            let (class, ms, rest) = fence_line(&r, "default-timeout");
            assert_eq!((class, rest), ("TimeoutError", "timed out"), "{who}\n{r}");
            assert!(ms < 1000, "{who}: GLIDE's 250 ms timeout took {ms} ms");
            let first = fence_retry(&r, "default-timeout");
            let (class, ms, rest) = fence_line(&r, "long-timeout");
            assert_eq!(class, "RequestError", "{who}\n{r}");
            assert!(
                rest.starts_with(&format!("NOREPLICAS: {NOT_ACKNOWLEDGED}")),
                "{who}: {rest}"
            );
            assert!(ms >= 950, "{who}: NOREPLICAS after {ms} ms");
            let second = fence_retry(&r, "long-timeout");
            assert!(first < second, "{who}\n{r}");
            second
        }
        Client::NodeRedis => {
            // A command's `timeout` bounds only its wait to be written: the call waited on.
            let (class, ms, rest) = fence_line(&r, "command-timeout");
            assert_eq!((class, rest), ("ok", "1 0"), "{who}\n{r}");
            assert!(
                ms > 300,
                "{who}: answered after {ms} ms, its timeout 250 ms"
            );
            assert_eq!(fence_retry(&r, "command-timeout"), 1, "{who}");
            // `socket.socketTimeout`: the socket closed under the waiting call, the client
            // closed for good (no reconnect after a socket timeout, by default).
            let (class, ms, _) = fence_line(&r, "socket-timeout");
            assert_eq!(class, "SocketTimeoutError", "{who}\n{r}");
            assert!(ms < 1000, "{who}: socket timeout of 250 ms took {ms} ms");
            assert_eq!(fence_retry(&r, "socket-timeout"), 2, "{who}");
            assert_eq!(r.words("fence.client", "socket-timeout"), ["open", "false"]);
            // No timeout (the default): imid's NOREPLICAS after imid.fence-timeout.
            let (class, ms, rest) = fence_line(&r, "no-timeout");
            assert_eq!(class, "SimpleError", "{who}\n{r}");
            assert!(
                rest.starts_with(&format!("NOREPLICAS {NOT_ACKNOWLEDGED}")),
                "{who}: {rest}"
            );
            assert!(ms >= 950, "{who}: NOREPLICAS after {ms} ms");
            fence_retry(&r, "no-timeout")
        }
    };
    let key = format!("{{{tag}}}:fence");
    assert_eq!(int_reply(&mut con, &["SEQ.GET", &key]), last, "{who}");
}

#[test]
fn glide_python_standalone() {
    standalone(Client::GlidePython);
}

#[test]
fn glide_node_standalone() {
    standalone(Client::GlideNode);
}

#[test]
fn node_redis_standalone() {
    standalone(Client::NodeRedis);
}

// ---- Redis Cluster: 3 primaries, 3 replicas ----

/// One shard: its slots, its primary and its replica (indexes into the nodes).
struct Shard {
    slots: RangeInclusive<u16>,
    primary: usize,
    replica: usize,
}

/// Six nodes with the module, made a cluster of 3 primaries with a replica each; returns them
/// once every node says cluster_state:ok and node 0's CLUSTER SLOTS names a replica per shard.
fn replicated_cluster() -> (Vec<Server>, Vec<Shard>) {
    let nodes: Vec<Server> = (0..6).map(|_| Server::with(&NODE_ARGS)).collect();
    create(&nodes, 1);
    let index = |port: i64| {
        nodes
            .iter()
            .position(|n| i64::from(n.port) == port)
            .unwrap()
    };
    let mut shards = Vec::new();
    wait_until("the cluster with its replicas", 60, || {
        let ok = nodes.iter().all(|n| {
            cmd::<String>(&mut n.client(), &["CLUSTER", "INFO"])
                .is_ok_and(|i| i.contains("cluster_state:ok"))
        });
        let slots: Vec<Vec<Value>> = cmd(&mut nodes[0].client(), &["CLUSTER", "SLOTS"]).unwrap();
        shards = slots
            .iter()
            .filter(|r| r.len() >= 4)
            .map(|r| {
                let num = |v: &Value| redis::from_redis_value::<i64>(v.clone()).unwrap();
                let port = |v: &Value| match v {
                    Value::Array(a) => num(&a[1]),
                    other => panic!("CLUSTER SLOTS node {other:?}"),
                };
                Shard {
                    slots: num(&r[0]) as u16..=num(&r[1]) as u16,
                    primary: index(port(&r[2])),
                    replica: index(port(&r[3])),
                }
            })
            .collect();
        ok && shards.len() == 3
    });
    for s in &shards {
        nodes[s.replica].wait_link_up();
    }
    (nodes, shards)
}

/// A node's INFO commandstats as command -> (calls, rejected_calls), and its errorstats as
/// error code -> count.
fn stats(s: &Server) -> (HashMap<String, (i64, i64)>, HashMap<String, i64>) {
    let info: String = cmd(&mut s.client(), &["INFO", "commandstats"]).unwrap();
    let field = |v: &str, name: &str| -> i64 {
        v.split(',')
            .find_map(|kv| kv.strip_prefix(&format!("{name}=")))
            .and_then(|n| n.parse().ok())
            .unwrap_or(0)
    };
    let commands = info
        .lines()
        .filter_map(|l| l.trim().strip_prefix("cmdstat_")?.split_once(':'))
        .map(|(c, v)| {
            (
                c.to_owned(),
                (field(v, "calls"), field(v, "rejected_calls")),
            )
        })
        .collect();
    let info: String = cmd(&mut s.client(), &["INFO", "errorstats"]).unwrap();
    let errors = info
        .lines()
        .filter_map(|l| l.trim().strip_prefix("errorstat_")?.split_once(':'))
        .map(|(e, v)| (e.to_owned(), field(v, "count")))
        .collect();
    (commands, errors)
}

/// What is wrong with the way `client` reached the nodes since their stats were reset, each
/// one a line (none: every call reached the owner of its key at once, SEQ.GET a replica):
/// a MOVED or ASK on any node, an imid command any node rejected, a primary that served
/// MSGID.GEN for other than its one conversation, a SEQ.GET no replica served (GLIDE routes it
/// to the replica; node-redis to the shard's nodes in turn).
fn misrouted(client: Client, nodes: &[Server], shards: &[Shard]) -> Vec<String> {
    let mut wrong = Vec::new();
    let stats: Vec<_> = nodes.iter().map(stats).collect();
    for (i, (commands, errors)) in stats.iter().enumerate() {
        for code in ["MOVED", "ASK"] {
            if let Some(n) = errors.get(code) {
                wrong.push(format!("node {i}: {n} {code} replies"));
            }
        }
        for (c, (_, rejected)) in commands {
            let imid = ["msgid.", "uid.", "seq.", "im."]
                .iter()
                .any(|p| c.starts_with(p));
            if imid && *rejected > 0 {
                wrong.push(format!("node {i}: {c} rejected {rejected} times"));
            }
        }
    }
    let calls = |i: usize, c: &str| stats[i].0.get(c).map_or(0, |v| v.0);
    for s in shards {
        if calls(s.primary, "msgid.gen") != 1 {
            wrong.push(format!(
                "primary {} served MSGID.GEN {} times, for its one conversation",
                s.primary,
                calls(s.primary, "msgid.gen")
            ));
        }
        let (on_primary, on_replica) = (calls(s.primary, "seq.get"), calls(s.replica, "seq.get"));
        let expected = match client {
            Client::GlidePython | Client::GlideNode => on_replica == 2 && on_primary == 0,
            Client::NodeRedis => on_replica >= 1 && on_primary + on_replica == 2,
        };
        if !expected {
            wrong.push(format!(
                "slots {:?}: SEQ.GET served {on_primary} times by the primary, {on_replica} by \
                 the replica",
                s.slots
            ));
        }
    }
    wrong
}

/// One conversation tag per shard, `<prefix><n>`, in shard order.
fn tags_per_shard(prefix: &str, shards: &[Shard]) -> Vec<String> {
    shards
        .iter()
        .map(|s| {
            (0..)
                .map(|i| format!("{prefix}{i}"))
                .find(|t| s.slots.contains(&slot(&format!("{{{t}}}"))))
                .unwrap()
        })
        .collect()
}

fn reset_stats(nodes: &[Server]) {
    for n in nodes {
        ok(&mut n.client(), &["CONFIG", "RESETSTAT"]);
    }
}

#[test]
fn every_call_reaches_its_owner_on_a_cluster() {
    let (nodes, shards) = replicated_cluster();
    let addresses = nodes
        .iter()
        .map(|n| format!("127.0.0.1:{}", n.port))
        .collect::<Vec<_>>()
        .join(",");
    for client in CLIENTS {
        let who = client.name();
        let tags = tags_per_shard(client.prefix(), &shards);
        let args = |routes: &str, tags: &[String]| {
            vec![
                "--cluster".to_owned(),
                addresses.clone(),
                "--tags".into(),
                tags.join(","),
                "--routes".into(),
                routes.into(),
            ]
        };
        reset_stats(&nodes);
        let r = run_client(client, &args("key", &tags));
        assert!(r.ok && r.stdout.trim_end().ends_with("ok"), "{who}\n{r}");
        let wrong = misrouted(client, &nodes, &shards);
        assert!(wrong.is_empty(), "{who}: {wrong:#?}\n{r}");
        for (t, s) in tags.iter().zip(&shards) {
            check_conversation(&r, t, &mut nodes[s.primary].client(), true);
        }

        // The same program with a wrong route: the check above must see it.
        let tags = tags_per_shard(&format!("{}w", client.prefix()), &shards);
        reset_stats(&nodes);
        let r = run_client(client, &args(client.wrong_routes(), &tags));
        let wrong = misrouted(client, &nodes, &shards);
        assert!(
            wrong.iter().any(|w| w.contains("MOVED")),
            "{who}: a wrong route not seen: {wrong:#?}\n{r}"
        );
        match client {
            // GLIDE follows MOVED (to the node it names), so its calls succeed one redirect
            // late; without a route SEQ.GET goes to the primary, as GLIDE takes a command it
            // does not know for a write.
            Client::GlidePython | Client::GlideNode => {
                assert!(r.ok, "{who}\n{r}");
                assert!(
                    wrong.iter().any(|w| w.contains("SEQ.GET")),
                    "{who}: {wrong:#?}"
                );
            }
            // node-redis routes again by the same wrong key after MOVED, until it gives up.
            Client::NodeRedis => {
                assert!(!r.ok, "{who}\n{r}");
                assert!(
                    r.stderr.contains("MaxCommandRedirectionsError"),
                    "{who}\n{r}"
                );
            }
        }
    }
}
