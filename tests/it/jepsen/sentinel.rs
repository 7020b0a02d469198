//! The Sentinel topology: a primary (127.0.0.2) and the row's replicas (two: .3, .4; three:
//! .3–.5) of the module, three Sentinels of the same server (.11–.13), and the faults against
//! the primary: cut off from everyone, from the Sentinels only, or with replica n1 from the
//! other replicas and the Sentinels (a split); paused; killed; or an operator's
//! `SENTINEL FAILOVER`. And issue 44's: a split with n2 announcing n1's address, on the
//! primary's side; n1 cut off from n2, an operator's failover to n2, then n2 killed; a split
//! in which an operator kills the cut-off replica's link on the primary and forgets it
//! (`FENCE.FORGET`).
use super::load::{self, Conv, Via};
use super::nemesis::{self, Firewall};
use super::node::{Node, PORT};
use super::run::{
    drive, final_inboxes, logs, node_args, outcome, shared, wait_for, Clients, Outcome,
};
use super::{secs, Fault, Row, Size};
use std::path::Path;
use std::time::{Duration, Instant};

/// The name the Sentinels monitor the primary under.
const MASTER: &str = "imid";

/// The primary every Sentinel names, if they agree.
pub(super) fn agreed(sentinels: &[Node]) -> Option<String> {
    let mut named = sentinels.iter().map(|s| {
        let a: Vec<String> = s
            .query(&["SENTINEL", "GET-MASTER-ADDR-BY-NAME", MASTER])
            .ok()?;
        Some(format!("{}:{}", a.first()?, a.get(1)?))
    });
    let first = named.next()??;
    named
        .all(|n| n.as_deref() == Some(first.as_str()))
        .then_some(first)
}

/// The server arguments the row's fault gives node `i` (0: the primary; `ips` the nodes'
/// addresses), after the row's own.
fn fault_args(fault: Fault, i: usize, ips: &[String]) -> Vec<String> {
    let a: Vec<&str> = match (fault, i) {
        // n2 announces n1's address: the primary's ROLE and INFO list two replicas as
        // 127.0.0.3:6379, and the Sentinels, which know replicas by address, one (n1).
        (Fault::AliasSplit(_), 2) => vec!["--replica-announce-ip", &ips[1]],
        // The operator's failover picks n2 (Sentinel prefers the lowest replica-priority);
        // once n2 is gone, n1 (the default, 100) wins over n0 (200), which was primary before
        // n2 and then synced from it.
        (Fault::StaleCandidate, 0) => vec!["--replica-priority", "200"],
        (Fault::StaleCandidate, 2) => vec!["--replica-priority", "10"],
        _ => Vec::new(),
    };
    a.into_iter().map(str::to_owned).collect()
}

