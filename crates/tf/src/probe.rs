//! A `DenseHashTable`'s bucket array judged by TensorFlow's own probing
//! (`tensorflow/core/kernels/lookup_table_op.cc`, `MutableDenseHashTable`).
//!
//! TF hashes an integer key to itself (`HashScalar`: `static_cast<uint64>(key)`, an int32
//! sign-extended) and probes buckets `h & mask`, then `+1`, `+2`, … (`bucket = (bucket +
//! ++num_probes) & mask`; triangular steps visit every bucket of a power-of-two array once).
//! An insert stops at the first bucket holding the key, the empty key or the deleted key; an
//! erase writes the deleted key over the key's bucket; only a rebucket (a new array, every
//! key inserted again) makes a bucket empty again. So every bucket on a live key's probe
//! sequence before its own was taken when it was inserted and can at most have become a
//! deleted bucket since: **an empty bucket never comes before a key on its own sequence**.
//! A key saved where an empty bucket comes first was never inserted there: it is the
//! deleted key (an erased id's bucket), or the array is damaged.
//!
//! Without the table's graph this names its sentinels: the empty key is the repeated key
//! with which every other key sits on its own sequence, and a key saved once off its
//! sequence is the deleted key. With the graph (both keys known) the same walk is an
//! integrity check.

use std::fmt;

/// Keys read per piece of a pass.
const PIECE: usize = 1 << 16;
/// The largest array judged: the walk keeps one bit per bucket for each candidate empty key.
pub(crate) const MAX_BUCKETS: u64 = 1 << 26;
/// Keys followed as candidates for the empty key (Misra–Gries: every key in more than
/// `1 / (CANDIDATES + 1)` of the buckets is among them).
const CANDIDATES: usize = 4;
/// Probe steps allowed per bucket, over the whole walk: a healthy array at TF's 0.8 load
/// factor needs a few; a crafted one could make the walk quadratic.
const STEPS_PER_BUCKET: u64 = 64;

/// What the walk tells of an array.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// Keys that mark no row (the empty key first when the walk tells them apart), every
    /// other key on its own sequence.
    Sentinels(Vec<i64>),
    /// A key saved where TF could not have put it.
    Damaged(OffSequence),
    /// Not judged: no key repeats (not a bucket array), too large, or too much probing.
    Unknown,
}

/// A key at `bucket` whose probe sequence meets the empty bucket `empty_at` first.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub(crate) struct OffSequence {
    pub(crate) key: i64,
    pub(crate) bucket: u64,
    pub(crate) empty_at: u64,
}

impl fmt::Display for OffSequence {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "DenseHashTable damaged: key {} is saved in bucket {}, but its probe sequence meets \
             the empty bucket {} first (TensorFlow's lookup would never find it)",
            self.key, self.bucket, self.empty_at
        )
    }
}

/// Reads the keys of buckets `first..first + out.len()`.
pub(crate) type ReadKeys<'a, E> = dyn FnMut(u64, &mut [i64]) -> Result<(), E> + 'a;

/// One bit per bucket.
struct Bits(Vec<u64>);

impl Bits {
    fn new(n: u64) -> Bits {
        Bits(vec![0; n.div_ceil(64) as usize])
    }
    fn set(&mut self, i: u64) {
        self.0[(i / 64) as usize] |= 1 << (i % 64);
    }
    fn get(&self, i: u64) -> bool {
        self.0[(i / 64) as usize] & (1 << (i % 64)) != 0
    }
}

/// Whether `n` keys may be a DenseHashTable's bucket array this module judges: a power of
/// two, at least TF's 4, at most `MAX_BUCKETS`.
pub(crate) fn judgeable(n: u64) -> bool {
    n.is_power_of_two() && (4..=MAX_BUCKETS).contains(&n)
}

