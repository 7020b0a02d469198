//! Background work of maps no write reaches: a map's index resize and its arena's compaction
//! advance a bounded step with every write (`core::seqmap`), so a map whose last write left
//! such work pending would hold it (two tables, dead entries) until written again. As Redis's
//! dicts finish their rehashing in `serverCron`, the maps with work left are queued here by
//! name when a write leaves them so, and each cron tick steps them for about
//! [`CRON_BUDGET`] in all.
//!
//! Only the layout changes, never what a map holds: nothing is replicated, written to the AOF,
//! signalled or notified, the key is opened without touching its LRU/LFU, and `DEBUG DIGEST`
//! is unchanged. A queued name that no longer holds one of our maps (deleted, renamed, another
//! type) just drops out; a map renamed or moved while queued finishes with its next writes. As
//! Redis's rehashing, the cron steps only with `activerehashing yes` (the default) and while no
//! forked child (an RDB save, an AOF rewrite) runs; nor while writes are paused (opening a key
//! for writing may expire it, which would propagate a DEL).

use super::TYPE;
use crate::host::key::TypedKey;
use crate::host::string::HeldString;
use crate::host::{Arg, Ctx};
use std::collections::VecDeque;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// At most this many maps wait in the queue; a write that finds it full leaves its map
/// unqueued, and a later write of that map tries again.
const MAX_QUEUED: usize = 4096;

/// The cron's time for the queued maps per tick (Redis gives its dicts 1 ms per database).
const CRON_BUDGET: Duration = Duration::from_millis(1);

/// Index slots and compaction units per step between two reads of the clock.
const STEP: usize = 256;

/// A queued map: its database and key name.
type Queued = (i32, HeldString);

static QUEUE: Mutex<VecDeque<Queued>> = Mutex::new(VecDeque::new());

/// Maps in the queue.
pub(crate) fn queued() -> usize {
    QUEUE.lock().map_or(0, |q| q.len())
}

/// After a write to the map of `key` (still open): queues it when the write left background
/// work and it is not queued yet.
#[inline]
pub(crate) fn after_write(ctx: &Ctx, key: &Arg, m: &mut crate::core::seqmap::SeqMap) {
    if m.queued || !m.pending() {
        return;
    }
    let Ok(mut q) = QUEUE.lock() else {
        return;
    };
    if q.len() >= MAX_QUEUED {
        return;
    }
    if let Some(name) = HeldString::new(key.bytes()) {
        q.push_back((ctx.selected_db(), name));
        m.queued = true;
    }
}

/// The cron's step: the queued maps in turn, oldest first, for about [`CRON_BUDGET`].
pub(crate) fn on_cron(ctx: &Ctx) {
    if queued() == 0
        || ctx.is_loading()
        || ctx.has_active_child()
        || ctx.writes_paused()
        || ctx.config_yes(c"activerehashing") == Some(false)
    {
        return;
    }
    let start = Instant::now();
    let db = ctx.selected_db();
    while start.elapsed() < CRON_BUDGET {
        let Some((map_db, name)) = QUEUE.lock().ok().and_then(|mut q| q.pop_front()) else {
            break;
        };
        if !ctx.select_db(map_db) {
            continue;
        }
        if step_map(ctx, name.as_arg(), start) {
            // Work left: first in line at the next tick.
            if let Ok(mut q) = QUEUE.lock() {
                q.push_front((map_db, name));
            }
            break;
        }
    }
    ctx.select_db(db);
}

/// Steps the map under `name` until its work is done or the tick's time is up; whether work is
/// left. A missing key, or one of another type, has none.
fn step_map(ctx: &Ctx, name: &Arg, start: Instant) -> bool {
    let Ok(mut key) = TypedKey::open_untouched(ctx, &TYPE, name) else {
        return false;
    };
    let Some(m) = key.value_mut() else {
        return false;
    };
    loop {
        if !m.step(STEP) {
            m.queued = false;
            return false;
        }
        if start.elapsed() >= CRON_BUDGET {
            return true;
        }
    }
}
