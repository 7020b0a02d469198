use super::*;

const EPOCH: u64 = DEFAULT_EPOCH_MS;
/// 2026-11-22, when these tests were written: the "server clock" of the lifetime checks.
const NOW: u64 = 1_795_317_698_506;
/// Baidu UidGenerator's default epoch, 2016-05-20T00:00:00Z.
const UIDGEN_EPOCH: u64 = 1_463_702_400_000;

fn layout(w: Widths, epoch: u64, unit: TimeUnit) -> Layout {
    Layout::new(w, epoch, unit).unwrap()
}

fn snowflake() -> Layout {
    layout(Widths::SNOWFLAKE, EPOCH, TimeUnit::Ms)
}

fn w(time: u32, node: u32, seq: u32) -> Widths {
    Widths { time, node, seq }
}

#[test]
fn utc_text_is_iso_8601() {
    assert_eq!(utc_text(0), "1970-01-01T00:00:00Z");
    assert_eq!(utc_text(EPOCH), "2026-01-01T00:00:00Z");
    assert_eq!(utc_text(951_782_400_000), "2000-02-29T00:00:00Z");
    assert_eq!(utc_text(4_102_444_799_999), "2099-12-31T23:59:59Z");
    assert_eq!(
        utc_text(UIDGEN_EPOCH + (1 << 28) * 1000),
        "2024-11-20T21:24:16Z"
    );
    // the largest Unix ms never panics
    assert!(utc_text(i64::MAX as u64).starts_with("292278994-"));
    let _ = utc_text(u64::MAX);
}

#[test]
fn layout_parse_table() {
    let ok: &[(&str, Option<Widths>)] = &[
        ("auto", None),
        ("AUTO", None),
        (" Auto ", None),
        ("41,10,12", Some(Widths::SNOWFLAKE)),
        (" 41 , 10 , 12 ", Some(Widths::SNOWFLAKE)),
        ("28,22,13", Some(Widths::UIDGENERATOR)),
        ("41,14,8", Some(Widths::CLUSTER)),
        ("63,0,0", Some(w(63, 0, 0))),
        ("1,31,31", Some(w(1, 31, 31))),
        ("01,31,31", Some(w(1, 31, 31))),
    ];
    for (text, want) in ok {
        assert_eq!(
            LayoutSpec::parse(text).map(|s| s.map(|s| s.widths)),
            Ok(*want),
            "{text:?}"
        );
    }
    let bad: &[(&str, LayoutError)] = &[
        ("", LayoutError::Syntax),
        ("41,10", LayoutError::Syntax),
        ("41,10,12,0", LayoutError::Syntax),
        ("41,10,12,", LayoutError::Syntax),
        (",41,10,12", LayoutError::Syntax),
        ("41,,22", LayoutError::Syntax),
        ("+41,10,12", LayoutError::Syntax),
        ("-1,32,32", LayoutError::Syntax),
        ("041,10,12", LayoutError::Syntax),
        ("41;10;12", LayoutError::Syntax),
        ("41 10 12", LayoutError::Syntax),
        ("a,b,c", LayoutError::Syntax),
        ("41,10,1٢", LayoutError::Syntax),
        ("snowflake", LayoutError::Syntax),
        ("twitter2", LayoutError::Syntax),
        ("time:41,node:10,seq:12,x:0", LayoutError::Syntax),
        ("time:41,node:10,seq:", LayoutError::Syntax),
        ("time:41,node:10,sequence:12", LayoutError::Syntax),
        ("time:41,node:10,12", LayoutError::Syntax),
        ("node:10,time:41,seq:12", LayoutError::TimeNotFirst),
        ("seq:12,node:10,time:41", LayoutError::TimeNotFirst),
        ("time:41,node:10,node:12", LayoutError::FieldTwice("node")),
        ("time:41,time:10,seq:12", LayoutError::FieldTwice("time")),
        ("time:40,node:12", LayoutError::Sum(52)),
        ("1,31,32", LayoutError::NoTime),
        ("41,10,14", LayoutError::Sum(65)),
        ("41,10,11", LayoutError::Sum(62)),
        ("99,99,99", LayoutError::Sum(297)),
        ("0,31,32", LayoutError::NoTime),
    ];
    for (text, want) in bad {
        assert_eq!(LayoutSpec::parse(text).as_ref(), Err(want), "{text:?}");
    }
}

#[test]
fn layouts_past_the_largest_unix_ms_are_refused() {
    // 2^63 ms past any epoch overflows; 2^62 ms fits.
    assert!(matches!(
        Layout::new(w(63, 0, 0), 0, TimeUnit::Ms),
        Err(LayoutError::TooWide { .. })
    ));
    assert!(Layout::new(w(62, 0, 1), EPOCH, TimeUnit::Ms).is_ok());
    // In seconds: 2^53 s fits from the default epoch, 2^54 s does not.
    assert!(Layout::new(w(53, 5, 5), EPOCH, TimeUnit::S).is_ok());
    assert!(matches!(
        Layout::new(w(54, 5, 4), EPOCH, TimeUnit::S),
        Err(LayoutError::TooWide { .. })
    ));
    // An epoch so late that even a small field passes 2^63-1 ms.
    assert!(Layout::new(w(41, 10, 12), i64::MAX as u64, TimeUnit::Ms).is_err());
    assert!(Layout::new(w(41, 10, 12), u64::MAX, TimeUnit::Ms).is_err());
    assert_eq!(
        Layout::new(w(41, 10, 11), EPOCH, TimeUnit::Ms),
        Err(LayoutError::Sum(62))
    );
    assert_eq!(
        Layout::new(w(0, 31, 32), EPOCH, TimeUnit::Ms),
        Err(LayoutError::NoTime)
    );
}

