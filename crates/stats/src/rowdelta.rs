//! Two keyed tables compared id by id (`modelfs diff --rows`), and the key sets of a table and
//! its optimizer slots (`modelfs check`), in memory bounded whatever the tables' size.
//!
//! Tables keep their rows in any order (a hash table's is its buckets'). A TF hash table
//! whose keys read apart is first tried by a sketch of its differences (`sketch`: one pass,
//! nothing written, memory sized to what differs). Every other table, and one whose sketch
//! gives up, has its ids matched by partitioning: a first pass reads both tables piece by
//! piece on all cores and spills, per row, (id, position, 88-bit fingerprint of the row's
//! bytes) grouped by partition of ids into a file per worker and side; a second pass takes
//! partition after partition (on all cores) and joins both sides' records by id in one
//! in-memory table. Equal fingerprints are equal rows; only rows whose fingerprints differ
//! are read again (by position) and compared as `diff` compares elements, so −0.0 = 0.0 and
//! NaN = NaN there too. A scan that reads its tensors unverified (`TableScan::deferring`)
//! has its checksums confirmed at the end of the first pass, before anything is compared.
//!
//! An id saved more than once in a table (a `DenseHashTable`'s empty and deleted buckets, its
//! sentinels) is not a row: it is left out, as `row_by_id` leaves it out.

use std::fs::File;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use super::delta::{compare_runs, Delta};
pub use super::rowpass::RowDiffError;
use super::rowpass::{mix, prefetch, work_items};
use modelfs_layout::{pool, LayoutError, Requester};
use modelfs_model::scan::{Batch, TableScan};
use modelfs_model::{Crc, KeyKind};

/// Records a partition holds on average (of each side): what the second pass joins at once
/// (its table, about 32 bytes a record, then stays within a core's L2).
const PARTITION_RECORDS: u64 = 1 << 15;
/// Partitions at most: each item of the first pass keeps where its run of each is.
const MAX_PARTITIONS: u64 = 1024;
/// Partitions merged at once by the second pass, per worker (their results wait to be
/// emitted in order).
const WINDOW_PER_WORKER: usize = 16;
/// Bits of a record's position. A scan finds `HashKey` and `RowIndex` rows again by position
/// (fewer rows than this, checked); other kinds find them by id and ignore it.
const POSITION_BITS: u32 = 40;
const POSITION_MASK: u64 = (1 << POSITION_BITS) - 1;

/// One row as spilled: 24 bytes, its id, position and an 88-bit fingerprint of its bytes (a
/// changed row passes for unchanged with odds 2^-88). Spill files are this process's own,
/// written and read on this machine: the layout is native.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, bytemuck::Pod, bytemuck::Zeroable)]
struct Rec {
    id: i64,
    /// The position in the low `POSITION_BITS`; 24 bits of the fingerprint above.
    position_print: u64,
    /// 64 more bits of the fingerprint.
    print: u64,
}

const REC: usize = std::mem::size_of::<Rec>();

impl Rec {
    fn new(id: i64, position: u64, print: u128) -> Rec {
        Rec {
            id,
            position_print: (position & POSITION_MASK) | ((print >> 64) as u64) << POSITION_BITS,
            print: print as u64,
        }
    }

    fn position(&self) -> u64 {
        self.position_print & POSITION_MASK
    }

    /// Whether the rows' fingerprints are equal.
    fn same_print(&self, o: &Rec) -> bool {
        self.print == o.print
            && self.position_print >> POSITION_BITS == o.position_print >> POSITION_BITS
    }
}

/// What an id's row did between A and B.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Change {
    Added,
    Removed,
    /// The largest |b − a| over its elements (both finite; 0 when only NaN/Inf changed).
    Changed(f64),
}

