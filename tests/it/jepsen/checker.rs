//! The checker over every successful reply of a run:
//! - no sequence value received twice on one key (plain `SEQ.NEXT`; on an IDMP key, one value
//!   answered to two different tokens counts too);
//! - no message ID and no UID received twice (plain, and IM.SEND's: a retry reading back its
//!   message's IDs, same client message id, is the same receipt);
//! - no IDMP token answered with two different values;
//! - no IM.SEND client message id answered with two different seqs ("losing theirs"), and no
//!   (conversation, seq) answered to two different client message ids ("seqs given to two
//!   messages");
//! - per lane (a sequence key; for message IDs and UIDs the slot in Cluster, the whole
//!   deployment with Sentinel), every value of a later primary term above every value of the
//!   earlier terms (terms ordered by when a client first met them); a retry's answer, which
//!   reads back what an earlier term issued, is left out of this one;
//! - readers (IM.SYNC): every (conversation, inbox, seq, member) a reader was shown is what the
//!   surviving data (the last primary's inbox, after the run) holds at that seq, unless the cap
//!   dropped that seq there (its trimmed marker at or above it); and the message shown is no
//!   send whose client message id was answered with another seq ("reads shown then taken
//!   back", counted apart for reads a primary and a replica answered).
//!
//! - every reply its own command's: the load counts a reply of another shape or layout
//!   ([`Misplaced`]), which fails every row whatever `IMID_JEPSEN_EXPECT` says.
//!
//! It counts each category and keeps a few examples, each naming the terms (node, run id,
//! replication ID) that answered; duplicates answered twice by one term (a node repeating
//! itself, which no partition explains) are counted apart.
use super::load::{member_token, Kind, Rec, Shown, Term, TokenRec};
use std::collections::{BTreeMap, BTreeSet, HashMap};

const EXAMPLES: usize = 4;

/// One term's values in one lane: the lowest, the highest, all.
type TermValues = (u128, u128, Vec<u128>);

/// One category's result.
#[derive(Default, Debug)]
pub struct Count {
    /// Values checked.
    pub checked: usize,
    /// Values received more than once (each such value counts once).
    pub twice: usize,
    /// Of those, values one term answered more than once.
    pub same_term: usize,
    /// Values of a later term at or below the highest value of an earlier term, in their lane.
    pub order: usize,
    pub examples: Vec<String>,
}

/// Tokens (IDMP tokens, IM.SEND client message ids) answered with two or more values, of
/// `tokens` answered at least once.
#[derive(Default, Debug)]
pub struct Tokens {
    pub two_values: usize,
    pub tokens: usize,
    pub examples: Vec<String>,
}

#[derive(Default, Debug)]
pub struct Findings {
    pub seq: Count,
    pub msgid: Count,
    pub uid: Count,
    pub idmp: Tokens,
    /// IM.SEND client message ids answered with two seqs.
    pub im_send: Tokens,
    /// IM.SEND's seqs per conversation, tagged by client message id: `twice` counts the seqs
    /// given to two messages.
    pub im_seq: Count,
    pub reads: Reads,
    pub misplaced: Misplaced,
}

/// Replies that were not their command's (a lost reply shifts every later one on its
/// connection), as the load counted them, with the first few.
#[derive(Default, Debug)]
pub struct Misplaced {
    pub count: u64,
    pub examples: Vec<String>,
}

/// The surviving data: per (conversation, inbox), its members by seq and its trimmed marker.
pub type Final = HashMap<(u16, u8), (BTreeMap<i64, Vec<u8>>, i64)>;

/// The readers' findings, over the distinct (conversation, inbox, seq, member) shown.
#[derive(Default, Debug)]
pub struct Reads {
    pub shown: usize,
    /// Shown, then taken back (either rule), by a primary and by a replica (a message both
    /// showed counts in both).
    pub taken_back: [usize; 2],
    /// Of those, messages whose send was answered with another seq.
    pub other_seq: [usize; 2],
    /// Shown at a seq the cap dropped from the surviving inbox (not checked).
    pub trimmed: usize,
    pub examples: Vec<String>,
}

