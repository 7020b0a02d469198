//! The IM flow end to end against a Redis with imid loaded: alice sends to bob in a private
//! conversation through the native IM.SEND, a retried send is dropped as a duplicate, bob syncs
//! in pages and reads (the sync and read scripts: SCRIPT LOAD once, then EVALSHA); then the same
//! flow runs through send.lua (EVALSHA) and the `imid_im` Functions library (FCALL): the script
//! stores exactly what IM.SEND stores, and is the place to change that storage model (another
//! member format, another trimming rule, more keys).
//!
//!     IMID_URL=redis://127.0.0.1:6379/ cargo run --release --example im_flow
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic
)]
mod im;

use im::{Conv, Im, Via};
use std::process::ExitCode;

fn main() -> ExitCode {
    let url = std::env::var("IMID_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379/".to_owned());
    match run(&url) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("im_flow against {url}: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run(url: &str) -> Result<(), Box<dyn std::error::Error>> {
    let mut con = redis::Client::open(url)?.get_connection()?;
    // A conversation id of its own per run, so repeated runs against one server do not mix.
    let run_id = std::process::id();
    for via in [
        Via::load_native(&mut con)?,
        Via::load_scripts(&mut con)?,
        Via::load_functions(&mut con)?,
    ] {
        let im = Im { via, inbox_cap: 5 };
        let conv = Conv::new(&format!("alice:bob:{run_id}:{}", im.via.name()), 1);
        println!("== via {} in {}", im.via.name(), conv.tag());
        flow(&im, &mut con, &conv)?;
    }
    Ok(())
}

fn flow(
    im: &Im,
    con: &mut redis::Connection,
    conv: &Conv,
) -> Result<(), Box<dyn std::error::Error>> {
    // alice sends 7 messages to bob and to herself (her other devices); inboxes keep 5.
    let mut newest = None;
    for i in 1..=7 {
        let sent = im.send(
            con,
            conv,
            "alice",
            &["bob", "alice"],
            &format!("c{i}"),
            &format!("hello {i}"),
        )?;
        println!(
            "send c{i}: seq {} msgid {} uid {}",
            sent.seq,
            shown(&sent.msgid),
            shown(&sent.uid)
        );
        newest = Some(sent);
    }
    // A client that timed out retries c7: same seq, msgid and uid (SEQ.NEXT ... IDMP knows
    // the token, the IDs are read back from the inbox), nothing stored again.
    let retry = im.send(con, conv, "alice", &["bob", "alice"], "c7", "hello 7")?;
    println!(
        "retry c7: seq {} msgid {} uid {} duplicate {}",
        retry.seq,
        shown(&retry.msgid),
        shown(&retry.uid),
        retry.duplicate
    );
    let first = newest.ok_or("no message sent")?;
    if !retry.duplicate
        || retry.seq != first.seq
        || retry.msgid != first.msgid
        || retry.uid != first.uid
    {
        return Err(format!("retry was not deduplicated: {retry:?} vs {first:?}").into());
    }
    // c1 is still known as sent, but the cap (5) dropped it from the inboxes: the retry gets
    // its seq only.
    let old = im.send(con, conv, "alice", &["bob", "alice"], "c1", "hello 1")?;
    println!(
        "retry c1: seq {} msgid {} uid {} duplicate {} (the inbox cap dropped it)",
        old.seq,
        shown(&old.msgid),
        shown(&old.uid),
        old.duplicate
    );
    if !old.duplicate || old.seq != 1 || old.msgid.is_some() {
        return Err(format!("retry of a dropped message: {old:?}").into());
    }

    // bob had nothing; he pulls in pages of 2.
    let mut last = 0;
    loop {
        let page = im.sync(con, conv, "bob", last, 2)?;
        for m in &page.messages {
            println!(
                "  bob got seq {} {} (uid {}) from {}: {}",
                m.seq, m.msgid, m.uid, m.sender, m.body
            );
        }
        if page.trimmed_through > last {
            println!(
                "  (the inbox cap dropped messages through seq {}: fetch those from history)",
                page.trimmed_through
            );
        }
        last = page.cursor;
        println!(
            "sync: cursor {} max_seq {} complete {}",
            page.cursor, page.max_seq, page.complete
        );
        if page.complete {
            break;
        }
    }

    // bob reads up to seq 5, then a late ack for seq 3 arrives: the cursor stays. An ack past
    // the conversation's seq is clamped to it.
    let r = im.read(con, conv, "bob", 5)?;
    println!("read 5: cursor {} unread {}", r.cursor, r.unread);
    let r = im.read(con, conv, "bob", 3)?;
    println!("late read 3: cursor {} unread {}", r.cursor, r.unread);
    let r = im.read(con, conv, "bob", last + 100)?;
    println!(
        "read {}: cursor {} unread {}",
        last + 100,
        r.cursor,
        r.unread
    );
    if r.cursor != last {
        return Err(format!(
            "an ack past the max seq {last} set the cursor to {}",
            r.cursor
        )
        .into());
    }
    if r.unread != 0 {
        return Err(format!("bob read everything but has {} unread", r.unread).into());
    }

    // The public id of the last message, as an open API would hand it out.
    let page = im.sync(con, conv, "alice", last - 1, 1)?;
    if let Some(m) = page.messages.first() {
        let open: String = redis::cmd("OPENID.ENC")
            .arg(&m.msgid)
            .arg(1)
            .arg(1)
            .query(con)?;
        println!("OPENID.ENC {} 1 1 -> {open}", m.msgid);
    }
    Ok(())
}

/// An ID of a reply, or `?` where the script could not read it back.
fn shown<T: std::fmt::Display>(v: &Option<T>) -> String {
    v.as_ref().map_or_else(|| "?".to_owned(), T::to_string)
}
