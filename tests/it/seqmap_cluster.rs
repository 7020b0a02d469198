//! Sequence maps in Redis Cluster: a map's slot moves between primaries (`redis-cli --cluster
//! reshard` and CLUSTER SETSLOT + MIGRATE, both DUMP/RESTORE underneath) while a client keeps
//! calling SEQ.HNEXT on its fields: no field value is received twice; and the LIMIT key of
//! SEQ.ADVANCE / SEQ.HADVANCE must share the slot (CROSSSLOT otherwise).
use crate::common;
use common::cluster::*;
use common::*;
use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

const MOVING: u16 = 2;

#[test]
fn moving_a_maps_slot_under_load_reissues_no_field_value() {
    let cluster = Cluster::start(None, &[], 0..MOVING);
    let (a, b) = cluster.owner_and_next(0);
    let tags = tags_in(0..MOVING, 1);
    let keys: Vec<String> = tags.iter().map(|t| format!("{{{t}}}:cursors")).collect();
    let stop = Arc::new(AtomicBool::new(false));
    let worker = {
        let (stop, keys) = (stop.clone(), keys.clone());
        let mut c = cluster.client();
        std::thread::spawn(move || {
            let mut got: HashMap<(String, String), Vec<i64>> = HashMap::new();
            let mut errors = 0;
            let mut i = 0usize;
            while !stop.load(Ordering::Relaxed) {
                let key = &keys[i % keys.len()];
                let field = format!("u{}", i % 16);
                i += 1;
                match redis::cmd("SEQ.HNEXT")
                    .arg(key)
                    .arg(&field)
                    .query::<i64>(&mut c)
                {
                    Ok(v) => got.entry((key.clone(), field)).or_default().push(v),
                    Err(_) => errors += 1,
                }
            }
            (got, errors)
        })
    };
    cluster.reshard_and_back(a, b, MOVING, || {
        std::thread::sleep(Duration::from_millis(500))
    });
    stop.store(true, Ordering::Relaxed);
    let (got, errors) = worker.join().unwrap();
    let mut n = 0;
    for ((key, field), vs) in &got {
        let set: HashSet<i64> = vs.iter().copied().collect();
        assert_eq!(
            set.len(),
            vs.len(),
            "{key} {field}: a value was received twice"
        );
        // one client: each value above the one before
        assert!(vs.windows(2).all(|w| w[0] < w[1]), "{key} {field}: {vs:?}");
        n += vs.len();
    }
    println!("{n} field values checked through 2 moves of {MOVING} slots, {errors} errors retried");
    assert!(n > 200, "the load ran through the moves");
}

/// Redis 7.0 checks the slots of the keys the getkeys API reports (its Cluster ignores key
/// specs); Redis 8.2 and Valkey 9.1 those of the key specs.
fn limit_key_in_another_slot_is_crossslot(bin: Option<std::path::PathBuf>) {
    let cluster = Cluster::start(bin.as_deref(), &[], 0..1);
    let tags = tags_in(0..1, 1);
    let t = &tags[0];
    let owner = cluster.owner(slot(t));
    let mut con = cluster.nodes[owner].client();
    let same = format!("{{{t}}}:max");
    let cur = format!("{{{t}}}:cur");
    let map = format!("{{{t}}}:cursors");
    assert_eq!(int_reply(&mut con, &["SEQ.NEXT", &same, "COUNT", "10"]), 10);
    assert_eq!(
        int_reply(&mut con, &["SEQ.ADVANCE", &cur, "50", "LIMIT", &same]),
        10
    );
    assert_eq!(
        int_reply(
            &mut con,
            &["SEQ.HADVANCE", &map, "u1", "50", "LIMIT", &same]
        ),
        10
    );
    // a key of another slot (whichever node owns it)
    let other = (0..)
        .map(|i| format!("other{i}"))
        .find(|k| slot(k) != slot(t))
        .unwrap();
    for call in [
        vec!["SEQ.ADVANCE", cur.as_str(), "50", "LIMIT", other.as_str()],
        vec![
            "SEQ.HADVANCE",
            map.as_str(),
            "u1",
            "60",
            "LIMIT",
            other.as_str(),
        ],
    ] {
        let bytes: Vec<&[u8]> = call.iter().map(|a| a.as_bytes()).collect();
        let e = expect_err(&mut con, &bytes);
        assert!(e.starts_with("CROSSSLOT"), "{call:?}: {e}");
    }
    assert_eq!(
        int_reply(&mut con, &["SEQ.GET", &cur]),
        10,
        "nothing changed"
    );
    assert_eq!(int_reply(&mut con, &["SEQ.HGET", &map, "u1"]), 10);
}

#[test]
fn a_limit_key_in_another_slot_is_crossslot() {
    limit_key_in_another_slot_is_crossslot(None);
}

on_newer_servers!(a_limit_key_in_another_slot_is_crossslot_on, |bin| {
    limit_key_in_another_slot_is_crossslot(Some(bin))
});
