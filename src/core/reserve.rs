//! The reserve protocol, Redis-free: what a call that hands out sequence values decides (SEQ.NEXT
//! on a key, SEQ.HNEXT on a field of a map, and anything later that reserves), written once.
//! It reads the target through a small port ([`Store`]: its state and its key's IDMP tokens) and
//! the node through another ([`Node`]: the gap, whether the call is a replay, what a missing
//! target starts from), and returns a [`Plan`]: answer a retry, or reserve `count` values and
//! say how the call must replicate. The command stores, replicates and replies as the plan says
//! (`handout::reserve`). The rules (docs/commands.md, docs/durability.md) are [`plan`]'s.

use super::idmp::{Clock, Entry, Lookup, Request, Window};
use super::seq::{Next, NextError, Seq};

/// What the protocol reads of its target: a sequence key, or one field of a map.
pub trait Store {
    /// What the target's tokens remember of a request (a COUNT; a field and a COUNT).
    type Request: Request;
    /// The target's state; `None` when it is missing.
    fn state(&self) -> Option<Seq>;
    /// The IDMP tokens of the target's key; `None` when it has none.
    fn tokens(&self) -> Option<&Window<Self::Request>>;
}

/// What the protocol asks of the node, each only on the paths that need it.
pub trait Node {
    /// The state a missing target starts from (0, marked for the gap when the node inherited
    /// its data).
    fn missing(&self) -> Seq;
    /// `imid.seq-gap`.
    fn gap(&self) -> u64;
    /// Whether the call replays a write (from the primary or the AOF).
    fn is_replay(&self) -> bool;
}

/// An `IDMP token` request: the token, the request (what a retry must repeat), and the clock
/// the call decides by.
pub struct Idmp<'a, R: Request> {
    pub token: &'a [u8],
    pub ask: R::Ask<'a>,
    pub clock: Clock,
}

/// What the call does.
#[derive(Debug, PartialEq, Eq)]
pub enum Plan<R> {
    /// A retry: the token's first call, with the same request, replied `last`. Nothing changes
    /// and nothing replicates.
    Duplicate(u64),
    /// Reserve.
    Reserve(Reservation<R>),
}

/// A reservation to store, replicate and reply.
#[derive(Debug, PartialEq, Eq)]
pub struct Reservation<R> {
    /// The new state and the block's last value.
    pub next: Next,
    /// The call replays a write: it hands nothing out (the primary did).
    pub replay: bool,
    /// With IDMP: the token to record.
    pub record: Option<Record<R>>,
    /// Replaying the call as called reproduces it exactly; else it replicates its explicit
    /// effect.
    pub as_called: bool,
}

/// A token to record: drop the `dropped` oldest tokens, then append `entry`.
#[derive(Debug, PartialEq, Eq)]
pub struct Record<R> {
    pub dropped: usize,
    pub entry: Entry<R>,
}

/// Why a call is refused; nothing changed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// The block would pass 2^63-1.
    Overflow,
    /// COUNT 0.
    ZeroCount,
    /// The token was used on this key for another request.
    Conflict,
    /// The token breaks the length rule.
    Token,
}

impl From<NextError> for Refusal {
    fn from(e: NextError) -> Refusal {
        match e {
            NextError::Overflow => Refusal::Overflow,
            NextError::ZeroCount => Refusal::ZeroCount,
        }
    }
}