/// Counts over a pair of tables.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct RowSummary {
    pub rows_a: u64,
    pub rows_b: u64,
    pub added: u64,
    pub removed: u64,
    pub changed: u64,
    pub unchanged: u64,
    /// Rows left out, per side: ids saved more than once, and sentinel keys
    /// (`Keyed::sentinels`).
    pub repeated: [u64; 2],
    /// Over the changed rows: Σ (b − a)², Σ a² (`rel_l2`).
    pub delta: Delta,
}

impl RowSummary {
    /// ‖B − A‖₂ / ‖A‖₂ over the changed rows.
    pub fn rel_l2(&self) -> Option<f64> {
        self.delta.rel_l2()
    }
}

/// The spill of one side: an unnamed temporary file per worker of the first pass (writers of
/// one file wait on its inode lock: 16 % of a diff's time went to spinning on it), written
/// an item (a run of pieces) at a time, each item's records grouped by partition.
struct Spill {
    /// Each file and the bytes written to it.
    files: Vec<(File, AtomicU64)>,
    /// The items, in item order (so that a partition's records come in the same order every
    /// run).
    items: Vec<Spilled>,
    /// Rows left out as sentinels (`TableScan::sentinels`).
    sentinels: AtomicU64,
}

/// Bytes a spill write hands the kernel at once.
const SPILL_WRITE: usize = 64 << 10;

/// Where an item's records are: in file `file` from `offset`, partition `p` at records
/// `starts[p]..starts[p + 1]`.
struct Spilled {
    file: usize,
    offset: u64,
    starts: Vec<u32>,
}

impl Spill {
    fn new(files: usize) -> std::io::Result<Spill> {
        let files = (0..files.max(1))
            .map(|_| Ok((tempfile::tempfile()?, AtomicU64::new(0))))
            .collect::<std::io::Result<_>>()?;
        Ok(Spill {
            files,
            items: Vec::new(),
            sentinels: AtomicU64::new(0),
        })
    }

    /// Writes `recs`, grouped by partition as `starts` says, at the end of file `file`
    /// (one worker's).
    fn write(&self, file: usize, recs: &[Rec], starts: Vec<u32>) -> std::io::Result<Spilled> {
        use std::os::unix::fs::FileExt;
        debug_assert_eq!(starts.last().map(|&n| n as usize), Some(recs.len()));
        let (f, end) = &self.files[file];
        let bytes: &[u8] = bytemuck::cast_slice(recs);
        let offset = end.fetch_add(bytes.len() as u64, Ordering::Relaxed);
        // 64 KiB a call: the page cache then takes small folios, not the large ones a
        // longer write asks for. Large free blocks are what a VM hands back to its host
        // (free page reporting); each fresh one costs a host fault per page on first write,
        // 10x the copy (measured: 480 MB in 1.4 s written 1 MiB a call, 0.5 s 64 KiB a call).
        for (k, page) in bytes.chunks(SPILL_WRITE).enumerate() {
            f.write_all_at(page, offset + (k * SPILL_WRITE) as u64)?;
        }
        Ok(Spilled {
            file,
            offset,
            starts,
        })
    }

    /// Partition `p`'s records.
    fn take(&self, p: usize, out: &mut Vec<Rec>) -> std::io::Result<()> {
        use std::os::unix::fs::FileExt;
        out.clear();
        for item in &self.items {
            let (s, e) = (item.starts[p] as usize, item.starts[p + 1] as usize);
            if e > s {
                let at = out.len();
                out.resize(at + e - s, Rec::default());
                let offset = item.offset + (s * REC) as u64;
                self.files[item.file]
                    .0
                    .read_exact_at(bytemuck::cast_slice_mut(&mut out[at..]), offset)?;
            }
        }
        Ok(())
    }
}