#[test]
fn lifetime_table() {
    // Snowflake from 2026: 69 years.
    let l = snowflake();
    assert_eq!(l.end_ms(), EPOCH + (1 << 41));
    assert_eq!(utc_text(l.end_ms()), "2095-09-07T15:47:35Z");
    assert_eq!(l.check_lifetime(NOW), Ok(()));
    // UidGenerator's default layout and epoch ran out on 2024-11-20.
    let old = layout(Widths::UIDGENERATOR, UIDGEN_EPOCH, TimeUnit::S);
    let e = old.check_lifetime(NOW).unwrap_err();
    assert_eq!(
        e,
        LayoutError::RanOut {
            end_ms: UIDGEN_EPOCH + (1 << 28) * 1000
        }
    );
    assert!(e.to_string().contains("2024-11-20"), "{e}");
    // The same widths from 2026-01-01 last until 2034-07-04.
    let l = layout(Widths::UIDGENERATOR, EPOCH, TimeUnit::S);
    assert_eq!(l.check_lifetime(NOW), Ok(()));
    assert_eq!(utc_text(l.end_ms()), "2034-07-04T21:24:16Z");
    // 35 bits of ms: 397 days. From 2026-01-01 that ends in 2027-02, within a year of NOW.
    let l = layout(w(35, 14, 14), EPOCH, TimeUnit::Ms);
    let e = l.check_lifetime(NOW).unwrap_err();
    assert!(matches!(e, LayoutError::RunsOutSoon { .. }));
    assert!(e.to_string().contains("2027-02-02"), "{e}");
    // ... and fine from an epoch of today.
    assert_eq!(
        layout(w(35, 14, 14), NOW, TimeUnit::Ms).check_lifetime(NOW),
        Ok(())
    );
    // Exactly a year left is enough; a millisecond less is not.
    let l = layout(w(35, 14, 14), NOW, TimeUnit::Ms);
    assert_eq!(l.check_lifetime(l.end_ms() - MIN_LIFETIME_MS), Ok(()));
    assert!(l.check_lifetime(l.end_ms() - MIN_LIFETIME_MS + 1).is_err());
    assert!(matches!(
        l.check_lifetime(l.end_ms()),
        Err(LayoutError::RanOut { .. })
    ));
    // An epoch after the clock is refused.
    assert!(matches!(
        snowflake().check_lifetime(EPOCH - 1),
        Err(LayoutError::EpochAhead { .. })
    ));
}

#[test]
fn node_modes() {
    let sf = snowflake();
    let cl = layout(Widths::CLUSTER, EPOCH, TimeUnit::Ms);
    let ug = layout(Widths::UIDGENERATOR, EPOCH, TimeUnit::S);
    assert_eq!(sf.node_mode(NodeSpec::Auto, false), Ok(NodeMode::Fixed(0)));
    assert_eq!(
        sf.node_mode(NodeSpec::Auto, true),
        Err(LayoutError::SlotNeedsBits { bits: 10 })
    );
    assert_eq!(cl.node_mode(NodeSpec::Auto, true), Ok(NodeMode::Slot));
    assert_eq!(ug.node_mode(NodeSpec::Auto, true), Ok(NodeMode::Slot));
    assert_eq!(
        sf.node_mode(NodeSpec::Fixed(1023), true),
        Ok(NodeMode::Fixed(1023))
    );
    assert_eq!(
        sf.node_mode(NodeSpec::Fixed(1024), false),
        Err(LayoutError::NodeTooBig {
            node: 1024,
            bits: 10
        })
    );
    let none = layout(w(50, 0, 13), EPOCH, TimeUnit::Ms);
    assert_eq!(
        none.node_mode(NodeSpec::Fixed(0), false),
        Ok(NodeMode::Fixed(0))
    );
    assert!(none.node_mode(NodeSpec::Fixed(1), false).is_err());
    assert!(none.node_mode(NodeSpec::Auto, true).is_err());

    assert_eq!(NodeSpec::parse("auto"), Ok(NodeSpec::Auto));
    assert_eq!(NodeSpec::parse("AUTO"), Ok(NodeSpec::Auto));
    assert_eq!(NodeSpec::parse("0"), Ok(NodeSpec::Fixed(0)));
    assert_eq!(NodeSpec::parse("4194303"), Ok(NodeSpec::Fixed(4_194_303)));
    // Written as UID.DECODE writes a node: no spaces or leading zeros.
    for bad in [
        "",
        "-1",
        "+1",
        "1.0",
        "0x10",
        "one",
        "99999999999999999999",
        "01",
        "00",
        " 5 ",
        "5 ",
        " auto",
    ] {
        assert_eq!(NodeSpec::parse(bad), Err(LayoutError::NodeSyntax), "{bad}");
    }
}

/// (time_ms, node, seq) <-> uid for one layout, both ways.
fn roundtrips(l: &Layout, cases: &[(u64, u64, u64, u64)]) {
    for &(t, n, s, uid) in cases {
        assert_eq!(l.encode(t, n, s), Ok(uid), "encode {t} {n} {s}");
        assert_eq!(
            l.decode(uid),
            UidFields {
                time_ms: t,
                node: n,
                seq: s
            },
            "decode {uid}"
        );
    }
}

#[test]
fn snowflake_encode_decode_table() {
    let l = snowflake();
    let last = EPOCH + (1 << 41) - 1;
    roundtrips(
        &l,
        &[
            (EPOCH, 0, 0, 0),
            (EPOCH, 0, 1, 1),
            (EPOCH, 1, 0, 1 << 12),
            (EPOCH + 1, 0, 0, 1 << 22),
            (EPOCH + 1, 1, 1, (1 << 22) | (1 << 12) | 1),
            (EPOCH, 1023, 4095, (1 << 22) - 1),
            (last, 0, 0, ((1 << 41) - 1) << 22),
            (last, 1023, 4095, i64::MAX as u64),
        ],
    );
    assert_eq!(l.last_ms(), last);
    assert_eq!(
        l.encode(EPOCH - 1, 0, 0),
        Err(UidFieldError::BeforeEpoch { epoch_ms: EPOCH })
    );
    assert!(matches!(
        l.encode(last + 1, 0, 0),
        Err(UidFieldError::PastEnd { last_ms, .. }) if last_ms == last
    ));
    assert!(l.encode(u64::MAX, 0, 0).is_err());
    assert_eq!(
        l.encode(EPOCH, 1024, 0),
        Err(UidFieldError::Node { max: 1023 })
    );
    assert_eq!(
        l.encode(EPOCH, 0, 4096),
        Err(UidFieldError::Seq { max: 4095 })
    );
    assert_eq!(
        l.encode(EPOCH, u64::MAX, u64::MAX),
        Err(UidFieldError::Node { max: 1023 })
    );
}

#[test]
fn discord_snowflake_vector() {
    // Discord's documented example: 175928847299117063 is 2016-04-30T11:18:25.796Z
    // (epoch 2015-01-01), worker 1 and process 0 (node 32), increment 7.
    let l = layout(Widths::SNOWFLAKE, 1_420_070_400_000, TimeUnit::Ms);
    roundtrips(&l, &[(1_462_015_105_796, 32, 7, 175_928_847_299_117_063)]);
}

