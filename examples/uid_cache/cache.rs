//! A client-side UID cache in the spirit of Baidu UidGenerator's CachedUidGenerator: a ring
//! buffer of UIDs, filled from `UID.GEN target COUNT n` by a background thread, hands IDs to
//! many threads with no round trip per ID.
//!
//! - The ring holds up to `capacity` UIDs. The refill thread tops it up one batch at a time
//!   whenever a whole batch fits (CachedUidGenerator's "padding" at a fill factor), so callers
//!   find UIDs in memory unless they drain the whole ring faster than one round trip.
//! - UIDs come out in the order the server issued them, and the server issues every batch above
//!   every earlier one: hand-out order is strictly increasing (so per thread too), and the server
//!   never reissues (restarts, clock jumps and failovers included).
//! - The time in a UID is when the server issued it, not when it is handed out: with a large
//!   ring it lags a little, which CachedUidGenerator accepts too. UIDs left in the ring at
//!   shutdown are never used (a hole, harmless for a primary key).
//!
//! The ring is a `VecDeque` behind a `Mutex`: taking a UID is a lock, a pop and an unlock (tens of
//! nanoseconds), with no allocation after the first fill. Enough for millions of IDs a second;
//! a lock-free ring as in CachedUidGenerator would only matter beyond that.
//!
//! Reusable: `tests/it/examples.rs` includes this file with `#[path = ...] mod cache;`.
#![allow(dead_code)]

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;

/// The most `UID.GEN ... COUNT n` hands out in one call.
pub const MAX_BATCH: usize = 10_000;

struct State {
    ring: VecDeque<i64>,
    /// The last refill failed; callers that find the ring empty get this error.
    error: Option<String>,
    shutdown: bool,
}

struct Shared {
    target: String,
    batch: usize,
    capacity: usize,
    state: Mutex<State>,
    /// Wakes the refill thread (room for a batch, or shutdown).
    room: Condvar,
    /// Wakes callers waiting on an empty ring.
    filled: Condvar,
    round_trips: AtomicU64,
    handed_out: AtomicU64,
    waits: AtomicU64,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic while holding the lock leaves a ring of plain integers, still consistent.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// Counters for observing the cache (and for the tests).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Stats {
    /// `UID.GEN ... COUNT` calls made.
    pub round_trips: u64,
    /// UIDs handed out.
    pub handed_out: u64,
    /// Times a caller found the ring empty and had to wait for the refill thread.
    pub waits: u64,
}

pub struct UidCache {
    shared: Arc<Shared>,
    refill: Option<JoinHandle<()>>,
}

impl UidCache {
    /// Fills the ring with its first batch now, then starts the refill thread on a connection
    /// of its own. `target` routes `UID.GEN` (in cluster mode its hash slot is the UIDs' node
    /// field); `batch` is clamped to 1..10000 and `capacity` to at least one batch.
    pub fn new(
        client: &redis::Client,
        target: &str,
        batch: usize,
        capacity: usize,
    ) -> redis::RedisResult<Self> {
        let batch = batch.clamp(1, MAX_BATCH);
        let capacity = capacity.max(batch);
        let mut con = client.get_connection()?;
        let shared = Arc::new(Shared {
            target: target.to_owned(),
            batch,
            capacity,
            state: Mutex::new(State {
                ring: VecDeque::with_capacity(capacity),
                error: None,
                shutdown: false,
            }),
            room: Condvar::new(),
            filled: Condvar::new(),
            round_trips: AtomicU64::new(0),
            handed_out: AtomicU64::new(0),
            waits: AtomicU64::new(0),
        });
        let first = fetch(&shared, &mut con)?;
        shared.lock().ring.extend(first);
        let bg = Arc::clone(&shared);
        let refill = std::thread::Builder::new()
            .name(format!("uid-refill {target}"))
            .spawn(move || refill_loop(&bg, &mut con))
            .map_err(|e| {
                redis::RedisError::from((
                    redis::ErrorKind::Io,
                    "cannot start the refill thread",
                    e.to_string(),
                ))
            })?;
        Ok(UidCache {
            shared,
            refill: Some(refill),
        })
    }

    /// The next UID: from the ring, or, when it is empty, after waiting for the refill thread.
    /// Fails only when the refill failed (the server is unreachable) or after `shutdown`.
    pub fn next_uid(&self) -> Result<i64, String> {
        let sh = &*self.shared;
        let mut st = sh.lock();
        let mut waited = false;
        loop {
            if st.shutdown {
                return Err("uid cache is shut down".into());
            }
            if let Some(uid) = st.ring.pop_front() {
                if st.ring.len() + sh.batch <= sh.capacity {
                    sh.room.notify_one();
                }
                sh.handed_out.fetch_add(1, Ordering::Relaxed);
                return Ok(uid);
            }
            if let Some(e) = st.error.take() {
                return Err(e);
            }
            if !waited {
                waited = true;
                sh.waits.fetch_add(1, Ordering::Relaxed);
            }
            sh.room.notify_one();
            st = sh.filled.wait(st).unwrap_or_else(|p| p.into_inner());
        }
    }

    /// UIDs waiting in the ring.
    pub fn buffered(&self) -> usize {
        self.shared.lock().ring.len()
    }

    pub fn stats(&self) -> Stats {
        let sh = &*self.shared;
        Stats {
            round_trips: sh.round_trips.load(Ordering::Relaxed),
            handed_out: sh.handed_out.load(Ordering::Relaxed),
            waits: sh.waits.load(Ordering::Relaxed),
        }
    }

    /// Stops the refill thread. UIDs still in the ring are dropped (never used).
    pub fn shutdown(&mut self) {
        self.shared.lock().shutdown = true;
        self.shared.room.notify_all();
        self.shared.filled.notify_all();
        if let Some(h) = self.refill.take() {
            let _ = h.join();
        }
    }
}

impl Drop for UidCache {
    fn drop(&mut self) {
        self.shutdown();
    }
}

/// One round trip: a batch of UIDs, strictly increasing.
fn fetch(sh: &Shared, con: &mut redis::Connection) -> redis::RedisResult<Vec<i64>> {
    let uids: Vec<i64> = redis::cmd("UID.GEN")
        .arg(&sh.target)
        .arg("COUNT")
        .arg(sh.batch)
        .query(con)?;
    sh.round_trips.fetch_add(1, Ordering::Relaxed);
    Ok(uids)
}

fn refill_loop(sh: &Shared, con: &mut redis::Connection) {
    loop {
        {
            let mut st = sh.lock();
            while st.ring.len() + sh.batch > sh.capacity && !st.shutdown {
                st = sh.room.wait(st).unwrap_or_else(|p| p.into_inner());
            }
            if st.shutdown {
                return;
            }
        }
        // The round trip happens outside the lock: callers keep taking UIDs meanwhile. Only this
        // thread adds to the ring, so the room seen above is still there afterwards.
        let got = fetch(sh, con);
        let mut st = sh.lock();
        match got {
            Ok(uids) => {
                st.ring.extend(uids);
                st.error = None;
            }
            Err(e) => {
                st.error = Some(format!("UID.GEN {} COUNT {}: {e}", sh.target, sh.batch));
                // Do not spin on a dead server: wait until a caller asks again.
                drop(st);
                sh.filled.notify_all();
                let st = sh.lock();
                let _unused = sh.room.wait(st).unwrap_or_else(|p| p.into_inner());
                continue;
            }
        }
        drop(st);
        sh.filled.notify_all();
    }
}
