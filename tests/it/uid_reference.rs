//! imid's named UID layouts against implementations written by others, both ways, bit-exact:
//! IDs each library generates decode in imid (UID.DECODE, under the node's layout and under
//! `LAYOUT name`) to the fields the library says they hold, and IDs imid generates (UID.GEN) or
//! builds at the layout's edges (UID.ENCODE) decode in the library to the fields imid says.
//!
//! | layout        | implementation (pinned in tests/uid_reference/)                         |
//! | ------------- | ------------------------------------------------------------------------ |
//! | twitter       | @sapphire/snowflake 3.5.5 (npm), `TwitterSnowflake`                      |
//! | discord       | @sapphire/snowflake 3.5.5 (npm), `DiscordSnowflake`                      |
//! | instagram     | snowflake-id-toolkit 0.6.0 (PyPI), `InstagramSnowflakeIDGenerator`       |
//! | sonyflake     | sonyflake-py 1.3.0 (PyPI), Sonyflake v1's port                           |
//! | sonyflake-v2  | sonyflake 2.0.3 (PyPI), Sonyflake v2's port                              |
//! | mastodon      | Mastodon.py 2.3.3 (PyPI), `MaybeSnowflakeIdType` (whole seconds only)    |
//! | uidgenerator  | none on npm, PyPI or Debian; Baidu's own classes by hand: scripts/uidgenerator-check/ |
//!
//! scripts/deps.sh installs them (`npm ci` in tests/uid_reference, a venv under target/uid-ref);
//! a missing one fails these tests, it never skips them. tests/uid_reference/ref.js and ref.py
//! only drive the libraries: every bit position comes from the library.
use crate::common;
use common::*;
use std::collections::HashMap;
use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Stdio};

/// How a library is run.
#[derive(Clone, Copy)]
enum Lib {
    /// ref.js under node, with tests/uid_reference/node_modules.
    Node,
    /// ref.py under target/uid-ref/venv's python.
    Python,
    /// ref.py with sonyflake-py (v1) on PYTHONPATH.
    PythonSonyflakeV1,
}

/// (id, time_ms, node, seq) as a library gives them; None where it gives no such field.
type Row = (u64, u64, Option<u64>, Option<u64>);

/// Sends `requests` (one per line, see ref.js/ref.py) to the library and parses its lines.
fn ask(lib: Lib, requests: &[String]) -> Vec<Row> {
    let dir = root().join("tests/uid_reference");
    let venv_python = root().join("target/uid-ref/venv/bin/python");
    let mut c = match lib {
        Lib::Node => {
            assert!(
                dir.join("node_modules/@sapphire/snowflake").is_dir(),
                "@sapphire/snowflake missing: run scripts/deps.sh (npm ci in tests/uid_reference)"
            );
            let mut c = Command::new("node");
            c.arg(dir.join("ref.js")).current_dir(&dir);
            c
        }
        Lib::Python | Lib::PythonSonyflakeV1 => {
            assert!(
                venv_python.exists(),
                "{} missing: run scripts/deps.sh (it installs tests/uid_reference/requirements*.txt)",
                venv_python.display()
            );
            let mut c = Command::new(&venv_python);
            c.arg(dir.join("ref.py"));
            if let Lib::PythonSonyflakeV1 = lib {
                let v1: PathBuf = root().join("target/uid-ref/sonyflake-v1");
                assert!(
                    v1.join("sonyflake").is_dir(),
                    "{} missing: run scripts/deps.sh",
                    v1.display()
                );
                c.env("PYTHONPATH", v1);
            }
            c
        }
    };
    let mut child = c
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run the reference implementation");
    child
        .stdin
        .take()
        .unwrap()
        .write_all((requests.join("\n") + "\n").as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "reference implementation failed: {}\n{text}",
        String::from_utf8_lossy(&out.stderr)
    );
    let field = |w: &str| (w != "-").then(|| w.parse::<u64>().unwrap());
    text.lines()
        .map(|l| {
            let w: Vec<&str> = l.split_whitespace().collect();
            assert_eq!(w.len(), 4, "{l}");
            (
                w[0].parse().unwrap(),
                w[1].parse().unwrap(),
                field(w[2]),
                field(w[3]),
            )
        })
        .collect()
}

/// UID.DECODE's reply as a name -> value map, and the names in reply order.
fn decode(
    con: &mut Connection,
    uid: u64,
    layout: Option<&str>,
) -> (HashMap<String, u64>, Vec<String>) {
    let mut c = redis::cmd("UID.DECODE");
    c.arg(uid);
    if let Some(l) = layout {
        c.arg("LAYOUT").arg(l);
    }
    let v: Vec<Value> = c.query(con).unwrap();
    let mut names = Vec::new();
    let mut map = HashMap::new();
    for pair in v.chunks(2) {
        let name: String = redis::from_redis_value(pair[0].clone()).unwrap();
        let value: i64 = redis::from_redis_value(pair[1].clone()).unwrap();
        names.push(name.clone());
        map.insert(name, value as u64);
    }
    (map, names)
}

