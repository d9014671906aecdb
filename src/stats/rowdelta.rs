//! Two keyed tables compared id by id (`modelfs diff --rows`), and the key sets of a table and
//! its optimizer slots (`modelfs check`), in memory bounded whatever the tables' size.
//!
//! Tables keep their rows in any order (a hash table's is its buckets'), so ids are matched
//! by partitioning: a first pass reads both tables piece by piece on all cores and spills, per
//! row, (id, position, 128-bit fingerprint of the row's bytes) into one file per partition
//! of ids and side; a second pass takes partition after partition (on all cores), sorts each
//! side's records by id and merges them. Equal fingerprints are equal rows; only rows whose
//! fingerprints differ are read again (by position) and compared as `diff` compares
//! elements, so −0.0 = 0.0 and NaN = NaN there too.
//!
//! An id saved more than once in a table (a `DenseHashTable`'s empty and deleted buckets, its
//! sentinels) is not a row: it is left out, as `row_by_id` leaves it out.

use std::fs::File;
use std::io::Write;
use std::sync::Mutex;

use super::delta::{compare_runs, Delta};
use crate::layout::{pool, LayoutError, Requester};
use crate::model::scan::{Batch, TableScan};

/// Records a partition holds on average (of each side): what the second pass sorts at once.
const PARTITION_RECORDS: u64 = 1 << 17;
/// Partitions at most: two open files each.
const MAX_PARTITIONS: u64 = 256;
/// Partitions merged at once by the second pass, per worker (their results wait to be
/// emitted in order).
const WINDOW_PER_WORKER: usize = 16;

/// One row as spilled: 32 bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Rec {
    id: i64,
    position: u64,
    print: u128,
}

const REC: usize = 32;

impl Rec {
    fn put(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.id.to_le_bytes());
        out.extend_from_slice(&self.position.to_le_bytes());
        out.extend_from_slice(&self.print.to_le_bytes());
    }

    fn get(b: &[u8]) -> Rec {
        let w = |r: std::ops::Range<usize>| -> [u8; 8] { b[r].try_into().expect("8 bytes") };
        Rec {
            id: i64::from_le_bytes(w(0..8)),
            position: u64::from_le_bytes(w(8..16)),
            print: u128::from_le_bytes(b[16..32].try_into().expect("16 bytes")),
        }
    }
}

/// What an id's row did between A and B.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Change {
    Added,
    Removed,
    /// The largest |b − a| over its elements (both finite; 0 when only NaN/Inf changed).
    Changed(f64),
}

/// Counts over a pair of tables.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub(crate) struct RowSummary {
    pub(crate) rows_a: u64,
    pub(crate) rows_b: u64,
    pub(crate) added: u64,
    pub(crate) removed: u64,
    pub(crate) changed: u64,
    pub(crate) unchanged: u64,
    /// Ids saved more than once (left out), per side.
    pub(crate) repeated: [u64; 2],
    /// Over the changed rows: Σ (b − a)², Σ a² (`rel_l2`).
    pub(crate) delta: Delta,
}

impl RowSummary {
    /// ‖B − A‖₂ / ‖A‖₂ over the changed rows.
    pub(crate) fn rel_l2(&self) -> Option<f64> {
        self.delta.rel_l2()
    }
}

