//! The incremental pull of an IM client against a Redis with imid loaded: alice's data of
//! several kinds (friendship, group, conversation, profile) changes; each change takes the
//! kind's next seq in one sequence map (`app:seq:{alice}`, SEQ.HNEXT inside `imid_change`);
//! her phone keeps its own copy of those seqs and pulls only the kinds whose seq moved
//! (`imid_pull`: one SEQ.HMGET for every kind, then the changes of the changed kinds).
//!
//!     IMID_URL=redis://127.0.0.1:6379/ cargo run --release --example user_sync
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic
)]
mod seqs;

use seqs::{Local, User};
use std::process::ExitCode;

const KINDS: [&str; 4] = ["friendship", "group", "conversation", "profile"];
const LOG_CAP: u64 = 100;

fn main() -> ExitCode {
    let url = std::env::var("IMID_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379/".to_owned());
    match run(&url) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("user_sync against {url}: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run(url: &str) -> Result<(), Box<dyn std::error::Error>> {
    let mut con = redis::Client::open(url)?.get_connection()?;
    seqs::load_library(&mut con)?;
    // A user of its own per run, so repeated runs against one server do not mix.
    let alice = User::new(&format!("alice-{}", std::process::id()));
    let mut phone = Local::new(&KINDS);

    for (kind, change) in [
        ("friendship", "+bob"),
        ("friendship", "+carol"),
        ("group", "join g1"),
    ] {
        let seq = alice.change(&mut con, kind, change, LOG_CAP)?;
        println!("change {kind} {change:?}: seq {seq}");
    }
    pull(&mut con, &alice, &mut phone, &["friendship", "group"])?;

    let seq = alice.change(&mut con, "conversation", "pin c42", LOG_CAP)?;
    println!("change conversation \"pin c42\": seq {seq}");
    pull(&mut con, &alice, &mut phone, &["conversation"])?;

    // Nothing changed: the pull is one SEQ.HMGET and an empty reply.
    pull(&mut con, &alice, &mut phone, &[])?;

    let server = alice.server_seqs(&mut con)?;
    println!("SEQ.HGETALL {}: {server:?}", alice.seqs());
    let held: std::collections::BTreeMap<String, i64> = phone
        .seqs
        .iter()
        .filter(|(_, s)| **s > 0)
        .map(|(k, s)| (k.clone(), *s))
        .collect();
    if server != held {
        return Err(format!("the phone holds {held:?}, the server {server:?}").into());
    }
    println!("phone up to date: {:?}", phone.changes);
    Ok(())
}

/// One pull; fails unless exactly the kinds `want` came back.
fn pull(
    con: &mut redis::Connection,
    user: &User,
    phone: &mut Local,
    want: &[&str],
) -> Result<(), Box<dyn std::error::Error>> {
    let deltas = phone.sync(con, user)?;
    let kinds: Vec<&str> = deltas.iter().map(|d| d.kind.as_str()).collect();
    println!("pull: {} kind(s) changed {kinds:?}", kinds.len());
    for d in &deltas {
        println!("  {} -> seq {}: {:?}", d.kind, d.seq, d.changes);
    }
    let mut want = want.to_vec();
    want.sort_unstable();
    if kinds != want {
        return Err(format!("pulled {kinds:?}, expected {want:?}").into());
    }
    Ok(())
}