#[test]
fn uidgenerator_encode_decode_table() {
    let l = layout(Widths::UIDGENERATOR, EPOCH, TimeUnit::S);
    let last = EPOCH + ((1 << 28) - 1) * 1000;
    roundtrips(
        &l,
        &[
            (EPOCH, 0, 0, 0),
            (EPOCH + 1000, 0, 0, 1 << 35),
            (EPOCH + 1000, 5, 17, (1 << 35) | (5 << 13) | 17),
            (EPOCH, (1 << 22) - 1, 8191, (1 << 35) - 1),
            (last, (1 << 22) - 1, 8191, i64::MAX as u64),
        ],
    );
    assert_eq!(
        l.encode(EPOCH + 1500, 0, 0),
        Err(UidFieldError::NotWholeUnit { unit: TimeUnit::S })
    );
    assert_eq!(
        l.encode(EPOCH + 1, 0, 0),
        Err(UidFieldError::NotWholeUnit { unit: TimeUnit::S })
    );
    assert!(matches!(
        l.encode(last + 1000, 0, 0),
        Err(UidFieldError::PastEnd { .. })
    ));
    // inside the last second, but not at its start
    assert_eq!(
        l.encode(last + 1, 0, 0),
        Err(UidFieldError::NotWholeUnit { unit: TimeUnit::S })
    );
    assert_eq!(
        l.encode(EPOCH, 1 << 22, 0),
        Err(UidFieldError::Node { max: (1 << 22) - 1 })
    );
    assert_eq!(
        l.encode(EPOCH, 0, 8192),
        Err(UidFieldError::Seq { max: 8191 })
    );
}

#[test]
fn cluster_encode_decode_table() {
    let l = layout(Widths::CLUSTER, EPOCH, TimeUnit::Ms);
    roundtrips(
        &l,
        &[
            (EPOCH, 16_383, 255, (1 << 22) - 1),
            (EPOCH + 7, 12_182, 3, (7 << 22) | (12_182 << 8) | 3),
            (EPOCH + (1 << 41) - 1, 16_383, 255, i64::MAX as u64),
        ],
    );
    assert_eq!(
        l.encode(EPOCH, 16_384, 0),
        Err(UidFieldError::Node { max: 16_383 })
    );
    assert_eq!(
        l.encode(EPOCH, 0, 256),
        Err(UidFieldError::Seq { max: 255 })
    );
}

#[test]
fn edge_layouts_encode_decode() {
    // No node bits, no seq bits, one time bit.
    let l = layout(w(63 - 13, 0, 13), EPOCH, TimeUnit::Ms);
    roundtrips(&l, &[(EPOCH + 3, 0, 5, (3 << 13) | 5)]);
    assert_eq!(l.encode(EPOCH, 1, 0), Err(UidFieldError::Node { max: 0 }));
    let l = layout(w(53, 10, 0), EPOCH, TimeUnit::Ms);
    roundtrips(&l, &[(EPOCH + 3, 9, 0, (3 << 10) | 9)]);
    assert_eq!(l.encode(EPOCH, 0, 1), Err(UidFieldError::Seq { max: 0 }));
    let l = layout(w(1, 31, 31), EPOCH, TimeUnit::S);
    roundtrips(
        &l,
        &[
            (EPOCH, 0, 0, 0),
            (EPOCH + 1000, (1 << 31) - 1, (1 << 31) - 1, i64::MAX as u64),
        ],
    );
    assert_eq!(l.end_ms(), EPOCH + 2000);
    // decode ignores bit 63 rather than reading a time past the end
    assert_eq!(l.decode(u64::MAX), l.decode(i64::MAX as u64));
}

fn gen_fixed(l: Layout, node: u64) -> UidGenerator {
    UidGenerator::new(l, NodeMode::Fixed(node))
}

#[test]
fn frozen_clock_counts_seq_then_borrows() {
    let mut g = gen_fixed(snowflake(), 5);
    let now = EPOCH + 1_000;
    let mut ids = Vec::new();
    for _ in 0..10_000 {
        ids.push(g.next(b"t", now, 0).unwrap());
    }
    assert!(ids.windows(2).all(|p| p[0].0 < p[1].0));
    let l = snowflake();
    assert_eq!(
        l.decode(ids[0].0),
        UidFields {
            time_ms: now,
            node: 5,
            seq: 0
        }
    );
    assert_eq!(
        l.decode(ids[4095].0),
        UidFields {
            time_ms: now,
            node: 5,
            seq: 4095
        }
    );
    assert_eq!(
        l.decode(ids[4096].0),
        UidFields {
            time_ms: now + 1,
            node: 5,
            seq: 0
        }
    );
    assert_eq!(ids[9_999].1, now + 2, "reported time is the ID's time");
    assert_eq!(
        g.stats(),
        UidStats {
            generated: 10_000,
            borrowed_units: 2
        }
    );
}

#[test]
fn seconds_layout_borrows_the_next_second() {
    let l = layout(Widths::UIDGENERATOR, EPOCH, TimeUnit::S);
    let mut g = gen_fixed(l, 3);
    let now = EPOCH + 10_500; // 10.5 s after the epoch: unit 10
    let first = g.next(b"t", now, 0).unwrap();
    assert_eq!(
        l.decode(first.0),
        UidFields {
            time_ms: EPOCH + 10_000,
            node: 3,
            seq: 0
        }
    );
    assert_eq!(first.1, EPOCH + 10_000);
    let run = g.issue_for(b"t", now, 0, 8191).unwrap();
    assert_eq!(run.count(), 8191);
    assert_eq!(l.decode(run.uids().last().unwrap()).seq, 8191);
    assert_eq!(g.stats().borrowed_units, 0);
    let next = g.next(b"t", now + 400, 0).unwrap();
    assert_eq!(
        l.decode(next.0),
        UidFields {
            time_ms: EPOCH + 11_000,
            node: 3,
            seq: 0
        }
    );
    assert_eq!(g.stats().borrowed_units, 1);
    // the clock reaching the borrowed second is not a borrow
    let mut g = gen_fixed(l, 3);
    g.issue_for(b"t", now, 0, 8192).unwrap();
    let n = g.next(b"t", EPOCH + 11_000, 0).unwrap();
    assert_eq!(l.decode(n.0).time_ms, EPOCH + 11_000);
    assert_eq!(g.stats().borrowed_units, 0);
}

