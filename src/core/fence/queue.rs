//! The calls that wait: each for what it needs from the replicas (the offset that covers its
//! own write, stamped after the write was propagated), from the node's AOF (a sample point,
//! written or fsynced), or both, until its deadline.

use crate::core::durable::{Level, Points};
use std::collections::VecDeque;

/// The calls waiting, oldest first. The deadlines are in order too, but after
/// `imid.fence-timeout` was lowered: a later call may then be due first.
#[derive(Debug)]
pub struct Queue<H> {
    waiting: VecDeque<Waiter<H>>,
    /// Some call's deadline is earlier than an older call's (until the queue empties).
    unordered: bool,
}

#[derive(Debug)]
struct Waiter<H> {
    handle: H,
    /// It waits for the replicas: `Some(None)` until its offset is stamped.
    replicas: Option<Option<u64>>,
    /// It waits for the AOF to hold this sample point, so.
    aof: Option<(u64, Level)>,
    deadline_ms: u64,
}

/// What a call waits for.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Wait {
    /// The replicas of the term must acknowledge its write.
    pub replicas: bool,
    /// The node's AOF must hold its write at this sample point, so.
    pub aof: Option<(u64, Level)>,
}

/// What a call that timed out was still waiting for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Missing {
    pub replicas: bool,
    pub aof: Option<Level>,
}

impl<H> Default for Queue<H> {
    fn default() -> Self {
        Queue::new()
    }
}

impl<H> Queue<H> {
    pub const fn new() -> Queue<H> {
        Queue {
            waiting: VecDeque::new(),
            unordered: false,
        }
    }

    /// A call waits from now on for `wait`; its offset (if it waits for the replicas) is
    /// stamped by the next [`Queue::stamp`].
    pub fn push(&mut self, handle: H, wait: Wait, deadline_ms: u64) {
        if self
            .waiting
            .back()
            .is_some_and(|w| w.deadline_ms > deadline_ms)
        {
            self.unordered = true;
        }
        self.waiting.push_back(Waiter {
            handle,
            replicas: wait.replicas.then_some(None),
            aof: wait.aof,
            deadline_ms,
        });
    }

    /// Every write of the waiting calls was propagated at or below `offset`. Returns whether
    /// any call was stamped.
    pub fn stamp(&mut self, offset: u64) -> bool {
        let mut any = false;
        for w in self.waiting.iter_mut() {
            if let Some(t @ None) = &mut w.replicas {
                *t = Some(offset);
                any = true;
            }
        }
        any
    }

    /// The highest offset a waiting call needs from the replicas.
    pub fn highest_target(&self) -> Option<u64> {
        self.waiting
            .iter()
            .filter_map(|w| w.replicas.flatten())
            .max()
    }

    /// Whether a call waits for the AOF (at any level).
    pub fn waits_for_aof(&self) -> bool {
        self.waiting.iter().any(|w| w.aof.is_some())
    }

    /// The calls whose needs are met, oldest first: the replicas acknowledged `acked` (`None`:
    /// nothing yet), the AOF holds `points`.
    pub fn take_ready(&mut self, acked: Option<u64>, points: Points) -> Vec<H> {
        let ready = |w: &Waiter<H>| {
            let replicas = match w.replicas {
                None => true,
                Some(None) => false,
                Some(Some(t)) => acked.is_some_and(|a| t <= a),
            };
            replicas && w.aof.is_none_or(|(p, level)| points.holds(p, level))
        };
        if !self.waiting.iter().any(ready) {
            return Vec::new();
        }
        let (done, left): (VecDeque<_>, VecDeque<_>) = std::mem::take(&mut self.waiting)
            .into_iter()
            .partition(ready);
        self.waiting = left;
        if self.waiting.is_empty() {
            self.unordered = false;
        }
        done.into_iter().map(|w| w.handle).collect()
    }

    /// The calls whose deadline has passed, oldest first (also one behind a call that is not
    /// due yet), with what each still waited for, as `points` and `acked` tell.
    pub fn take_expired(
        &mut self,
        now_ms: u64,
        acked: Option<u64>,
        points: Points,
    ) -> Vec<(H, Missing)> {
        let due = |w: &Waiter<H>| w.deadline_ms <= now_ms;
        let taken: Vec<Waiter<H>> = if self.unordered {
            let (due, left): (VecDeque<_>, VecDeque<_>) =
                std::mem::take(&mut self.waiting).into_iter().partition(due);
            self.waiting = left;
            due.into()
        } else {
            let mut out = Vec::new();
            while self.waiting.front().is_some_and(due) {
                if let Some(w) = self.waiting.pop_front() {
                    out.push(w);
                }
            }
            out
        };
        self.hand_back(taken, |w| Missing {
            replicas: match w.replicas {
                None => false,
                Some(t) => t.is_none_or(|t| acked.is_none_or(|a| t > a)),
            },
            aof: w
                .aof
                .filter(|&(p, level)| !points.holds(p, level))
                .map(|(_, level)| level),
        })
    }

