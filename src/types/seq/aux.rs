//! The sequence type's aux data: the node's two ID high-water marks and its IDMP clock, saved
//! before the keyspace of every RDB file (`node::ids`, `node::idmp_clock` own them), so a node
//! restarted from an RDB file (or a replica after a full sync) starts above every ID the old
//! process may have issued, and IDMP replays continue by the same clock. The layout per version
//! is in `super::ENCODING_VERSION`'s comment.

use super::{known_version, ENCODING_V1, ENCODING_V2, ENCODING_V3};
use crate::host::io::{Rdb, AUX_BEFORE_RDB};
use crate::node;
use std::os::raw::c_int;

pub(crate) fn aux_save(rdb: &Rdb, when: c_int) {
    if when == AUX_BEFORE_RDB {
        rdb.save_u64(node::ids::high_water());
        rdb.save_u64(node::ids::uid_high_water());
        let (now, ttl, max) = node::idmp_clock::saved().unwrap_or((0, 0, 0));
        rdb.save_u64(now);
        rdb.save_u64(ttl);
        rdb.save_u64(max);
        rdb.save_u64(node::durable::stream_gap());
    }
}

/// Redis 7.2+ and Valkey: the aux data only when there is something to keep (a mark, an IDMP
/// clock, a gap record). Saving nothing leaves the aux record out of the RDB altogether, so a snapshot of a
/// server that never issued an ID nor used IDMP (and holds no sequence key) loads without imid.
pub(crate) fn aux_save2(rdb: &Rdb, when: c_int) {
    if node::ids::has_mark()
        || node::idmp_clock::saved().is_some()
        || node::durable::stream_gap() > 0
    {
        aux_save(rdb, when);
    }
}

pub(crate) fn aux_load(rdb: &Rdb, encver: c_int, when: c_int) -> Result<(), String> {
    if !known_version(encver) {
        Err(format!("aux encoding version {encver} unknown"))
    } else if when != AUX_BEFORE_RDB {
        Err(format!("aux data at position {when} unknown"))
    } else {
        load_marks(rdb, encver)?;
        if encver > ENCODING_V2 {
            load_idmp_clock(rdb)?;
        }
        if encver > ENCODING_V3 {
            load_gap(rdb)?;
        }
        Ok(())
    }
}

/// Version 1: one mark for both families; version 2 and later: message IDs', then UIDs'.
fn load_marks(rdb: &Rdb, encver: c_int) -> Result<(), String> {
    let msgid = rdb
        .load_u64()
        .ok_or_else(|| "truncated message-id high-water mark".to_owned())?;
    let uid = if encver == ENCODING_V1 {
        None
    } else {
        Some(
            rdb.load_u64()
                .ok_or_else(|| "truncated uid high-water mark".to_owned())?,
        )
    };
    node::ids::load_marks(msgid, uid)
}

/// Version 3: the IDMP clock (all 0: none), checked as SEQ.IDMPCLOCK checks it (its ranges,
/// and a token it records must expire by 2^63-1 ms).
fn load_idmp_clock(rdb: &Rdb) -> Result<(), String> {
    let next = || {
        rdb.load_u64()
            .ok_or_else(|| "truncated IDMP clock".to_owned())
    };
    let (now, ttl, max) = (next()?, next()?, next()?);
    if (now, ttl, max) == (0, 0, 0) {
        return Ok(());
    }
    let (ttl, max) = node::idmp_clock::check(now, ttl, max)
        .map_err(|e| format!("IDMP clock {now} {ttl} {max}: {e}; refusing the RDB file"))?;
    node::idmp_clock::replayed(now, ttl, max, false);
    Ok(())
}

/// Version 4: the gap in force in the data (0: none), checked as SEQ.GAP checks it.
fn load_gap(rdb: &Rdb) -> Result<(), String> {
    let gap = rdb.load_u64().ok_or_else(|| "truncated gap".to_owned())?;
    if gap > 1_000_000_000 {
        return Err(format!(
            "gap {gap} above 1000000000 (SEQ.GAP's range); refusing the RDB file"
        ));
    }
    node::durable::replayed(gap);
    Ok(())
}