#[test]
fn clock_thirty_seconds_back_holds_the_last_time() {
    let l = snowflake();
    let mut g = gen_fixed(l, 0);
    let now = EPOCH + 100_000;
    let a = g.next(b"t", now, 0).unwrap();
    let b = g.next(b"t", now - 30_000, 0).unwrap();
    assert!(b.0 > a.0);
    assert_eq!(l.decode(b.0).time_ms, now);
    assert_eq!(l.decode(b.0).seq, 1);
    // 10,000 more while the clock stays behind: increasing, borrowing forward
    let run = g.issue_for(b"t", now - 30_000, 0, 10_000).unwrap();
    assert!(run.first() > b.0);
    let v: Vec<u64> = run.uids().collect();
    assert!(v.windows(2).all(|p| p[0] < p[1]));
    assert_eq!(g.stats().borrowed_units, 2);
    // the clock before the epoch: the epoch acts as a floor
    let mut g = gen_fixed(l, 0);
    let x = g.next(b"t", 0, 0).unwrap();
    assert_eq!(l.decode(x.0).time_ms, EPOCH);
}

#[test]
fn floor_after_restart_starts_above_every_earlier_id() {
    for unit in [TimeUnit::Ms, TimeUnit::S] {
        let l = layout(Widths::SNOWFLAKE, EPOCH, unit);
        let mut old = gen_fixed(l, 1);
        let now = EPOCH + 1_000_000_123;
        let mut last = 0;
        let mut max_time = 0;
        for i in 0..5_000 {
            let (uid, t) = old.next(b"t", now + i / 3, 0).unwrap();
            last = uid;
            max_time = max_time.max(t);
        }
        // The lease is above every reported time; the restarted node's clock is a minute
        // behind. Its first ID lies above the old ones, for any lease above max_time.
        for lease in [
            max_time + 1,
            max_time + 999,
            max_time + 1000,
            max_time + 5000,
        ] {
            let mut new = gen_fixed(l, 1);
            let (uid, t) = new.next(b"t", now - 60_000, lease).unwrap();
            assert!(uid > last, "{unit:?} lease {lease}");
            assert!(t >= lease, "time at or above the floor");
        }
    }
}

#[test]
fn batch_equals_single_calls() {
    for (w, unit) in [
        (Widths::SNOWFLAKE, TimeUnit::Ms),
        (Widths::CLUSTER, TimeUnit::Ms),
        (Widths::UIDGENERATOR, TimeUnit::S),
        (w(55, 8, 0), TimeUnit::Ms),
    ] {
        let l = layout(w, EPOCH, unit);
        let mut a = gen_fixed(l, 7);
        let mut b = gen_fixed(l, 7);
        for (now, n) in [(EPOCH + 5, 10_000u32), (EPOCH + 3, 1), (EPOCH + 9_000, 300)] {
            let run = a.issue_for(b"t", now, 0, n).unwrap();
            let singles: Vec<u64> = (0..n).map(|_| b.next(b"t", now, 0).unwrap().0).collect();
            assert_eq!(run.uids().collect::<Vec<_>>(), singles, "{w} {n}");
            assert_eq!(run.time_ms, l.decode(*singles.last().unwrap()).time_ms);
        }
        assert_eq!(a.stats(), b.stats());
    }
}

#[test]
fn slot_mode_gives_each_slot_its_own_lane() {
    let l = layout(Widths::CLUSTER, EPOCH, TimeUnit::Ms);
    let mut g = UidGenerator::new(l, NodeMode::Slot);
    let now = EPOCH + 42;
    let a = l.decode(g.next(b"{conv:1}", now, 0).unwrap().0);
    let b = l.decode(g.next(b"{conv:2}", now, 0).unwrap().0);
    let a2 = l.decode(g.next(b"{conv:1}x", now, 0).unwrap().0);
    assert_eq!((a.node, a.seq), (u64::from(key_slot(b"conv:1")), 0));
    assert_eq!((b.node, b.seq), (u64::from(key_slot(b"conv:2")), 0));
    assert_eq!((a2.node, a2.seq), (a.node, 1), "same slot, same lane");
    // 256 per ms per slot
    let run = g.issue_for(b"conv:1", now, 0, 300).unwrap();
    assert_eq!(run.time_ms, now + 1);
    // a slot mode with too few node bits is not trusted: it falls back to one lane
    let g = UidGenerator::new(snowflake(), NodeMode::Slot);
    assert_eq!(g.mode(), NodeMode::Fixed(0));
    let g = UidGenerator::new(snowflake(), NodeMode::Fixed(5000));
    assert_eq!(g.mode(), NodeMode::Fixed(5000 & 1023));
}

#[test]
fn exhaustion_is_an_error_and_changes_nothing() {
    let l = layout(w(2, 55, 6), EPOCH, TimeUnit::S); // 4 seconds of 64 IDs
    let mut g = gen_fixed(l, 0);
    let end = l.end_ms();
    assert_eq!(end, EPOCH + 4_000);
    // 4 * 64 IDs fit in all; one more does not
    let run = g.issue_for(b"t", EPOCH, 0, 200).unwrap();
    assert_eq!(run.count(), 200);
    assert_eq!(
        g.issue_for(b"t", EPOCH, 0, 57),
        Err(UidExhausted { end_ms: end })
    );
    assert_eq!(
        g.stats().generated,
        200,
        "nothing issued by the refused batch"
    );
    let rest = g.issue_for(b"t", EPOCH, 0, 56).unwrap();
    assert_eq!(rest.uids().last(), Some((3 << 61) | 63));
    assert!(g.next(b"t", EPOCH, 0).is_err());
    // a clock or floor past the end
    let mut g = gen_fixed(l, 0);
    assert!(g.next(b"t", end, 0).is_err());
    assert!(g.next(b"t", EPOCH, end).is_err());
    assert!(g.next(b"t", u64::MAX, u64::MAX).is_err());
    assert!(g.next(b"t", end - 1, 0).is_ok());
    let e = UidExhausted { end_ms: end }.to_string();
    assert!(e.contains("2026-01-01T00:00:04Z"), "{e}");
}

fn named_layout(name: &str) -> Layout {
    LayoutSpec::parse(name)
        .unwrap()
        .unwrap()
        .resolve(None, None)
        .unwrap()
}

