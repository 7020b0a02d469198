//! The checker over every successful reply of a run:
//! - no sequence value received twice on one key (plain `SEQ.NEXT`; on an IDMP key, one value
//!   answered to two different tokens counts too);
//! - no message ID and no UID received twice;
//! - no IDMP token answered with two different values;
//! - per lane (a sequence key; for message IDs and UIDs the slot in Cluster, the whole
//!   deployment with Sentinel), every value of a later primary term above every value of the
//!   earlier terms (terms ordered by when a client first met them).
//!
//! It counts each category and keeps a few examples, each naming the terms (node, run id,
//! replication ID) that answered; duplicates answered twice by one term (a node repeating
//! itself, which no partition explains) are counted apart.
use super::load::{IdmpRec, Kind, Rec, Term};
use std::collections::{BTreeSet, HashMap};

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

#[derive(Default, Debug)]
pub struct Findings {
    pub seq: Count,
    pub msgid: Count,
    pub uid: Count,
    /// Tokens answered with two or more values, of `tokens` tokens answered at least once.
    pub idmp_two_values: usize,
    pub idmp_tokens: usize,
    pub idmp_examples: Vec<String>,
}

impl Findings {
    /// Duplicates of any kind (the fence's target: 0).
    pub fn duplicates(&self) -> usize {
        self.seq.twice + self.msgid.twice + self.uid.twice + self.idmp_two_values
    }

    pub fn order_violations(&self) -> usize {
        self.seq.order + self.msgid.order + self.uid.order
    }

    pub fn same_term(&self) -> usize {
        self.seq.same_term + self.msgid.same_term + self.uid.same_term
    }

