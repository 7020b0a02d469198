//! A Leaf-style segment allocator: 4 threads take IDs from blocks reserved with
//! `SEQ.NEXT key COUNT 10000`, with the next block fetched in the background (double buffer),
//! so handing out an ID costs no round trip.
//!
//!     IMID_URL=redis://127.0.0.1:6379/ cargo run --release --example segment_allocator
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic
)]
mod allocator;

use allocator::SegmentAllocator;
use std::process::ExitCode;
use std::sync::Arc;

const THREADS: usize = 4;
const PER_THREAD: usize = 50_000;
const STEP: u64 = 10_000;

fn main() -> ExitCode {
    let url = std::env::var("IMID_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379/".to_owned());
    match run(&url) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("segment_allocator against {url}: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run(url: &str) -> Result<(), Box<dyn std::error::Error>> {
    let client = redis::Client::open(url)?;
    let key = format!("{{ids:segment-demo-{}}}:seq", std::process::id());
    let mut alloc = SegmentAllocator::new(&client, &key, STEP)?;
    let shared = Arc::new(alloc);
    let handles: Vec<_> = (0..THREADS)
        .map(|_| {
            let a = Arc::clone(&shared);
            std::thread::spawn(move || -> Result<(u64, u64), String> {
                let first = a.next_id()?;
                let mut last = first;
                for _ in 1..PER_THREAD {
                    let v = a.next_id()?;
                    if v <= last {
                        return Err(format!("not increasing: {v} after {last}"));
                    }
                    last = v;
                }
                Ok((first, last))
            })
        })
        .collect();
    for (i, h) in handles.into_iter().enumerate() {
        let (first, last) = h.join().map_err(|_| "worker panicked")??;
        println!("thread {i}: {PER_THREAD} ids from {first} to {last}");
    }
    alloc = Arc::try_unwrap(shared).map_err(|_| "allocator still shared")?;
    let stats = alloc.stats();
    alloc.shutdown();
    let mut con = client.get_connection()?;
    let server: u64 = redis::cmd("SEQ.GET").arg(&key).query(&mut con)?;
    println!(
        "{} ids with {} round trips (SEQ.NEXT COUNT {STEP}); callers waited for a block {} times",
        stats.handed_out, stats.round_trips, stats.waits
    );
    // Here 4 threads do nothing but take IDs, so they can drain a block faster than one round
    // trip; callers that do real work between IDs find the next block already in memory.
    println!("SEQ.GET {key} = {server} (values left in memory at shutdown are a hole)");
    let _: i64 = redis::cmd("DEL").arg(&key).query(&mut con)?;
    Ok(())
}