/// Each distinct message shown (conversation, inbox, seq, member): shown by a primary, by a
/// replica; its first showing.
type Distinct<'a> = BTreeMap<(u16, u8, i64, &'a [u8]), ([bool; 2], &'a Shown)>;

/// Checks what the readers were shown against the surviving data and the IM.SEND answers.
pub fn reads(shown: &[Shown], fin: &Final, sends: &[TokenRec]) -> Reads {
    let mut answered: HashMap<u64, BTreeSet<i64>> = HashMap::new();
    for r in sends {
        answered.entry(r.token).or_default().insert(r.value);
    }
    // Each distinct message shown: by a primary, by a replica, the first showing.
    let mut distinct = Distinct::new();
    for s in shown {
        let e = distinct
            .entry((s.conv, s.inbox, s.seq, s.member.as_slice()))
            .or_insert(([false; 2], s));
        e.0[usize::from(!s.primary)] = true;
    }
    let mut r = Reads {
        shown: distinct.len(),
        ..Reads::default()
    };
    let text = |m: &[u8]| String::from_utf8_lossy(m).into_owned();
    for ((conv, inbox, seq, member), (by, first)) in &distinct {
        let (held, trimmed) = fin
            .get(&(*conv, *inbox))
            .map_or((None, 0), |(m, t)| (m.get(seq), *t));
        let other = member_token(member)
            .and_then(|t| answered.get(&t))
            .and_then(|seqs| seqs.iter().find(|&&v| v != *seq).copied());
        let gone = match held {
            Some(h) => h.as_slice() != *member,
            None => *seq > trimmed,
        };
        if held.is_none() && *seq <= trimmed {
            r.trimmed += 1;
        }
        if !gone && other.is_none() {
            continue;
        }
        for (k, &b) in by.iter().enumerate() {
            if b {
                r.taken_back[k] += 1;
                if other.is_some() {
                    r.other_seq[k] += 1;
                }
            }
        }
        if r.examples.len() < EXAMPLES {
            r.examples.push(format!(
                "conversation {conv} inbox {inbox} seq {seq}: shown {} by {} ({}) at {} ms; \
                 the surviving inbox holds {}{}",
                text(member),
                first.node,
                if first.primary { "primary" } else { "replica" },
                first.at_ms,
                held.map_or_else(|| "nothing".to_owned(), |h| text(h)),
                other.map_or_else(String::new, |v| format!("; its send was answered seq {v}"))
            ));
        }
    }
    r
}

impl Findings {
    /// Duplicates of any kind (the fence's target: 0).
    pub fn duplicates(&self) -> usize {
        self.seq.twice
            + self.msgid.twice
            + self.uid.twice
            + self.idmp.two_values
            + self.im_send.two_values
            + self.im_seq.twice
    }

    pub fn order_violations(&self) -> usize {
        self.seq.order + self.msgid.order + self.uid.order + self.im_seq.order
    }

    pub fn same_term(&self) -> usize {
        self.seq.same_term + self.msgid.same_term + self.uid.same_term + self.im_seq.same_term
    }

    pub fn print(&self, name: &str) {
        for (what, c) in [
            ("sequence values", &self.seq),
            ("message IDs", &self.msgid),
            ("UIDs", &self.uid),
            ("IM.SEND seqs (twice: given to two messages)", &self.im_seq),
        ] {
            eprintln!(
                "{name}: {what}: {} checked, {} received twice ({} by one term), {} below an \
                 earlier term's",
                c.checked, c.twice, c.same_term, c.order
            );
            for e in &c.examples {
                eprintln!("{name}:   {e}");
            }
        }
        for (what, t) in [
            ("IDMP tokens", &self.idmp),
            ("IM.SEND client message ids", &self.im_send),
        ] {
            eprintln!(
                "{name}: {what}: {} answered with two values, of {}",
                t.two_values, t.tokens
            );
            for e in &t.examples {
                eprintln!("{name}:   {e}");
            }
        }
        let r = &self.reads;
        eprintln!(
            "{name}: reads: {} messages shown; shown then taken back: {} by a primary ({} of them \
             answered another seq), {} by a replica ({}); {} at seqs the cap dropped (unchecked)",
            r.shown, r.taken_back[0], r.other_seq[0], r.taken_back[1], r.other_seq[1], r.trimmed
        );
        for e in &r.examples {
            eprintln!("{name}:   {e}");
        }
        eprintln!(
            "{name}: replies not their command's: {}",
            self.misplaced.count
        );
        for e in &self.misplaced.examples {
            eprintln!("{name}:   {e}");
        }
    }
}

fn label(terms: &[Term], t: u16) -> String {
    terms
        .get(t as usize)
        .map_or_else(|| format!("term {t}"), Term::label)
}

/// One value received: its lane, the value, the term that answered and when (ms), a tag that
/// tells apart receipts that are the same request (an IDMP token or a client message id
/// answered again: not a duplicate), and whether that term issued it (a retry's answer reads
/// back what may be an earlier term's: left out of the order).
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Debug)]
struct Item {
    lane: u32,
    v: u128,
    term: u16,
    at_ms: u32,
    tag: u64,
    issued: bool,
}

