//! In-process benches of the Redis-free core: what each command costs before Redis's own
//! request handling (parsing, dispatch, reply) is added on top.
//!
//! Run with `cargo bench --features system-alloc --bench core` (the feature links the system
//! allocator; Redis's allocator aborts outside redis-server). `make bench` runs it and copies
//! the numbers into server-bench/RESULTS.md.
//!
//! Inputs vary from one iteration to the next (a small ring of precomputed values) so that the
//! compiler cannot fold a constant input into a constant result, and `black_box` keeps the
//! results alive.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic
)]

use criterion::{black_box, criterion_group, criterion_main, BatchSize, Criterion};
use imid::core::generator::Generator;
use imid::core::javahash::java_hash22;
use imid::core::msgid::{Fields, MsgId};
use imid::core::openid::{decode_plain, encode_plain, Key, OpenId};
use imid::core::uid::{Layout, NodeMode, TimeUnit, UidGenerator, Widths, DEFAULT_EPOCH_MS};
use imid::system_now_ms;

/// Inputs per ring: a power of two so the index is a mask, small enough to stay in L1.
const RING: usize = 64;

/// A deterministic spread of in-range fields (a fixed LCG, so every run measures the same data).
fn fields_ring() -> Vec<Fields> {
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    (0..RING)
        .map(|_| {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            Fields::new(
                1_700_000_000_000 + (x >> 40),
                (x >> 8) & 0xFFF,
                (x >> 20) & 0xF,
                (x >> 24) & 0x3F_FFFF,
            )
            .expect("in range by construction")
        })
        .collect()
}

fn openid_ring() -> Vec<OpenId> {
    fields_ring()
        .into_iter()
        .enumerate()
        .map(|(i, f)| OpenId {
            msgid: f.to_id(),
            msg_type: (i % 3 + 1) as u8,
            direction: (i % 2 + 1) as u8,
        })
        .collect()
}

fn msgid(c: &mut Criterion) {
    let fields = fields_ring();
    let texts: Vec<[u8; 19]> = fields.iter().map(|f| f.to_id().to_text()).collect();

    let mut i = 0usize;
    c.bench_function("msgid/encode (fields -> text)", |b| {
        b.iter(|| {
            i = (i + 1) & (RING - 1);
            black_box(black_box(fields[i]).to_id().to_text())
        })
    });

    let mut i = 0usize;
    c.bench_function("msgid/decode (text -> fields)", |b| {
        b.iter(|| {
            i = (i + 1) & (RING - 1);
            black_box(MsgId::parse(black_box(&texts[i])).map(MsgId::fields))
        })
    });

    // What MSGID.GEN does besides Redis's request handling: read the wall clock, advance the
    // generator, hash the target (separate bench below), build and encode the ID.
    let mut gen = Generator::new();
    c.bench_function("msgid/generate (clock + next + encode)", |b| {
        b.iter(|| {
            let issued = gen
                .next(system_now_ms(), 0)
                .expect("time field not exhausted");
            let f = Fields::new(issued.time, u64::from(issued.seq), 1, 2_526_662)
                .expect("generator output is in range");
            black_box(f.to_id().to_text())
        })
    });
}

fn javahash(c: &mut Criterion) {
    // Typical conversation targets: short ASCII ids, and one with non-ASCII text.
    let targets: [&[u8]; 4] = [
        b"user1",
        b"group:8d3f2a91",
        b"{conv:4242}:inbox",
        "\u{4f1a}\u{8bdd}-42".as_bytes(),
    ];
    let mut i = 0usize;
    c.bench_function("javahash/hash22 (5-17 byte targets)", |b| {
        b.iter(|| {
            i = (i + 1) & 3;
            black_box(java_hash22(black_box(targets[i])))
        })
    });
}

