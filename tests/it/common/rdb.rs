//! Crafting RDB data and DUMP payloads by hand: lengths, module value fields and checksums,
//! for the persistence tests of every data type.

/// An RDB length: 6-bit, 14-bit, 32-bit or 64-bit form.
pub fn rdb_len(v: u64) -> Vec<u8> {
    if v < 64 {
        vec![v as u8]
    } else if v < 16384 {
        vec![0x40 | (v >> 8) as u8, v as u8]
    } else if v <= u64::from(u32::MAX) {
        let mut b = vec![0x80];
        b.extend_from_slice(&(v as u32).to_be_bytes());
        b
    } else {
        let mut b = vec![0x81];
        b.extend_from_slice(&v.to_be_bytes());
        b
    }
}

pub const OP_SINT: u64 = 1;
pub const OP_UINT: u64 = 2;
pub const OP_STRING: u64 = 5;
pub const OP_EOF: u64 = 0;

/// A module value's saved field: opcode then value, as RedisModule_Save* writes it.
pub fn field(op: u64, v: u64) -> Vec<u8> {
    let mut b = rdb_len(op);
    b.extend(rdb_len(v));
    b
}

/// A module value's saved string buffer (RedisModule_SaveStringBuffer).
pub fn string_field(s: &[u8]) -> Vec<u8> {
    let mut b = rdb_len(OP_STRING);
    b.extend(rdb_len(s.len() as u64));
    b.extend_from_slice(s);
    b
}

/// A DUMP payload of a module value with a correct checksum around `body` (everything after
/// the module id).
pub fn payload(id: u64, body: &[u8], version: [u8; 2]) -> Vec<u8> {
    let mut p = vec![7];
    p.extend(rdb_len(id));
    p.extend_from_slice(body);
    p.extend_from_slice(&version);
    let crc = crc::Crc::<u64>::new(&crc::CRC_64_REDIS).checksum(&p);
    p.extend_from_slice(&crc.to_le_bytes());
    p
}

/// `rdb` (a file or a DUMP payload) with its CRC-64 trailer recomputed.
pub fn with_crc(mut rdb: Vec<u8>) -> Vec<u8> {
    let n = rdb.len();
    rdb.truncate(n - 8);
    let sum = crc::Crc::<u64>::new(&crc::CRC_64_REDIS).checksum(&rdb);
    rdb.extend_from_slice(&sum.to_le_bytes());
    rdb
}
