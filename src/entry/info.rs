//! The `imid` section of INFO: each family reports its own fields (`info_fields` in
//! `commands/*`, slot adoption's in `node::promises`), in the order docs/observability.md lists
//! them.

use super::{guard, EntryPoint};
use crate::commands;
use crate::node::promises;
use redis_module::{InfoContext, RedisResult};

/// Fills the `imid` section of INFO (fields appear as `imid_<name>`).
#[redis_module_macros::info_command_handler]
#[allow(deprecated)]
fn imid_info(ctx: &InfoContext, _for_crash_report: bool) -> RedisResult<()> {
    // A section without a name is named after the module, so `INFO imid` shows it. The
    // builder API always names the section (`imid_<name>`), hence the older calls.
    ctx.add_info_section(None);
    // Gathered inside the guard (a panic leaves the section empty), then written.
    let fields: Vec<(&str, u64)> = guard(
        std::ptr::null_mut(),
        EntryPoint::Named("the INFO section"),
        Vec::new,
        || {
            commands::msgid::info_fields()
                .into_iter()
                .chain(promises::info_fields())
                .chain(commands::seq::info_fields())
                .chain(commands::openid::info_fields())
                .chain(commands::uid::info_fields())
                .chain(crate::node::fence::info_fields())
                .collect()
        },
    );
    for (name, v) in fields {
        ctx.add_info_field_long_long(name, crate::core::to_i64(v));
    }
    // What a value and a record handed out now survive, as the AOF's setting makes it.
    let (values, records) = crate::node::durable::mode().promises();
    ctx.add_info_field_str("durable_values", values);
    ctx.add_info_field_str("durable_records", records);
    ctx.add_info_field_long_long(
        "seq_gap_in_force",
        crate::core::to_i64(crate::node::durable::gap_in_force()),
    );
    ctx.add_info_field_long_long(
        "seq_gap_skip",
        crate::core::to_i64(crate::node::durable::skip_gap()),
    );
    Ok(())
}