/// Buffers a worker of the second pass keeps from partition to partition: freeing them each
/// time would unmap them, and every unmap stops all cores (a TLB shootdown).
#[derive(Default)]
struct Scratch {
    recs: [Vec<Rec>; 2],
    table: Vec<Slot>,
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

fn partition_bits(rows: u64, most: u64) -> u32 {
    let want = rows.div_ceil(PARTITION_RECORDS).clamp(1, most);
    want.next_power_of_two().trailing_zeros()
}

/// The first pass: every piece of both sides (`fingerprint`: of its rows' bytes too) spilled
/// by partition, a run of pieces (an item) at a time.
fn spill(
    sides: [&TableScan; 2],
    bits: u32,
    fingerprint: bool,
    req: &dyn Requester,
) -> Result<[Spill; 2], RowDiffError> {
    for s in sides {
        let by_position = matches!(s.kind(), KeyKind::HashKey | KeyKind::RowIndex);
        if by_position && s.rows().is_some_and(|r| r > POSITION_MASK) {
            return Err(RowDiffError::TooManyRows(s.rows().unwrap_or(0)));
        }
    }
    let workers = modelfs_io::source::cores();
    let mut spills = [Spill::new(workers)?, Spill::new(workers)?];
    // Each worker writes files of its own (the pool makes at most `workers`).
    let next_file = AtomicUsize::new(0);
    let partitions = 1usize << bits;
    let work = work_items(sides);
    struct Worker {
        file: usize,
        batch: Batch,
        parts: Vec<Vec<Rec>>,
        out: Vec<Rec>,
    }
    let results = pool::each(
        work.len(),
        req,
        || Worker {
            file: next_file.fetch_add(1, Ordering::Relaxed) % workers,
            batch: Batch::default(),
            parts: vec![Vec::new(); partitions],
            out: Vec::new(),
        },
        |w, i| -> Result<(Spilled, [Crc; 2]), RowDiffError> {
            let (s, first, end) = work[i];
            let scan = sides[s];
            let row = scan.row_bytes();
            let sentinels = scan.sentinels();
            let mut left_out = 0;
            // The item's pieces are read in order: their checksums run on.
            w.batch.take_crcs();
            for k in first..end {
                scan.read_piece(k, &mut w.batch)?;
                let b = &w.batch;
                let values = b.values();
                debug_assert_eq!(values.len(), b.ids.len() * row);
                for (r, (&id, &position)) in b.ids.iter().zip(&b.positions).enumerate() {
                    if sentinels.contains(&id) {
                        left_out += 1;
                        continue;
                    }
                    let print = match fingerprint {
                        true => xxhash_rust::xxh3::xxh3_128(&values[r * row..(r + 1) * row]),
                        false => 0,
                    };
                    w.parts[partition_of(id, bits)].push(Rec::new(id, position, print));
                }
            }
            let mut starts = Vec::with_capacity(partitions + 1);
            w.out.clear();
            for part in &mut w.parts {
                starts.push(w.out.len() as u32);
                w.out.extend_from_slice(part);
                part.clear();
            }
            starts.push(w.out.len() as u32);
            spills[s].sentinels.fetch_add(left_out, Ordering::Relaxed);
            Ok((
                spills[s].write(w.file, &w.out, starts)?,
                w.batch.take_crcs(),
            ))
        },
    )?;
    let mut crcs = [[Crc::default(); 2]; 2];
    for ((s, _, _), r) in work.iter().zip(results) {
        let (spilled, c) = r?;
        spills[*s].items.push(spilled);
        crcs[*s] = [0, 1].map(|j| crcs[*s][j].then(c[j]));
    }
    // What a deferring scan read counts only once its checksums are confirmed.
    for (scan, c) in sides.iter().zip(crcs) {
        scan.confirm(c)?;
    }
    Ok(spills)
}

/// A slot of the join's table: an id and where each side holds it (index + 1 into that
/// side's records; 0: not held; `REPEATED`: held more than once). A free slot holds `[0, 0]`.
#[derive(Clone, Copy, Default)]
struct Slot {
    id: i64,
    at: [u32; 2],
}

const REPEATED: u32 = u32::MAX;

/// Records ahead whose slot the join asks the cache for.
const PREFETCH_AHEAD: usize = 8;

/// A second hash of an id, independent of `partition_of`'s (splitmix64's finaliser).
fn slot_hash(id: i64, bits: u32) -> usize {
    (mix(id as u64) >> (64 - bits)) as usize
}

/// One partition's records of both sides joined by id, in one open-addressing table that
/// holds ids in place (one cache miss an id, not one per side and probe): `on(a, b)` for
/// each id that is a row of either side, in no particular order; the records of ids held more
/// than once in a side are counted in `repeated` and left out of it.
fn join(
    recs: &[Vec<Rec>; 2],
    table: &mut Vec<Slot>,
    repeated: &mut [u64; 2],
    mut on: impl FnMut(Option<&Rec>, Option<&Rec>),
) {
    let n = recs[0].len() + recs[1].len();
    debug_assert!(n < REPEATED as usize);
    // At most two thirds full, so probes stay short and always find a free slot.
    let bits = (n * 3 / 2 + 1).next_power_of_two().trailing_zeros().max(1);
    let mask = (1usize << bits) - 1;
    table.clear();
    table.resize(1 << bits, Slot::default());
    for (side, recs) in recs.iter().enumerate() {
        for (i, r) in recs.iter().enumerate() {
            // The slot of a record a few ahead is fetched meanwhile: the table is larger
            // than a core's L1, and one miss at a time left the join waiting on memory.
            if let Some(next) = recs.get(i + PREFETCH_AHEAD) {
                prefetch(&table[slot_hash(next.id, bits)]);
            }
            let mut h = slot_hash(r.id, bits);
            loop {
                let s = &mut table[h];
                if s.at == [0, 0] {
                    s.id = r.id;
                    s.at[side] = i as u32 + 1;
                    break;
                }
                if s.id == r.id {
                    match s.at[side] {
                        0 => s.at[side] = i as u32 + 1,
                        REPEATED => repeated[side] += 1,
                        _ => {
                            // The first record of the id and this one.
                            s.at[side] = REPEATED;
                            repeated[side] += 2;
                        }
                    }
                    break;
                }
                h = (h + 1) & mask;
            }
        }
    }
    for s in table.iter() {
        let get = |side: usize| match s.at[side] {
            0 | REPEATED => None,
            k => Some(&recs[side][k as usize - 1]),
        };
        match (get(0), get(1)) {
            (None, None) => {}
            (x, y) => on(x, y),
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

impl Found {
    /// Id `id`, held by A and B at `at` (`None`: not held), whose fingerprints differ: an
    /// added or removed row, or both rows read again and compared (`rows_differ`).
    fn compare(
        &mut self,
        sides: [&TableScan; 2],
        id: i64,
        at: [Option<u64>; 2],
        rows: &mut [Vec<u8>; 2],
    ) -> Result<(), modelfs_model::ModelError> {
        match at {
            [Some(x), Some(y)] => {
                let [va, vb] = rows;
                va.clear();
                vb.clear();
                sides[0].row(x, id, va)?;
                sides[1].row(y, id, vb)?;
                self.rows_differ(sides[0].dtype(), id, va, vb);
            }
            _ => self.one_side(id, at),
        }
        Ok(())
    }

    /// Id `id`'s rows of A and B, whose bytes differ, compared as `diff` compares elements
    /// (bytes that differ may still be equal numbers).
    fn rows_differ(&mut self, dtype: modelfs_model::DType, id: i64, a: &[u8], b: &[u8]) {
        let s = &mut self.summary;
        let d = compare_runs(dtype, a, b);
        if d.changed == 0 {
            s.unchanged += 1;
            return;
        }
        s.changed += 1;
        s.delta.merge(&d);
        s.delta.numeric = d.numeric;
        self.changes.push((id, Change::Changed(d.max_abs)));
    }

    /// Id `id`, held by one side only (`at`).
    fn one_side(&mut self, id: i64, at: [Option<u64>; 2]) {
        let s = &mut self.summary;
        match at {
            [Some(_), None] => {
                s.removed += 1;
                self.changes.push((id, Change::Removed));
            }
            [None, Some(_)] => {
                s.added += 1;
                self.changes.push((id, Change::Added));
            }
            _ => debug_assert!(false, "an id held by one side"),
        }
    }
}

/// A worker's buffers of `compare_listed`: positions to read, and the rows read.
#[derive(Default)]
struct Gather {
    at: Vec<u64>,
    rows: [Vec<u8>; 2],
}

/// Differences listed by `sketch` (rows read once more only where both sides hold an id),
/// emitted in the spill's order — partition by partition, ids ascending within one — so the
/// output does not depend on the way taken.
fn compare_listed(
    sides: [&TableScan; 2],
    bits: u32,
    mut listed: Vec<super::sketch::Difference>,
    req: &dyn Requester,
    emit: &mut dyn FnMut(i64, Change) -> std::io::Result<()>,
) -> Result<RowSummary, RowDiffError> {
    /// Differences a worker takes at once.
    const CHUNK: usize = 4096;
    listed.sort_unstable_by_key(|d| (partition_of(d.id, bits), d.id));
    let found = pool::each(
        listed.len().div_ceil(CHUNK),
        req,
        Gather::default,
        |w: &mut Gather, c| -> Result<Found, RowDiffError> {
            let chunk = &listed[c * CHUNK..((c + 1) * CHUNK).min(listed.len())];
            // The rows of ids both hold, read a side at a time in one call each.
            for (s, side) in sides.iter().enumerate() {
                w.at.clear();
                w.at.extend(
                    chunk
                        .iter()
                        .filter_map(|d| d.at[0].and(d.at[1]).and(d.at[s])),
                );
                side.rows_at(&w.at, &mut w.rows[s])?;
            }
            let row = sides[0].row_bytes();
            let mut f = Found::default();
            let mut k = 0;
            for d in chunk {
                match d.at {
                    [Some(_), Some(_)] => {
                        let (a, b) = (&w.rows[0][k * row..], &w.rows[1][k * row..]);
                        f.rows_differ(sides[0].dtype(), d.id, &a[..row], &b[..row]);
                        k += 1;
                    }
                    at => f.one_side(d.id, at),
                }
            }
            Ok(f)
        },
    )?;
    let mut total = RowSummary::default();
    for f in found {
        let f = f?;
        for &(id, c) in &f.changes {
            emit(id, c).map_err(RowDiffError::Emit)?;
        }
        total.merge(&f.summary);
    }
    let [ra, rb] = sides.map(|s| s.rows().unwrap_or(0));
    // Every other row is in both, unchanged (`sketch` checked the counts agree).
    total.unchanged = ra.saturating_sub(total.removed + total.changed);
    (total.rows_a, total.rows_b) = (ra, rb);
    total.delta.numeric = crate::has_stats(sides[0].dtype());
    Ok(total)
}

/// Compares tables `a` and `b` row by row: `emit(id, change)` for every id that differs,
/// partition by partition (ids ascending within one), and the counts.
pub fn diff_rows(
    a: &TableScan,
    b: &TableScan,
    req: &dyn Requester,
    emit: &mut dyn FnMut(i64, Change) -> std::io::Result<()>,
) -> Result<RowSummary, RowDiffError> {
    diff_rows_by(a, b, req, emit, Way::Sketch).map(|(s, _)| s)
}

/// How a row diff matched ids: a sketch of the differences (`sketch`), or the spill.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Way {
    Sketch,
    Spill,
}

/// `diff_rows`, trying `way` first, and the way taken.
pub fn diff_rows_by(
    a: &TableScan,
    b: &TableScan,
    req: &dyn Requester,
    emit: &mut dyn FnMut(i64, Change) -> std::io::Result<()>,
    way: Way,
) -> Result<(RowSummary, Way), RowDiffError> {
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
    let bits = partition_bits(estimate(a).max(estimate(b)), MAX_PARTITIONS);
    if way == Way::Sketch {
        if let Some(listed) = super::sketch::differences([a, b], req)? {
            let t = std::time::Instant::now();
            let s = compare_listed([a, b], bits, listed, req, emit)?;
            log::debug!("row diff: compared {:?}", t.elapsed());
            return Ok((s, Way::Sketch));
        }
    }
    let spills = spill([a, b], bits, true, req)?;
    let dtype = a.dtype();
    let mut total = RowSummary::default();
    each_window(
        1 << bits,
        req,
        |w: &mut Scratch, p| -> Result<Found, RowDiffError> {
            w.take(&spills, p)?;
            let mut f = Found::default();
            f.summary.rows_a = w.recs[0].len() as u64;
            f.summary.rows_b = w.recs[1].len() as u64;
            let mut failed = None;
            let mut repeated = [0; 2];
            join(&w.recs, &mut w.table, &mut repeated, |x, y| match (x, y) {
                (Some(x), Some(y)) if x.same_print(y) => f.summary.unchanged += 1,
                (x, y) => {
                    let at = [x.map(Rec::position), y.map(Rec::position)];
                    let id = x.or(y).map_or(0, |r| r.id);
                    if let Err(e) = f.compare([a, b], id, at, &mut w.rows) {
                        failed.get_or_insert(e);
                    }
                }
            });
            f.summary.repeated = repeated;
            f.summary.rows_a -= repeated[0];
            f.summary.rows_b -= repeated[1];
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
    for (r, s) in total.repeated.iter_mut().zip(&spills) {
        *r += s.sentinels.load(Ordering::Relaxed);
    }
    total.delta.numeric = crate::has_stats(dtype);
    Ok((total, Way::Spill))
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
pub struct KeySets {
    pub table: u64,
    pub slot: u64,
    pub only_table: u64,
    pub only_slot: u64,
    /// The `SAMPLE` smallest of each, ascending.
    pub sample_table: Vec<i64>,
    pub sample_slot: Vec<i64>,
}

/// Ids named of each side at most.
pub const SAMPLE: usize = 10;

/// The ids of `table` against those of `slot` (no values read where the tables keep ids
/// apart from rows).
pub fn key_sets(
    table: &TableScan,
    slot: &TableScan,
    req: &dyn Requester,
) -> Result<KeySets, RowDiffError> {
    let bits = partition_bits(estimate(table).max(estimate(slot)), MAX_PARTITIONS);
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
            let mut repeated = [0; 2];
            join(&w.recs, &mut w.table, &mut repeated, |x, y| match (x, y) {
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
            k.table -= repeated[0];
            k.slot -= repeated[1];
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
    let workers = modelfs_io::source::cores();
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
        let r = |id| Rec::new(id, 0, 0);
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
        let print = u128::MAX - 3;
        let x = Rec::new(-7, (1 << 40) - 1, print);
        assert_eq!((x.id, x.position()), (-7, (1 << 40) - 1));
        assert!(x.same_print(&Rec::new(5, 0, print)));
        assert!(!x.same_print(&Rec::new(-7, 0, print ^ (1 << 87))));
        assert!(!x.same_print(&Rec::new(-7, 0, print ^ 1)));
        assert_eq!(REC, 24);
        assert_eq!(partition_bits(0, 256), 0);
        assert_eq!(partition_bits(PARTITION_RECORDS * 3, 256), 2);
        assert_eq!(partition_bits(u64::MAX, 256), 8);
        let mut seen = [0u32; 16];
        for id in 0..16_000 {
            seen[partition_of(id, 4)] += 1;
        }
        assert!(seen.iter().all(|&n| (900..1100).contains(&n)), "{seen:?}");
    }
}
