//! The Sentinel topology: a primary (127.0.0.2) and the row's replicas (two: .3, .4; three:
//! .3–.5) of the module, three Sentinels of the same server (.11–.13), and the faults against
//! the primary: cut off from everyone, from the Sentinels only, or with replica n1 from the
//! other replicas and the Sentinels (a split); paused; killed; or an operator's
//! `SENTINEL FAILOVER`.
use super::load::{self, Conv, Via};
use super::nemesis::{self, Firewall};
use super::node::Node;
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
    let mut nodes = vec![Node::server("n0", bin, module, &ips[0], &args)];
    for (i, ip) in ips.iter().enumerate().skip(1) {
        let mut a = args.clone();
        a.extend(["--replicaof", &ips[0], "6379"].map(str::to_owned));
        nodes.push(Node::server(&format!("n{i}"), bin, module, ip, &a));
    }
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
                    n("REPLICAS") == row.replicas && n("SENTINELS") == 2
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
    // and the Sentinels (only the Sentinels when they alone are cut off).
    let with = usize::from(matches!(row.fault, Fault::Split(_)));
    let cut_off: Vec<String> = ips.iter().take(1 + with).cloned().collect();
    let sentinel_ips = sentinels.iter().map(|s| s.ip.clone());
    let others: Vec<String> = match row.fault {
        Fault::SentinelCut(_) => sentinel_ips.collect(),
        _ => ips
            .iter()
            .skip(1 + with)
            .cloned()
            .chain(sentinel_ips)
            .collect(),
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
                Fault::Partition(d) | Fault::Split(d) | Fault::SentinelCut(d) => {
                    fw.cut_for(&cut_off, &others, d);
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
                Fault::OperatorFailover => {
                    let ok: String = sentinels[0]
                        .query(&["SENTINEL", "FAILOVER", MASTER])
                        .unwrap_or_else(|e| panic!("SENTINEL FAILOVER: {e}"));
                    eprintln!(
                        "SENTINEL FAILOVER {MASTER} to {}: {ok}",
                        sentinels[0].addr()
                    );
                }
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
                    if primary.role().as_deref() != Some("master")
                        || !nodes.iter().all(|n| n.addr() == p || n.replicates(primary))
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