/// Every named layout: its first ID, its last positive one, the end date, and the lifetime
/// check against the day these tests were written.
#[test]
fn named_layouts_edge_table() {
    let max = i64::MAX as u64;
    // name, epoch, unit ms, usable time bits, node max, seq max, end (UTC), lifetime ok
    type Row = (&'static str, u64, u64, u32, u64, u64, &'static str, bool);
    let table: &[Row] = &[
        (
            "twitter",
            1_288_834_974_657,
            1,
            41,
            1023,
            4095,
            "2080-07-10T17:30:30Z",
            true,
        ),
        (
            "discord",
            1_420_070_400_000,
            1,
            41,
            1023,
            4095,
            "2084-09-06T15:47:35Z",
            true,
        ),
        (
            "instagram",
            1_314_220_021_721,
            1,
            40,
            8191,
            1023,
            "2046-06-27T17:00:49Z",
            true,
        ),
        (
            "sonyflake",
            1_409_529_600_000,
            10,
            39,
            65_535,
            255,
            "2188-11-16T03:28:58Z",
            true,
        ),
        (
            "sonyflake-v2",
            1_735_689_600_000,
            10,
            39,
            65_535,
            255,
            "2199-03-19T03:28:58Z",
            true,
        ),
        (
            "uidgenerator",
            UIDGEN_EPOCH,
            1000,
            28,
            (1 << 22) - 1,
            8191,
            "2024-11-20T21:24:16Z",
            false,
        ),
        (
            "mastodon",
            0,
            1,
            47,
            0,
            65_535,
            "6429-10-17T02:45:55Z",
            true,
        ),
    ];
    for &(name, epoch, unit, bits, node_max, seq_max, end, alive) in table {
        let l = named_layout(name);
        assert_eq!(
            LayoutSpec::parse(&name.to_uppercase())
                .unwrap()
                .unwrap()
                .name,
            Some(name)
        );
        assert_eq!((l.epoch_ms(), l.unit().ms()), (epoch, unit), "{name}");
        assert_eq!((l.node_max(), l.seq_max()), (node_max, seq_max), "{name}");
        assert_eq!(l.time_max(), (1 << bits) - 1, "{name}");
        assert_eq!(l.end_ms(), epoch + (1u64 << bits) * unit, "{name}");
        assert_eq!(utc_text(l.end_ms()), end, "{name}");
        let last = l.last_ms();
        assert_eq!(last, epoch + ((1u64 << bits) - 1) * unit, "{name}");
        // the epoch's first ID is 0, the last unit's last ID is 2^63-1
        assert_eq!(l.encode(epoch, 0, 0), Ok(0), "{name}");
        assert_eq!(l.encode(last, node_max, seq_max), Ok(max), "{name}");
        assert_eq!(
            l.decode(0),
            UidFields {
                time_ms: epoch,
                node: 0,
                seq: 0
            }
        );
        assert_eq!(
            l.decode(max),
            UidFields {
                time_ms: last,
                node: node_max,
                seq: seq_max
            }
        );
        // one unit more would set bit 63 (the sign bit: Discord's, Instagram's and
        // Mastodon's top time bit), and is refused
        assert!(
            matches!(
                l.encode(last + unit, 0, 0),
                Err(UidFieldError::PastEnd { .. })
            ),
            "{name}"
        );
        assert_eq!(
            l.encode(epoch - epoch.min(1), 0, 0).is_err(),
            epoch > 0,
            "{name}"
        );
        if unit > 1 {
            assert_eq!(
                l.encode(epoch + 1, 0, 0),
                Err(UidFieldError::NotWholeUnit { unit: l.unit() })
            );
        }
        assert_eq!(
            l.encode(epoch, node_max + 1, 0),
            Err(UidFieldError::Node { max: node_max })
        );
        assert_eq!(
            l.encode(epoch, 0, seq_max + 1),
            Err(UidFieldError::Seq { max: seq_max })
        );
        assert_eq!(l.check_lifetime(NOW).is_ok(), alive, "{name}");
    }
    // UidGenerator's default ran out, and the error says when
    let e = named_layout("uidgenerator")
        .check_lifetime(NOW)
        .unwrap_err();
    assert!(e.to_string().contains("ended on 2024-11-20"), "{e}");
}

#[test]
fn named_layouts_put_each_field_in_its_place() {
    // one unit, node 1, seq 1 in each layout: where the bits land
    let cases: &[(&str, u64)] = &[
        ("twitter", (1 << 22) | (1 << 12) | 1),
        ("discord", (1 << 22) | (1 << 12) | 1),
        ("instagram", (1 << 23) | (1 << 10) | 1),
        // Sonyflake: time | seq (8) | machine (16)
        ("sonyflake", (1 << 24) | (1 << 16) | 1),
        ("sonyflake-v2", (1 << 24) | (1 << 16) | 1),
        ("uidgenerator", (1 << 35) | (1 << 13) | 1),
    ];
    for &(name, uid) in cases {
        let l = named_layout(name);
        let t = l.epoch_ms() + l.unit().ms();
        assert_eq!(l.encode(t, 1, 1), Ok(uid), "{name}");
        assert_eq!(
            l.decode(uid),
            UidFields {
                time_ms: t,
                node: 1,
                seq: 1
            },
            "{name}"
        );
    }
    let m = named_layout("mastodon");
    assert_eq!(m.encode(1, 0, 1), Ok((1 << 16) | 1));
    assert_eq!(m.encode(0, 1, 0), Err(UidFieldError::Node { max: 0 }));
    // Discord's documented example, now under its own name
    assert_eq!(
        named_layout("discord").decode(175_928_847_299_117_063),
        UidFields {
            time_ms: 1_462_015_105_796,
            node: 32,
            seq: 7
        }
    );
    assert_eq!(
        named_layout("sonyflake").order().fields(),
        [Field::Time, Field::Seq, Field::Node]
    );
    assert_eq!(
        named_layout("sonyflake").spec_text(),
        "time:39,seq:8,node:16"
    );
    assert_eq!(named_layout("twitter").spec_text(), "41,10,12");
}

#[test]
fn explicit_epoch_and_unit_override_a_name() {
    let spec = LayoutSpec::parse("uidgenerator").unwrap().unwrap();
    let l = spec.resolve(Some(EPOCH), None).unwrap();
    assert_eq!((l.epoch_ms(), l.unit()), (EPOCH, TimeUnit::S));
    assert_eq!(l.check_lifetime(NOW), Ok(()));
    let l = spec.resolve(None, Some(TimeUnit::Ms)).unwrap();
    assert_eq!((l.epoch_ms(), l.unit()), (UIDGEN_EPOCH, TimeUnit::Ms));
    // widths without a name: 2026-01-01 and ms unless given
    let spec = LayoutSpec::parse("time:39,seq:8,node:16").unwrap().unwrap();
    assert_eq!((spec.order, spec.name), (Order::SeqNode, None));
    let l = spec.resolve(None, None).unwrap();
    assert_eq!((l.epoch_ms(), l.unit()), (EPOCH, TimeUnit::Ms));
    assert_eq!(
        spec.resolve(Some(1_409_529_600_000), Some(TimeUnit::TEN_MS))
            .unwrap(),
        named_layout("sonyflake")
    );
    // named fields in Snowflake's order equal the three-number form; a missing field has 0 bits
    assert_eq!(
        LayoutSpec::parse("time:41, node:10, seq:12").unwrap(),
        LayoutSpec::parse("41,10,12").unwrap()
    );
    assert_eq!(
        LayoutSpec::parse("TIME:48,SEQ:16")
            .unwrap()
            .map(|s| (s.widths, s.order)),
        Some((w(48, 0, 16), Order::NodeSeq))
    );
    // 64-bit explicit widths: the time field's top bit stays 0
    let l = LayoutSpec::parse("42,10,12")
        .unwrap()
        .unwrap()
        .resolve(None, None)
        .unwrap();
    assert_eq!(l.time_max(), (1 << 41) - 1);
}