/// Counts values received under two tags, and orders terms per lane.
fn check(what: &str, mut items: Vec<Item>, lanes: impl Fn(u32) -> u32, terms: &[Term]) -> Count {
    let mut c = Count {
        checked: items.len(),
        ..Count::default()
    };
    items.sort_unstable();
    let mut i = 0;
    while i < items.len() {
        let Some(&Item { lane, v, .. }) = items.get(i) else {
            break;
        };
        let mut j = i;
        while items.get(j).is_some_and(|x| x.lane == lane && x.v == v) {
            j += 1;
        }
        let run = items.get(i..j).unwrap_or_default();
        let tags: BTreeSet<u64> = run.iter().map(|x| x.tag).collect();
        if tags.len() > 1 {
            c.twice += 1;
            let mut by_term: HashMap<u16, BTreeSet<u64>> = HashMap::new();
            for x in run {
                by_term.entry(x.term).or_default().insert(x.tag);
            }
            if by_term.values().any(|t| t.len() > 1) {
                c.same_term += 1;
            }
            if c.examples.len() < EXAMPLES {
                let who: Vec<String> = run
                    .iter()
                    .map(|x| format!("{} at {} ms", label(terms, x.term), x.at_ms))
                    .collect();
                c.examples
                    .push(format!("{what} {v} (lane {lane}) from {}", who.join(", ")));
            }
        }
        i = j;
    }
    // Order: per lane, the terms as first met; a value at or below the highest of an earlier
    // term counts.
    let first = |t: u16| terms.get(t as usize).map_or(u32::MAX, |x| x.first_ms);
    let mut per_lane: HashMap<u32, HashMap<u16, TermValues>> = HashMap::new();
    for &Item {
        lane, v, term: t, ..
    } in items.iter().filter(|x| x.issued)
    {
        let e = per_lane
            .entry(lanes(lane))
            .or_default()
            .entry(t)
            .or_insert((u128::MAX, 0, Vec::new()));
        e.0 = e.0.min(v);
        e.1 = e.1.max(v);
        e.2.push(v);
    }
    let mut order_examples = Vec::new();
    for (lane, by_term) in &per_lane {
        let mut ts: Vec<&u16> = by_term.keys().collect();
        ts.sort_by_key(|&&t| (first(t), t));
        let mut high: Option<(u128, u16)> = None;
        for &t in ts {
            let Some((min, max, vs)) = by_term.get(&t) else {
                continue;
            };
            if let Some((h, ht)) = high {
                let below = vs.iter().filter(|&&v| v <= h).count();
                c.order += below;
                if below > 0 && order_examples.len() < 2 {
                    order_examples.push(format!(
                        "{what} lane {lane}: {} values from {} (lowest {min}) at or below {h} \
                         from the earlier {}",
                        below,
                        label(terms, t),
                        label(terms, ht)
                    ));
                }
            }
            if high.is_none_or(|(h, _)| *max > h) {
                high = Some((*max, t));
            }
        }
    }
    c.examples.extend(order_examples);
    c
}