/// Why two tables could not be compared.
#[derive(Debug, thiserror::Error)]
pub(crate) enum RowDiffError {
    #[error("{0}")]
    Read(#[from] crate::model::ModelError),
    #[error("spill file: {0}")]
    Spill(#[from] std::io::Error),
    #[error("{0}")]
    Layout(#[from] LayoutError),
    #[error("rows of {a} and {b} elements cannot be compared")]
    Widths { a: u64, b: u64 },
    #[error("{a} and {b} rows cannot be compared")]
    Dtypes { a: String, b: String },
    /// The consumer of the differences stopped (its own error is with it).
    #[error("output: {0}")]
    Emit(std::io::Error),
}

/// The spill files of one side, one per partition.
struct Spill {
    files: Vec<Mutex<File>>,
}

impl Spill {
    fn new(partitions: usize) -> std::io::Result<Spill> {
        let files = (0..partitions)
            .map(|_| tempfile::tempfile().map(Mutex::new))
            .collect::<std::io::Result<_>>()?;
        Ok(Spill { files })
    }

    fn append(&self, p: usize, bytes: &[u8]) -> std::io::Result<()> {
        let mut f = self.files[p]
            .lock()
            .map_err(|_| std::io::Error::other("spill lock poisoned"))?;
        f.write_all(bytes)
    }

    /// Partition `p`'s records; the file is emptied (its space given back).
    fn take(&self, p: usize, out: &mut Vec<Rec>) -> std::io::Result<()> {
        let f = self.files[p]
            .lock()
            .map_err(|_| std::io::Error::other("spill lock poisoned"))?;
        out.clear();
        if f.metadata()?.len() > 0 {
            // SAFETY: the file is this process's own unnamed temporary file, written only
            // under the lock held here, and unmapped before the lock is let go.
            let map = unsafe { memmap2::Mmap::map(&*f)? };
            out.extend(map.chunks_exact(REC).map(Rec::get));
        }
        f.set_len(0)?;
        Ok(())
    }
}

/// Buffers a worker of the second pass keeps from partition to partition: freeing them each
/// time would unmap them, and every unmap stops all cores (a TLB shootdown).
#[derive(Default)]
struct Scratch {
    recs: [Vec<Rec>; 2],
    slots: [Vec<u32>; 2],
    rows: [Vec<u8>; 2],
}

impl Scratch {
    /// Partition `p` of both sides, into `recs`.
    fn take(&mut self, spills: &[Spill; 2], p: usize) -> std::io::Result<()> {
        for (side, recs) in spills.iter().zip(&mut self.recs) {
            side.take(p, recs)?;
        }
        Ok(())
    }
}

/// The partition of an id, of `2^bits` (Fibonacci hashing: sequential ids spread).
fn partition_of(id: i64, bits: u32) -> usize {
    match bits {
        0 => 0,
        _ => ((id as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> (64 - bits)) as usize,
    }
}

fn partition_bits(rows: u64) -> u32 {
    let want = rows.div_ceil(PARTITION_RECORDS).clamp(1, MAX_PARTITIONS);
    want.next_power_of_two().trailing_zeros()
}

/// The first pass: every piece of both sides (`fingerprint`: of its rows' bytes too) spilled
/// by partition.
fn spill(
    sides: [&TableScan; 2],
    bits: u32,
    fingerprint: bool,
    req: &dyn Requester,
) -> Result<[Spill; 2], RowDiffError> {
    let spills = [Spill::new(1 << bits)?, Spill::new(1 << bits)?];
    let work: Vec<(usize, usize)> = (0..2)
        .flat_map(|s| (0..sides[s].pieces()).map(move |k| (s, k)))
        .collect();
    struct Worker {
        batch: Batch,
        parts: Vec<Vec<u8>>,
    }
    let results = pool::each(
        work.len(),
        req,
        || Worker {
            batch: Batch::default(),
            parts: vec![Vec::new(); 1 << bits],
        },
        |w, i| -> Result<(), RowDiffError> {
            let (s, k) = work[i];
            let scan = sides[s];
            scan.read_piece(k, &mut w.batch)?;
            let row = scan.row_bytes();
            for (r, (&id, &position)) in w.batch.ids.iter().zip(&w.batch.positions).enumerate() {
                let print = match fingerprint {
                    true => xxhash_rust::xxh3::xxh3_128(&w.batch.values[r * row..(r + 1) * row]),
                    false => 0,
                };
                Rec {
                    id,
                    position,
                    print,
                }
                .put(&mut w.parts[partition_of(id, bits)]);
            }
            for (p, bytes) in w.parts.iter_mut().enumerate() {
                if !bytes.is_empty() {
                    spills[s].append(p, bytes)?;
                    bytes.clear();
                }
            }
            Ok(())
        },
    )?;
    results.into_iter().collect::<Result<(), _>>()?;
    Ok(spills)
}

/// One partition's records of a side found by id: open addressing over `recs`. An id held
/// by more than one record is not a row (`get` gives none).
struct ById<'a> {
    recs: &'a [Rec],
    /// Index + 1 into `recs`; 0: empty.
    slots: &'a [u32],
    bits: u32,
    repeated: std::collections::HashSet<i64>,
}

/// A second hash of an id, independent of `partition_of`'s (splitmix64's finaliser).
fn slot_hash(id: i64, bits: u32) -> usize {
    let mut z = id as u64;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^= z >> 31;
    (z >> (64 - bits)) as usize
}

impl<'a> ById<'a> {
    fn new(recs: &'a [Rec], slots: &'a mut Vec<u32>) -> ById<'a> {
        debug_assert!(recs.len() < u32::MAX as usize);
        let bits = (recs.len().max(1) * 2)
            .next_power_of_two()
            .trailing_zeros()
            .max(1);
        let mask = (1usize << bits) - 1;
        slots.clear();
        slots.resize(1 << bits, 0);
        let mut repeated = std::collections::HashSet::new();
        for (i, r) in recs.iter().enumerate() {
            let mut h = slot_hash(r.id, bits);
            loop {
                match slots[h] {
                    0 => {
                        slots[h] = i as u32 + 1;
                        break;
                    }
                    k if recs[k as usize - 1].id == r.id => {
                        repeated.insert(r.id);
                        break;
                    }
                    _ => h = (h + 1) & mask,
                }
            }
        }
        ById {
            recs,
            slots,
            bits,
            repeated,
        }
    }

    /// Records whose id is held more than once.
    fn repeated_count(&self) -> u64 {
        match self.repeated.is_empty() {
            true => 0,
            false => self
                .recs
                .iter()
                .filter(|r| self.repeated.contains(&r.id))
                .count() as u64,
        }
    }

    fn is_row(&self, r: &Rec) -> bool {
        self.repeated.is_empty() || !self.repeated.contains(&r.id)
    }

    fn get(&self, id: i64) -> Option<&'a Rec> {
        let mask = self.slots.len() - 1;
        let mut h = slot_hash(id, self.bits);
        loop {
            match self.slots[h] {
                0 => return None,
                k if self.recs[k as usize - 1].id == id => {
                    let r = &self.recs[k as usize - 1];
                    return self.is_row(r).then_some(r);
                }
                _ => h = (h + 1) & mask,
            }
        }
    }
}

/// One partition's records of both sides joined by id: `on(a, b)` for each id that is a row
/// of either side (A's records in their order, then B's not in A); the records of ids held
/// more than once in a side are counted in `repeated` and left out of it.
fn join(
    recs: &[Vec<Rec>; 2],
    slots: &mut [Vec<u32>; 2],
    repeated: &mut [u64; 2],
    mut on: impl FnMut(Option<&Rec>, Option<&Rec>),
) {
    let (a, b) = (&recs[0][..], &recs[1][..]);
    let [sa, sb] = slots;
    let (ia, ib) = (ById::new(a, sa), ById::new(b, sb));
    repeated[0] += ia.repeated_count();
    repeated[1] += ib.repeated_count();
    for x in a.iter().filter(|x| ia.is_row(x)) {
        on(Some(x), ib.get(x.id));
    }
    for y in b.iter().filter(|y| ib.is_row(y)) {
        if ia.get(y.id).is_none() {
            on(None, Some(y));
        }
    }
}

/// Keeps the `SAMPLE` smallest of the ids offered (`ids` ascending).
fn keep_smallest(ids: &mut Vec<i64>, id: i64) {
    if ids.len() == SAMPLE && ids.last().is_some_and(|&m| m <= id) {
        return;
    }
    let at = ids.partition_point(|&x| x < id);
    ids.insert(at, id);
    ids.truncate(SAMPLE);
}

/// What one partition of a row diff found.
#[derive(Default)]
struct Found {
    changes: Vec<(i64, Change)>,
    summary: RowSummary,
}

/// Compares tables `a` and `b` row by row: `emit(id, change)` for every id that differs,
/// partition by partition (ids ascending within one), and the counts.
pub(crate) fn diff_rows(
    a: &TableScan,
    b: &TableScan,
    req: &dyn Requester,
    emit: &mut dyn FnMut(i64, Change) -> std::io::Result<()>,
) -> Result<RowSummary, RowDiffError> {
    if a.width() != b.width() {
        return Err(RowDiffError::Widths {
            a: a.width(),
            b: b.width(),
        });
    }
    if a.dtype() != b.dtype() {
        return Err(RowDiffError::Dtypes {
            a: a.dtype().name().into_owned(),
            b: b.dtype().name().into_owned(),
        });
    }
    let bits = partition_bits(estimate(a).max(estimate(b)));
    let spills = spill([a, b], bits, true, req)?;
    let dtype = a.dtype();
    let mut total = RowSummary::default();
    each_window(
        1 << bits,
        req,
        |w: &mut Scratch, p| -> Result<Found, RowDiffError> {
            w.take(&spills, p)?;
            let mut f = Found::default();
            let s = &mut f.summary;
            s.rows_a = w.recs[0].len() as u64;
            s.rows_b = w.recs[1].len() as u64;
            let [va, vb] = &mut w.rows;
            let mut failed = None;
            join(&w.recs, &mut w.slots, &mut s.repeated, |x, y| {
                match (x, y) {
                    (Some(x), Some(y)) if x.print == y.print => s.unchanged += 1,
                    (Some(x), Some(y)) => {
                        va.clear();
                        vb.clear();
                        let read = a
                            .row(x.position, x.id, va)
                            .and_then(|()| b.row(y.position, y.id, vb));
                        if let Err(e) = read {
                            failed.get_or_insert(e);
                            return;
                        }
                        let d = compare_runs(dtype, va, vb);
                        if d.changed == 0 {
                            s.unchanged += 1;
                            return;
                        }
                        s.changed += 1;
                        s.delta.merge(&d);
                        s.delta.numeric = d.numeric;
                        f.changes.push((x.id, Change::Changed(d.max_abs)));
                    }
                    (Some(x), None) => {
                        s.removed += 1;
                        f.changes.push((x.id, Change::Removed));
                    }
                    (None, Some(y)) => {
                        s.added += 1;
                        f.changes.push((y.id, Change::Added));
                    }
                    (None, None) => {}
                }
            });
            // Ids ascending within a partition: the same output every run.
            f.changes.sort_unstable_by_key(|c| c.0);
            match failed {
                Some(e) => Err(e.into()),
                None => Ok(f),
            }
        },
        |f| {
            for &(id, c) in &f.changes {
                emit(id, c).map_err(RowDiffError::Emit)?;
            }
            total.merge(&f.summary);
            Ok(())
        },
    )?;
    total.delta.numeric = crate::stats::has_stats(dtype);
    Ok(total)
}

impl RowSummary {
    fn merge(&mut self, o: &RowSummary) {
        self.rows_a += o.rows_a;
        self.rows_b += o.rows_b;
        self.added += o.added;
        self.removed += o.removed;
        self.changed += o.changed;
        self.unchanged += o.unchanged;
        self.repeated[0] += o.repeated[0];
        self.repeated[1] += o.repeated[1];
        self.delta.merge(&o.delta);
    }
}

/// How the ids of a table and of one of its slots compare.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct KeySets {
    pub(crate) table: u64,
    pub(crate) slot: u64,
    pub(crate) only_table: u64,
    pub(crate) only_slot: u64,
    /// The `SAMPLE` smallest of each, ascending.
    pub(crate) sample_table: Vec<i64>,
    pub(crate) sample_slot: Vec<i64>,
}

