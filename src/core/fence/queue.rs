//! The calls that wait for the replicas: each until the offset that covers its own write,
//! stamped after the write was propagated, or until its deadline.

use std::collections::VecDeque;

/// The calls waiting for the replicas, oldest first: each with the offset that covers its
/// write (stamped after the write was propagated) and its deadline.
#[derive(Debug)]
pub struct Queue<H> {
    waiting: VecDeque<Waiter<H>>,
}

#[derive(Debug)]
struct Waiter<H> {
    handle: H,
    target: Option<u64>,
    deadline_ms: u64,
}

impl<H> Default for Queue<H> {
    fn default() -> Self {
        Queue {
            waiting: VecDeque::new(),
        }
    }
}

impl<H> Queue<H> {
    pub const fn new() -> Queue<H> {
        Queue {
            waiting: VecDeque::new(),
        }
    }

    /// A call waits from now on; its offset is stamped by the next [`Queue::stamp`].
    pub fn push(&mut self, handle: H, deadline_ms: u64) {
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

    /// The calls whose deadline has passed (from the oldest, until one that has not).
    pub fn take_expired(&mut self, now_ms: u64) -> Vec<H> {
        let mut out = Vec::new();
        while self
            .waiting
            .front()
            .is_some_and(|w| w.deadline_ms <= now_ms)
        {
            if let Some(w) = self.waiting.pop_front() {
                out.push(w.handle);
            }
        }
        out
    }

    /// Every waiting call.
    pub fn drain(&mut self) -> Vec<H> {
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
}
