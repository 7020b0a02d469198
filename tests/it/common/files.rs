//! Files: a directory of its own for each server, the reference vectors under tests/vectors/,
//! what a server wrote in its AOF directory, and docs/guide.md's program ([`guide_program`],
//! run by examples.rs and, against a cluster, by cluster.rs).

use super::*;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};

/// A fresh directory under the system temp dir (a server removes its own when it drops).
pub fn temp_dir(tag: &str) -> PathBuf {
    static SEQ: AtomicU32 = AtomicU32::new(0);
    let n = SEQ.fetch_add(1, Ordering::SeqCst);
    let d = std::env::temp_dir().join(format!("imid-test-{tag}-{}-{n}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).expect("create temp dir");
    d
}

/// The reference vectors: `tests/vectors/<name>`, or `$IMID_VECTORS/<name>`. Returns the rows
/// as maps from header to (unescaped) value.
pub fn vectors(name: &str) -> Vec<std::collections::HashMap<String, String>> {
    let dir = std::env::var_os("IMID_VECTORS")
        .map(PathBuf::from)
        .unwrap_or_else(|| root().join("tests/vectors"));
    let path = dir.join(name);
    let text =
        std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
    let mut lines = text.lines();
    let header: Vec<&str> = lines.next().expect("header").split('\t').collect();
    lines
        .filter(|l| !l.is_empty())
        .map(|l| {
            header
                .iter()
                .zip(l.split('\t').chain(std::iter::repeat("")))
                .map(|(h, v)| (h.to_string(), v.to_string()))
                .collect()
        })
        .collect()
}

/// The rows of the reference vectors `name` ([`vectors`]) that `keep` keeps, which must be at
/// least `min`: a test that runs over them cannot pass on a truncated or misread file.
pub fn vector_rows(
    name: &str,
    min: usize,
    keep: impl Fn(&std::collections::HashMap<String, String>) -> bool,
) -> Vec<std::collections::HashMap<String, String>> {
    let rows: Vec<_> = vectors(name).into_iter().filter(|r| keep(r)).collect();
    assert!(rows.len() >= min, "{name}: only {} rows", rows.len());
    rows
}

/// Undoes the vectors' escaping: `\\`, `\t`, `\n`, `\r`, `\xHH`.
pub fn unescape(s: &str) -> Vec<u8> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        // (the byte, how many input bytes it took)
        let (byte, took) = match (b[i], b.get(i + 1)) {
            (b'\\', Some(b'\\')) => (b'\\', 2),
            (b'\\', Some(b't')) => (b'\t', 2),
            (b'\\', Some(b'n')) => (b'\n', 2),
            (b'\\', Some(b'r')) => (b'\r', 2),
            (b'\\', Some(b'x')) => b
                .get(i + 2..i + 4)
                .and_then(|h| std::str::from_utf8(h).ok())
                .and_then(|h| u8::from_str_radix(h, 16).ok())
                .map_or((b[i], 1), |v| (v, 4)),
            (c, _) => (c, 1),
        };
        out.push(byte);
        i += took;
    }
    out
}

/// The base file of Redis 7's multi-part AOF: its name and bytes: the one the manifest names
/// (`file <name> seq <n> type b`), not whichever `.base.` file the directory lists first (an
/// old one is there until the rewrite's end removes it).
pub fn aof_base(s: &Server) -> (String, Vec<u8>) {
    let dir = s.dir.join("appendonlydir");
    let manifest = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.to_string_lossy().ends_with(".manifest"))
        .expect("an AOF manifest");
    let text = std::fs::read_to_string(&manifest).unwrap();
    let name = text
        .lines()
        .find_map(|l| {
            let f: Vec<&str> = l.split(' ').collect();
            (f.len() >= 6 && f[0] == "file" && f[4] == "type" && f[5] == "b").then(|| f[1])
        })
        .unwrap_or_else(|| panic!("no base file in {}:\n{text}", manifest.display()))
        .to_owned();
    let bytes = std::fs::read(dir.join(&name)).unwrap();
    (name, bytes)
}

/// The incremental files of Redis 7's multi-part AOF, concatenated in name order.
pub fn aof_incr(s: &Server) -> Vec<u8> {
    let mut files: Vec<_> = std::fs::read_dir(s.dir.join("appendonlydir"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.to_string_lossy().contains(".incr."))
        .collect();
    files.sort();
    files
        .iter()
        .flat_map(|p| std::fs::read(p).unwrap())
        .collect()
}

/// Whether `needle` occurs in `hay`.
pub fn contains(hay: &[u8], needle: &[u8]) -> bool {
    hay.windows(needle.len()).any(|w| w == needle)
}

/// docs/guide.md's Python blocks, in order, as one program (issue 46: the guide's code is what
/// runs), written to `dir`.
pub fn guide_program(dir: &Path) -> PathBuf {
    let text = std::fs::read_to_string(root().join("docs/guide.md")).unwrap();
    let mut program = String::new();
    let mut inside = false;
    for line in text.lines() {
        match (inside, line.trim_end()) {
            (false, "```python") => inside = true,
            (true, "```") => inside = false,
            (true, l) => {
                program.push_str(l);
                program.push('\n');
            }
            _ => {}
        }
    }
    assert!(
        program.contains("IM.SEND") && program.len() > 2000,
        "{program}"
    );
    let path = dir.join("guide.py");
    std::fs::write(&path, program).unwrap();
    path
}
