//! `make dist`: the release tarball holds the module, README, CHANGELOG, LICENSE, what README
//! links to (docs/, examples/, server-bench/README.md and RESULTS.md, and the client programs
//! of tests/clients/, which the README and the docs link to) and
//! SHA256SUMS under one directory named after Cargo.toml's version; every relative link of every
//! page in it leads to a file in it; the sums match; and the module unpacked from it loads into
//! a fresh server and reports that version in MODULE LIST.
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

/// The targets of a Markdown page's relative links (`[text](target)`), without their `#anchor`:
/// not web addresses, not anchors within the page.
fn relative_links(page: &str) -> Vec<String> {
    page.split("](")
        .skip(1)
        .filter_map(|rest| rest.split(')').next())
        .filter(|l| !l.contains("://") && !l.starts_with('#') && !l.starts_with("mailto:"))
        .map(|l| l.split('#').next().unwrap_or(l).to_owned())
        .collect()
}

#[test]
fn dist_tarball_unpacks_verifies_and_loads() {
    let version = env!("CARGO_PKG_VERSION");
    let name = format!("imid-{version}-linux-x86_64");
    let work = temp_dir("dist");
    let tarball = build_tarball(&work.join("dist"));
    assert_eq!(tarball, work.join("dist").join(format!("{name}.tar.gz")));

    // Exactly these files, all under one directory: the four, the sums, and the tracked files
    // of docs/, examples/ and tests/clients/ (no node_modules) and the benchmark results.
    let mut listed: Vec<String> = run(Command::new("tar").arg("-tzf").arg(&tarball))
        .lines()
        .filter(|e| !e.ends_with('/'))
        .map(str::to_owned)
        .collect();
    listed.sort();
    let tracked = run(Command::new("git")
        .args([
            "ls-files",
            "--",
            "docs",
            "examples",
            "server-bench/README.md",
            "server-bench/RESULTS.md",
            "tests/clients",
        ])
        .current_dir(root()));
    let mut want: Vec<String> = [
        "CHANGELOG.md",
        "LICENSE",
        "README.md",
        "SHA256SUMS",
        "libimid.so",
    ]
    .into_iter()
    .chain(tracked.lines())
    .map(|f| format!("{name}/{f}"))
    .collect();
    want.sort();
    assert_eq!(listed, want);
    assert!(listed.contains(&format!("{name}/docs/commands.md")));
    assert!(!listed.iter().any(|f| f.contains("node_modules")));

    let unpacked = work.join("unpacked");
    std::fs::create_dir_all(&unpacked).unwrap();
    run(Command::new("tar")
        .arg("-xzf")
        .arg(&tarball)
        .arg("-C")
        .arg(&unpacked));
    let dir = unpacked.join(&name);

    // Every relative link of every page shipped leads to a file or directory in the tarball.
    for page in listed.iter().filter(|f| f.ends_with(".md")) {
        let page = unpacked.join(page);
        for link in relative_links(&std::fs::read_to_string(&page).unwrap()) {
            let target = page.parent().unwrap().join(&link);
            let inside = target.canonicalize().map(|t| t.starts_with(&dir));
            assert!(
                matches!(inside, Ok(true)),
                "{}: the link {link} leads outside the tarball or nowhere",
                page.display()
            );
        }
    }
    let readme = std::fs::read_to_string(dir.join("README.md")).unwrap();
    assert!(relative_links(&readme).contains(&"docs/commands.md".to_owned()));

    // SHA256SUMS covers every other file, and they match it.
    let sums = std::fs::read_to_string(dir.join("SHA256SUMS")).unwrap();
    let mut covered: Vec<String> = sums
        .lines()
        .map(|l| l.split_whitespace().nth(1).expect("sha256sum line"))
        .map(|f| format!("{name}/{f}"))
        .collect();
    covered.sort();
    let others: Vec<&String> = listed
        .iter()
        .filter(|f| !f.ends_with("SHA256SUMS"))
        .collect();
    assert_eq!(covered.iter().collect::<Vec<_>>(), others);
    run(Command::new("sha256sum")
        .args(["--check", "--strict", "SHA256SUMS"])
        .current_dir(&dir));
    // ... and a changed file does not.
    let copy = work.join("tampered");
    run(Command::new("cp").arg("-r").arg(&dir).arg(&copy));
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
