//! What one pass over a table's shards learns, kept in the store under the shards' identity
//! (a `Record`) so that a remount makes no pass.

use std::collections::BTreeMap;

use crate::store::{put_words, starts_at_zero_ascending, words, Record};

/// Records between two kept offsets (the table walks at most `STRIDE - 1` records to a row).
pub(super) const STRIDE: u64 = 256;

/// Where the pass got to: entries seen, width, the kept offsets, entries per slot.
pub(super) struct Summary {
    pub(super) entries: u64,
    pub(super) dim: u64,
    /// Global offset (shards laid end to end) of record `k * STRIDE`.
    pub(super) strides: Vec<u64>,
    pub(super) slots: BTreeMap<u64, u64>,
}

/// As kept: entries, dim, the number of kept offsets, the offsets, then (slot, entries)
/// pairs in slot order.
impl Record for Summary {
    const KIND: &'static str = "monolith-summary/1";
    fn encode(&self, out: &mut Vec<u8>) {
        put_words(out, &[self.entries, self.dim, self.strides.len() as u64]);
        put_words(out, &self.strides);
        for (&slot, &count) in &self.slots {
            put_words(out, &[slot, count]);
        }
    }
    fn decode(bytes: &[u8]) -> Option<Summary> {
        let w = words(bytes)?;
        let (&[entries, dim, n], rest) = (w.get(..3)?, w.get(3..)?) else {
            return None;
        };
        // Checked like the file it came from: a width an entry can have, one kept offset per
        // STRIDE records, ascending, slots that count no more entries than there are.
        if dim > super::record::MAX_RECORD / 4 || n != entries.div_ceil(STRIDE) {
            return None;
        }
        let n = usize::try_from(n).ok().filter(|&n| n <= rest.len())?;
        let (strides, pairs) = rest.split_at(n);
        if !starts_at_zero_ascending(strides) || pairs.len() % 2 != 0 {
            return None;
        }
        let mut slots = BTreeMap::new();
        let mut total = 0u64;
        for p in pairs.chunks_exact(2) {
            total = total.checked_add(p[1]).filter(|&t| t <= entries)?;
            if slots.insert(p[0], p[1]).is_some() {
                return None;
            }
        }
        Some(Summary {
            entries,
            dim,
            strides: strides.to_vec(),
            slots,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::{put_words, MemStore, Store};

    #[test]
    fn a_summary_kept_reads_back_the_same_and_a_partial_one_not_at_all() {
        let s = Summary {
            entries: 2 * STRIDE + 5,
            dim: 16,
            strides: vec![0, 7000, 14500],
            slots: [(0, 3), (5, 2 * STRIDE), (65535, 2)].into_iter().collect(),
        };
        let store: &dyn Store = &MemStore::default();
        store.put("t", &s);
        let got: Summary = store.get("t").unwrap();
        assert_eq!(
            (got.entries, got.dim, &got.strides, &got.slots),
            (s.entries, s.dim, &s.strides, &s.slots)
        );
        assert!(store.get::<Summary>("other").is_none());
        // Offsets that do not match the count, or slots counting more entries than there
        // are, are not used.
        for words in [
            vec![2 * STRIDE + 5, 16, 2, 0, 7000],
            vec![5, 16, 1, 0, 1, 6],
            vec![5, 16, 1, 0, 1, 3, 1, 3],
            vec![5, u64::MAX, 1, 0],
        ] {
            let mut b = Vec::new();
            put_words(&mut b, &words);
            store.put_bytes(Summary::KIND, "t", &b);
            assert!(store.get::<Summary>("t").is_none(), "{words:?}");
        }
    }
}
