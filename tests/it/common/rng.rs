//! A seeded, reproducible stream for the scenario and model tests (xorshift64*): a failing seed
//! replays the same calls.

/// xorshift64* from a non-zero seed.
pub struct Rng(pub u64);

impl Rng {
    /// The next value in `0..n` (`n` > 0).
    pub fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) % n
    }
}
