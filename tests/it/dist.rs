//! `make dist`: the release tarball holds the module, README, CHANGELOG, LICENSE and SHA256SUMS
//! under one directory named after Cargo.toml's version, the sums match, and the module
//! unpacked from it loads into a fresh server and reports that version in MODULE LIST.
use crate::common;
use common::*;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Builds the tarball with the script behind `make dist`, into a directory of its own.
fn build_tarball(out: &Path) -> PathBuf {
    let stdout = run(Command::new("bash")
        .arg(root().join("scripts/dist.sh"))
        .env("IMID_DIST_DIR", out));
    PathBuf::from(
        stdout
            .lines()
            .last()
            .expect("dist.sh printed the tarball's path"),
    )
}

#[test]
fn dist_tarball_unpacks_verifies_and_loads() {
    let version = env!("CARGO_PKG_VERSION");
    let name = format!("imid-{version}-linux-x86_64");
    let work = temp_dir("dist");
    let tarball = build_tarball(&work.join("dist"));
    assert_eq!(tarball, work.join("dist").join(format!("{name}.tar.gz")));

    // Exactly these entries, all under one directory.
    let mut listed: Vec<String> = run(Command::new("tar").arg("-tzf").arg(&tarball))
        .lines()
        .map(str::to_owned)
        .collect();
    listed.sort();
    let want: Vec<String> = [
        "",
        "CHANGELOG.md",
        "LICENSE",
        "README.md",
        "SHA256SUMS",
        "libimid.so",
    ]
    .iter()
    .map(|f| format!("{name}/{f}"))
    .collect();
    assert_eq!(listed, want);

    let unpacked = work.join("unpacked");
    std::fs::create_dir_all(&unpacked).unwrap();
    run(Command::new("tar")
        .arg("-xzf")
        .arg(&tarball)
        .arg("-C")
        .arg(&unpacked));
    let dir = unpacked.join(&name);

    // SHA256SUMS covers the four other files, and they match it.
    let sums = std::fs::read_to_string(dir.join("SHA256SUMS")).unwrap();
    let mut covered: Vec<&str> = sums
        .lines()
        .map(|l| l.split_whitespace().nth(1).expect("sha256sum line"))
        .collect();
    covered.sort();
    assert_eq!(
        covered,
        ["CHANGELOG.md", "LICENSE", "README.md", "libimid.so"]
    );
    run(Command::new("sha256sum")
        .args(["--check", "--strict", "SHA256SUMS"])
        .current_dir(&dir));
    // ... and a changed file does not.
    let copy = work.join("tampered");
    std::fs::create_dir_all(&copy).unwrap();
    for f in [
        "CHANGELOG.md",
        "LICENSE",
        "README.md",
        "libimid.so",
        "SHA256SUMS",
    ] {
        std::fs::copy(dir.join(f), copy.join(f)).unwrap();
    }
    std::fs::write(copy.join("LICENSE"), "changed").unwrap();
    let st = Command::new("sha256sum")
        .args(["--check", "--status", "SHA256SUMS"])
        .current_dir(&copy)
        .status()
        .unwrap();
    assert!(!st.success(), "sha256sum accepted a changed LICENSE");

    // The documents are this checkout's.
    for f in ["README.md", "CHANGELOG.md", "LICENSE"] {
        assert_eq!(
            std::fs::read(dir.join(f)).unwrap(),
            std::fs::read(root().join(f)).unwrap(),
            "{f}"
        );
    }
    let license = std::fs::read_to_string(dir.join("LICENSE")).unwrap();
    assert!(license.starts_with("MIT License"), "{license}");

    // The module loads from where it was unpacked, into a server that never saw this checkout.
    let s = Server::build().module(&dir.join("libimid.so")).start();
    let mut con = s.client();
    let id: String = cmd(&mut con, &["MSGID.GEN", "1", "user1"]).unwrap();
    assert_eq!(id.len(), 19, "{id}");
    let list: Vec<Vec<Value>> = cmd(&mut con, &["MODULE", "LIST"]).unwrap();
    let imid: Vec<String> = list
        .iter()
        .map(|m| {
            m.iter()
                .map(|v| redis::from_redis_value::<String>(v.clone()).unwrap_or_default())
                .collect::<Vec<String>>()
        })
        .find(|f| f.get(1).map(String::as_str) == Some("imid"))
        .expect("imid in MODULE LIST");
    let field = |k: &str| {
        let at = imid.iter().position(|f| f == k).expect(k);
        imid[at + 1].clone()
    };
    let n = |s: &str| s.parse::<i64>().unwrap();
    let want_ver = n(env!("CARGO_PKG_VERSION_MAJOR")) * 10_000
        + n(env!("CARGO_PKG_VERSION_MINOR")) * 100
        + n(env!("CARGO_PKG_VERSION_PATCH"));
    assert_eq!(
        n(&field("ver")),
        want_ver,
        "MODULE LIST version of {version}"
    );
    assert_eq!(
        PathBuf::from(field("path")),
        dir.join("libimid.so"),
        "loaded from the tarball"
    );
    drop(con);
    drop(s);
    let _ = std::fs::remove_dir_all(&work);
}

#[test]
fn dist_tarball_is_reproducible() {
    // Same sources, same bytes: sorted names, no owners, the last commit's time, gzip -n.
    let work = temp_dir("dist-repro");
    let a = std::fs::read(build_tarball(&work.join("a"))).unwrap();
    let b = std::fs::read(build_tarball(&work.join("b"))).unwrap();
    assert!(a == b, "two builds of the tarball differ");
    let _ = std::fs::remove_dir_all(&work);
}
