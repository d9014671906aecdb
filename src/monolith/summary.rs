//! What one pass over a table's shards learns, and how it is kept in the store so that a
//! remount makes no pass: the kept offsets under the shards' identity (ascending, as the store
//! requires), the counts under `#n`, entries per slot under `#s`.

use std::collections::BTreeMap;

use crate::store::OffsetStore;

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

/// The persisted summary: offsets (ascending, as the store keeps them) under the identity,
/// the counts under `#n` as `[0, entries, entries + dim]`, slots under `#s` as running sums.
pub(super) fn load(store: &dyn OffsetStore, id: &str) -> Option<Summary> {
    let strides = store.load(id)?;
    let n = store.load(&format!("{id}#n"))?;
    let s = store.load(&format!("{id}#s"))?;
    let (&[0, entries, end], true) = (&n[..], s.len() % 2 == 0) else {
        return None;
    };
    if strides.len() as u64 != entries.div_ceil(STRIDE) {
        return None;
    }
    // What the store gives is checked like the file it came from: a width an entry can have.
    let dim = end.checked_sub(entries)?;
    if dim > super::record::MAX_RECORD / 4 {
        return None;
    }
    let mut slots = BTreeMap::new();
    let mut before = 0u64;
    for p in s.chunks_exact(2) {
        let slot = p[0].checked_sub(before)?;
        let count = p[1].checked_sub(p[0])?;
        before = before.checked_add(count)?;
        slots.insert(slot, count);
    }
    Some(Summary {
        entries,
        dim,
        strides,
        slots,
    })
}

pub(super) fn save(store: &dyn OffsetStore, id: &str, s: &Summary) {
    let mut slots = Vec::with_capacity(s.slots.len() * 2);
    let mut before = 0u64;
    for (&slot, &count) in &s.slots {
        slots.push(slot + before);
        slots.push(slot + before + count);
        before += count;
    }
    store.save(id, &s.strides);
    store.save(&format!("{id}#n"), &[0, s.entries, s.entries + s.dim]);
    store.save(&format!("{id}#s"), &slots);
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;
    use std::sync::Mutex;

    use super::*;

    #[derive(Default)]
    struct Mem(Mutex<HashMap<String, Vec<u64>>>);

    impl OffsetStore for Mem {
        fn load(&self, key: &str) -> Option<Vec<u64>> {
            self.0.lock().unwrap().get(key).cloned()
        }
        fn save(&self, key: &str, offsets: &[u64]) {
            // The disk store keeps only what starts at 0 and never decreases.
            assert!(
                crate::store::starts_at_zero_ascending(offsets),
                "{key}: {offsets:?}"
            );
            self.0.lock().unwrap().insert(key.into(), offsets.to_vec());
        }
    }

    #[test]
    fn a_summary_kept_reads_back_the_same_and_a_partial_one_not_at_all() {
        let s = Summary {
            entries: 2 * STRIDE + 5,
            dim: 16,
            strides: vec![0, 7000, 14500],
            slots: [(0, 3), (5, 2 * STRIDE), (65535, 2)].into_iter().collect(),
        };
        let store = Mem::default();
        save(&store, "t", &s);
        let got = load(&store, "t").unwrap();
        assert_eq!(
            (got.entries, got.dim, &got.strides, &got.slots),
            (s.entries, s.dim, &s.strides, &s.slots)
        );
        // Offsets that do not match the count are not used.
        store.0.lock().unwrap().insert("t".into(), vec![0, 7000]);
        assert!(load(&store, "t").is_none());
        assert!(load(&store, "other").is_none());
    }
}
