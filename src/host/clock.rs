//! The system wall clock, as the generators read it (through `node::now_ms`, which a test-hooks
//! build can steer). Public for the benches (`imid::system_now_ms`), which time the same read.

use std::time::{SystemTime, UNIX_EPOCH};

/// The system wall clock in Unix milliseconds (before 1970 reads as 0; the generators then run
/// on `max(now, last, floor)`). The node's clock (`node::now_ms`) reads it, or the tests'
/// steerable clock in a test-hooks build.
///
/// `gettimeofday` straight (the clock Redis itself reads, through the vDSO):
/// `SystemTime::now().duration_since(UNIX_EPOCH)` with `as_millis` cost about 70 instructions
/// more per ID (checked subtraction of two timespecs, a u128 division), a sixth of UID.GEN's
/// own work.
pub fn system_now_ms() -> u64 {
    let mut tv = libc::timeval {
        tv_sec: 0,
        tv_usec: 0,
    };
    // SAFETY: tv is a valid, writable timeval; a null timezone is allowed.
    if unsafe { libc::gettimeofday(&mut tv, std::ptr::null_mut()) } != 0 {
        return fallback_now_ms();
    }
    // Before 1970 reads as 0. tv_usec is below 10^6; tv_sec * 1000 wraps only past the year
    // 584 million.
    match u64::try_from(tv.tv_sec) {
        Ok(s) => s
            .wrapping_mul(1000)
            .wrapping_add(tv.tv_usec.unsigned_abs() / 1000),
        Err(_) => 0,
    }
}

/// The same reading through std, should gettimeofday ever fail.
#[cold]
fn fallback_now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}
