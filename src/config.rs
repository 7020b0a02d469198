//! Module configs (`imid.<name>`), settable at load and with `CONFIG SET`.

use redis_module::enum_configuration;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::Mutex;

enum_configuration! {
    /// `imid.msgid-hash`: how MSGID.GEN/HASH hash the target. The variant names are the
    /// config words, hence lowercase.
    #[allow(non_camel_case_types)]
    #[derive(Debug, PartialEq, Eq)]
    pub enum HashMode {
        java = 0,
        slot = 1,
        auto = 2,
    }
}

pub static MSGID_HASH: Mutex<HashMode> = Mutex::new(HashMode::auto);

/// `imid.seq-gap`: values skipped by the first SEQ.NEXT on a key this process did not write.
pub static SEQ_GAP: AtomicI64 = AtomicI64::new(1000);

/// Whether the server runs in cluster mode; fixed at startup, read once in init.
pub static CLUSTER_MODE: AtomicBool = AtomicBool::new(false);

/// The effective target-hash mode: `auto` resolved against cluster mode.
pub fn effective_hash_mode() -> HashMode {
    let mode = MSGID_HASH
        .lock()
        .map(|m| m.clone())
        .unwrap_or_else(|e| e.into_inner().clone());
    match mode {
        HashMode::auto if CLUSTER_MODE.load(Ordering::Relaxed) => HashMode::slot,
        HashMode::auto => HashMode::java,
        m => m,
    }
}

pub fn seq_gap() -> u64 {
    u64::try_from(SEQ_GAP.load(Ordering::Relaxed)).unwrap_or(0)
}