/// An operator on `primary` who takes the replica at `ip` for gone while it is only cut off:
/// kills its replication link (`CLIENT KILL ID` of the replica client from `ip`), then runs
/// `FENCE.FORGET ip:port` every 200 ms for up to 3 s until it is accepted (it refuses a
/// replica it still takes for connected, as it may just after the kill), each reply said on
/// stderr. Refused throughout is a fair outcome, not the test's failure: a FENCE.FORGET that
/// probes the address refuses while the replica could still be promoted.
fn forget_replica(primary: &Node, ip: &str) {
    let list: String = primary
        .query(&["CLIENT", "LIST", "TYPE", "replica"])
        .unwrap_or_else(|e| panic!("CLIENT LIST on {}: {e}", primary.name));
    let field = |line: &str, f: &str| {
        line.split_whitespace()
            .find_map(|kv| kv.strip_prefix(f).map(str::to_owned))
    };
    let ids: Vec<String> = list
        .lines()
        .filter(|l| field(l, "addr=").is_some_and(|a| a.starts_with(&format!("{ip}:"))))
        .filter_map(|l| field(l, "id="))
        .collect();
    if ids.is_empty() {
        eprintln!(
            "operator: no replica client from {ip} on {}",
            primary.addr()
        );
    }
    for id in &ids {
        let r = primary.query::<redis::Value>(&["CLIENT", "KILL", "ID", id]);
        eprintln!(
            "operator: CLIENT KILL ID {id} (from {ip}) on {}: {r:?}",
            primary.addr()
        );
    }
    let addr = format!("{ip}:{PORT}");
    let deadline = Instant::now() + secs(3);
    loop {
        let r = primary.query::<redis::Value>(&["FENCE.FORGET", &addr]);
        // An error reply as the server sent it (`-ERR ...`); no reply (a broken connection)
        // as the client says.
        let said = match &r {
            Ok(v) => format!("{v:?}"),
            Err(e) => match e.code() {
                Some(code) => format!("-{code} {}", e.detail().unwrap_or_default()),
                None => format!("no reply: {e}"),
            },
        };
        eprintln!(
            "operator: FENCE.FORGET {addr} on {}: {said}",
            primary.addr()
        );
        if r.is_ok() || Instant::now() + Duration::from_millis(200) > deadline {
            return;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// The stale candidate (issue 44), `r1` (n1) cut off from `r2` (n2) for its whole course: an
/// operator's `SENTINEL FAILOVER`; the Sentinels promote n2 (replica-priority 10) and tell n1
/// to follow it, which n1 never reaches. Once the Sentinels agree on n2 and n0, the old
/// primary, replicates it, n2 serves 4 s of load, then is killed (kill -9) and the Sentinels
/// promote another node: by priority n1, which holds only what n0 held at the operator's
/// failover (its values repeat n2's), unless n1 keeps itself out of it (replica-priority 0
/// while it has never synced from the primary it follows); then n0, which holds n2's data. n2
/// comes back from its AOF once that node is primary, and the cut is healed.
fn stale_candidate(
    nodes: &mut [Node],
    sentinels: &[Node],
    fw: &Firewall,
    r1: &[String],
    r2: &[String],
) {
    let all = |nodes: &[Node]| logs(&nodes.iter().chain(sentinels).collect::<Vec<_>>());
    fw.cut(r1, r2);
    eprintln!("partition: {}", Firewall::rules());
    operator_failover(sentinels);
    let n2 = nodes[2].addr();
    // n0 must hold n2's data before n2 goes: the Sentinels turn it into n2's replica only some
    // seconds after the promotion (it reports itself a primary until then).
    wait_for(
        "the Sentinels promote n2 (replica-priority 10) and n0 replicates it",
        90,
        || agreed(sentinels).as_deref() == Some(n2.as_str()) && nodes[0].replicates(&nodes[2]),
        || all(nodes),
    );
    eprintln!("n2 ({n2}) is primary, n0 replicates it");
    std::thread::sleep(secs(4));
    nodes[2].kill();
    eprintln!("kill -9 of n2 ({n2})");
    wait_for(
        "the Sentinels promote another node once n2 is gone",
        90,
        || agreed(sentinels).is_some_and(|p| p != n2),
        || all(nodes),
    );
    eprintln!(
        "the Sentinels promoted {}",
        agreed(sentinels).unwrap_or_default()
    );
    nodes[2].restart();
    eprintln!("healed: {}", Firewall::rules());
    fw.heal();
}

/// An operator's `SENTINEL FAILOVER` to the first Sentinel (its reply said on stderr).
fn operator_failover(sentinels: &[Node]) {
    let ok: String = sentinels[0]
        .query(&["SENTINEL", "FAILOVER", MASTER])
        .unwrap_or_else(|e| panic!("SENTINEL FAILOVER: {e}"));
    eprintln!(
        "SENTINEL FAILOVER {MASTER} to {}: {ok}",
        sentinels[0].addr()
    );
}

/// One row against Sentinel: the nodes and Sentinels, the load, the fault against the primary,
/// the wait until the Sentinels agree on a primary every other node replicates; what the
/// clients received, checked.
pub(super) fn run(row: &Row, bin: &Path, module: &Path, size: &Size) -> Outcome {
    let started = Instant::now();
    let fw = Firewall::new();
    let args = node_args(row);
    let ips: Vec<String> = (0..=row.replicas)
        .map(|i| format!("127.0.0.{}", 2 + i))
        .collect();
    let mut a = args.clone();
    a.extend(fault_args(row.fault, 0, &ips));
    let mut nodes = vec![Node::server("n0", bin, module, &ips[0], &a)];
    for (i, ip) in ips.iter().enumerate().skip(1) {
        let mut a = args.clone();
        a.extend(["--replicaof", &ips[0], "6379"].map(str::to_owned));
        a.extend(fault_args(row.fault, i, &ips));
        nodes.push(Node::server(&format!("n{i}"), bin, module, ip, &a));
    }
    // The replicas the Sentinels know: one address for n1 and n2 when n2 announces n1's.
    let known = if matches!(row.fault, Fault::AliasSplit(_)) {
        1
    } else {
        row.replicas
    };
    let sentinels: Vec<Node> = (0..3)
        .map(|i| {
            Node::sentinel(
                &format!("s{i}"),
                bin,
                &format!("127.0.0.{}", 11 + i),
                MASTER,
                &ips[0],
                row.down_after_ms,
            )
        })
        .collect();
    let all = |nodes: &[Node]| logs(&nodes.iter().chain(&sentinels).collect::<Vec<_>>());
    wait_for(
        "the replicas sync and the Sentinels find them and each other",
        90,
        || {
            nodes.iter().skip(1).all(|n| n.replicates(&nodes[0]))
                && sentinels.iter().all(|s| {
                    let n = |what| {
                        s.query::<Vec<redis::Value>>(&["SENTINEL", what, MASTER])
                            .map_or(0, |v| v.len())
                    };
                    n("REPLICAS") == known && n("SENTINELS") == 2
                })
        },
        || all(&nodes),
    );
    if let Some(behind) = row.replicas_behind_ms {
        for (n, ms) in nodes.iter().skip(1).zip(behind) {
            nemesis::skew_clock(n, ms);
        }
    }
    let convs: Vec<Conv> = (0..size.convs)
        .map(|i| Conv::new(&format!("c{i}")))
        .collect();
    let n_convs = convs.len();
    let sh = shared(row, convs);
    let sentinel_addrs: Vec<String> = sentinels.iter().map(Node::addr).collect();
    let follow = Via::Sentinel(sentinel_addrs, MASTER.to_owned());
    let mut clients = Clients::new(size, &nodes[0].addr(), &follow, n_convs, n_convs);
    // Readers: every other round the primary the Sentinels name, else any data node
    // (`IMID_JEPSEN_READS=old`: the first primary only, the node a fault cuts off).
    let node_addrs: Vec<String> = nodes.iter().map(Node::addr).collect();
    let read_via = match std::env::var("IMID_JEPSEN_READS").as_deref() {
        Ok("old") => load::ReadVia {
            follow: None,
            nodes: vec![nodes[0].addr()],
        },
        Ok("any") | Err(_) => load::ReadVia {
            follow: Some(follow.clone()),
            nodes: node_addrs,
        },
        Ok(other) => panic!("IMID_JEPSEN_READS={other}: any or old"),
    };
    clients.readers = (0..size.readers)
        .map(|_| (read_via.clone(), n_convs))
        .collect();
    // The sides of a cut: the primary (with replica n1 in a split) against the other replicas
    // and the Sentinels (only the Sentinels when they alone are cut off); in the alias split
    // the primary with n2 against n1, the address n2 announces, and the Sentinels; n1 against
    // n2 alone for the stale candidate.
    let with = usize::from(matches!(row.fault, Fault::Split(_) | Fault::ForgetSplit(_)));
    let sentinel_ips = sentinels.iter().map(|s| s.ip.clone());
    let (cut_off, others): (Vec<String>, Vec<String>) = match row.fault {
        Fault::SentinelCut(_) => (
            ips.iter().take(1).cloned().collect(),
            sentinel_ips.collect(),
        ),
        Fault::AliasSplit(_) => (
            vec![ips[0].clone(), ips[2].clone()],
            std::iter::once(ips[1].clone())
                .chain(sentinel_ips)
                .collect(),
        ),
        Fault::StaleCandidate => (vec![ips[1].clone()], vec![ips[2].clone()]),
        _ => (
            ips.iter().take(1 + with).cloned().collect(),
            ips.iter()
                .skip(1 + with)
                .cloned()
                .chain(sentinel_ips)
                .collect(),
        ),
    };
    let first = nodes[0].addr();
    let mut last = first.clone();
    let got = {
        let nodes = &mut nodes;
        let last = &mut last;
        let fw = &fw;
        drive(&sh, clients, size, || {
            if row.before_renewal {
                // Just before the primary's next lease renewal: its replicated lease then
                // reaches only 2.5 s past the cut.
                let deadline = Instant::now() + secs(15);
                loop {
                    let now = nemesis::now_ms();
                    if let Some(at) = nemesis::next_renewal_ms(&nodes[0], 0) {
                        let wait = at - 100 - now;
                        if (0..2500).contains(&wait) {
                            std::thread::sleep(Duration::from_millis(wait as u64));
                            break;
                        }
                    }
                    assert!(Instant::now() < deadline, "no lease renewal seen");
                    std::thread::sleep(Duration::from_millis(100));
                }
            }
            let at = sh.fault_begins();
            match row.fault {
                Fault::Partition(d)
                | Fault::Split(d)
                | Fault::SentinelCut(d)
                | Fault::AliasSplit(d) => {
                    fw.cut_for(&cut_off, &others, d);
                }
                Fault::ForgetSplit(d) => fw.cut_during(&cut_off, &others, d, || {
                    std::thread::sleep(secs(1));
                    forget_replica(&nodes[0], &ips[2]);
                }),
                Fault::StaleCandidate => {
                    stale_candidate(&mut *nodes, &sentinels, fw, &cut_off, &others)
                }
                Fault::Pause(d) => nemesis::pause_for(&nodes[0], d),
                Fault::Kill => nodes[0].kill(),
                Fault::ReplicaDown(d) => {
                    let last = nodes.len() - 1;
                    if let Some(n) = nodes.get_mut(last) {
                        n.kill();
                        std::thread::sleep(d);
                        n.restart();
                    }
                }
                Fault::OperatorFailover => operator_failover(&sentinels),
            }
            if matches!(row.fault, Fault::Kill | Fault::OperatorFailover) {
                let old = nodes[0].addr();
                wait_for(
                    "the Sentinels promote a replica",
                    90,
                    || agreed(&sentinels).is_some_and(|p| p != old),
                    || all(nodes),
                );
            }
            if matches!(row.fault, Fault::Kill) {
                nodes[0].restart();
            }
            wait_for(
                "the Sentinels agree on a primary that every other node replicates",
                120,
                || {
                    let Some(p) = agreed(&sentinels) else {
                        return false;
                    };
                    let Some(primary) = nodes.iter().find(|n| n.addr() == p) else {
                        return false;
                    };
                    // The alias split: the Sentinels know n2 only as n1's address, so they
                    // never reconfigure it, and it keeps following n0, which they made a
                    // replica of the new primary. Accepted as settled (every value reaches n2
                    // through n0) rather than an operator's REPLICAOF: n2 would then announce
                    // the new primary's own address to it.
                    let chained = |n: &Node| {
                        matches!(row.fault, Fault::AliasSplit(_))
                            && n.name == "n2"
                            && n.replicates(&nodes[0])
                            && nodes[0].replicates(primary)
                    };
                    if primary.role().as_deref() != Some("master")
                        || !nodes
                            .iter()
                            .all(|n| n.addr() == p || n.replicates(primary) || chained(n))
                    {
                        return false;
                    }
                    *last = p;
                    true
                },
                || all(nodes),
            );
            at
        })
    };
    let fin = match nodes.iter().find(|n| n.addr() == last) {
        Some(n) if size.readers > 0 => final_inboxes(n, &sh.convs),
        _ => super::checker::Final::new(),
    };
    outcome(&sh, got, &first, &last, |_| 0, started, &fin)
}