fn openid(c: &mut Criterion) {
    let ids = openid_ring();
    // A fixed test key: the keyed format's cost does not depend on the key's value.
    let key = Key::new(*b"imid-bench-key!!");
    let plain: Vec<[u8; 19]> = ids.iter().map(encode_plain).collect();
    let keyed: Vec<[u8; 19]> = ids.iter().map(|id| key.encode(id)).collect();

    let mut i = 0usize;
    c.bench_function("openid/plain encode", |b| {
        b.iter(|| {
            i = (i + 1) & (RING - 1);
            black_box(encode_plain(black_box(&ids[i])))
        })
    });
    let mut i = 0usize;
    c.bench_function("openid/plain decode", |b| {
        b.iter(|| {
            i = (i + 1) & (RING - 1);
            black_box(decode_plain(black_box(&plain[i])))
        })
    });
    let mut i = 0usize;
    c.bench_function("openid/keyed encode", |b| {
        b.iter(|| {
            i = (i + 1) & (RING - 1);
            black_box(key.encode(black_box(&ids[i])))
        })
    });
    let mut i = 0usize;
    c.bench_function("openid/keyed decode", |b| {
        b.iter(|| {
            i = (i + 1) & (RING - 1);
            black_box(key.decode(black_box(&keyed[i])))
        })
    });
    // Expanding a key (three AES key schedules) happens once per CONFIG SET, not per call;
    // measured so that the README can say so with a number.
    c.bench_function("openid/key schedule (per config change)", |b| {
        b.iter_batched(
            || *b"imid-bench-key!!",
            |k| black_box(Key::new(k)),
            BatchSize::SmallInput,
        )
    });
}

fn uid(c: &mut Criterion) {
    let snowflake = Layout::new(Widths::SNOWFLAKE, DEFAULT_EPOCH_MS, TimeUnit::Ms)
        .expect("the Snowflake layout is valid");
    let cluster = Layout::new(Widths::CLUSTER, DEFAULT_EPOCH_MS, TimeUnit::Ms)
        .expect("the cluster layout is valid");

    // What UID.GEN does besides Redis's request handling: read the wall clock and issue one
    // ID (standalone: one lane, no hashing). Compare with UidGenerator's ~6 million IDs/s.
    let mut gen = UidGenerator::new(snowflake, NodeMode::Fixed(1));
    c.bench_function("uid/generate (clock + next, standalone)", |b| {
        b.iter(|| {
            black_box(
                gen.next(black_box(b"conv:42"), system_now_ms(), 0)
                    .expect("time field not exhausted"),
            )
        })
    });

    // The wall-clock read each single-ID call above pays (a vDSO clock_gettime): most of it.
    c.bench_function("uid/clock read alone (system_now_ms)", |b| {
        b.iter(|| black_box(system_now_ms()))
    });

    // The state machine alone, the clock reading given (it advances 1 ms every 64 calls, so
    // the run mixes new milliseconds and seq counting as a loaded server does).
    let mut gen = UidGenerator::new(snowflake, NodeMode::Fixed(1));
    let mut now = DEFAULT_EPOCH_MS + 1_000_000;
    let mut k = 0u32;
    c.bench_function("uid/next (clock reading given)", |b| {
        b.iter(|| {
            k = k.wrapping_add(1);
            now += u64::from(k & 63 == 0);
            black_box(
                gen.next(black_box(b"conv:42"), black_box(now), 0)
                    .expect("time field not exhausted"),
            )
        })
    });

    // Cluster mode: the target's hash slot picks the node field and the lane.
    let targets: [&[u8]; 4] = [b"{conv:42}", b"user1", b"group:8d3f2a91", b"{conv:4242}:x"];
    let mut gen = UidGenerator::new(cluster, NodeMode::Slot);
    let mut i = 0usize;
    c.bench_function("uid/generate (clock + slot + next, cluster)", |b| {
        b.iter(|| {
            i = (i + 1) & 3;
            black_box(
                gen.next(black_box(targets[i]), system_now_ms(), 0)
                    .expect("time field not exhausted"),
            )
        })
    });

    // UID.GEN ... COUNT 100: one clock read, one run, 100 IDs written out.
    let mut gen = UidGenerator::new(snowflake, NodeMode::Fixed(1));
    let mut out = Vec::with_capacity(100);
    c.bench_function("uid/generate batch of 100 (per batch)", |b| {
        b.iter(|| {
            let run = gen
                .issue_for(black_box(b"conv:42"), system_now_ms(), 0, 100)
                .expect("time field not exhausted");
            out.clear();
            out.extend(run.uids());
            black_box(&out);
        })
    });

    let mut i = 0u64;
    c.bench_function("uid/decode", |b| {
        b.iter(|| {
            i = i.wrapping_add(0x9E37_79B9_7F4A_7C15);
            black_box(snowflake.decode(black_box(i >> 1)))
        })
    });
}

criterion_group!(benches, msgid, javahash, openid, uid);
criterion_main!(benches);
