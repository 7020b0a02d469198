//! Redis-free logic: everything here is plain Rust, unit-tested without a server.

pub mod durable;
pub mod fence;
pub mod generator;
pub mod hash;
pub mod idmp;
pub mod javahash;
pub mod lease;
pub mod msgid;
pub mod openid;
pub mod read;
pub mod reserve;
pub mod send;
pub mod seq;
pub mod seqmap;
pub mod slot;
pub mod uid;

/// A number known to be below 2^63 (a sequence value, a UID, a time, a count), as the `i64` that
/// Redis's integer replies and formats take; saturating, should it ever not be.
pub fn to_i64(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

/// The decimal digits of `v`, written at the end of `buf` (20 digits hold any u64).
pub fn decimal(mut v: u64, buf: &mut [u8; 20]) -> &[u8] {
    let mut start = buf.len();
    for slot in buf.iter_mut().rev() {
        // v % 10 < 10, so the digit fits a byte.
        *slot = b'0' + (v % 10) as u8;
        v /= 10;
        start -= 1;
        if v == 0 {
            break;
        }
    }
    buf.get(start..).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    #[test]
    fn decimal_matches_to_string() {
        let mut buf = [0u8; 20];
        for v in [
            0,
            1,
            9,
            10,
            4095,
            117_831_765_636_153_344,
            i64::MAX as u64,
            u64::MAX,
        ] {
            assert_eq!(super::decimal(v, &mut buf), v.to_string().as_bytes());
        }
    }
}
