//! The docs cover what a real server with the module shows, and nothing it does not: every
//! command `COMMAND LIST FILTERBY MODULE imid` lists has a section in docs/commands.md and a
//! row in README.md's table; every config (`CONFIG GET imid.*`, and the hidden ones the
//! module-argument refusal names) a row in docs/configuration.md's table; every `INFO imid`
//! field a row in docs/observability.md's table. The README stays a five-minute read, and the
//! links between the pages lead to files that exist.
use crate::common;
use common::*;
use std::collections::BTreeSet;

fn doc(path: &str) -> String {
    std::fs::read_to_string(root().join(path)).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// The first backticked word of each table row of `text` that starts with "| `" + `prefix`.
fn table_names(text: &str, prefix: &str) -> BTreeSet<String> {
    text.lines()
        .filter_map(|l| l.strip_prefix("| `"))
        .filter(|l| l.starts_with(prefix))
        .filter_map(|l| l.split('`').next())
        .map(|s| s.split(' ').next().unwrap_or(s).to_owned())
        .collect()
}

fn assert_same(what: &str, server: &BTreeSet<String>, documented: &BTreeSet<String>) {
    let missing: Vec<_> = server.difference(documented).collect();
    let extra: Vec<_> = documented.difference(server).collect();
    assert!(
        missing.is_empty() && extra.is_empty(),
        "{what}: undocumented {missing:?}; documented but not on the server {extra:?}"
    );
}

#[test]
fn every_command_is_documented() {
    let s = Server::start();
    let names: Vec<String> = cmd(
        &mut s.client(),
        &["COMMAND", "LIST", "FILTERBY", "MODULE", "imid"],
    )
    .unwrap();
    let server: BTreeSet<String> = names.iter().map(|n| n.to_uppercase()).collect();
    assert!(server.len() >= 16, "{server:?}");
    // docs/commands.md: a `### NAME args` section per command.
    let sections: BTreeSet<String> = doc("docs/commands.md")
        .lines()
        .filter_map(|l| l.strip_prefix("### "))
        .filter_map(|l| l.split(' ').next())
        .filter(|w| w.contains('.') && w.chars().all(|c| c.is_ascii_uppercase() || c == '.'))
        .map(str::to_owned)
        .collect();
    assert_same("docs/commands.md sections", &server, &sections);
    // README.md: one table row per command.
    let rows: BTreeSet<String> = table_names(&doc("README.md"), "")
        .into_iter()
        .filter(|w| w.contains('.') && w.chars().all(|c| c.is_ascii_uppercase() || c == '.'))
        .collect();
    assert_same("README.md command table", &server, &rows);
}

#[test]
fn every_config_is_documented() {
    let s = Server::start();
    let got: Vec<String> = cmd(&mut s.client(), &["CONFIG", "GET", "imid.*"]).unwrap();
    let mut server: BTreeSet<String> = got.chunks(2).map(|p| p[0].clone()).collect();
    // Hidden configs (imid.openid-keys) are left out of CONFIG GET patterns: the refusal of an
    // unknown module argument names every config the module has.
    let log = Server::build()
        .args(&["no-such-config", "1"])
        .refused("Can't load module")
        .log;
    let known = log
        .split("(known: ")
        .nth(1)
        .and_then(|r| r.split(')').next())
        .unwrap_or_else(|| panic!("no list of configs in the log:\n{log}"));
    server.extend(known.split(", ").map(|n| format!("imid.{n}")));
    assert!(server.len() >= 7, "{server:?}");
    let documented = table_names(&doc("docs/configuration.md"), "imid.");
    assert_same("docs/configuration.md table", &server, &documented);
}

#[test]
fn every_info_field_is_documented() {
    let s = Server::start();
    let info: String = cmd(&mut s.client(), &["INFO", "imid"]).unwrap();
    let server: BTreeSet<String> = info
        .lines()
        .filter_map(|l| l.split_once(':'))
        .map(|(k, _)| k.to_owned())
        .collect();
    assert!(server.len() >= 20, "{server:?}");
    let documented = table_names(&doc("docs/observability.md"), "imid_");
    assert_same("docs/observability.md table", &server, &documented);
}

#[test]
fn readme_is_short_and_links_lead_somewhere() {
    let readme = doc("README.md");
    let lines = readme.lines().count();
    assert!(
        lines < 250,
        "README.md has {lines} lines: move detail into docs/"
    );
    let mut pages = vec!["README.md".to_owned(), "CHANGELOG.md".to_owned()];
    for e in std::fs::read_dir(root().join("docs")).unwrap() {
        let p = e.unwrap().path();
        pages.push(format!("docs/{}", p.file_name().unwrap().to_string_lossy()));
    }
    for page in &pages {
        let text = doc(page);
        let base = root().join(page).parent().unwrap().to_owned();
        for link in text.split("](").skip(1).filter_map(|r| r.split(')').next()) {
            let file = link.split('#').next().unwrap();
            if file.is_empty() || file.starts_with("http") {
                continue;
            }
            assert!(
                base.join(file).exists(),
                "{page}: the link {link} leads nowhere"
            );
        }
    }
}

/// The pages a reader is shown: README.md, docs/*.md, examples/README.md.
fn reader_pages() -> Vec<String> {
    let mut pages = vec!["README.md".to_owned(), "examples/README.md".to_owned()];
    for e in std::fs::read_dir(root().join("docs")).unwrap() {
        let p = e.unwrap().path();
        pages.push(format!("docs/{}", p.file_name().unwrap().to_string_lossy()));
    }
    pages
}

/// Every `XXXX-XXXX-XXXX-XXXX` of base32hex in `text`.
fn message_ids(text: &str) -> Vec<String> {
    let b = text.as_bytes();
    let id_char = |c: u8| c.is_ascii_digit() || (b'A'..=b'V').contains(&c);
    let mut out = Vec::new();
    for i in 0..b.len().saturating_sub(18) {
        let w = &b[i..i + 19];
        let shaped = w
            .iter()
            .enumerate()
            .all(|(j, &c)| if j % 5 == 4 { c == b'-' } else { id_char(c) });
        let bounded = (i == 0 || !b[i - 1].is_ascii_alphanumeric())
            && b.get(i + 19).is_none_or(|c| !c.is_ascii_alphanumeric());
        if shaped && bounded {
            out.push(String::from_utf8_lossy(w).into_owned());
        }
    }
    out
}

/// Issue 46: README's `MSGID.GEN 1 '{conv:42}'` output and commands.md's IM.SEND example carried
/// other targets' hashes. Every message ID the docs show decodes, and carries the hash of a
/// target its section (a `##` part of its page) names: a hash tag (`{conv:42}`), MSGID.GEN's target, a word after
/// "target", a number the section gives (MSGID.ENCODE's hash), or (in slot mode) the hash of a
/// slot it names.
#[test]
fn every_message_id_in_the_docs_carries_its_targets_hash() {
    let s = Server::start();
    let mut con = s.client();
    let mut checked = 0;
    for page in reader_pages() {
        let text = doc(&page);
        let mut sections = vec![String::new()];
        // A section: a page's family (`## `), with its commands' subsections.
        for line in text.lines() {
            if line.starts_with("# ") || line.starts_with("## ") {
                sections.push(String::new());
            }
            let last = sections.last_mut().unwrap();
            last.push_str(line);
            last.push('\n');
        }
        for sec in sections {
            let ids = message_ids(&sec);
            if ids.is_empty() {
                continue;
            }
            let words: Vec<&str> = sec
                .split(|c: char| c.is_whitespace() || "`'\"(),;".contains(c))
                .filter(|w| !w.is_empty())
                .collect();
            let mut hashes = BTreeSet::new();
            let mut slots = BTreeSet::new();
            for (i, w) in words.iter().enumerate() {
                let target = if let (Some(a), Some(b)) = (w.find('{'), w.find('}')) {
                    (a < b).then(|| &w[a..=b])
                } else if (i > 0 && (words[i - 1] == "target" || words[i - 1] == "MSGID.HASH"))
                    || (i > 1 && words[i - 2] == "MSGID.GEN")
                {
                    Some(*w)
                } else {
                    None
                };
                if let Some(t) = target {
                    hashes.insert(int_reply(&mut con, &["MSGID.HASH", t]));
                }
                if let Ok(n) = w.trim_end_matches(['.', ':']).parse::<i64>() {
                    hashes.insert(n);
                    if i > 0 && words[i - 1] == "slot" {
                        slots.insert(n);
                    }
                }
            }
            for id in ids {
                let d: Vec<Value> = cmd(&mut con, &["MSGID.DECODE", &id])
                    .unwrap_or_else(|e| panic!("{page}: {id} does not decode: {e}"));
                let Value::Int(hash) = d[7] else {
                    panic!("{d:?}")
                };
                assert!(
                    hashes.contains(&hash) || slots.contains(&(hash >> 8)),
                    "{page}: {id} carries hash {hash}, which no target of its section has \
                     (hashes {hashes:?}, slots {slots:?})"
                );
                checked += 1;
            }
        }
    }
    assert!(checked >= 15, "{checked} IDs");
}

/// Issue 46, item 8 and item 7: what cost a new user trust. No stale reference (a bench/ folder,
/// "three scripts" of five, a 0.1.0 tarball), README's quick start shows IM.SEND, IM.SYNC and the
/// port option and leads to the guide, and no key in the docs has two hash tags (only the first
/// counts: `{user:9}:read:{conv:42}` is not in the conversation's slot).
#[test]
fn no_stale_reference_and_no_key_with_two_hash_tags() {
    let readme = doc("README.md");
    let quick = readme.split("## Commands").next().unwrap();
    for want in ["IM.SEND", "IM.SYNC", "PORT=", "docs/guide.md"] {
        assert!(quick.contains(want), "README's quick start lacks {want}");
    }
    for page in reader_pages() {
        let text = doc(&page);
        for stale in [
            "](bench/",
            "](../bench/",
            "`bench/RESULTS.md`",
            "three scripts",
            "imid-0.1.0-",
            "main README",
        ] {
            assert!(!text.contains(stale), "{page}: {stale}");
        }
        for w in text.split(|c: char| c.is_whitespace() || "`'\"(),".contains(c)) {
            assert!(
                w.matches('{').count() < 2 || !w.contains("}:"),
                "{page}: the key {w} has two hash tags"
            );
        }
    }
}