/// The bidirectional check for one named layout. `time_res` is the resolution of the library's
/// times (1 ms; 1000 for Mastodon.py, which works in whole seconds).
fn agree(layout: &str, node: u64, lib: Lib, time_res: u64) {
    let s = Server::with(&[
        "--imid.uid-layout",
        layout,
        "--imid.uid-node",
        &node.to_string(),
    ]);
    let mut con = s.client();
    let conf: Vec<String> = cmd(&mut con, &["CONFIG", "GET", "imid.uid-layout"]).unwrap();
    assert_eq!(conf[1], layout);
    let order: Vec<&str> = if layout.starts_with("sonyflake") {
        vec!["time", "seq", "node"]
    } else {
        vec!["time", "node", "seq"]
    };

    // 1. Their IDs in imid: the fields they say, under the node's layout and under LAYOUT.
    let before = server_time_ms(&mut con) as u64;
    let theirs = ask(lib, &[format!("gen {layout} {node} 50")]);
    let after = server_time_ms(&mut con) as u64;
    assert_eq!(theirs.len(), 50);
    for &(id, time_ms, n, seq) in &theirs {
        let (f, names) = decode(&mut con, id, None);
        assert_eq!(
            names, order,
            "{layout}: UID.DECODE replies in the layout's order"
        );
        assert_eq!(f["time"], time_ms, "{layout}: time of their {id}");
        assert_eq!(
            Some(f["node"]),
            n.or(Some(f["node"])),
            "{layout}: node of their {id}"
        );
        assert_eq!(
            Some(f["seq"]),
            seq.or(Some(f["seq"])),
            "{layout}: seq of their {id}"
        );
        if let Some(n) = n {
            assert_eq!(n, node, "{layout}: the library put our node in");
        }
        // both epochs agree: their ID made now decodes to now
        assert!(
            before.saturating_sub(time_res + 10) <= f["time"] && f["time"] <= after + 10,
            "{layout}: their {id} made at {before}..{after} decodes to {}",
            f["time"]
        );
        assert_eq!(
            decode(&mut con, id, Some(layout)).0,
            f,
            "{layout}: LAYOUT {layout}"
        );
    }

    // 2. imid's IDs in theirs: a UID.GEN run (long enough to borrow units where the seq field
    // is small) and the layout's edges from UID.ENCODE.
    let mut ours: Vec<u64> = cmd::<Vec<i64>>(&mut con, &["UID.GEN", "t", "COUNT", "2000"])
        .unwrap()
        .into_iter()
        .map(|v| v as u64)
        .collect();
    let info = |k: &str| s.imid_stat(k) as u64;
    let end = info("uid_time_ends_ms");
    let (mut first, _) = decode(&mut con, 0, None);
    let epoch = first.remove("time").unwrap();
    let (max, _) = decode(&mut con, i64::MAX as u64, None);
    let unit = if layout.starts_with("sonyflake") {
        10
    } else {
        1
    };
    assert_eq!(
        max["time"],
        end - unit,
        "{layout}: the last unit ends the field"
    );
    for (t, n, q) in [
        (epoch, 0, 0),
        (epoch + unit, 1.min(max["node"]), 1),
        (epoch + 1_000 * unit, max["node"], max["seq"]),
        (max["time"], max["node"], max["seq"]),
        (max["time"], 0, 0),
    ] {
        let id: i64 = cmd(
            &mut con,
            &["UID.ENCODE", &t.to_string(), &n.to_string(), &q.to_string()],
        )
        .unwrap();
        ours.push(id as u64);
    }
    assert!(
        ours.contains(&(i64::MAX as u64)),
        "the sign bit's edge is checked"
    );
    let requests: Vec<String> = ours.iter().map(|id| format!("dec {layout} {id}")).collect();
    let read = ask(lib, &requests);
    assert_eq!(read.len(), ours.len());
    for (&id, &(rid, time_ms, n, seq)) in ours.iter().zip(&read) {
        assert_eq!(rid, id);
        let (f, _) = decode(&mut con, id, Some(layout));
        assert_eq!(
            time_ms,
            f["time"] / time_res * time_res,
            "{layout}: their time of our {id}"
        );
        if let Some(n) = n {
            assert_eq!(n, f["node"], "{layout}: their node of our {id}");
        }
        if let Some(q) = seq {
            assert_eq!(q, f["seq"], "{layout}: their seq of our {id}");
        }
    }
    // our first generated ID, read by them, was made now
    assert!(
        read[0].1 + time_res + 10 >= after,
        "{layout}: {} vs {after}",
        read[0].1
    );
}

#[test]
fn twitter_agrees_with_sapphire_snowflake() {
    agree("twitter", 677, Lib::Node, 1);
}

#[test]
fn discord_agrees_with_sapphire_snowflake() {
    agree("discord", 33, Lib::Node, 1);
}

#[test]
fn instagram_agrees_with_snowflake_id_toolkit() {
    agree("instagram", 5_001, Lib::Python, 1);
}

#[test]
fn sonyflake_agrees_with_sonyflake_py_v1() {
    agree("sonyflake", 4_660, Lib::PythonSonyflakeV1, 1);
}

#[test]
fn sonyflake_v2_agrees_with_sonyflake_2_0_3() {
    agree("sonyflake-v2", 65_535, Lib::Python, 1);
}

#[test]
fn mastodon_agrees_with_mastodon_py() {
    agree("mastodon", 0, Lib::Python, 1000);
}
