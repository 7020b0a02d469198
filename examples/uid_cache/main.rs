//! A CachedUidGenerator-style client cache: 8 threads take 64-bit UIDs from a ring buffer that
//! a background thread refills with `UID.GEN target COUNT 10000`, so handing out a UID costs no
//! round trip; then the same UIDs are decoded on the server.
//!
//!     IMID_URL=redis://127.0.0.1:6379/ cargo run --release --example uid_cache
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic
)]
mod cache;

use cache::UidCache;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Instant;

const THREADS: usize = 8;
const PER_THREAD: usize = 100_000;
const BATCH: usize = 10_000;
const CAPACITY: usize = 4 * BATCH;

fn main() -> ExitCode {
    let url = std::env::var("IMID_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379/".to_owned());
    match run(&url) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("uid_cache against {url}: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run(url: &str) -> Result<(), Box<dyn std::error::Error>> {
    let client = redis::Client::open(url)?;
    let cache = Arc::new(UidCache::new(&client, "{ids:uid-cache}", BATCH, CAPACITY)?);
    let start = Instant::now();
    let handles: Vec<_> = (0..THREADS)
        .map(|_| {
            let c = Arc::clone(&cache);
            std::thread::spawn(move || -> Result<(i64, i64), String> {
                let first = c.next_uid()?;
                let mut last = first;
                for _ in 1..PER_THREAD {
                    let u = c.next_uid()?;
                    if u <= last {
                        return Err(format!("not increasing: {u} after {last}"));
                    }
                    last = u;
                }
                Ok((first, last))
            })
        })
        .collect();
    let mut ends = Vec::new();
    for (i, h) in handles.into_iter().enumerate() {
        let (first, last) = h.join().map_err(|_| "worker panicked")??;
        println!("thread {i}: {PER_THREAD} uids from {first} to {last}");
        ends.push(last);
    }
    let elapsed = start.elapsed();
    let mut cache = Arc::try_unwrap(cache).map_err(|_| "cache still shared")?;
    cache.shutdown();
    let stats = cache.stats();
    println!(
        "{} uids in {:.0} ms with {} round trips (UID.GEN COUNT {BATCH}); callers waited {} times",
        stats.handed_out,
        elapsed.as_secs_f64() * 1000.0,
        stats.round_trips,
        stats.waits
    );
    // Here 8 threads do nothing but take UIDs, so they can drain the ring faster than the
    // refill thread's round trips; callers doing real work between IDs find it full.
    let mut con = client.get_connection()?;
    let last = ends.into_iter().max().ok_or("no uids")?;
    let fields: Vec<redis::Value> = redis::cmd("UID.DECODE").arg(last).query(&mut con)?;
    let time: i64 = redis::from_redis_value(fields[1].clone())?;
    println!("UID.DECODE {last}: time {time} ms, node and seq follow the server's layout");
    Ok(())
}