#[test]
fn time_unit_parse_table() {
    for (text, ms) in [
        ("ms", 1),
        ("1ms", 1),
        ("10ms", 10),
        ("s", 1000),
        ("1s", 1000),
        ("2s", 2000),
        ("1000ms", 1000),
        ("86400s", 86_400_000),
        ("86400000ms", 86_400_000),
        ("MS", 1),
        ("10Ms", 10),
        ("S", 1000),
    ] {
        assert_eq!(TimeUnit::parse(text).map(TimeUnit::ms), Ok(ms), "{text:?}");
    }
    for bad in [
        "",
        "0ms",
        "0s",
        "010ms",
        "-1ms",
        "+1s",
        "1.5s",
        "us",
        "m",
        "10 ms",
        " 10ms",
        "s ",
        "86401s",
        "99999999999s",
        "auto",
    ] {
        assert_eq!(
            TimeUnit::parse(bad),
            Err(LayoutError::UnitSyntax),
            "{bad:?}"
        );
    }
    assert_eq!(parse_unit("AUTO"), Ok(None));
    assert_eq!(parse_unit("10ms"), Ok(Some(TimeUnit::TEN_MS)));
    for (ms, text) in [
        (1, "ms"),
        (10, "10ms"),
        (1000, "s"),
        (2000, "2s"),
        (1500, "1500ms"),
    ] {
        assert_eq!(TimeUnit::of_ms(ms).unwrap().to_string(), text);
    }
    assert_eq!(parse_epoch("auto"), Ok(None));
    assert_eq!(parse_epoch("0"), Ok(Some(0)));
    assert_eq!(parse_epoch("1420070400000"), Ok(Some(1_420_070_400_000)));
    assert_eq!(
        parse_epoch("9223372036854775807"),
        Ok(Some(i64::MAX as u64))
    );
    for bad in [
        "",
        "-1",
        "+1",
        "01",
        "1e3",
        "9223372036854775808",
        "now",
        " 5",
        "5 ",
    ] {
        assert_eq!(parse_epoch(bad), Err(LayoutError::EpochSyntax), "{bad:?}");
    }
}

#[test]
fn sonyflake_borrows_the_next_ten_ms_after_256_ids() {
    let l = named_layout("sonyflake");
    let mut g = gen_fixed(l, 0xBEEF);
    let now = l.epoch_ms() + 12_345_678_905; // 5 ms into a unit
    let unit0 = now - 5;
    let run = g.issue_for(b"t", now, 0, 1000).unwrap();
    let ids: Vec<u64> = run.uids().collect();
    assert!(ids.windows(2).all(|p| p[0] < p[1]));
    for (i, &uid) in ids.iter().enumerate() {
        let i = i as u64;
        assert_eq!(
            l.decode(uid),
            UidFields {
                time_ms: unit0 + i / 256 * 10,
                node: 0xBEEF,
                seq: i % 256
            },
            "{i}"
        );
    }
    assert_eq!(run.time_ms, unit0 + 30, "four units: 1000 = 3 x 256 + 232");
    assert_eq!(g.stats().borrowed_units, 3);
    // singles equal the batch, and the clock 30 s behind holds the time
    let mut a = gen_fixed(l, 7);
    let mut b = gen_fixed(l, 7);
    let batch: Vec<u64> = a.issue_for(b"t", now, 0, 600).unwrap().uids().collect();
    let singles: Vec<u64> = (0..600).map(|_| b.next(b"t", now, 0).unwrap().0).collect();
    assert_eq!(batch, singles);
    let back = b.next(b"t", now - 30_000, 0).unwrap();
    assert!(back.0 > *singles.last().unwrap());
    assert_eq!(
        l.decode(back.0),
        UidFields {
            time_ms: unit0 + 20,
            node: 7,
            seq: 600 - 512
        }
    );
    // a restart with a floor above every reported time starts above every earlier ID
    for lease in [back.1 + 1, back.1 + 9, back.1 + 10, back.1 + 5_000] {
        let mut new = gen_fixed(l, 7);
        let (uid, t) = new.next(b"t", now - 60_000, lease).unwrap();
        assert!(uid > back.0, "lease {lease}");
        assert!(t >= lease);
    }
}

#[test]
fn sonyflake_in_slot_mode_puts_the_slot_in_the_machine_field() {
    let l = named_layout("sonyflake");
    assert_eq!(l.node_mode(NodeSpec::Auto, true), Ok(NodeMode::Slot));
    assert_eq!(
        named_layout("twitter").node_mode(NodeSpec::Auto, true),
        Err(LayoutError::SlotNeedsBits { bits: 10 })
    );
    let e = LayoutError::SlotNeedsBits { bits: 13 }.to_string();
    assert!(
        e.contains("set imid.uid-node to this node's worker number (0..8191)"),
        "{e}"
    );
    let mut g = UidGenerator::new(l, NodeMode::Slot);
    let now = l.epoch_ms() + 1_000_000;
    let a = l.decode(g.next(b"{conv:1}", now, 0).unwrap().0);
    let b = l.decode(g.next(b"{conv:1}x", now, 0).unwrap().0);
    assert_eq!((a.node, a.seq), (u64::from(key_slot(b"conv:1")), 0));
    assert_eq!((b.node, b.seq), (a.node, 1));
}

