//! The calls that wait for the replicas: each until the offset that covers its own write,
//! stamped after the write was propagated, or until its deadline.

use std::collections::VecDeque;

/// The calls waiting for the replicas, oldest first: each with the offset that covers its
/// write (stamped after the write was propagated) and its deadline. The deadlines are in order
/// too, but after `imid.fence-timeout` was lowered: a later call may then be due first.
#[derive(Debug)]
pub struct Queue<H> {
    waiting: VecDeque<Waiter<H>>,
    /// Some call's deadline is earlier than an older call's (until the queue empties).
    unordered: bool,
}

#[derive(Debug)]
struct Waiter<H> {
    handle: H,
    target: Option<u64>,
    deadline_ms: u64,
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

    /// A call waits from now on; its offset is stamped by the next [`Queue::stamp`].
    pub fn push(&mut self, handle: H, deadline_ms: u64) {
        if self
            .waiting
            .back()
            .is_some_and(|w| w.deadline_ms > deadline_ms)
        {
            self.unordered = true;
        }
        self.waiting.push_back(Waiter {
            handle,
            target: None,
            deadline_ms,
        });
    }

    /// Every write of the waiting calls was propagated at or below `offset`. Returns whether
    /// any call was stamped.
    pub fn stamp(&mut self, offset: u64) -> bool {
        let mut any = false;
        for w in self.waiting.iter_mut().rev() {
            if w.target.is_some() {
                break;
            }
            w.target = Some(offset);
            any = true;
        }
        any
    }

    /// The highest offset a waiting call needs.
    pub fn highest_target(&self) -> Option<u64> {
        self.waiting.iter().filter_map(|w| w.target).max()
    }

    /// The calls whose writes the replicas acknowledged with `offset`, oldest first.
    pub fn take_acked(&mut self, offset: u64) -> Vec<H> {
        let mut out = Vec::new();
        while self
            .waiting
            .front()
            .is_some_and(|w| w.target.is_some_and(|t| t <= offset))
        {
            if let Some(w) = self.waiting.pop_front() {
                out.push(w.handle);
            }
        }
        out
    }

    /// The calls whose deadline has passed, oldest first: every one, also one behind a call
    /// that is not due yet.
    pub fn take_expired(&mut self, now_ms: u64) -> Vec<H> {
        let mut out = Vec::new();
        if self.unordered {
            let (due, left): (VecDeque<_>, VecDeque<_>) = std::mem::take(&mut self.waiting)
                .into_iter()
                .partition(|w| w.deadline_ms <= now_ms);
            self.waiting = left;
            out.extend(due.into_iter().map(|w| w.handle));
        } else {
            while self
                .waiting
                .front()
                .is_some_and(|w| w.deadline_ms <= now_ms)
            {
                if let Some(w) = self.waiting.pop_front() {
                    out.push(w.handle);
                }
            }
        }
        if self.waiting.is_empty() {
            self.unordered = false;
        }
        out
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

    #[test]
    fn waiters_leave_when_acknowledged_or_expired() {
        let mut q = Queue::default();
        q.push('a', 1_000);
        q.push('b', 1_000);
        assert!(
            q.take_acked(u64::MAX).is_empty(),
            "not stamped: never released"
        );
        assert!(q.stamp(10));
        q.push('c', 1_100);
        assert_eq!(q.highest_target(), Some(10));
        assert_eq!(q.take_acked(9), Vec::<char>::new());
        assert_eq!(q.take_acked(10), vec!['a', 'b']);
        assert!(q.take_acked(10).is_empty(), "c is not stamped");
        assert!(q.stamp(20));
        assert!(!q.stamp(30), "nothing left to stamp");
        assert_eq!(q.take_expired(1_099), Vec::<char>::new());
        assert_eq!(q.take_expired(1_100), vec!['c']);
        q.push('d', 5);
        assert_eq!(q.drain(), vec!['d']);
        assert!(q.is_empty());
    }

    #[test]
    fn a_call_due_before_an_older_one_expires_on_time() {
        // imid.fence-timeout lowered while 'a' waits: 'b' is due first.
        let mut q = Queue::default();
        q.push('a', 1_000);
        q.push('b', 300);
        q.push('c', 1_200);
        assert_eq!(q.next_deadline(), Some(300));
        assert_eq!(q.take_expired(299), Vec::<char>::new());
        assert_eq!(q.take_expired(300), vec!['b']);
        assert_eq!(q.next_deadline(), Some(1_000));
        assert_eq!(q.take_expired(1_200), vec!['a', 'c']);
        assert_eq!(q.next_deadline(), None);
        // Empty again: in order from here on.
        q.push('d', 50);
        q.push('e', 60);
        assert_eq!(q.take_expired(55), vec!['d']);
        assert_eq!(q.next_deadline(), Some(60));
    }
}