/// Calls `f` with each piece of the `n` keys `read` gives, and the bucket of its first.
fn each_piece<E>(
    n: u64,
    read: &mut ReadKeys<'_, E>,
    mut f: impl FnMut(u64, &[i64]),
) -> Result<(), E> {
    let mut buf = vec![0i64; PIECE.min(n as usize)];
    let mut first = 0u64;
    while first < n {
        let len = (n - first).min(PIECE as u64) as usize;
        read(first, &mut buf[..len])?;
        f(first, &buf[..len]);
        first += len as u64;
    }
    Ok(())
}

/// The empty bucket `key`'s sequence meets before `bucket`, `Some(None)` when it reaches
/// `bucket` first; `None` when the step budget ran out.
fn empty_before(
    empty: &Bits,
    n: u64,
    key: i64,
    bucket: u64,
    budget: &mut u64,
) -> Option<Option<u64>> {
    let mask = n - 1;
    let mut at = key as u64 & mask;
    let mut probes = 0u64;
    loop {
        if at == bucket {
            return Some(None);
        }
        if empty.get(at) {
            return Some(Some(at));
        }
        probes += 1;
        // Triangular steps reach every bucket within `n` probes (TF's own bound too).
        if probes >= n {
            return Some(Some(at));
        }
        *budget = budget.checked_sub(1)?;
        at = (at + probes) & mask;
    }
}

/// For each candidate empty key, the keys (not in `skip`) saved where an empty bucket
/// comes first on their sequence, up to `keep` of them; `None` for a candidate whose walk
/// ran out of steps. Two passes: the empty buckets, then the walk.
fn off_sequence<E>(
    n: u64,
    read: &mut ReadKeys<'_, E>,
    empties: &[i64],
    skip: &[i64],
    keep: usize,
) -> Result<Vec<Option<Vec<OffSequence>>>, E> {
    let mut bits: Vec<Bits> = empties.iter().map(|_| Bits::new(n)).collect();
    each_piece(n, read, |first, keys| {
        for (i, k) in keys.iter().enumerate() {
            if let Some(c) = empties.iter().position(|e| e == k) {
                bits[c].set(first + i as u64);
            }
        }
    })?;
    let mut out: Vec<Option<Vec<OffSequence>>> = empties.iter().map(|_| Some(Vec::new())).collect();
    let mut budgets = vec![n.saturating_mul(STEPS_PER_BUCKET); empties.len()];
    each_piece(n, read, |first, keys| {
        for (i, &key) in keys.iter().enumerate() {
            if skip.contains(&key) {
                continue;
            }
            let bucket = first + i as u64;
            for (c, &e) in empties.iter().enumerate() {
                let Some(found) = out[c].as_mut() else {
                    continue;
                };
                if key == e || found.len() >= keep {
                    continue;
                }
                match empty_before(&bits[c], n, key, bucket, &mut budgets[c]) {
                    None => out[c] = None,
                    Some(None) => {}
                    Some(Some(empty_at)) => found.push(OffSequence {
                        key,
                        bucket,
                        empty_at,
                    }),
                }
            }
        }
    })?;
    Ok(out)
}

/// Checks an array whose sentinels its graph names: every other key on its own sequence.
pub(crate) fn check<E>(
    n: u64,
    read: &mut ReadKeys<'_, E>,
    empty: i64,
    deleted: i64,
) -> Result<Verdict, E> {
    if !judgeable(n) {
        return Ok(Verdict::Unknown);
    }
    let found = off_sequence(n, read, &[empty], &[deleted], 1)?;
    Ok(match found.into_iter().next().flatten() {
        None => Verdict::Unknown,
        Some(v) => match v.into_iter().next() {
            Some(off) => Verdict::Damaged(off),
            None => Verdict::Sentinels(vec![empty, deleted]),
        },
    })
}