/// Ids named of each side at most.
pub(crate) const SAMPLE: usize = 10;

/// The ids of `table` against those of `slot` (no values read where the tables keep ids
/// apart from rows).
pub(crate) fn key_sets(
    table: &TableScan,
    slot: &TableScan,
    req: &dyn Requester,
) -> Result<KeySets, RowDiffError> {
    let bits = partition_bits(estimate(table).max(estimate(slot)));
    let spills = spill([table, slot], bits, false, req)?;
    let mut out = KeySets::default();
    each_window(
        1 << bits,
        req,
        |w: &mut Scratch, p| -> Result<KeySets, RowDiffError> {
            w.take(&spills, p)?;
            let mut k = KeySets {
                table: w.recs[0].len() as u64,
                slot: w.recs[1].len() as u64,
                ..KeySets::default()
            };
            join(&w.recs, &mut w.slots, &mut [0; 2], |x, y| match (x, y) {
                (Some(x), None) => {
                    k.only_table += 1;
                    keep_smallest(&mut k.sample_table, x.id);
                }
                (None, Some(y)) => {
                    k.only_slot += 1;
                    keep_smallest(&mut k.sample_slot, y.id);
                }
                _ => {}
            });
            Ok(k)
        },
        |k| {
            out.table += k.table;
            out.slot += k.slot;
            out.only_table += k.only_table;
            out.only_slot += k.only_slot;
            for (all, some) in [
                (&mut out.sample_table, &k.sample_table),
                (&mut out.sample_slot, &k.sample_slot),
            ] {
                for &id in some {
                    keep_smallest(all, id);
                }
            }
            Ok(())
        },
    )?;
    Ok(out)
}

