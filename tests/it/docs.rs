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
