//! Counters for `INFO imid`. Commands run on Redis's main thread; atomics keep the statics
//! `Sync` at no real cost.

use redis_module::InfoContext;
use redis_module::RedisResult;
use std::sync::atomic::{AtomicU64, Ordering};

pub struct Counter(AtomicU64);

impl Counter {
    pub const fn new() -> Counter {
        Counter(AtomicU64::new(0))
    }
    pub fn add(&self, n: u64) {
        self.0.fetch_add(n, Ordering::Relaxed);
    }
    pub fn get(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}

impl Default for Counter {
    fn default() -> Self {
        Counter::new()
    }
}

/// Fills the `imid` section of INFO (fields appear as `imid_<name>`).
#[redis_module_macros::info_command_handler]
#[allow(deprecated)]
fn imid_info(ctx: &InfoContext, _for_crash_report: bool) -> RedisResult<()> {
    let g = crate::commands::msgid::generator_stats();
    let hwm = crate::commands::msgid::high_water();
    // A section without a name is named after the module, so `INFO imid` shows it. The
    // builder API always names the section (`imid_<name>`), hence the older calls.
    ctx.add_info_section(None);
    let fields: [(&str, u64); 5] = [
        ("msgid_generated", g.generated),
        ("msgid_borrowed_ms", g.borrowed_ms),
        ("msgid_clock_regressions", g.clock_regressions),
        ("msgid_lease_renewals", g.lease_renewals),
        ("msgid_high_water_ms", hwm),
    ];
    for (name, v) in fields {
        ctx.add_info_field_long_long(name, i64::try_from(v).unwrap_or(i64::MAX));
    }
    let families = crate::commands::seq::info_fields()
        .into_iter()
        .chain(crate::commands::openid::info_fields())
        .chain(crate::commands::uid::info_fields());
    for (name, v) in families {
        ctx.add_info_field_long_long(name, i64::try_from(v).unwrap_or(i64::MAX));
    }
    Ok(())
}