/// Names the sentinels of an array saved without its graph (module doc): three passes.
pub(crate) fn infer<E>(n: u64, read: &mut ReadKeys<'_, E>) -> Result<Verdict, E> {
    if !judgeable(n) {
        return Ok(Verdict::Unknown);
    }
    // Misra–Gries: the keys frequent enough to be the empty key.
    let mut counters: Vec<(i64, u64)> = Vec::with_capacity(CANDIDATES);
    each_piece(n, read, |_, keys| {
        for &k in keys {
            if let Some(c) = counters.iter_mut().find(|c| c.0 == k) {
                c.1 += 1;
            } else if counters.len() < CANDIDATES {
                counters.push((k, 1));
            } else {
                counters.iter_mut().for_each(|c| c.1 -= 1);
                counters.retain(|c| c.1 > 0);
            }
        }
    })?;
    let mut counts: Vec<(i64, u64)> = counters.iter().map(|c| (c.0, 0)).collect();
    each_piece(n, read, |_, keys| {
        for k in keys {
            if let Some(c) = counts.iter_mut().find(|c| c.0 == *k) {
                c.1 += 1;
            }
        }
    })?;
    counts.retain(|c| c.1 >= 2);
    counts.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    if counts.is_empty() {
        return Ok(Verdict::Unknown);
    }
    let repeated: Vec<i64> = counts.iter().map(|c| c.0).collect();
    // Up to three keys off their sequence tell "one deleted key" from damage.
    let walks = off_sequence(n, read, &repeated, &repeated, 3)?;
    // The empty key: the candidate that leaves the fewest keys off their sequence (the
    // most frequent on a tie).
    let best = walks
        .iter()
        .enumerate()
        .filter_map(|(c, w)| Some((w.as_ref()?.len(), c)))
        .min();
    let Some((_, c)) = best else {
        return Ok(Verdict::Unknown);
    };
    let off = walks[c].clone().unwrap_or_default();
    let mut sentinels = vec![repeated[c]];
    sentinels.extend(repeated.iter().filter(|&&k| k != repeated[c]));
    for o in &off {
        if !sentinels.contains(&o.key) {
            sentinels.push(o.key);
        }
    }
    // TF has two sentinels; any more is a key where TF could not have put it.
    if sentinels.len() > 2 {
        let first_extra = sentinels[2];
        let damaged = off.into_iter().find(|o| o.key == first_extra);
        return Ok(damaged.map_or(Verdict::Unknown, Verdict::Damaged));
    }
    Ok(Verdict::Sentinels(sentinels))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// TF's `MutableDenseHashTable` on `n` buckets, as `lookup_table_op.cc` does it: insert
    /// (stops at the key, the empty or the deleted key) and erase.
    struct Dense {
        keys: Vec<i64>,
        empty: i64,
        deleted: i64,
    }

    impl Dense {
        fn new(n: usize, empty: i64, deleted: i64) -> Dense {
            Dense {
                keys: vec![empty; n],
                empty,
                deleted,
            }
        }
        fn probe(&self, key: i64, mut stop: impl FnMut(i64) -> bool) -> Option<usize> {
            let mask = self.keys.len() as u64 - 1;
            let mut at = key as u64 & mask;
            for probes in 1..=self.keys.len() as u64 {
                if stop(self.keys[at as usize]) {
                    return Some(at as usize);
                }
                at = (at + probes) & mask;
            }
            None
        }
        fn insert(&mut self, key: i64) {
            let (e, d) = (self.empty, self.deleted);
            let at = self.probe(key, |k| k == key || k == e || k == d).unwrap();
            self.keys[at] = key;
        }
        fn erase(&mut self, key: i64) {
            let e = self.empty;
            if let Some(at) = self.probe(key, |k| k == key || k == e) {
                if self.keys[at] == key {
                    self.keys[at] = self.deleted;
                }
            }
        }
    }

    fn judge(keys: &[i64]) -> Verdict {
        let mut read = |first: u64, out: &mut [i64]| -> Result<(), ()> {
            out.copy_from_slice(&keys[first as usize..first as usize + out.len()]);
            Ok(())
        };
        infer(keys.len() as u64, &mut read).unwrap()
    }

    fn checked(keys: &[i64], e: i64, d: i64) -> Verdict {
        let mut read = |first: u64, out: &mut [i64]| -> Result<(), ()> {
            out.copy_from_slice(&keys[first as usize..first as usize + out.len()]);
            Ok(())
        };
        check(keys.len() as u64, &mut read, e, d).unwrap()
    }

    /// Colliding ids (multiples of the bucket count, negative ones) so that probing runs.
    fn filled(n: usize, count: i64) -> Dense {
        let mut t = Dense::new(n, -1, -2);
        for i in 0..count {
            t.insert(i * 61 % 97 * n as i64 + i - 40);
        }
        t
    }

    #[test]
    fn one_erase_names_the_deleted_key() {
        for erased in [0, 5, 17, 40] {
            let mut t = filled(64, 50);
            t.erase(erased * 61 % 97 * 64 + erased - 40);
            assert_eq!(judge(&t.keys), Verdict::Sentinels(vec![-1, -2]), "{erased}");
            assert_eq!(checked(&t.keys, -1, -2), Verdict::Sentinels(vec![-1, -2]));
        }
    }

    #[test]
    fn several_erases_and_no_erase() {
        let mut t = filled(64, 50);
        assert_eq!(judge(&t.keys), Verdict::Sentinels(vec![-1]));
        for i in [3, 9, 30] {
            t.erase(i * 61 % 97 * 64 + i - 40);
        }
        assert_eq!(judge(&t.keys), Verdict::Sentinels(vec![-1, -2]));
        // Erased ids inserted again fill deleted buckets first.
        t.insert(-40);
        t.insert(7);
        assert_eq!(judge(&t.keys), Verdict::Sentinels(vec![-1, -2]));
    }

    #[test]
    fn a_deleted_key_more_frequent_than_the_empty_key() {
        let mut t = filled(64, 50);
        for i in 0..45 {
            t.erase(i * 61 % 97 * 64 + i - 40);
        }
        // Both keys may keep the few ids left on their sequences: either order is exact.
        let Verdict::Sentinels(mut s) = judge(&t.keys) else {
            panic!("{:?}", judge(&t.keys))
        };
        s.sort();
        assert_eq!(s, [-2, -1]);
    }

    #[test]
    fn keys_saved_off_their_sequence_are_damage() {
        let t = filled(64, 50);
        // A new id written into an empty bucket other than its own, its own left empty.
        let plant = |keys: &mut Vec<i64>, id: i64| {
            let home = (id as u64 & 63) as usize;
            assert_eq!(keys[home], -1);
            let at = (0..64).find(|&i| i != home && keys[i] == -1).unwrap();
            keys[at] = id;
        };
        let empty_home = |keys: &[i64]| (0..64).find(|&i| keys[i] == -1).unwrap() as i64;
        let mut one = t.keys.clone();
        let id = 1000 * 64 + empty_home(&one);
        plant(&mut one, id);
        // Saved once without its graph: indistinguishable from the deleted key.
        assert_eq!(
            judge(&one).clone(),
            Verdict::Sentinels(vec![-1, 1000 * 64 + empty_home(&t.keys)])
        );
        assert!(matches!(checked(&one, -1, -2), Verdict::Damaged(_)));
        let mut two = one.clone();
        let id = 2000 * 64 + empty_home(&one);
        plant(&mut two, id);
        assert!(
            matches!(judge(&two), Verdict::Damaged(_)),
            "{:?}",
            judge(&two)
        );
    }

    #[test]
    fn no_repeated_key_is_no_bucket_array() {
        assert_eq!(judge(&[5, 6, 7, 8]), Verdict::Unknown);
        assert_eq!(judge(&[5, 6, 7]), Verdict::Unknown);
        // A crafted array: one empty bucket, every walk long; judged within its budget.
        let n = 1 << 12;
        let mut keys: Vec<i64> = (0..n as i64).map(|i| i * n as i64 + 1).collect();
        keys[0] = -1;
        keys[1] = -1;
        let _ = judge(&keys);
    }
}
