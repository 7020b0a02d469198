//! A Leaf-style segment allocator on top of `SEQ.NEXT key COUNT n`: IDs are handed out from a
//! block held in memory (no round trip per ID), and a background thread fetches the next block
//! while the current one is still being used (double buffer), so callers only wait when they
//! drain a whole block faster than one round trip.
//!
//! Values are unique and increasing in the order they are handed out (so per thread too), and
//! never reissued by the server. They are not dense: a block left unused at shutdown or crash
//! is a hole, as are the server's own never-reissue gaps.
//!
//! Reusable: `tests/it/examples.rs` includes this file with `#[path = ...] mod allocator;`.
#![allow(dead_code)]

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;

/// A block `[next, end]` (inclusive) reserved from the server.
#[derive(Clone, Copy, Debug)]
struct Segment {
    next: u64,
    end: u64,
}

impl Segment {
    fn remaining(&self) -> u64 {
        (self.end + 1).saturating_sub(self.next)
    }
}

#[derive(Default)]
struct State {
    current: Option<Segment>,
    /// The prefetched block, waiting for `current` to run out.
    spare: Option<Segment>,
    /// The refill thread has been asked for a block and has not delivered it yet.
    loading: bool,
    /// The last refill failed; callers that must wait get this error.
    error: Option<String>,
    shutdown: bool,
}

struct Shared {
    key: String,
    step: u64,
    /// Ask for the next block once the current one has fewer values left than this.
    low_water: u64,
    state: Mutex<State>,
    /// Wakes the refill thread (a block is wanted, or shutdown).
    want: Condvar,
    /// Wakes callers waiting for a block.
    ready: Condvar,
    round_trips: AtomicU64,
    handed_out: AtomicU64,
    waits: AtomicU64,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic while holding the lock leaves plain integers behind, still consistent.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// Counters for observing the allocator (and for the tests).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Stats {
    /// `SEQ.NEXT ... COUNT` calls made (the first one synchronously in `new`, the rest by the
    /// refill thread).
    pub round_trips: u64,
    /// Values handed out.
    pub handed_out: u64,
    /// Times a caller found no value in memory and had to wait for the refill thread.
    pub waits: u64,
}

pub struct SegmentAllocator {
    shared: Arc<Shared>,
    refill: Option<JoinHandle<()>>,
}

impl SegmentAllocator {
    /// Reserves the first block of `step` values of sequence `key` now, and starts the refill
    /// thread on a connection of its own. The next block is requested once fewer than `step / 2`
    /// values remain (Leaf asks after 10% of a block is used; half is plenty for one round trip
    /// and wastes less at shutdown).
    pub fn new(client: &redis::Client, key: &str, step: u64) -> redis::RedisResult<Self> {
        let step = step.clamp(1, 1_000_000);
        let mut con = client.get_connection()?;
        let shared = Arc::new(Shared {
            key: key.to_owned(),
            step,
            low_water: step.div_ceil(2),
            state: Mutex::new(State::default()),
            want: Condvar::new(),
            ready: Condvar::new(),
            round_trips: AtomicU64::new(0),
            handed_out: AtomicU64::new(0),
            waits: AtomicU64::new(0),
        });
        let first = fetch(&shared, &mut con)?;
        shared.lock().current = Some(first);
        let bg = Arc::clone(&shared);
        let refill = std::thread::Builder::new()
            .name(format!("segment-refill {key}"))
            .spawn(move || refill_loop(&bg, &mut con))
            .map_err(|e| {
                redis::RedisError::from((
                    redis::ErrorKind::Io,
                    "cannot start the refill thread",
                    e.to_string(),
                ))
            })?;
        Ok(SegmentAllocator {
            shared,
            refill: Some(refill),
        })
    }

    /// The next value: from memory, or, when both blocks are drained, after waiting for the
    /// refill thread. Fails only when the refill failed (the server is unreachable) or after
    /// `shutdown`.
    pub fn next_id(&self) -> Result<u64, String> {
        let sh = &*self.shared;
        let mut st = sh.lock();
        let mut waited = false;
        loop {
            if st.shutdown {
                return Err("segment allocator is shut down".into());
            }
            if let Some(seg) = st.current.as_mut().filter(|s| s.remaining() > 0) {
                let v = seg.next;
                seg.next += 1;
                let low = seg.remaining() < sh.low_water;
                if low && st.spare.is_none() && !st.loading {
                    st.loading = true;
                    sh.want.notify_one();
                }
                sh.handed_out.fetch_add(1, Ordering::Relaxed);
                return Ok(v);
            }
            // The current block is drained: switch to the spare one if it has arrived.
            if let Some(spare) = st.spare.take() {
                st.current = Some(spare);
                continue;
            }
            if let Some(e) = st.error.take() {
                return Err(e);
            }
            if !st.loading {
                st.loading = true;
                sh.want.notify_one();
            }
            if !waited {
                waited = true;
                sh.waits.fetch_add(1, Ordering::Relaxed);
            }
            st = sh.ready.wait(st).unwrap_or_else(|p| p.into_inner());
        }
    }

    /// Whether the next block has been fetched and is waiting in memory.
    pub fn spare_ready(&self) -> bool {
        self.shared.lock().spare.is_some()
    }

    pub fn stats(&self) -> Stats {
        let sh = &*self.shared;
        Stats {
            round_trips: sh.round_trips.load(Ordering::Relaxed),
            handed_out: sh.handed_out.load(Ordering::Relaxed),
            waits: sh.waits.load(Ordering::Relaxed),
        }
    }

    /// Stops the refill thread. Values still in memory are dropped (a hole in the sequence).
    pub fn shutdown(&mut self) {
        {
            let mut st = self.shared.lock();
            st.shutdown = true;
        }
        self.shared.want.notify_all();
        self.shared.ready.notify_all();
        if let Some(h) = self.refill.take() {
            let _ = h.join();
        }
    }
}

impl Drop for SegmentAllocator {
    fn drop(&mut self) {
        self.shutdown();
    }
}

/// One round trip: reserves `step` values and returns them as a block.
fn fetch(sh: &Shared, con: &mut redis::Connection) -> redis::RedisResult<Segment> {
    let last: u64 = redis::cmd("SEQ.NEXT")
        .arg(&sh.key)
        .arg("COUNT")
        .arg(sh.step)
        .query(con)?;
    sh.round_trips.fetch_add(1, Ordering::Relaxed);
    Ok(Segment {
        next: (last + 1).saturating_sub(sh.step),
        end: last,
    })
}

fn refill_loop(sh: &Shared, con: &mut redis::Connection) {
    loop {
        {
            let mut st = sh.lock();
            while !st.loading && !st.shutdown {
                st = sh.want.wait(st).unwrap_or_else(|p| p.into_inner());
            }
            if st.shutdown {
                return;
            }
        }
        // The round trip happens outside the lock: callers keep taking values meanwhile.
        let got = fetch(sh, con);
        let mut st = sh.lock();
        st.loading = false;
        match got {
            Ok(seg) => st.spare = Some(seg),
            Err(e) => st.error = Some(format!("SEQ.NEXT {} COUNT {}: {e}", sh.key, sh.step)),
        }
        drop(st);
        sh.ready.notify_all();
    }
}