    /// Every call waiting for the replicas (fewer are online than required: no
    /// acknowledgement can come), with what each still waited for.
    pub fn take_replicas_waiting(&mut self) -> Vec<(H, Missing)> {
        let (taken, left): (VecDeque<_>, VecDeque<_>) = std::mem::take(&mut self.waiting)
            .into_iter()
            .partition(|w| w.replicas.is_some());
        self.waiting = left;
        self.hand_back(taken, |w| Missing {
            replicas: true,
            aof: w.aof.map(|(_, level)| level),
        })
    }

    /// The calls `taken` out of the queue, each with what it still waited for (`missing`); an
    /// emptied queue is in order again.
    fn hand_back(
        &mut self,
        taken: impl IntoIterator<Item = Waiter<H>>,
        missing: impl Fn(&Waiter<H>) -> Missing,
    ) -> Vec<(H, Missing)> {
        if self.waiting.is_empty() {
            self.unordered = false;
        }
        taken
            .into_iter()
            .map(|w| {
                let missing = missing(&w);
                (w.handle, missing)
            })
            .collect()
    }

    /// The earliest deadline of a waiting call.
    pub fn next_deadline(&self) -> Option<u64> {
        if self.unordered {
            self.waiting.iter().map(|w| w.deadline_ms).min()
        } else {
            self.waiting.front().map(|w| w.deadline_ms)
        }
    }

    /// Every waiting call.
    pub fn drain(&mut self) -> Vec<H> {
        self.unordered = false;
        self.waiting.drain(..).map(|w| w.handle).collect()
    }

    pub fn len(&self) -> usize {
        self.waiting.len()
    }

    pub fn is_empty(&self) -> bool {
        self.waiting.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const REPLICAS: Wait = Wait {
        replicas: true,
        aof: None,
    };
    const NONE: Points = Points {
        written: 0,
        fsynced: 0,
    };

    #[test]
    fn waiters_leave_when_acknowledged_or_expired() {
        let mut q = Queue::default();
        q.push('a', REPLICAS, 1_000);
        q.push('b', REPLICAS, 1_000);
        assert!(
            q.take_ready(Some(u64::MAX), NONE).is_empty(),
            "not stamped: never released"
        );
        assert!(q.stamp(10));
        q.push('c', REPLICAS, 1_100);
        assert_eq!(q.highest_target(), Some(10));
        assert_eq!(q.take_ready(Some(9), NONE), Vec::<char>::new());
        assert_eq!(q.take_ready(Some(10), NONE), vec!['a', 'b']);
        assert!(q.take_ready(Some(10), NONE).is_empty(), "c is not stamped");
        assert!(q.stamp(20));
        assert!(!q.stamp(30), "nothing left to stamp");
        assert!(q.take_expired(1_099, None, NONE).is_empty());
        let expired = q.take_expired(1_100, None, NONE);
        assert_eq!(
            expired,
            vec![(
                'c',
                Missing {
                    replicas: true,
                    aof: None
                }
            )]
        );
        q.push('d', REPLICAS, 5);
        assert_eq!(q.drain(), vec!['d']);
        assert!(q.is_empty());
    }

    #[test]
    fn a_call_waiting_for_both_leaves_when_both_hold_it() {
        let mut q = Queue::default();
        let both = Wait {
            replicas: true,
            aof: Some((3, Level::Fsynced)),
        };
        let written = Wait {
            replicas: false,
            aof: Some((3, Level::Written)),
        };
        q.push('a', both, 1_000);
        q.push('b', written, 1_000);
        q.stamp(50);
        assert!(q.waits_for_aof());
        let p = |written, fsynced| Points { written, fsynced };
        assert_eq!(
            q.take_ready(Some(50), p(3, 2)),
            vec!['b'],
            "b: written is enough"
        );
        assert!(
            q.take_ready(Some(49), p(3, 3)).is_empty(),
            "a: the replicas lag"
        );
        assert!(
            q.take_ready(Some(50), p(3, 2)).is_empty(),
            "a: not fsynced yet"
        );
        let expired = q.take_expired(1_000, Some(50), p(3, 2));
        assert_eq!(
            expired,
            vec![(
                'a',
                Missing {
                    replicas: false,
                    aof: Some(Level::Fsynced)
                }
            )]
        );
    }

    #[test]
    fn a_call_due_before_an_older_one_expires_on_time() {
        // imid.fence-timeout lowered while 'a' waits: 'b' is due first.
        let mut q = Queue::default();
        q.push('a', REPLICAS, 1_000);
        q.push('b', REPLICAS, 300);
        q.push('c', REPLICAS, 1_200);
        assert_eq!(q.next_deadline(), Some(300));
        assert!(q.take_expired(299, None, NONE).is_empty());
        let names = |v: Vec<(char, Missing)>| v.into_iter().map(|(c, _)| c).collect::<Vec<_>>();
        assert_eq!(names(q.take_expired(300, None, NONE)), vec!['b']);
        assert_eq!(q.next_deadline(), Some(1_000));
        assert_eq!(names(q.take_expired(1_200, None, NONE)), vec!['a', 'c']);
        assert_eq!(q.next_deadline(), None);
        // Empty again: in order from here on.
        q.push('d', REPLICAS, 50);
        q.push('e', REPLICAS, 60);
        assert_eq!(names(q.take_expired(55, None, NONE)), vec!['d']);
        assert_eq!(q.next_deadline(), Some(60));
    }
}
