//! What the OPENID unit tests share: keys, vectors, ID builders and the statistics the
//! tamper and structure tests apply to both formats.

use super::framing::from_text;
use super::{KeyRing, MsgId, OpenId, OPENID_LEN};

pub(super) const ALPHABET: &[u8] =
    b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
pub(super) const KEY_A: &str = "000102030405060708090a0b0c0d0e0f";
pub(super) const KEY_B: &str = "f0e1d2c3b4a5968778695a4b3c2d1e0f";

pub(super) fn unhex(s: &str) -> Vec<u8> {
    (0..s.len() / 2)
        .map(|i| u8::from_str_radix(&s[2 * i..2 * i + 2], 16).unwrap())
        .collect()
}

pub(super) fn rows(tsv: &str) -> Vec<Vec<&str>> {
    tsv.lines()
        .skip(1)
        .filter(|l| !l.is_empty())
        .map(|l| l.split('\t').collect())
        .collect()
}

pub(super) fn ring(list: &str) -> KeyRing {
    match KeyRing::parse(list) {
        Ok(p) => p.ring,
        Err(e) => panic!("{e}"),
    }
}

pub(super) fn id_from(n: u128, msg_type: u8, direction: u8) -> OpenId {
    let b = (n & ((1 << 80) - 1)).to_be_bytes();
    let mut m = [0u8; 10];
    m.copy_from_slice(&b[6..]);
    OpenId {
        msgid: MsgId::from_bytes(m),
        msg_type,
        direction,
    }
}

/// Counts single-character substitutions of valid IDs that still decode. Each of the 18
/// first characters carries 6 data bits; the last one 4 data bits (its other 12
/// substitutions only change spare bits and are refused as non-canonical).
pub(super) fn tamper_acceptance(
    encode: impl Fn(&OpenId) -> [u8; 19],
    decode: impl Fn(&[u8]) -> bool,
) -> (u64, u64) {
    let mut tried = 0u64;
    let mut accepted = 0u64;
    let mut x: u128 = 0x9E37_79B9_7F4A_7C15_F39C;
    for i in 0..2000u32 {
        // A cheap deterministic spread of msgids, types and directions.
        x = x
            .wrapping_mul(0x2545_F491_4F6C_DD1D)
            .wrapping_add(0x1405_7B7E_F767_814F);
        let id = id_from(x >> 20, (i % 256) as u8, (i / 7 % 256) as u8);
        let good = encode(&id);
        assert!(decode(&good));
        for pos in 0..OPENID_LEN {
            for &c in ALPHABET {
                if c == good[pos] {
                    continue;
                }
                let mut t = good;
                t[pos] = c;
                tried += 1;
                if decode(&t) {
                    accepted += 1;
                }
            }
        }
    }
    (accepted, tried)
}

pub(super) fn assert_tamper_rate(name: &str, (accepted, tried): (u64, u64)) {
    let rate = accepted as f64 / tried as f64;
    let bound = 4.0 / 65536.0;
    println!(
        "{name}: {accepted} of {tried} single-character changes accepted, rate {rate:.3e} (2^-16 = {:.3e})",
        1.0 / 65536.0
    );
    // 4x the expected rate plus 3 absolute, so a lucky run cannot fail but a check that
    // misses whole positions (1/19 of all changes) certainly does.
    assert!(
        (accepted as f64) < bound * tried as f64 + 3.0,
        "{name}: {accepted} of {tried} accepted"
    );
}

pub(super) fn common_prefix(a: &[u8], b: &[u8]) -> usize {
    a.iter().zip(b).take_while(|(x, y)| x == y).count()
}

/// 10,000 consecutive msgids (time steps of 1 ms, same conversation, type and
/// direction), as a generator issues them.
pub(super) fn consecutive(encode: impl Fn(&OpenId) -> [u8; 19]) -> Vec<[u8; 19]> {
    let base = MsgId::parse(b"CE5H-STK6-0006-D3E6").unwrap().as_u128();
    (0..10_000u128)
        .map(|i| encode(&id_from(base + (i << 34), 1, 1)))
        .collect()
}

/// (longest, mean) common prefix of consecutive IDs. For independent uniform 64-symbol
/// strings P(lcp >= 5) = 2^-30 per pair, so over 10^4 pairs a longest prefix of 5 or more
/// is a failure; the mean is 1/63 = 0.016.
pub(super) fn prefix_stats(ids: &[[u8; 19]]) -> (usize, f64) {
    let l: Vec<usize> = ids
        .windows(2)
        .map(|w| common_prefix(&w[0], &w[1]))
        .collect();
    let max = l.iter().copied().max().unwrap_or(0);
    (max, l.iter().sum::<usize>() as f64 / l.len() as f64)
}

/// Mean number of byte positions i in 2..12 where the XOR difference of two consecutive
/// IDs repeats two bytes later (d[i] == d[i+2]). The plain format's check cancels in
/// exactly this statistic wherever the payloads agree, so it is large there; for
/// unrelated IDs each position matches with probability 1/256, mean 10/256 = 0.039.
pub(super) fn xor_period_stat(ids: &[[u8; 19]]) -> f64 {
    let total: usize = ids
        .windows(2)
        .map(|w| {
            let x = from_text(&w[0]).unwrap();
            let y = from_text(&w[1]).unwrap();
            let d: Vec<u8> = x.iter().zip(&y).map(|(a, b)| a ^ b).collect();
            (2..12).filter(|&i| d[i] == d[i + 2]).count()
        })
        .sum();
    total as f64 / (ids.len() - 1) as f64
}