/// Rows a table has, or at most has (a `ColumnId` table: its stored entries).
fn estimate(t: &TableScan) -> u64 {
    t.rows().unwrap_or_else(|| {
        t.tensor()
            .sparse_shape()
            .map(|s| s.row_ptr.last().copied().unwrap_or(0))
            .unwrap_or(0)
    })
}

/// `work(p)` for every partition `p < n`, on all cores, a window at a time; `done` takes the
/// results in partition order.
fn each_window<T: Send, E: From<LayoutError> + Send>(
    n: usize,
    req: &dyn Requester,
    work: impl Fn(&mut Scratch, usize) -> Result<T, E> + Sync,
    mut done: impl FnMut(T) -> Result<(), E>,
) -> Result<(), E> {
    let workers = std::thread::available_parallelism().map_or(1, |n| n.get());
    let window = (workers * WINDOW_PER_WORKER).max(1);
    let mut first = 0;
    while first < n {
        let count = window.min(n - first);
        let got = pool::each(count, req, Scratch::default, |w, k| work(w, first + k))?;
        for r in got {
            done(r?)?;
        }
        first += count;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn repeated_ids_are_left_out_and_join_pairs_ids() {
        let r = |id| Rec {
            id,
            position: 0,
            print: 0,
        };
        let a = vec![r(5), r(1), r(3), r(3), r(9)];
        let b = vec![r(0), r(5), r(10), r(9), r(9)];
        let mut repeated = [0; 2];
        let mut seen = Vec::new();
        join(&[a, b], &mut Default::default(), &mut repeated, |x, y| {
            seen.push((x.map(|x| x.id), y.map(|y| y.id)))
        });
        assert_eq!(repeated, [2, 2]);
        seen.sort();
        assert_eq!(
            seen,
            [
                (None, Some(0)),
                (None, Some(10)),
                (Some(1), None),
                (Some(5), Some(5)),
                (Some(9), None),
            ]
        );
        let mut small = Vec::new();
        for id in [7, 3, 99, -4, 12, 0, 1, 2, 8, 5, 6, -1, 100] {
            keep_smallest(&mut small, id);
        }
        assert_eq!(small, [-4, -1, 0, 1, 2, 3, 5, 6, 7, 8]);
    }

    #[test]
    fn records_round_trip_and_partitions_spread() {
        let x = Rec {
            id: -7,
            position: 1 << 40,
            print: u128::MAX - 3,
        };
        let mut b = Vec::new();
        x.put(&mut b);
        assert_eq!(b.len(), REC);
        assert_eq!(Rec::get(&b), x);
        assert_eq!(partition_bits(0), 0);
        assert_eq!(partition_bits(PARTITION_RECORDS * 3), 2);
        assert_eq!(partition_bits(u64::MAX), 8);
        let mut seen = [0u32; 16];
        for id in 0..16_000 {
            seen[partition_of(id, 4)] += 1;
        }
        assert!(seen.iter().all(|&n| (900..1100).contains(&n)), "{seen:?}");
    }
}
