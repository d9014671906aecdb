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
use std::io::{Read, Seek, Write};
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
const WINDOW_PER_WORKER: usize = 2;

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
        let mut f = self.files[p]
            .lock()
            .map_err(|_| std::io::Error::other("spill lock poisoned"))?;
        let len = f.stream_position()?;
        f.rewind()?;
        let mut buf = vec![0u8; len as usize];
        f.read_exact(&mut buf)?;
        f.set_len(0)?;
        out.clear();
        out.extend(buf.chunks_exact(REC).map(Rec::get));
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

/// Sorts `recs` by id and drops ids present more than once (counted in `repeated`).
fn sort_unique(recs: &mut Vec<Rec>, repeated: &mut u64) {
    recs.sort_unstable();
    let mut kept = 0;
    let mut i = 0;
    while i < recs.len() {
        let mut j = i + 1;
        while j < recs.len() && recs[j].id == recs[i].id {
            j += 1;
        }
        if j - i == 1 {
            recs[kept] = recs[i];
            kept += 1;
        } else {
            *repeated += (j - i) as u64;
        }
        i = j;
    }
    recs.truncate(kept);
}

/// One partition's records of both sides, sorted and merged: `on(id, a, b)` for each id.
fn merge(a: &[Rec], b: &[Rec], mut on: impl FnMut(Option<&Rec>, Option<&Rec>)) {
    let (mut i, mut j) = (0, 0);
    while i < a.len() || j < b.len() {
        match (a.get(i), b.get(j)) {
            (Some(x), Some(y)) if x.id == y.id => {
                on(Some(x), Some(y));
                i += 1;
                j += 1;
            }
            (Some(x), y) if y.is_none_or(|y| x.id < y.id) => {
                on(Some(x), None);
                i += 1;
            }
            (_, y) => {
                on(None, y);
                j += 1;
            }
        }
    }
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
        |p| -> Result<Found, RowDiffError> {
            let (mut ra, mut rb) = (Vec::new(), Vec::new());
            spills[0].take(p, &mut ra)?;
            spills[1].take(p, &mut rb)?;
            let mut f = Found::default();
            let s = &mut f.summary;
            s.rows_a = ra.len() as u64;
            s.rows_b = rb.len() as u64;
            sort_unique(&mut ra, &mut s.repeated[0]);
            sort_unique(&mut rb, &mut s.repeated[1]);
            let (mut va, mut vb) = (Vec::new(), Vec::new());
            let mut failed = None;
            merge(&ra, &rb, |x, y| match (x, y) {
                (Some(x), Some(y)) if x.print == y.print => s.unchanged += 1,
                (Some(x), Some(y)) => {
                    va.clear();
                    vb.clear();
                    let read = a
                        .row(x.position, x.id, &mut va)
                        .and_then(|()| b.row(y.position, y.id, &mut vb));
                    if let Err(e) = read {
                        failed.get_or_insert(e);
                        return;
                    }
                    let d = compare_runs(dtype, &va, &vb);
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
            });
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
    /// Up to `SAMPLE` of each, smallest first per partition.
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
        |p| -> Result<KeySets, RowDiffError> {
            let (mut ra, mut rb) = (Vec::new(), Vec::new());
            spills[0].take(p, &mut ra)?;
            spills[1].take(p, &mut rb)?;
            let mut k = KeySets {
                table: ra.len() as u64,
                slot: rb.len() as u64,
                ..KeySets::default()
            };
            sort_unique(&mut ra, &mut 0);
            sort_unique(&mut rb, &mut 0);
            merge(&ra, &rb, |x, y| match (x, y) {
                (Some(x), None) => {
                    k.only_table += 1;
                    if k.sample_table.len() < SAMPLE {
                        k.sample_table.push(x.id);
                    }
                }
                (None, Some(y)) => {
                    k.only_slot += 1;
                    if k.sample_slot.len() < SAMPLE {
                        k.sample_slot.push(y.id);
                    }
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
                let room = SAMPLE - all.len();
                all.extend(some.iter().take(room));
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
    work: impl Fn(usize) -> Result<T, E> + Sync,
    mut done: impl FnMut(T) -> Result<(), E>,
) -> Result<(), E> {
    let workers = std::thread::available_parallelism().map_or(1, |n| n.get());
    let window = (workers * WINDOW_PER_WORKER).max(1);
    let mut first = 0;
    while first < n {
        let count = window.min(n - first);
        let got = pool::each(count, req, || (), |_, k| work(first + k))?;
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
    fn repeated_ids_are_left_out_and_merge_pairs_ids() {
        let r = |id| Rec {
            id,
            position: 0,
            print: 0,
        };
        let mut a = vec![r(5), r(1), r(3), r(3), r(9)];
        let mut repeated = 0;
        sort_unique(&mut a, &mut repeated);
        assert_eq!(a.iter().map(|x| x.id).collect::<Vec<_>>(), [1, 5, 9]);
        assert_eq!(repeated, 2);
        let b = vec![r(0), r(5), r(10)];
        let mut seen = Vec::new();
        merge(&a, &b, |x, y| seen.push((x.map(|x| x.id), y.map(|y| y.id))));
        assert_eq!(
            seen,
            [
                (None, Some(0)),
                (Some(1), None),
                (Some(5), Some(5)),
                (Some(9), None),
                (None, Some(10))
            ]
        );
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