/// What a call of `count` values on `store` (with `idmp`, when given) does. The rules
/// (docs/commands.md, docs/durability.md):
/// - a target this process did not write itself (loaded, replicated, or missing on a node that
///   inherited its data) skips `imid.seq-gap` values at its first NEXT, unless the call is a
///   replay (from the primary or the AOF), which must reproduce the recorded effect;
/// - with `IDMP token`, a live token recorded for the same request answers its first reply and
///   changes nothing; one recorded for another request is refused; otherwise the call reserves
///   and records the token, after dropping what the IDMP clock says (expired tokens, then the
///   oldest beyond the window's size);
/// - a call replicates as called when replaying it reproduces its effect exactly: not when it
///   skipped the gap (replay could not know it was due), nor when its IDMP clock is not one
///   replicas replay by; those replicate their explicit effect.
#[inline(always)]
pub fn plan<S: Store>(
    store: &S,
    node: &impl Node,
    count: u64,
    idmp: Option<&Idmp<'_, S::Request>>,
) -> Result<Plan<S::Request>, Refusal> {
    if let Some(i) = idmp {
        let lookup = store
            .tokens()
            .map_or(Lookup::Miss, |w| w.lookup(i.token, i.ask, i.clock.now_ms));
        match lookup {
            Lookup::Hit(last) => return Ok(Plan::Duplicate(last)),
            Lookup::Conflict => return Err(Refusal::Conflict),
            Lookup::Miss => {}
        }
    }
    let old = store.state().unwrap_or_else(|| node.missing());
    // Only a marked state can make replay differ, so only then is the node asked whether this
    // call is itself a replay (a replica's and an AOF's targets are all marked).
    let replay = old.needs_gap() && node.is_replay();
    let next = if replay {
        old.replay_next(count)
    } else {
        old.next(count, node.gap())
    }?;
    let record = match idmp {
        None => None,
        Some(i) => Some(Record {
            dropped: store
                .tokens()
                .map_or(0, |w| w.plan(i.clock.now_ms, i.clock.max)),
            entry: Entry::new(
                i.token,
                next.last,
                i.clock.expires_ms(),
                S::Request::of(i.ask),
            )
            .ok_or(Refusal::Token)?,
        }),
    };
    let as_called = !next.skipped_gap && idmp.is_none_or(|i| i.clock.verbatim);
    Ok(Plan::Reserve(Reservation {
        next,
        replay,
        record,
        as_called,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::idmp::FieldRequest;

    /// A target in memory: a sequence key (`R` = u64) or a map's field.
    struct Mem<R = u64> {
        state: Option<Seq>,
        tokens: Option<Window<R>>,
    }

    impl<R> Default for Mem<R> {
        fn default() -> Mem<R> {
            Mem {
                state: None,
                tokens: None,
            }
        }
    }

    impl<R: Request> Store for Mem<R> {
        type Request = R;
        fn state(&self) -> Option<Seq> {
            self.state
        }
        fn tokens(&self) -> Option<&Window<R>> {
            self.tokens.as_ref()
        }
    }

    impl<R: Request> Mem<R> {
        /// Stores what a plan reserved, as a command would.
        fn commit(&mut self, p: &Plan<R>) {
            if let Plan::Reserve(r) = p {
                self.state = Some(r.next.state);
                if let Some(rec) = &r.record {
                    self.tokens
                        .get_or_insert_with(Window::default)
                        .apply(rec.dropped, rec.entry.clone());
                }
            }
        }
    }

    struct N {
        inherited: bool,
        gap: u64,
        replay: bool,
    }

    impl Node for N {
        fn missing(&self) -> Seq {
            Seq::new(0, self.inherited).unwrap()
        }
        fn gap(&self) -> u64 {
            self.gap
        }
        fn is_replay(&self) -> bool {
            self.replay
        }
    }

    const PRIMARY: N = N {
        inherited: false,
        gap: 1000,
        replay: false,
    };

    fn clock(now_ms: u64, verbatim: bool) -> Clock {
        Clock {
            now_ms,
            ttl_ms: 300_000,
            max: 2,
            verbatim,
        }
    }

    fn reserved<R: Request>(p: Result<Plan<R>, Refusal>) -> Reservation<R> {
        match p {
            Ok(Plan::Reserve(r)) => r,
            other => panic!("not a reservation: {other:?}"),
        }
    }

    #[test]
    fn a_plain_next_counts_up_and_replicates_as_called() {
        let mut m: Mem = Mem::default();
        let r = reserved(plan(&m, &PRIMARY, 1, None));
        assert_eq!((r.next.last, r.replay, r.as_called), (1, false, true));
        assert_eq!(r.record, None);
        m.commit(&Plan::Reserve(r));
        let r = reserved(plan(&m, &PRIMARY, 5, None));
        assert_eq!(r.next.last, 6, "a block of 5 after 1");
    }

    #[test]
    fn the_gap_is_skipped_once_and_then_replicated_as_an_effect() {
        let m: Mem = Mem {
            state: Seq::new(10, true),
            tokens: None,
        };
        let r = reserved(plan(&m, &PRIMARY, 1, None));
        assert_eq!(r.next.last, 1011);
        assert!(r.next.skipped_gap && !r.as_called, "replay could not know");
        // A missing target on a node that inherited its data skips it too.
        let inherited = N {
            inherited: true,
            ..PRIMARY
        };
        let r = reserved(plan(&Mem::<u64>::default(), &inherited, 1, None));
        assert_eq!(r.next.last, 1001);
    }

    #[test]
    fn a_replay_never_skips_and_hands_nothing_out() {
        let m: Mem = Mem {
            state: Seq::new(10, true),
            tokens: None,
        };
        let replica = N {
            replay: true,
            ..PRIMARY
        };
        let r = reserved(plan(&m, &replica, 1, None));
        assert_eq!((r.next.last, r.replay, r.as_called), (11, true, true));
        // An unmarked state never asks: a replay of it is an ordinary NEXT.
        let m: Mem = Mem {
            state: Seq::new(10, false),
            tokens: None,
        };
        let r = reserved(plan(&m, &replica, 1, None));
        assert_eq!((r.next.last, r.replay), (11, false));
    }

    #[test]
    fn refusals_change_nothing() {
        let m: Mem = Mem {
            state: Seq::new(crate::core::seq::MAX_VALUE, false),
            tokens: None,
        };
        assert_eq!(plan(&m, &PRIMARY, 1, None), Err(Refusal::Overflow));
        assert_eq!(
            plan(&Mem::<u64>::default(), &PRIMARY, 0, None),
            Err(Refusal::ZeroCount)
        );
        let long = [b'x'; 65];
        let i = Idmp {
            token: &long,
            ask: 1,
            clock: clock(0, true),
        };
        assert_eq!(
            plan(&Mem::<u64>::default(), &PRIMARY, 1, Some(&i)),
            Err(Refusal::Token)
        );
    }

    #[test]
    fn a_retry_gets_its_first_answer_and_another_request_is_refused() {
        let mut m: Mem = Mem::default();
        let i = Idmp {
            token: b"msg-1",
            ask: 3,
            clock: clock(1_000, true),
        };
        let p = plan(&m, &PRIMARY, 3, Some(&i)).unwrap();
        let Plan::Reserve(r) = &p else {
            panic!("{p:?}")
        };
        assert_eq!((r.next.last, r.as_called), (3, true));
        let rec = r.record.as_ref().unwrap();
        assert_eq!(
            (rec.dropped, rec.entry.last, rec.entry.expires_ms),
            (0, 3, 301_000)
        );
        m.commit(&p);
        assert_eq!(plan(&m, &PRIMARY, 3, Some(&i)), Ok(Plan::Duplicate(3)));
        let other = Idmp { ask: 4, ..i };
        assert_eq!(plan(&m, &PRIMARY, 4, Some(&other)), Err(Refusal::Conflict));
        // Once expired by the clock the call decides by, the token reserves again.
        let later = Idmp {
            clock: clock(301_000, true),
            ..i
        };
        let r = reserved(plan(&m, &PRIMARY, 3, Some(&later)));
        assert_eq!(r.next.last, 6);
        assert_eq!(r.record.unwrap().dropped, 1, "the expired token goes");
    }

    #[test]
    fn an_idmp_clock_replicas_do_not_replay_by_replicates_the_effect() {
        let i = Idmp {
            token: b"t",
            ask: 1,
            clock: clock(0, false),
        };
        let r = reserved(plan(&Mem::<u64>::default(), &PRIMARY, 1, Some(&i)));
        assert!(!r.as_called);
    }

    #[test]
    fn the_window_keeps_its_size() {
        let mut m: Mem = Mem::default();
        for (n, t) in [b"a", b"b", b"c"].iter().enumerate() {
            let i = Idmp {
                token: *t,
                ask: 1,
                clock: clock(n as u64, true),
            };
            let p = plan(&m, &PRIMARY, 1, Some(&i)).unwrap();
            m.commit(&p);
        }
        assert_eq!(
            m.tokens.as_ref().unwrap().len(),
            2,
            "max 2: the oldest went"
        );
    }

    /// A map's token names its field and COUNT exactly: two fields whose 64-bit FNV-1a
    /// fingerprints collide (found by a birthday search, issue 28) are two requests, so the
    /// second is refused rather than answered with the first one's block. A token loaded from
    /// a file of the map's first token layout (only the fingerprint known) still answers its
    /// retry.
    #[test]
    fn a_map_token_names_its_field_exactly() {
        let a: &[u8] = &[0x46, 0xe9, 0xc7, 0x40, 0x61, 0x37, 0x7e, 0xf1, 0xa7];
        let b: &[u8] = &[0x46, 0xbc, 0x73, 0x36, 0x8d, 0xbe, 0x2e, 0xea, 0xd0];
        use crate::core::idmp::legacy_fingerprint;
        assert_eq!(
            legacy_fingerprint(a, 3),
            legacy_fingerprint(b, 3),
            "the crafted pair collides under the old fingerprint"
        );
        let mut m: Mem<FieldRequest> = Mem::default();
        let call = |field: &'static [u8], count| Idmp {
            token: b"tok",
            ask: (field, count),
            clock: clock(1_000, true),
        };
        let p = plan(&m, &PRIMARY, 3, Some(&call(a, 3))).unwrap();
        m.commit(&p);
        assert_eq!(
            plan(&m, &PRIMARY, 3, Some(&call(a, 3))),
            Ok(Plan::Duplicate(3))
        );
        assert_eq!(
            plan(&m, &PRIMARY, 3, Some(&call(b, 3))),
            Err(Refusal::Conflict)
        );
        assert_eq!(
            plan(&m, &PRIMARY, 4, Some(&call(a, 4))),
            Err(Refusal::Conflict)
        );
        // A legacy token: compared by its fingerprint.
        let mut old: Mem<FieldRequest> = Mem::default();
        old.tokens.get_or_insert_with(Window::default).apply(
            0,
            Entry::new(
                b"tok",
                7,
                301_000,
                FieldRequest::legacy(legacy_fingerprint(a, 3)),
            )
            .unwrap(),
        );
        assert_eq!(
            plan(&old, &PRIMARY, 3, Some(&call(a, 3))),
            Ok(Plan::Duplicate(7))
        );
        let c: &'static [u8] = b"other";
        assert_eq!(
            plan(&old, &PRIMARY, 3, Some(&call(c, 3))),
            Err(Refusal::Conflict)
        );
    }
}
