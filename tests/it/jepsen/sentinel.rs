//! The Sentinel topology: a primary (127.0.0.2) and two replicas (.3, .4) of the module, three
//! Sentinels of the same server (.11–.13), and the faults against the primary.
use super::load::{Conv, Via};
use super::nemesis::{self, Firewall};
use super::node::Node;
use super::run::{drive, logs, node_args, outcome, shared, wait_for, Clients, Outcome};
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
    let ips = ["127.0.0.2", "127.0.0.3", "127.0.0.4"];
    let mut nodes = vec![Node::server("n0", bin, module, ips[0], &args)];
    for (i, ip) in ips.iter().enumerate().skip(1) {
        let mut a = args.clone();
        a.extend(["--replicaof", ips[0], "6379"].map(str::to_owned));
        nodes.push(Node::server(&format!("n{i}"), bin, module, ip, &a));
    }
    let sentinels: Vec<Node> = (0..3)
        .map(|i| {
            Node::sentinel(
                &format!("s{i}"),
                bin,
                &format!("127.0.0.{}", 11 + i),
                MASTER,
                ips[0],
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
                    n("REPLICAS") == 2 && n("SENTINELS") == 2
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
    let mut clients = Clients {
        plain: Vec::new(),
        idmp: Vec::new(),
    };
    for _ in 0..size.direct {
        clients.plain.push((Via::Direct(nodes[0].addr()), n_convs));
    }
    for _ in 0..size.follow {
        clients.plain.push((follow.clone(), n_convs));
    }
    // Half the IDMP clients start on the primary that gets cut off and follow the Sentinels
    // once it turns them away; the others follow the Sentinels throughout.
    for i in 0..size.idmp {
        clients.idmp.push(if i % 2 == 0 {
            (
                Via::Pinned(nodes[0].addr(), Box::new(follow.clone())),
                n_convs,
            )
        } else {
            (follow.clone(), n_convs)
        });
    }
    let others: Vec<String> = ips
        .iter()
        .skip(1)
        .map(|s| s.to_string())
        .chain(sentinels.iter().map(|s| s.ip.clone()))
        .collect();
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
            let others: Vec<&str> = others.iter().map(String::as_str).collect();
            let at = (sh.ms(), nemesis::now_ms());
            match row.fault {
                Fault::Partition(d) => {
                    fw.isolate(&nodes[0].ip, &others);
                    eprintln!("partition: {}", Firewall::rules());
                    std::thread::sleep(d);
                    eprintln!("healed: {}", Firewall::rules());
                    fw.heal();
                }
                Fault::Pause(d) => {
                    nodes[0].pause();
                    std::thread::sleep(d);
                    nodes[0].resume();
                }
                Fault::Kill => {
                    nodes[0].kill();
                    let old = nodes[0].addr();
                    wait_for(
                        "the Sentinels promote a replica",
                        90,
                        || agreed(&sentinels).is_some_and(|p| p != old),
                        || all(nodes),
                    );
                    nodes[0].restart();
                }
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
    outcome(&sh, got, &first, &last, |_| 0, started)
}
