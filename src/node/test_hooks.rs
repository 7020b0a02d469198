//! Test-only state, compiled in only with the cargo feature `test-hooks` (never in a release
//! build made by `make build` / `make run`): the steerable wall clock [`now_ms`] reads, the
//! panic armed for the next call into an entry ([`maybe_panic`], which `entry::guard` calls),
//! and a node deaf to its peers' promises over the bus ([`deaf`]).
//! The commands that set them (`IMID.TEST-*`) are in `commands::test_hooks`.
//!
//! Why not libfaketime: it cannot preload into Debian's redis-server (jemalloc calls
//! clock_gettime while libfaketime initialises, and the process aborts), so the module's own
//! clock is made steerable instead.

use crate::host::clock::system_now_ms;
use std::fmt::Display;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU8, Ordering};
use std::sync::Mutex;

/// How the clock reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ClockMode {
    /// The system clock.
    Real,
    /// The system clock plus this many ms (may be negative).
    Offset(i64),
    /// Exactly this Unix ms.
    Frozen(u64),
}

const REAL: u8 = 0;
const OFFSET: u8 = 1;
const FROZEN: u8 = 2;

static MODE: AtomicU8 = AtomicU8::new(REAL);
static VALUE: AtomicI64 = AtomicI64::new(0);

pub(crate) fn now_ms() -> u64 {
    let real = system_now_ms();
    let v = VALUE.load(Ordering::Relaxed);
    match MODE.load(Ordering::Relaxed) {
        OFFSET => real.saturating_add_signed(v),
        FROZEN => u64::try_from(v).unwrap_or(0),
        _ => real,
    }
}

/// Sets how [`now_ms`] reads.
pub(crate) fn set_clock(mode: ClockMode) {
    let (m, v) = match mode {
        ClockMode::Real => (REAL, 0),
        ClockMode::Offset(ms) => (OFFSET, ms),
        ClockMode::Frozen(ms) => (FROZEN, crate::core::to_i64(ms)),
    };
    VALUE.store(v, Ordering::Relaxed);
    MODE.store(m, Ordering::Relaxed);
}

/// Whether a panic is armed, and the entry it is for.
static ARMED: AtomicBool = AtomicBool::new(false);
static PANIC_AT: Mutex<String> = Mutex::new(String::new());

/// Arms a panic for the next call into the entry named `entry` (as the guard's log line names
/// it).
pub(crate) fn arm_panic(entry: &str) {
    let mut g = PANIC_AT.lock().unwrap_or_else(|e| e.into_inner());
    *g = entry.to_owned();
    ARMED.store(true, Ordering::Relaxed);
}

/// Called by `entry::guard` inside its `catch_unwind`, before the entry runs: panics there
/// once when a panic is armed for this entry.
#[allow(clippy::panic)] // the point of this hook
pub(crate) fn maybe_panic(entry: &dyn Display) {
    if !ARMED.load(Ordering::Relaxed) {
        return;
    }
    let name = entry.to_string();
    let mut g = PANIC_AT.lock().unwrap_or_else(|e| e.into_inner());
    if !name.eq_ignore_ascii_case(&g) {
        return;
    }
    g.clear();
    ARMED.store(false, Ordering::Relaxed);
    drop(g);
    panic!("IMID.TEST-PANIC-NEXT armed for {name}");
}

/// Whether the cluster bus receiver drops peers' promises (`node::cluster::received`): what a
/// node sees when the bus loses a promise, so that only what travels inside a slot migration
/// reaches it.
static DEAF: AtomicBool = AtomicBool::new(false);

pub(crate) fn set_deaf(on: bool) {
    DEAF.store(on, Ordering::Relaxed);
}

pub(crate) fn deaf() -> bool {
    DEAF.load(Ordering::Relaxed)
}