    pub fn print(&self, name: &str) {
        for (what, c) in [
            ("sequence values", &self.seq),
            ("message IDs", &self.msgid),
            ("UIDs", &self.uid),
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
        eprintln!(
            "{name}: IDMP tokens: {} answered with two values, of {}",
            self.idmp_two_values, self.idmp_tokens
        );
        for e in &self.idmp_examples {
            eprintln!("{name}:   {e}");
        }
    }
}

fn label(terms: &[Term], t: u16) -> String {
    terms
        .get(t as usize)
        .map_or_else(|| format!("term {t}"), Term::label)
}

/// `items`: (lane, value, term, ms, tag) where the tag tells apart receipts that are the same
/// request (an IDMP token answered again: not a duplicate); counts values received under two
/// tags, and orders terms per lane.
fn check(
    what: &str,
    mut items: Vec<(u32, u128, u16, u32, u64)>,
    lanes: impl Fn(u32) -> u32,
    terms: &[Term],
) -> Count {
    let mut c = Count {
        checked: items.len(),
        ..Count::default()
    };
    items.sort_unstable();
    let mut i = 0;
    while i < items.len() {
        let Some(&(lane, v, ..)) = items.get(i) else {
            break;
        };
        let mut j = i;
        while items.get(j).is_some_and(|x| x.0 == lane && x.1 == v) {
            j += 1;
        }
        let run = items.get(i..j).unwrap_or_default();
        let tags: BTreeSet<u64> = run.iter().map(|x| x.4).collect();
        if tags.len() > 1 {
            c.twice += 1;
            let mut by_term: HashMap<u16, BTreeSet<u64>> = HashMap::new();
            for x in run {
                by_term.entry(x.2).or_default().insert(x.4);
            }
            if by_term.values().any(|t| t.len() > 1) {
                c.same_term += 1;
            }
            if c.examples.len() < EXAMPLES {
                let who: Vec<String> = run
                    .iter()
                    .map(|x| format!("{} at {} ms", label(terms, x.2), x.3))
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
    for &(lane, v, t, ..) in &items {
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

/// Checks a run's replies. `id_lane`: the lane of a conversation's message IDs and UIDs.
pub fn run(
    recs: &[Rec],
    idmp: &[IdmpRec],
    terms: &[Term],
    id_lane: impl Fn(u16) -> u32,
) -> Findings {
    let n_convs = 1 << 16;
    let mut seq = Vec::new();
    let mut msgid = Vec::new();
    let mut uid = Vec::new();
    for (i, r) in recs.iter().enumerate() {
        let item = |lane: u32| (lane, r.v, r.term, r.at_ms, i as u64);
        match r.kind {
            Kind::Seq => seq.push(item(u32::from(r.conv))),
            Kind::MsgId => msgid.push(item(id_lane(r.conv))),
            Kind::Uid => uid.push(item(id_lane(r.conv))),
        }
    }
    // IDMP keys: each (token, value) once, tagged by its token, on a lane of its own per key.
    let mut answers: HashMap<u64, Vec<&IdmpRec>> = HashMap::new();
    for r in idmp {
        answers.entry(r.token).or_default().push(r);
    }
    let mut f = Findings {
        idmp_tokens: answers.len(),
        ..Findings::default()
    };
    let mut tokens: Vec<&u64> = answers.keys().collect();
    tokens.sort();
    for token in tokens {
        let Some(rs) = answers.get(token) else {
            continue;
        };
        let mut values: Vec<&IdmpRec> = Vec::new();
        for r in rs {
            if !values.iter().any(|v| v.value == r.value) {
                values.push(r);
                seq.push((
                    n_convs + u32::from(r.conv),
                    u128::try_from(r.value).unwrap_or(0),
                    r.term,
                    r.at_ms,
                    *token | (1 << 63),
                ));
            }
        }
        if values.len() > 1 {
            f.idmp_two_values += 1;
            if f.idmp_examples.len() < EXAMPLES {
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
                f.idmp_examples
                    .push(format!("token t{token:x}: {}", all.join("; ")));
            }
        }
    }
    f.seq = check("sequence value", seq, |l| l, terms);
    f.msgid = check("message ID", msgid, |l| l, terms);
    f.uid = check("UID", uid, |l| l, terms);
    f
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

    fn idmp(token: u64, term: u16, value: i64) -> IdmpRec {
        IdmpRec {
            conv: 0,
            token,
            term,
            at_ms: 0,
            value,
            duplicate: false,
        }
    }

    /// The checker itself (no servers): a clean history passes; each kind of fault a run can
    /// show is counted where it belongs.
    #[test]
    fn checker_counts_each_kind_of_duplicate_and_regression() {
        let terms = [term("a", 0), term("b", 100)];
        // Clean: a's values, then b's above them; a token retried with its first answer.
        let clean = [
            rec(Kind::Seq, 0, 0, 1),
            rec(Kind::Seq, 0, 0, 2),
            rec(Kind::Seq, 0, 1, 1003),
            rec(Kind::Seq, 1, 1, 1),
            rec(Kind::MsgId, 0, 0, 10),
            rec(Kind::MsgId, 0, 1, 20),
            rec(Kind::Uid, 0, 0, 10),
            rec(Kind::Uid, 1, 1, 30),
        ];
        let f = run(&clean, &[idmp(1, 0, 5), idmp(1, 1, 5)], &terms, |_| 0);
        assert_eq!((f.duplicates(), f.order_violations()), (0, 0), "{f:?}");
        assert_eq!((f.seq.checked, f.idmp_tokens), (5, 1));

        // The old primary (a) keeps issuing after b began: 3 twice on key 0, an ID and a UID
        // twice, a token answered 5 by a and 9 by b.
        let dirty = [
            rec(Kind::Seq, 0, 0, 3),
            rec(Kind::Seq, 0, 1, 3),
            rec(Kind::Seq, 0, 1, 4),
            rec(Kind::MsgId, 0, 0, 10),
            rec(Kind::MsgId, 0, 1, 10),
            rec(Kind::Uid, 0, 0, 7),
            rec(Kind::Uid, 1, 1, 7),
            rec(Kind::Uid, 1, 1, 6),
        ];
        let f = run(&dirty, &[idmp(1, 0, 5), idmp(1, 1, 9)], &terms, |_| 0);
        assert_eq!(f.seq.twice, 1, "{f:?}");
        assert_eq!(f.seq.order, 1, "b's 3 is not above a's 3");
        assert_eq!((f.msgid.twice, f.uid.twice, f.idmp_two_values), (1, 1, 1));
        assert_eq!(f.uid.order, 2, "b's 7 and 6 are not above a's 7");
        assert_eq!(f.same_term(), 0);
        assert!(f.seq.examples.iter().any(|e| e.contains("run-a")));

        // One term repeating itself is counted apart; UIDs of different lanes are not
        // ordered against each other.
        let repeat = [rec(Kind::Seq, 0, 0, 3), rec(Kind::Seq, 0, 0, 3)];
        let f = run(&repeat, &[], &terms, |_| 0);
        assert_eq!((f.seq.twice, f.seq.same_term), (1, 1));
        let lanes = [rec(Kind::Uid, 0, 0, 7), rec(Kind::Uid, 1, 1, 6)];
        let f = run(&lanes, &[], &terms, u32::from);
        assert_eq!(f.uid.order, 0);
        // Two tokens answered the same value on one IDMP key: a sequence value twice.
        let f = run(&[], &[idmp(1, 0, 5), idmp(2, 1, 5)], &terms, |_| 0);
        assert_eq!((f.seq.twice, f.idmp_two_values), (1, 0));
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
