//! The Cluster topology: 3 primaries with the row's replicas each (one: 127.0.0.21–.26; two:
//! .21–.29), made by `redis-cli --cluster create`, and the faults against the owner of slot 0:
//! cut off from every other node, or with one of its replicas (a split); paused; killed.
use super::load::{self, Conv, Via};
use super::nemesis::{self, Firewall};
use super::node::{self, Node};
use super::run::{drive, logs, node_args, outcome, shared, wait_for, Clients, Outcome};
use super::{Fault, Row, Size};
use std::path::Path;
use std::time::Instant;

/// One row against Cluster: the nodes, the load (half of it in the slots of slot 0's
/// owner, the victim), the fault against the victim, the wait until the cluster is ok again
/// with every replica synced; what the clients received, checked.
pub(super) fn run(row: &Row, bin: &Path, module: &Path, size: &Size) -> Outcome {
    let started = Instant::now();
    let fw = Firewall::new();
    let ips: Vec<String> = (0..3 * (1 + row.replicas))
        .map(|i| format!("127.0.0.{}", 21 + i))
        .collect();
    let mut nodes: Vec<Node> = ips
        .iter()
        .enumerate()
        .map(|(i, ip)| {
            let mut a = node_args(row);
            a.extend(
                [
                    "--cluster-enabled",
                    "yes",
                    "--cluster-config-file",
                    "nodes.conf",
                    "--cluster-node-timeout",
                    &row.node_timeout_ms.to_string(),
                    "--cluster-announce-ip",
                    ip,
                ]
                .map(str::to_owned),
            );
            Node::server(&format!("n{i}"), bin, module, ip, &a)
        })
        .collect();
    let mut create = std::process::Command::new("redis-cli");
    create.args(["--cluster", "create"]);
    create.args(nodes.iter().map(Node::addr));
    let replicas = row.replicas.to_string();
    create.args(["--cluster-replicas", &replicas, "--cluster-yes"]);
    let out = create.output().expect("redis-cli (redis-tools)");
    assert!(
        out.status.success(),
        "redis-cli --cluster create: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let all = |nodes: &[Node]| logs(&nodes.iter().collect::<Vec<_>>());
    // Who owns slot 0, and the slots of each primary (node 0's view, once settled).
    let owner_of = |n: &Node, slot: u16| -> Option<String> {
        let v: redis::Value = n.query(&["CLUSTER", "SLOTS"]).ok()?;
        let redis::Value::Array(ranges) = v else {
            return None;
        };
        ranges.iter().find_map(|r| {
            let redis::Value::Array(r) = r else {
                return None;
            };
            let (a, b) = (node::int(r.first()?)?, node::int(r.get(1)?)?);
            if !(a..=b).contains(&i64::from(slot)) {
                return None;
            }
            let redis::Value::Array(o) = r.get(2)? else {
                return None;
            };
            let (redis::Value::BulkString(ip), port) = (o.first()?, node::int(o.get(1)?)?) else {
                return None;
            };
            Some(format!("{}:{port}", String::from_utf8_lossy(ip)))
        })
    };
    let settled = |nodes: &[Node], slot: u16| -> Option<String> {
        let ok = nodes.iter().all(|n| {
            n.query::<String>(&["CLUSTER", "INFO"])
                .is_ok_and(|i| i.contains("cluster_state:ok"))
        });
        let replicas_up = nodes
            .iter()
            .filter(|n| n.role().as_deref() == Some("slave"))
            .filter(|n| n.info_field("replication", "master_link_status").as_deref() == Some("up"))
            .count();
        let owners: Vec<Option<String>> = nodes.iter().map(|n| owner_of(n, slot)).collect();
        let first = owners.first()?.clone()?;
        (ok && replicas_up == 3 * row.replicas
            && owners.iter().all(|o| o.as_deref() == Some(first.as_str())))
        .then_some(first)
    };
    let mut victim_addr = String::new();
    wait_for(
        "the cluster settles",
        90,
        || match settled(&nodes, 0) {
            Some(o) => {
                victim_addr = o;
                true
            }
            None => false,
        },
        || all(&nodes),
    );
    let victim = nodes
        .iter()
        .position(|n| n.addr() == victim_addr)
        .expect("slot 0's owner is a node");
    // Conversations: half in the victim's slots (the hot ones among them), half elsewhere.
    let mut mine = Vec::new();
    let mut elsewhere = Vec::new();
    let mut i = 0;
    while mine.len() < size.convs / 2 || elsewhere.len() < size.convs - size.convs / 2 {
        let tag = format!("c{i}");
        i += 1;
        let owner = owner_of(&nodes[victim], load::slot_of(&tag));
        if owner.as_deref() == Some(victim_addr.as_str()) {
            if mine.len() < size.convs / 2 {
                mine.push(Conv::new(&tag));
            }
        } else if elsewhere.len() < size.convs - size.convs / 2 {
            elsewhere.push(Conv::new(&tag));
        }
    }
    let n_mine = mine.len();
    let convs: Vec<Conv> = mine.into_iter().chain(elsewhere).collect();
    let n_convs = convs.len();
    let slots: Vec<u16> = convs.iter().map(|c| c.slot).collect();
    let hot_slot = slots.first().copied().unwrap_or(0);
    let sh = shared(row, convs);
    let seeds: Vec<String> = nodes.iter().map(Node::addr).collect();
    let clients = Clients::new(size, &victim_addr, &Via::Cluster(seeds), n_mine, n_convs);
    // The sides of a cut: the victim (with one of its replicas in a split) against the rest.
    let mut cut_off = vec![nodes[victim].ip.clone()];
    if matches!(row.fault, Fault::Split(_)) {
        let replica = nodes
            .iter()
            .find(|n| n.replicates(&nodes[victim]))
            .expect("slot 0's owner has a replica");
        cut_off.push(replica.ip.clone());
    }
    let others: Vec<String> = ips
        .iter()
        .filter(|ip| !cut_off.contains(ip))
        .cloned()
        .collect();
    let mut last = victim_addr.clone();
    let got = {
        let nodes = &mut nodes;
        let last = &mut last;
        let fw = &fw;
        let victim_addr = &victim_addr;
        drive(&sh, clients, size, || {
            let at = sh.fault_begins();
            match row.fault {
                Fault::Partition(d) | Fault::Split(d) => fw.cut_for(&cut_off, &others, d),
                Fault::Pause(d) => nemesis::pause_for(&nodes[victim], d),
                Fault::SentinelCut(_)
                | Fault::OperatorFailover
                | Fault::ReplicaDown(_)
                | Fault::AliasSplit(_)
                | Fault::StaleCandidate
                | Fault::ForgetSplit(_) => {
                    panic!("{:?}: a Sentinel fault, no Cluster one", row.fault)
                }
                Fault::Kill => {
                    nodes[victim].kill();
                    wait_for(
                        "the victim's replica takes over",
                        90,
                        || {
                            nodes.iter().enumerate().any(|(i, n)| {
                                i != victim
                                    && owner_of(n, hot_slot).is_some_and(|o| o != *victim_addr)
                            })
                        },
                        || all(nodes),
                    );
                    nodes[victim].restart();
                }
            }
            wait_for(
                "the cluster settles after the fault",
                120,
                || match settled(nodes, hot_slot) {
                    Some(o) => {
                        *last = o;
                        true
                    }
                    None => false,
                },
                || all(nodes),
            );
            at
        })
    };
    let lane_of: Vec<u32> = slots.iter().map(|&s| u32::from(s)).collect();
    outcome(
        &sh,
        got,
        &victim_addr,
        &last,
        |c| lane_of.get(c as usize).copied().unwrap_or(u32::MAX),
        started,
        &super::checker::Final::new(),
    )
}