/// The tag of a token's receipts: the token, marked by its kind (plain receipts are tagged
/// by their index, below 2^62).
const IDMP_TAG: u64 = 1 << 63;
const IM_SEND_TAG: u64 = 1 << 62;

/// Answers under tokens: counts the tokens answered with two or more values, and gives each
/// token's distinct values (its first receipt of each) to `push` as items tagged `tag | token`.
fn tokens(
    rs: &[TokenRec],
    tag: u64,
    terms: &[Term],
    mut push: impl FnMut(&TokenRec, u64),
) -> Tokens {
    let mut answers: HashMap<u64, Vec<&TokenRec>> = HashMap::new();
    for r in rs {
        answers.entry(r.token).or_default().push(r);
    }
    let mut t = Tokens {
        tokens: answers.len(),
        ..Tokens::default()
    };
    let mut keys: Vec<&u64> = answers.keys().collect();
    keys.sort();
    for token in keys {
        let Some(rs) = answers.get(token) else {
            continue;
        };
        let mut values: Vec<&TokenRec> = Vec::new();
        for r in rs {
            if !values.iter().any(|v| v.value == r.value) {
                values.push(r);
            }
            push(r, tag | *token);
        }
        if values.len() > 1 {
            t.two_values += 1;
            if t.examples.len() < EXAMPLES {
                let all: Vec<String> = rs
                    .iter()
                    .map(|r| {
                        format!(
                            "{} (duplicate {}) from {} at {} ms",
                            r.value,
                            u8::from(r.duplicate),
                            label(terms, r.term),
                            r.at_ms
                        )
                    })
                    .collect();
                t.examples
                    .push(format!("token {token:x}: {}", all.join("; ")));
            }
        }
    }
    t
}

/// The receipts already taken: (category, lane, value, tag).
type Seen = BTreeSet<(u8, u32, u128, u64)>;

/// Adds `item` to `items` (category `cat`) unless the same tag already gave the same value in
/// its lane there (a token's retry).
fn push_once(items: &mut Vec<Item>, cat: u8, seen: &mut Seen, item: Item) {
    if seen.insert((cat, item.lane, item.v, item.tag)) {
        items.push(item);
    }
}