#[test]
fn borrowing_past_the_lead_is_refused_and_issues_nothing() {
    // One ID per second (0 seq bits): every ID borrows a whole second.
    let l = layout(w(53, 10, 0), EPOCH, TimeUnit::S);
    let mut g = gen_fixed(l, 3);
    let now = EPOCH + 1_000_500;
    // from the clock's second through 10 s later: 11 IDs
    let run = g.issue_bounded(0, now, 0, 11).unwrap();
    assert_eq!(run.time_ms, EPOCH + 1_010_000);
    let e = g.issue_bounded(0, now, 0, 1).unwrap_err();
    let IssueError::TooFast(t) = e else {
        panic!("{e:?}")
    };
    assert_eq!(
        (t.ahead_ms, t.wait_ms, t.per_unit, t.per_run),
        (10_500, 500, 1, 11)
    );
    assert_eq!(
        e.to_string(),
        "UID rate exceeded: imid.uid-layout 53,10,0 in s holds 1 UIDs per s per lane, and UID.GEN may borrow at most 10000 ms ahead of the clock; this run would end 10500 ms ahead, so nothing was issued: retry in 500 ms"
    );
    assert_eq!(g.stats().generated, 11, "nothing issued");
    // after the wait it goes through, continuing the lane
    let next = g.issue_bounded(0, now + 500, 0, 1).unwrap();
    assert_eq!(next.time_ms, EPOCH + 1_011_000);
    assert_eq!(next.first(), l.encode(EPOCH + 1_011_000, 3, 0).unwrap());
    // a COUNT that can never fit says so
    let e = g.issue_bounded(0, now + 60_000, 0, 10_000).unwrap_err();
    assert!(
        e.to_string()
            .ends_with("COUNT 10000 never fits (at most 11 per call)"),
        "{e}"
    );
    assert_eq!(g.stats().generated, 12);
    // the bound counts from the floor when it is ahead of the clock
    let mut g = gen_fixed(l, 3);
    let floor = EPOCH + 1_030_000;
    let run = g.issue_bounded(0, now, floor, 11).unwrap();
    assert_eq!(run.time_ms, EPOCH + 1_040_000);
    assert!(matches!(
        g.issue_bounded(0, now, floor, 1),
        Err(IssueError::TooFast(_))
    ));
    // exhaustion is still reported as such
    let mut g = gen_fixed(l, 3);
    assert_eq!(
        g.issue_bounded(0, l.end_ms(), 0, 1),
        Err(IssueError::Exhausted(UidExhausted { end_ms: l.end_ms() }))
    );
}

#[test]
fn a_clock_stepping_back_does_not_stall_the_bound() {
    let l = layout(Widths::UIDGENERATOR, EPOCH, TimeUnit::S); // 8192 per second
    let mut g = gen_fixed(l, 0);
    let now = EPOCH + 100_000;
    let before = g.issue_bounded(0, now, 0, 3000).unwrap();
    // the clock jumps 30 s back: IDs hold at the last second and count up, as before
    let after = g.issue_bounded(0, now - 30_000, 0, 10_000).unwrap();
    assert!(after.first() > before.first());
    assert_eq!(
        after.time_ms,
        EPOCH + 101_000,
        "borrowed one second past the last"
    );
    // and still no further than the bound past the latest reading
    for _ in 0..9 {
        g.issue_bounded(0, now - 30_000, 0, 8192).unwrap();
    }
    assert!(matches!(
        g.issue_bounded(0, now - 30_000, 0, 8192),
        Err(IssueError::TooFast(_))
    ));
}

#[test]
fn issue_one_takes_the_next_id_of_the_same_unit_only() {
    let l = snowflake();
    let mut g = gen_fixed(l, 5);
    let now = EPOCH + 1_000;
    // Nothing to repeat before a planned issue.
    assert_eq!(g.issue_one(now, 0), None);
    let first = g.issue_bounded(0, now, 0, 1).unwrap().first();
    // Same clock reading and floor: the next seq, without planning.
    assert_eq!(g.issue_one(now, 0), Some(first + 1));
    assert_eq!(l.decode(first + 1).seq, 1);
    // Another clock reading, or another floor: the caller must plan.
    assert_eq!(g.issue_one(now + 1, 0), None);
    assert_eq!(g.issue_one(now, 1), None);
    // A full unit: the next ID borrows, which only the plan may decide.
    let rest = g.issue_bounded(0, now, 0, 4094).unwrap();
    assert_eq!(l.decode(rest.uids().last().unwrap()).seq, 4095);
    assert_eq!(g.issue_one(now, 0), None);
    // An unbounded issue records nothing to repeat.
    g.issue(0, now, 0, 1).unwrap();
    assert_eq!(g.issue_one(now, 0), None);
    // Slot mode has a lane per slot: never repeated.
    let c = Layout::new(Widths::CLUSTER, EPOCH, TimeUnit::Ms).unwrap();
    let mut s = UidGenerator::new(c, NodeMode::Slot);
    s.issue_bounded(7, now, 0, 1).unwrap();
    assert_eq!(s.issue_one(now, 0), None);
}

#[test]
fn usual_layouts_take_a_full_count_within_the_lead() {
    for (wd, unit) in [
        (Widths::SNOWFLAKE, TimeUnit::Ms),
        (Widths::CLUSTER, TimeUnit::Ms),
        (Widths::UIDGENERATOR, TimeUnit::S),
        (w(43, 10, 10), TimeUnit::S),
        (w(53, 10, 0), TimeUnit::Ms),
    ] {
        let l = layout(wd, EPOCH, unit);
        let mut g = gen_fixed(l, 0);
        let now = EPOCH + 777;
        let run = g.issue_bounded(0, now, 0, MAX_BATCH).unwrap();
        assert!(run.time_ms <= now + UID_MAX_LEAD_MS, "{wd} {unit:?}");
    }
}

mod props {
    use super::*;
    use proptest::prelude::*;

    fn any_layout() -> impl Strategy<Value = Layout> {
        (
            1u32..=64,
            0u32..=62,
            0u64..=2_000_000_000_000,
            prop_oneof![Just(1u64), Just(10), Just(1000), 1u64..=MAX_UNIT_MS],
            prop::bool::ANY,
            prop::bool::ANY,
        )
            .prop_filter_map(
                "a valid layout",
                |(time, node, epoch, unit, wide, seq_first)| {
                    let sum = if wide { 64 } else { 63 };
                    let time = time.min(sum);
                    let node = node.min(sum - time);
                    let widths = Widths {
                        time,
                        node,
                        seq: sum - time - node,
                    };
                    let order = if seq_first {
                        Order::SeqNode
                    } else {
                        Order::NodeSeq
                    };
                    Layout::with_order(widths, order, epoch, TimeUnit::of_ms(unit)?).ok()
                },
            )
    }

