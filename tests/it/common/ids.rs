//! imid's identifiers as the tests know them, independently of the module: Redis Cluster's
//! key slot, the fields of a message ID and of a UID, the time leases; and many IDs issued at
//! once.

use super::*;

/// Redis Cluster's key slot (CRC16-XMODEM with hash-tag rules), computed independently of the
/// module.
pub fn slot(key: &str) -> u16 {
    const CRC16: crc::Crc<u16> = crc::Crc::<u16>::new(&crc::CRC_16_XMODEM);
    let k = key.as_bytes();
    let tagged = k
        .iter()
        .position(|&b| b == b'{')
        .and_then(|o| {
            let rest = &k[o + 1..];
            rest.iter()
                .position(|&b| b == b'}')
                .filter(|&c| c > 0)
                .map(|c| &rest[..c])
        })
        .unwrap_or(k);
    CRC16.checksum(tagged) & 0x3FFF
}

/// The 80 bits of a message ID (`XXXX-XXXX-XXXX-XXXX`, base32hex; data-encoding decodes it):
/// time (42 bits), sequence (12), channel type (4), hash (22), from the top.
pub fn msgid_bits(id: &str) -> u128 {
    let b = data_encoding::BASE32HEX_NOPAD
        .decode(id.replace('-', "").as_bytes())
        .unwrap_or_else(|e| panic!("{id}: {e}"));
    b.iter().fold(0u128, |acc, x| (acc << 8) | u128::from(*x))
}

/// The 22-bit hash field of a message ID (in slot mode: the slot in its top 14 bits).
pub fn hash_of(id: &str) -> u32 {
    (msgid_bits(id) & 0x3F_FFFF) as u32
}

/// Unix ms of a message ID's time field (its top 42 bits).
pub fn msgid_time(id: &str) -> u64 {
    (msgid_bits(id) >> 38) as u64
}

/// Unix ms of a UID's time field under the cluster default (`41,14,8`, ms, epoch 2026-01-01).
pub fn uid_time(uid: i64) -> u64 {
    1_767_225_600_000 + (uid as u64 >> 22)
}

/// The lease window (src/core/lease.rs): how far a restarted or promoted node's IDs may lead
/// its clock.
pub const LEASE_MS: i64 = 5_000;
/// How far a primary's promise to its peers reaches past its last ID (src/node/cluster.rs).
pub const PROMISE_MS: i64 = 1_000;

/// `n` replies of one ID-issuing command (`["MSGID.GEN", "1", "t"]`, `["UID.GEN", "t"]`),
/// called `n` times, pipelined 1,000 at a time.
fn gen_many<T: redis::FromRedisValue>(con: &mut Connection, n: usize, args: &[&str]) -> Vec<T> {
    let mut out = Vec::with_capacity(n);
    while out.len() < n {
        let mut p = redis::pipe();
        for _ in 0..(n - out.len()).min(1000) {
            p.cmd(args[0]).arg(&args[1..]);
        }
        out.extend(p.query::<Vec<T>>(con).unwrap());
    }
    out
}

/// `n` message IDs for `target`, one MSGID.GEN (channel type 1) each.
pub fn msgids(con: &mut Connection, n: usize, target: &str) -> Vec<String> {
    gen_many(con, n, &["MSGID.GEN", "1", target])
}

/// `n` UIDs for `target`, one UID.GEN each.
pub fn uids(con: &mut Connection, n: usize, target: &str) -> Vec<i64> {
    gen_many(con, n, &["UID.GEN", target])
}

/// One pipelined batch of the IM load: `n` conversations drawn from `0..keys` by a cheap LCG
/// (`x`, advanced), each with SEQ.NEXT on `{conv:<i>}:seq`, then MSGID.GEN and UID.GEN for it.
/// Returns the pipeline and the keys in order (three replies per key).
pub fn load_batch(x: &mut u64, keys: usize, n: usize) -> (redis::Pipeline, Vec<String>) {
    let mut p = redis::pipe();
    let mut batch = Vec::with_capacity(n);
    for _ in 0..n {
        *x = x
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let key = format!("{{conv:{}}}:seq", (*x >> 33) as usize % keys);
        p.cmd("SEQ.NEXT").arg(&key);
        p.cmd("MSGID.GEN").arg(1).arg(&key);
        p.cmd("UID.GEN").arg(&key);
        batch.push(key);
    }
    (p, batch)
}
