//! The part of a text file's chunk-offset index learnt so far. Chunks are rendered on several
//! threads at once and finish in any order; a chunk's offset is known once every chunk before
//! it has a length, so lengths that arrive early wait in `ahead` until the gap closes.

use std::collections::BTreeMap;

use crate::LayoutError;

/// Invariants: `prefix[0] == 0`, non-decreasing, `prefix.len() - 1` chunks learnt (the
/// frontier); every key of `ahead` is beyond the frontier (the frontier's own length would
/// have been moved into `prefix`).
#[derive(Debug)]
pub(super) struct Learnt {
    prefix: Vec<u64>,
    ahead: BTreeMap<u64, u64>,
}

impl Learnt {
    pub(super) fn new() -> Learnt {
        Learnt {
            prefix: vec![0],
            ahead: BTreeMap::new(),
        }
    }

    /// The first chunk whose offset is known but whose length is not.
    pub(super) fn frontier(&self) -> u64 {
        self.prefix.len() as u64 - 1
    }

    /// Bytes of the learnt chunks (where the frontier chunk starts).
    pub(super) fn end(&self) -> u64 {
        self.prefix.last().copied().unwrap_or(0)
    }

    /// Prefix sums of the learnt chunks (`frontier() + 1` entries).
    pub(super) fn prefix(&self) -> &[u64] {
        &self.prefix
    }

    pub(super) fn len_of(&self, c: u64) -> Option<u64> {
        if c < self.frontier() {
            let i = c as usize;
            return Some(self.prefix[i + 1] - self.prefix[i]);
        }
        self.ahead.get(&c).copied()
    }

    /// Average bytes per learnt chunk, once there is one.
    pub(super) fn average(&self) -> Option<u64> {
        self.end().checked_div(self.frontier())
    }

    /// Records that chunk `c` has `len` bytes; the frontier moves over every chunk whose
    /// length is now known without a gap.
    pub(super) fn record(&mut self, c: u64, len: u64) -> Result<(), LayoutError> {
        if c < self.frontier() {
            // Rendering is deterministic: a chunk rendered twice has one length.
            debug_assert_eq!(self.len_of(c), Some(len));
            return Ok(());
        }
        self.ahead.insert(c, len);
        while let Some(l) = self.ahead.remove(&self.frontier()) {
            let end = self
                .end()
                .checked_add(l)
                .ok_or(LayoutError::Overflow("text size"))?;
            self.prefix.push(end);
        }
        debug_assert!(self.ahead.keys().all(|&k| k > self.frontier()));
        Ok(())
    }

    /// Hands over the prefix sums (when they are complete); leaves an empty index behind.
    pub(super) fn take(&mut self) -> Vec<u64> {
        self.ahead.clear();
        std::mem::replace(&mut self.prefix, vec![0])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn out_of_order_lengths_join_the_prefix_when_the_gap_closes() {
        let mut l = Learnt::new();
        assert_eq!((l.frontier(), l.end(), l.average()), (0, 0, None));
        l.record(2, 30).unwrap();
        l.record(1, 20).unwrap();
        assert_eq!(l.frontier(), 0);
        assert_eq!(l.len_of(2), Some(30));
        assert_eq!(l.len_of(0), None);
        l.record(0, 10).unwrap();
        assert_eq!(l.prefix(), &[0, 10, 30, 60]);
        assert_eq!((l.frontier(), l.end(), l.average()), (3, 60, Some(20)));
        // A chunk rendered again changes nothing.
        l.record(1, 20).unwrap();
        l.record(4, 0).unwrap();
        assert_eq!(l.frontier(), 3);
        l.record(3, 5).unwrap();
        assert_eq!(l.prefix(), &[0, 10, 30, 60, 65, 65]);
        assert_eq!(l.len_of(4), Some(0));
        assert_eq!(l.take(), vec![0, 10, 30, 60, 65, 65]);
        assert_eq!(l.frontier(), 0);
    }

    #[test]
    fn overflow_is_an_error() {
        let mut l = Learnt::new();
        l.record(0, u64::MAX).unwrap();
        assert!(matches!(l.record(1, 1), Err(LayoutError::Overflow(_))));
    }
}