    /// A clock step: how far the clock moves (it may go back), a floor raise, a count.
    fn steps() -> impl Strategy<Value = Vec<(i64, u64, u32)>> {
        proptest::collection::vec(
            (
                -40_000i64..40_000,
                prop_oneof![9 => Just(0u64), 1 => 0u64..100_000],
                1u32..600,
            ),
            1..60,
        )
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2_000))]

        #[test]
        fn encode_decode_round_trip(l in any_layout(), t in any::<u64>(), n in any::<u64>(), s in any::<u64>()) {
            let units = (l.end_ms() - l.epoch_ms()) / l.unit().ms();
            let time_ms = l.epoch_ms() + (t % units) * l.unit().ms();
            let node = n & l.node_max();
            let seq = s & l.seq_max();
            let uid = l.encode(time_ms, node, seq).unwrap();
            prop_assert!(uid <= i64::MAX as u64);
            prop_assert_eq!(l.decode(uid), UidFields { time_ms, node, seq });
            // every uid decodes, and re-encodes to itself
            let f = l.decode(s >> 1);
            prop_assert_eq!(l.encode(f.time_ms, f.node, f.seq), Ok(s >> 1));
        }

        #[test]
        fn strictly_increasing_under_any_clock(l in any_layout(), start in 0u64..4_000_000_000_000, steps in steps(), node in any::<u64>()) {
            let mut g = UidGenerator::new(l, NodeMode::Fixed(node & l.node_max()));
            let mut now = start;
            let mut floor = 0u64;
            let mut prev: Option<u64> = None;
            let mut max_time = 0;
            for (dt, raise, count) in steps {
                now = now.saturating_add_signed(dt);
                floor = floor.max(now.saturating_add(raise).saturating_sub(50_000));
                match g.issue_for(b"t", now, floor, count) {
                    Ok(run) => {
                        prop_assert_eq!(run.count(), u64::from(count));
                        for uid in run.uids() {
                            prop_assert!(uid <= i64::MAX as u64);
                            if let Some(p) = prev { prop_assert!(uid > p, "{} after {}", uid, p); }
                            let f = l.decode(uid);
                            prop_assert!(f.time_ms <= run.time_ms);
                            // time at or above the floor (the epoch counts as one)
                            let floor_units = floor.saturating_sub(l.epoch_ms()).div_ceil(l.unit().ms());
                            prop_assert!((f.time_ms - l.epoch_ms()) / l.unit().ms() >= floor_units.min(l.time_max()));
                            prev = Some(uid);
                        }
                        max_time = max_time.max(run.time_ms);
                    }
                    Err(UidExhausted { end_ms }) => prop_assert_eq!(end_ms, l.end_ms()),
                }
            }
            // A restart whose floor is any lease above the reported times, with any clock,
            // starts above everything issued.
            if let Some(p) = prev {
                let mut new = UidGenerator::new(l, g.mode());
                if let Ok((uid, _)) = new.next(b"t", start / 2, max_time + 1) {
                    prop_assert!(uid > p);
                }
            }
        }

        /// `issue_one`, where it answers, issues exactly what `issue_bounded(.., 1)` would:
        /// one generator takes every single ID through it (falling back as the node does),
        /// a twin plans every ID; their IDs, errors and counters agree, under clocks that
        /// mostly stand still (so the shortcut is taken), step, jump back, and floor raises.
        #[test]
        fn issue_one_is_issue_bounded_of_one(
            l in any_layout(),
            start in 0u64..4_000_000_000_000,
            node in any::<u64>(),
            steps in proptest::collection::vec(
                (
                    prop_oneof![6 => Just(0i64), 3 => 1i64..3, 1 => -40_000i64..40_000],
                    prop_oneof![19 => Just(0u64), 1 => 0u64..100_000],
                    prop_oneof![9 => Just(1u32), 1 => 1u32..600],
                ),
                1..300,
            ),
        ) {
            let mode = NodeMode::Fixed(node & l.node_max());
            let (mut fast, mut twin) = (UidGenerator::new(l, mode), UidGenerator::new(l, mode));
            let mut now = start;
            let mut floor = 0u64;
            for (dt, raise, count) in steps {
                now = now.saturating_add_signed(dt);
                floor = floor.max(now.saturating_add(raise).saturating_sub(50_000));
                let want = twin.issue_bounded(0, now, floor, count).map(|r| r.first());
                let shortcut = if count == 1 { fast.issue_one(now, floor) } else { None };
                let got = match shortcut {
                    Some(uid) => Ok(uid),
                    None => fast.issue_bounded(0, now, floor, count).map(|r| r.first()),
                };
                prop_assert_eq!(got, want);
                prop_assert_eq!(fast.stats(), twin.stats());
            }
        }

        #[test]
        fn slot_lanes_increase_and_never_collide(steps in steps(), targets in proptest::collection::vec("[a-z{}]{0,6}", 1..8)) {
            let l = Layout::new(Widths::CLUSTER, EPOCH, TimeUnit::Ms).unwrap();
            let mut g = UidGenerator::new(l, NodeMode::Slot);
            let mut now = EPOCH + 1_000_000;
            let mut seen = std::collections::HashSet::new();
            let mut last_per_slot = std::collections::HashMap::new();
            for (i, (dt, _, count)) in steps.into_iter().enumerate() {
                now = now.saturating_add_signed(dt);
                let t = targets[i % targets.len()].as_bytes();
                let run = g.issue_for(t, now, 0, count).unwrap();
                for uid in run.uids() {
                    prop_assert!(seen.insert(uid));
                    let f = l.decode(uid);
                    prop_assert_eq!(f.node, u64::from(key_slot(t)));
                    if let Some(p) = last_per_slot.insert(f.node, uid) { prop_assert!(uid > p); }
                }
            }
        }

        #[test]
        fn never_panics(time in 0u32..80, node in 0u32..80, seq in 0u32..80, epoch in any::<u64>(),
                        secs in prop::bool::ANY, nodeval in any::<u64>(), slot_mode in prop::bool::ANY,
                        calls in proptest::collection::vec((any::<u64>(), any::<u64>(), any::<u32>(), any::<Vec<u8>>()), 1..20),
                        text in ".{0,20}") {
            let _ = LayoutSpec::parse(&text);
            let _ = TimeUnit::parse(&text);
            let _ = parse_epoch(&text);
            let _ = NodeSpec::parse(&text);
            let unit = if secs { TimeUnit::S } else { TimeUnit::Ms };
            let w = Widths { time, node, seq };
            if let Ok(l) = Layout::new(w, epoch, unit) {
                let _ = l.check_lifetime(nodeval);
                let _ = l.node_mode(NodeSpec::Fixed(nodeval), slot_mode);
                let _ = l.encode(nodeval, nodeval, nodeval);
                let _ = l.decode(nodeval);
                let mode = if slot_mode { NodeMode::Slot } else { NodeMode::Fixed(nodeval) };
                let mut g = UidGenerator::new(l, mode);
                for (now, floor, count, target) in calls {
                    if let Ok(run) = g.issue_for(&target, now, floor, count % (MAX_BATCH + 1)) {
                        let _ = run.uids().take(3).count();
                    }
                }
            }
        }
    }
}