/// Checks a run's replies: the plain load's, the IDMP clients' and the IM.SEND clients'.
/// `id_lane`: the lane of a conversation's message IDs and UIDs.
pub fn run(
    recs: &[Rec],
    idmp: &[TokenRec],
    sends: &[TokenRec],
    terms: &[Term],
    id_lane: impl Fn(u16) -> u32,
) -> Findings {
    let n_convs = 1 << 16;
    let mut seq = Vec::new();
    let mut msgid = Vec::new();
    let mut uid = Vec::new();
    let mut im_seq = Vec::new();
    for (i, r) in recs.iter().enumerate() {
        let item = |lane: u32| Item {
            lane,
            v: r.v,
            term: r.term,
            at_ms: r.at_ms,
            tag: i as u64,
            issued: true,
        };
        match r.kind {
            Kind::Seq => seq.push(item(u32::from(r.conv))),
            Kind::MsgId => msgid.push(item(id_lane(r.conv))),
            Kind::Uid => uid.push(item(id_lane(r.conv))),
        }
    }
    let mut seen = Seen::new();
    let item = |r: &TokenRec, lane: u32, v: u128, tag: u64| Item {
        lane,
        v,
        term: r.term,
        at_ms: r.at_ms,
        tag,
        issued: !r.duplicate,
    };
    // IDMP keys: each (token, value) once, tagged by its token, on a lane of its own per key.
    let idmp = tokens(idmp, IDMP_TAG, terms, |r, tag| {
        let v = u128::try_from(r.value).unwrap_or(0);
        push_once(
            &mut seq,
            0,
            &mut seen,
            item(r, n_convs + u32::from(r.conv), v, tag),
        );
    });
    // IM.SEND: its seqs on their own, its message IDs and UIDs with the plain ones.
    let im_send = tokens(sends, IM_SEND_TAG, terms, |r, tag| {
        let v = u128::try_from(r.value).unwrap_or(0);
        push_once(
            &mut im_seq,
            1,
            &mut seen,
            item(r, u32::from(r.conv), v, tag),
        );
        let lane = id_lane(r.conv);
        if let Some(v) = r.msgid {
            push_once(&mut msgid, 2, &mut seen, item(r, lane, v, tag));
        }
        if let Some(v) = r.uid {
            push_once(&mut uid, 3, &mut seen, item(r, lane, v, tag));
        }
    });
    Findings {
        seq: check("sequence value", seq, |l| l, terms),
        msgid: check("message ID", msgid, |l| l, terms),
        uid: check("UID", uid, |l| l, terms),
        idmp,
        im_send,
        im_seq: check("IM.SEND seq", im_seq, |l| l, terms),
        reads: Reads::default(),
        misplaced: Misplaced::default(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn term(node: &str, first_ms: u32) -> Term {
        Term {
            node: node.to_owned(),
            run_id: format!("run-{node}"),
            replid: "r".to_owned(),
            first_ms,
        }
    }

    fn rec(kind: Kind, conv: u16, term: u16, v: u128) -> Rec {
        Rec {
            kind,
            conv,
            term,
            at_ms: 0,
            v,
        }
    }

    /// Records of one kind, each `(conv, term, value)`.
    fn recs(kind: Kind, rows: &[(u16, u16, u128)]) -> Vec<Rec> {
        rows.iter()
            .map(|&(conv, term, v)| rec(kind, conv, term, v))
            .collect()
    }

    fn idmp(token: u64, term: u16, value: i64) -> TokenRec {
        TokenRec {
            conv: 0,
            token,
            term,
            at_ms: 0,
            value,
            duplicate: false,
            msgid: None,
            uid: None,
        }
    }

    /// An IM.SEND answer on conversation `conv`: client message id `id`, `seq`, and the IDs
    /// `ids` (message ID and UID; None: nil, nil), a retry's when `duplicate`.
    fn send(
        id: u64,
        conv: u16,
        term: u16,
        seq: i64,
        ids: Option<u128>,
        duplicate: bool,
    ) -> TokenRec {
        TokenRec {
            conv,
            duplicate,
            msgid: ids,
            uid: ids,
            ..idmp(id, term, seq)
        }
    }

    /// The checker itself (no servers): a clean history passes; each kind of fault a run can
    /// show is counted where it belongs.
    #[test]
    fn checker_counts_each_kind_of_duplicate_and_regression() {
        let terms = [term("a", 0), term("b", 100)];
        // Clean: a's values, then b's above them; a token retried with its first answer.
        let clean = [
            recs(Kind::Seq, &[(0, 0, 1), (0, 0, 2), (0, 1, 1003), (1, 1, 1)]),
            recs(Kind::MsgId, &[(0, 0, 10), (0, 1, 20)]),
            recs(Kind::Uid, &[(0, 0, 10), (1, 1, 30)]),
        ]
        .concat();
        let f = run(&clean, &[idmp(1, 0, 5), idmp(1, 1, 5)], &[], &terms, |_| 0);
        assert_eq!((f.duplicates(), f.order_violations()), (0, 0), "{f:?}");
        assert_eq!((f.seq.checked, f.idmp.tokens), (5, 1));

        // The old primary (a) keeps issuing after b began: 3 twice on key 0, an ID and a UID
        // twice, a token answered 5 by a and 9 by b.
        let dirty = [
            recs(Kind::Seq, &[(0, 0, 3), (0, 1, 3), (0, 1, 4)]),
            recs(Kind::MsgId, &[(0, 0, 10), (0, 1, 10)]),
            recs(Kind::Uid, &[(0, 0, 7), (1, 1, 7), (1, 1, 6)]),
        ]
        .concat();
        let f = run(&dirty, &[idmp(1, 0, 5), idmp(1, 1, 9)], &[], &terms, |_| 0);
        assert_eq!(f.seq.twice, 1, "{f:?}");
        assert_eq!(f.seq.order, 1, "b's 3 is not above a's 3");
        assert_eq!((f.msgid.twice, f.uid.twice, f.idmp.two_values), (1, 1, 1));
        assert_eq!(f.uid.order, 2, "b's 7 and 6 are not above a's 7");
        assert_eq!(f.same_term(), 0);
        assert!(f.seq.examples.iter().any(|e| e.contains("run-a")));

        // One term repeating itself is counted apart; UIDs of different lanes are not
        // ordered against each other.
        let repeat = [rec(Kind::Seq, 0, 0, 3), rec(Kind::Seq, 0, 0, 3)];
        let f = run(&repeat, &[], &[], &terms, |_| 0);
        assert_eq!((f.seq.twice, f.seq.same_term), (1, 1));
        let lanes = [rec(Kind::Uid, 0, 0, 7), rec(Kind::Uid, 1, 1, 6)];
        let f = run(&lanes, &[], &[], &terms, u32::from);
        assert_eq!(f.uid.order, 0);
        // Two tokens answered the same value on one IDMP key: a sequence value twice.
        let f = run(&[], &[idmp(1, 0, 5), idmp(2, 1, 5)], &[], &terms, |_| 0);
        assert_eq!((f.seq.twice, f.idmp.two_values), (1, 0));
    }

    /// IM.SEND answers: a retry reading back its message (same client message id, same
    /// seq and IDs, or nil IDs) is no duplicate and, when a later term reads back an earlier
    /// term's IDs, no regression; a message losing its seq, a seq given to two messages, and
    /// IDs given to two messages are counted, each where it belongs.
    #[test]
    fn checker_counts_im_send_losses_and_seqs_given_twice() {
        let terms = [term("a", 0), term("b", 100)];
        // Clean: message 1 sent on a, read back by b (a retry), then without IDs (its
        // inbox member dropped); message 2 on b above a's seq and IDs; message 4 answered
        // first by b's retry, with IDs a issued (below a's highest); plain IDs.
        let sends = [
            send(1, 0, 0, 7, Some(50), false),
            send(1, 0, 1, 7, Some(50), true),
            send(1, 0, 1, 7, None, true),
            send(2, 0, 1, 8, Some(60), false),
            send(3, 1, 1, 7, Some(61), false),
            send(4, 2, 1, 3, Some(45), true),
        ];
        let plain = recs(Kind::MsgId, &[(0, 0, 40), (0, 1, 70)]);
        let f = run(&plain, &[], &sends, &terms, |_| 0);
        assert_eq!((f.duplicates(), f.order_violations()), (0, 0), "{f:?}");
        assert_eq!(
            (f.im_send.tokens, f.im_seq.checked, f.msgid.checked),
            (4, 4, 6)
        );

        // Message 1's first answer (seq 7 on a) lost on b: b answers it 9 with new IDs, and
        // gives 7 to message 2; message 3 gets a's message ID and UID 50 again, and a plain
        // UID of a is message 1's second UID.
        let sends = [
            send(1, 0, 0, 7, Some(50), false),
            send(1, 0, 1, 9, Some(52), false),
            send(2, 0, 1, 7, Some(51), false),
            send(3, 1, 1, 1, Some(50), false),
        ];
        let plain = recs(Kind::Uid, &[(2, 0, 52)]);
        let f = run(&plain, &[], &sends, &terms, |_| 0);
        assert_eq!((f.im_send.two_values, f.im_send.tokens), (1, 3), "{f:?}");
        assert_eq!(
            f.im_seq.twice, 1,
            "seq 7 of conversation 0 went to messages 1 and 2"
        );
        assert_eq!(f.im_seq.order, 1, "b's 7 is not above a's 7");
        assert_eq!((f.msgid.twice, f.uid.twice, f.seq.twice), (1, 2, 0));
        assert_eq!(f.duplicates(), 5);
        assert!(f.im_send.examples.iter().any(|e| e.contains("run-b")));
        // One term giving a seq to two messages is a node repeating itself.
        let f = run(
            &[],
            &[],
            &[send(1, 0, 0, 3, None, false), send(2, 0, 0, 3, None, false)],
            &terms,
            |_| 0,
        );
        assert_eq!((f.im_seq.twice, f.same_term()), (1, 1));
    }

    /// Readers: a message shown where the surviving inbox holds it passes, and so does one at a
    /// seq the cap dropped; a message the surviving inbox lacks or holds another at, and one
    /// whose send was answered with another seq, count, by the role of the node that showed it.
    #[test]
    fn checker_counts_reads_taken_back() {
        use crate::jepsen::load::member_token;
        let shown = |seq: i64, token: u64, primary: bool| Shown {
            conv: 0,
            inbox: 0,
            seq,
            member: format!("ID|1|u1|m{token:x}").into_bytes(),
            primary,
            node: "n".to_owned(),
            at_ms: 0,
        };
        assert_eq!(member_token(b"D1VO-8H8O-0006-D3E6|7|u1|m1f"), Some(0x1f));
        let mut held = BTreeMap::new();
        held.insert(3, b"ID|1|u1|m3".to_vec());
        held.insert(4, b"ID|1|u1|m4".to_vec());
        held.insert(5, b"ID|1|u1|m9".to_vec());
        let fin: Final = [((0, 0), (held, 2))].into_iter().collect();
        // Token 4's send answered 4, token 6's 6 then (after a failover) 7.
        let sends = [send(4, 0, 0, 4, None, false), send(6, 0, 0, 6, None, false)];
        let clean = [shown(1, 1, true), shown(3, 3, false), shown(4, 4, true)];
        let r = reads(&clean, &fin, &sends);
        assert_eq!((r.shown, r.taken_back, r.trimmed), (3, [0, 0], 1), "{r:?}");
        let sends = [sends.to_vec(), vec![send(6, 0, 1, 7, None, false)]].concat();
        let dirty = [
            shown(5, 5, true),
            shown(5, 5, false),
            shown(6, 6, false),
            shown(8, 8, true),
        ];
        let r = reads(&dirty, &fin, &sends);
        assert_eq!(r.taken_back, [2, 2], "{r:?}");
        assert_eq!(r.other_seq, [0, 1], "{r:?}");
        assert!(r.examples.iter().any(|e| e.contains("answered seq 7")));
    }

    /// A message ID's number keeps its order and its time (README's example ID, whose time
    /// MSGID.DECODE gives as 1795263894624).
    #[test]
    fn message_ids_keep_order_and_time() {
        use crate::jepsen::load::{msgid_time_ms, msgid_value};
        let v = msgid_value(b"D1VO-8H8O-0006-D3E6").unwrap();
        assert_eq!(msgid_time_ms(v), 1_795_263_894_624);
        let w = msgid_value(b"D1VO-8H8O-0006-D3E7").unwrap();
        assert!(w > v);
        assert!(msgid_value(b"D1VO-8H8O-0006-D3E").is_none());
    }
}
