//! Which RDB files need imid to load (issue 18, item 6), on every server of the matrix: a
//! server that loaded imid and never issued an ID writes no imid aux record where the server
//! lets a module skip it (`aux_save2`: Redis 7.2+, Valkey), so its snapshots load without the
//! module; Redis 7.0 always writes it (and refuses the file without imid, as docs/operations.md says).
//! Once an ID was issued the record carries the time mark on every server, so the file needs
//! imid and restores the mark; a sequence key needs imid like any module value.
use crate::common;
use common::*;
use std::path::{Path, PathBuf};

/// Whether the server calls `aux_save2` (Redis 7.2+, Valkey), so a record with nothing to keep
/// is left out.
fn skips_empty_aux(s: &Server) -> bool {
    if s.info_field("server", "valkey_version").is_some() {
        return true;
    }
    let v = s.info_field("server", "redis_version").unwrap();
    !v.starts_with("7.0.") && !v.starts_with("6.")
}

fn bin_of(bin: &Option<PathBuf>) -> PathBuf {
    bin.clone()
        .unwrap_or_else(|| PathBuf::from(redis_server_bin()))
}

fn save(s: &Server) {
    let ok: String = cmd(&mut s.client(), &["SAVE"]).unwrap();
    assert_eq!(ok, "OK");
}

/// Starts `s` again on its files, without imid; asserts the data is there.
fn restarts_without_imid(s: &mut Server, key: &str, value: &str) {
    s.shutdown(false);
    s.module = None;
    s.restart();
    let mut con = s.client();
    assert!(!modules(&mut con).iter().any(|m| m == "imid"));
    let v: String = cmd(&mut con, &["GET", key]).unwrap();
    assert_eq!(v, value);
}

/// `bin` without imid refuses the files of the stopped `s`, logging `expect`; the log.
fn refused_without_imid(s: &Server, bin: &Path, expect: &str) -> String {
    let launch = Server::build().bin(bin).without_module().dir(s.dir.clone());
    launch.refused(expect).log
}

fn with_imid(s: &mut Server) {
    s.shutdown(false);
    s.module = Some(module_path());
    s.restart();
}

fn rdb_files(bin: Option<PathBuf>) {
    let mut b = Server::build();
    if let Some(bin) = &bin {
        b = b.bin(bin.clone());
    }
    let mut s = b.start();
    let skips = skips_empty_aux(&s);
    let exe = bin_of(&bin);

    // 1. Loaded, never used: a plain key only.
    let _: () = cmd(&mut s.client(), &["SET", "plain", "v1"]).unwrap();
    assert_eq!(s.imid_stat("msgid_high_water_ms"), 0);
    save(&s);
    if skips {
        restarts_without_imid(&mut s, "plain", "v1");
        with_imid(&mut s);
        assert_eq!(s.imid_stat("msgid_high_water_ms"), 0);
    } else {
        s.shutdown(false);
        refused_without_imid(&s, &exe, "AUX module data I can't load");
        with_imid(&mut s);
    }

    // 2. A sequence key is module data: the file needs imid on every server, and loads
    //    without it once the key is gone (where the empty aux record is skipped).
    let ok: String = cmd(&mut s.client(), &["SEQ.SET", "seq", "5"]).unwrap();
    assert_eq!(ok, "OK");
    save(&s);
    s.shutdown(false);
    let log = refused_without_imid(&s, &exe, "module data I can't load");
    assert!(log.contains("imidseq01"), "{log}");
    with_imid(&mut s);
    assert_eq!(int_reply(&mut s.client(), &["SEQ.GET", "seq"]), 5);
    assert_eq!(int_reply(&mut s.client(), &["DEL", "seq"]), 1);
    save(&s);
    if skips {
        restarts_without_imid(&mut s, "plain", "v1");
        with_imid(&mut s);
    }

    // 3. A UID alone makes a mark to keep too: the file needs imid, and brings the UID mark
    //    back. 4. Once a message ID was issued the mark is kept: the file needs imid on every
    //    server, and loading it with imid restores the mark.
    let issue: [(&[&str], &str); 2] = [
        (&["UID.GEN", "t"], "uid_high_water_ms"),
        (&["MSGID.GEN", "1", "conv"], "msgid_high_water_ms"),
    ];
    for (call, field) in issue {
        let _: Value = cmd(&mut s.client(), call).unwrap();
        let mark = s.imid_stat(field);
        assert!(mark > 0, "{field}");
        save(&s);
        s.shutdown(false);
        refused_without_imid(&s, &exe, "AUX module data I can't load");
        with_imid(&mut s);
        assert!(
            s.imid_stat(field) >= mark,
            "{field} {mark} was not restored"
        );
    }
    let v: String = cmd(&mut s.client(), &["GET", "plain"]).unwrap();
    assert_eq!(v, "v1");
}

#[test]
fn rdb_files_need_imid_only_for_what_it_keeps() {
    rdb_files(None);
}

on_newer_servers!(rdb_files_need_imid_only_for_what_it_keeps_on, |bin| {
    rdb_files(Some(bin))
});
