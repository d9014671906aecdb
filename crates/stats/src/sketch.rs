//! The rows that differ between two saves of a table, found in one pass over both and in
//! memory that follows the number of differences, not the tables' size: an invertible Bloom
//! lookup table (Goodrich and Mitzenmacher, 2011; the set reconciliation of Eppstein et al.,
//! 2011) of (id, fingerprint of the row's bytes), A's rows added and B's taken away.
//!
//! A row saved unchanged in both cancels out wherever either stored it; what stays is, for
//! each id that differs, A's version, B's, or both (changed), and peeling the table lists
//! them. Where each sits in its table then comes from one more pass over the stored keys
//! alone (an eighth of a 16-float table's bytes).
//!
//! Taken only where that pass is cheap and an id is a row once (`eligible`). It gives up,
//! and the caller spills instead (exact for every table), when the differences outnumber
//! what the table can peel or anything is off: an id peeled twice in a side, or found other
//! than once in a side where the peel put it. An id saved twice with the same bytes in both
//! tables cancels unseen; only a `DenseHashTable` saves ids twice (its sentinels, in a bucket
//! array whose length is a power of two), and such tables are not eligible.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use super::rowpass::{mix, prefetch, work_items, RowDiffError};
use modelfs_layout::{pool, LayoutError, Requester};
use modelfs_model::scan::{Batch, TableScan};
use modelfs_model::{Crc, KeyKind};

/// Bytes of cells a table holds at most: the differences it can list are about
/// `TABLE_BYTES / 24 / 1.3` (400 K), whatever the tables' size. Beyond that the peel fails
/// and the caller spills.
const TABLE_BYTES: usize = 12 << 20;
/// Tables the first pass fills at once (merged at its end): workers share them, so memory
/// does not grow with cores; the lock is held for a piece's toggles, never across a read.
const TABLES: usize = 2;
/// Cells an element takes, one in each third of the table: peeling then succeeds with high
/// probability while elements are fewer than cells / 1.23.
const HASHES: usize = 3;
/// Rows of both tables together above which the differences are estimated before the
/// sketch is tried: a first pass that then does not peel is wasted, which a 1 % change of
/// tables this large risks. The estimate costs a key pass (a ninth of a 16-float table's
/// bytes) and a sample's rows (0.2 s in all for two 10 M-row tables, a quarter of a pass).
const ESTIMATE_ABOVE: u64 = 30_000_000;
/// Rows of a side the estimate samples, about.
const SAMPLE_ROWS: u64 = 1 << 17;
/// Rows ahead whose cells the first pass asks the cache for (the table is larger than L2).
const PREFETCH_AHEAD: usize = 8;

/// A cell: the XOR of the ids, fingerprints and checks of its elements, and their count (A's
/// count +1, B's −1; wrapping, as only the final small value matters).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Cell {
    id: u64,
    print: u64,
    check: u32,
    count: i32,
}

/// An element (a row: its id and fingerprint) and where it goes.
#[derive(Clone, Copy)]
struct Placed {
    id: u64,
    print: u64,
    check: u32,
    cells: [usize; HASHES],
}

impl Placed {
    fn new(id: u64, print: u64, part: usize) -> Placed {
        let h = mix(mix(id) ^ print);
        let at = |k: usize| {
            let x = mix(h ^ (k as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15));
            ((x as u128 * part as u128) >> 64) as usize + k * part
        };
        Placed {
            id,
            print,
            check: h as u32,
            cells: [at(0), at(1), at(2)],
        }
    }
}

/// One worker's table: `HASHES` parts of `part` cells.
struct Sketch {
    cells: Vec<Cell>,
    part: usize,
}

/// An element left in the table after the unchanged rows cancelled: a row of A (`side` 0) or
/// of B (1).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Element {
    id: i64,
    side: u8,
}

impl Sketch {
    fn new(part: usize) -> Sketch {
        Sketch {
            cells: vec![Cell::default(); part * HASHES],
            part,
        }
    }

    fn toggle(&mut self, e: &Placed, count: i32) {
        for &c in &e.cells {
            let x = &mut self.cells[c];
            x.id ^= e.id;
            x.print ^= e.print;
            x.check ^= e.check;
            x.count = x.count.wrapping_add(count);
        }
    }

    fn merge(&mut self, o: &Sketch) {
        debug_assert_eq!(self.part, o.part);
        for (x, y) in self.cells.iter_mut().zip(&o.cells) {
            x.id ^= y.id;
            x.print ^= y.print;
            x.check ^= y.check;
            x.count = x.count.wrapping_add(y.count);
        }
    }

    /// The element alone in cell `c`, if one is: its count ±1, its check its own, and `c`
    /// one of its cells (a cell holding several elements passes all three with odds of
    /// about 2^-32 · 3 / cells).
    fn pure(&self, c: usize) -> Option<(Placed, i32)> {
        let x = &self.cells[c];
        if x.count != 1 && x.count != -1 {
            return None;
        }
        let e = Placed::new(x.id, x.print, self.part);
        (e.check == x.check && e.cells.contains(&c)).then_some((e, x.count))
    }

    /// Every element left, or `None` when the table does not peel to empty (more elements
    /// than it holds, or an element in it more than once).
    fn peel(mut self) -> Option<Vec<Element>> {
        let mut out = Vec::new();
        let mut todo: Vec<usize> = (0..self.cells.len())
            .filter(|&c| self.pure(c).is_some())
            .collect();
        while let Some(c) = todo.pop() {
            let Some((e, count)) = self.pure(c) else {
                continue;
            };
            // Each peel empties a cell for good: more peels than cells is a table gone wrong.
            if out.len() >= self.cells.len() {
                return None;
            }
            out.push(Element {
                id: e.id as i64,
                side: u8::from(count < 0),
            });
            self.toggle(&e, -count);
            todo.extend(e.cells.iter().copied().filter(|&d| self.pure(d).is_some()));
        }
        self.cells
            .iter()
            .all(|x| *x == Cell::default())
            .then_some(out)
    }
}

/// A row that differs: where A holds its id and where B does (positions for `TableScan::row`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Difference {
    pub(super) id: i64,
    pub(super) at: [Option<u64>; 2],
}

/// Whether `differences` may be taken for `s`: a hash table whose keys can be read alone
/// (`TableScan::read_piece_keys`) and whose length is not a `DenseHashTable`'s (nor has it
/// sentinel keys).
fn eligible(s: &TableScan) -> bool {
    s.kind() == KeyKind::HashKey
        && s.keys_apart()
        && s.rows().is_some_and(|r| !r.is_power_of_two())
        && s.sentinels().is_empty()
}

/// The rows that differ between `a` and `b` (in no order), having read both whole and
/// confirmed their checksums; `None` when this way does not apply or gives up (see the
/// module comment): the caller then spills.
pub(super) fn differences(
    sides: [&TableScan; 2],
    req: &dyn Requester,
) -> Result<Option<Vec<Difference>>, RowDiffError> {
    if !sides.iter().all(|s| eligible(s)) {
        return Ok(None);
    }
    let rows: u64 = sides.iter().map(|s| s.rows().unwrap_or(0)).sum();
    let workers = modelfs_io::source::cores();
    // No more cells than all rows could need.
    let most = TABLE_BYTES / std::mem::size_of::<Cell>();
    let want = usize::try_from(rows.saturating_mul(3) / 2).unwrap_or(usize::MAX);
    let part = (want.min(most) / HASHES).max(16);
    // What peels with high probability (elements below cells / 1.23), with a margin.
    let holds = (part * HASHES) as u64 * 10 / 13;
    if rows > ESTIMATE_ABOVE {
        let (elements, rate) = estimate(sides, SAMPLE_ROWS, req)?;
        if elements > holds {
            log::debug!(
                "row diff: about {elements} differences (1 id in {rate} sampled); spilling"
            );
            return Ok(None);
        }
    }
    let t = std::time::Instant::now();
    let Some(sketch) = first_pass(sides, part, workers.min(TABLES), req)? else {
        return Ok(None);
    };
    log::debug!("row diff: first pass {:?}", t.elapsed());
    let peeled = sketch.peel();
    log::debug!("row diff: peeled {:?}", t.elapsed());
    let Some(mut elements) = peeled else {
        log::debug!("row diff: more differences than the sketch holds; spilling");
        return Ok(None);
    };
    elements.sort_unstable();
    let mut found: Vec<(i64, [bool; 2])> = Vec::with_capacity(elements.len());
    for e in &elements {
        match found.last_mut() {
            Some((id, held)) if *id == e.id => {
                if held[e.side as usize] {
                    return Ok(None); // twice in one side
                }
                held[e.side as usize] = true;
            }
            _ => {
                let mut held = [false; 2];
                held[e.side as usize] = true;
                found.push((e.id, held));
            }
        }
    }
    drop(elements);
    // Ids in both sides number the same counted from either.
    let only = |side: usize| {
        found
            .iter()
            .filter(|f| f.1 == [side == 0, side == 1])
            .count()
    };
    let [ra, rb] = sides.map(|s| s.rows().unwrap_or(0));
    if ra.checked_sub(only(0) as u64) != rb.checked_sub(only(1) as u64) {
        return Ok(None);
    }
    let p = positions(sides, found, req);
    log::debug!("row diff: positions {:?}", t.elapsed());
    p
}

/// The elements a sketch of `sides` would be left with (a row added or removed once, a
/// changed one twice), estimated from the ids whose hash falls in one `rate`-th of its range
/// (about `sample` rows a side): their keys found by one pass over the stored keys, and only
/// their rows read. The estimate and the rate. (A deferring scan's bytes are not confirmed
/// yet here: they only choose the way taken, and nothing read here is reported.)
pub fn estimate(
    sides: [&TableScan; 2],
    sample: u64,
    req: &dyn Requester,
) -> Result<(u64, u64), RowDiffError> {
    let rows = sides
        .iter()
        .map(|s| s.rows().unwrap_or(0))
        .max()
        .unwrap_or(0);
    let rate = (rows / sample.max(1)).max(1);
    let cut = u64::MAX / rate;
    let mut sampled: [Vec<(i64, u64)>; 2] = Default::default();
    for (side, out) in sides.iter().zip(&mut sampled) {
        let found = pool::each(
            side.pieces(),
            req,
            Batch::default,
            |b, k| -> Result<Vec<(u64, i64)>, RowDiffError> {
                let first = side.read_piece_keys(k, b)?;
                Ok((first..)
                    .zip(&b.ids)
                    .filter(|(_, &id)| mix(id as u64) <= cut)
                    .map(|(p, &id)| (p, id))
                    .collect())
            },
        )?;
        let mut at = Vec::new();
        for f in found {
            at.extend(f?);
        }
        // Their rows, a chunk at a time, fingerprinted as the first pass does.
        const CHUNK: usize = 4096;
        let row = side.row_bytes();
        let prints = pool::each(
            at.len().div_ceil(CHUNK),
            req,
            || (Vec::new(), Vec::new()),
            |(positions, values): &mut (Vec<u64>, Vec<u8>), c| -> Result<_, RowDiffError> {
                let chunk = &at[c * CHUNK..((c + 1) * CHUNK).min(at.len())];
                positions.clear();
                positions.extend(chunk.iter().map(|x| x.0));
                side.rows_at(positions, values)?;
                Ok(chunk
                    .iter()
                    .zip(values.chunks_exact(row.max(1)))
                    .map(|(x, v)| (x.1, xxhash_rust::xxh3::xxh3_64(v)))
                    .collect::<Vec<_>>())
            },
        )?;
        for p in prints {
            out.extend(p?);
        }
        out.sort_unstable();
    }
    // Both samples by id: what a sketch of them would hold.
    let [a, b] = &sampled;
    let (mut i, mut j, mut elements) = (0, 0, 0u64);
    while i < a.len() || j < b.len() {
        match (a.get(i), b.get(j)) {
            (Some(x), Some(y)) if x.0 == y.0 => {
                elements += if x.1 == y.1 { 0 } else { 2 };
                (i, j) = (i + 1, j + 1);
            }
            (Some(x), Some(y)) if x.0 < y.0 => (elements, i) = (elements + 1, i + 1),
            (Some(_), None) => (elements, i) = (elements + 1, i + 1),
            _ => (elements, j) = (elements + 1, j + 1),
        }
    }
    Ok((elements.saturating_mul(rate), rate))
}

/// Every row of both sides into `tables` tables, merged; the sides' checksums confirmed.
/// `None` when the pass was cut short.
fn first_pass(
    sides: [&TableScan; 2],
    part: usize,
    tables: usize,
    req: &dyn Requester,
) -> Result<Option<Sketch>, RowDiffError> {
    let shared = tables;
    let tables: Vec<Mutex<Sketch>> = (0..shared).map(|_| Mutex::new(Sketch::new(part))).collect();
    let next = AtomicUsize::new(0);
    let work = work_items(sides);
    struct Worker {
        table: usize,
        batch: Batch,
        placed: Vec<Placed>,
    }
    let results = pool::each(
        work.len(),
        req,
        || Worker {
            table: next.fetch_add(1, Ordering::Relaxed) % shared,
            batch: Batch::default(),
            placed: Vec::new(),
        },
        |w, i| -> Result<[Crc; 2], RowDiffError> {
            let (s, first, end) = work[i];
            let scan = sides[s];
            let row = scan.row_bytes();
            let count = if s == 0 { 1 } else { -1 };
            w.batch.take_crcs();
            for k in first..end {
                scan.read_piece(k, &mut w.batch)?;
                let values = w.batch.values();
                debug_assert_eq!(values.len(), w.batch.ids.len() * row);
                w.placed.clear();
                w.placed
                    .extend(w.batch.ids.iter().enumerate().map(|(r, &id)| {
                        let print = xxhash_rust::xxh3::xxh3_64(&values[r * row..(r + 1) * row]);
                        Placed::new(id as u64, print, part)
                    }));
                // With as many tables as workers (two cores), never waited for.
                let mut table = tables[w.table]
                    .lock()
                    .map_err(|_| RowDiffError::Layout(LayoutError::WorkerPanicked))?;
                for (r, e) in w.placed.iter().enumerate() {
                    if let Some(next) = w.placed.get(r + PREFETCH_AHEAD) {
                        for &c in &next.cells {
                            prefetch(&table.cells[c]);
                        }
                    }
                    table.toggle(e, count);
                }
            }
            Ok(w.batch.take_crcs())
        },
    )?;
    let mut crcs = [[Crc::default(); 2]; 2];
    for ((s, _, _), r) in work.iter().zip(results) {
        let c = r?;
        crcs[*s] = [0, 1].map(|j| crcs[*s][j].then(c[j]));
    }
    for (scan, c) in sides.iter().zip(crcs) {
        scan.confirm(c)?;
    }
    let mut tables = tables.into_iter().map(|t| t.into_inner());
    let Some(Ok(mut all)) = tables.next() else {
        return Ok(None);
    };
    for t in tables {
        all.merge(&t.map_err(|_| RowDiffError::Layout(LayoutError::WorkerPanicked))?);
    }
    Ok(Some(all))
}

/// Where each side holds the ids `found` says it holds (`[A, B]`), from a pass over the
/// stored keys; `None` when a side holds one elsewhere or twice.
fn positions(
    sides: [&TableScan; 2],
    found: Vec<(i64, [bool; 2])>,
    req: &dyn Requester,
) -> Result<Option<Vec<Difference>>, RowDiffError> {
    let lookup = Lookup::new(found.iter().map(|f| f.0));
    let work: Vec<(usize, usize)> = (0..2)
        .flat_map(|s| (0..sides[s].pieces()).map(move |k| (s, k)))
        .collect();
    let hits = pool::each(
        work.len(),
        req,
        Batch::default,
        |batch, i| -> Result<Vec<(u32, u64)>, RowDiffError> {
            let (s, k) = work[i];
            let first = sides[s].read_piece_keys(k, batch)?;
            let mut hits = Vec::new();
            for (position, &id) in (first..).zip(&batch.ids) {
                if let Some(at) = lookup.find(id) {
                    hits.push((at, position));
                }
            }
            Ok(hits)
        },
    )?;
    let mut out: Vec<Difference> = found
        .iter()
        .map(|&(id, _)| Difference { id, at: [None; 2] })
        .collect();
    for ((s, _), h) in work.iter().zip(hits) {
        for (at, position) in h? {
            let d = &mut out[at as usize].at[*s];
            if d.replace(position).is_some() {
                return Ok(None); // twice in one side
            }
        }
    }
    let agree = out
        .iter()
        .zip(&found)
        .all(|(d, f)| d.at.map(|p| p.is_some()) == f.1);
    Ok(agree.then_some(out))
}

/// Ids → their index, asked of every stored key of both tables: a filter first (two bits
/// of one word an id, 32 bits an id: about 1 key in 250 that is none of them passes, and
/// the filter stays in L2), then an open-addressing table.
struct Lookup {
    filter: Vec<u64>,
    filter_shift: u32,
    slots: Vec<(i64, u32)>,
    mask: usize,
}

const FREE: u32 = u32::MAX;

impl Lookup {
    fn new(ids: impl ExactSizeIterator<Item = i64>) -> Lookup {
        let n = ids.len();
        debug_assert!(n < FREE as usize);
        let words = (n / 2).next_power_of_two().max(2);
        let slots = (n * 2).next_power_of_two().max(2);
        let mut l = Lookup {
            filter: vec![0; words],
            filter_shift: 64 - words.trailing_zeros(),
            slots: vec![(0, FREE); slots],
            mask: slots - 1,
        };
        for (k, id) in ids.enumerate() {
            let h = mix(id as u64);
            let (word, bits) = l.filter_of(h);
            l.filter[word] |= bits;
            let mut s = h as usize & l.mask;
            while l.slots[s].1 != FREE {
                s = (s + 1) & l.mask;
            }
            l.slots[s] = (id, k as u32);
        }
        l
    }

    /// An id's filter word and its two bits there (from bits of its hash the slot's index
    /// does not use).
    fn filter_of(&self, h: u64) -> (usize, u64) {
        let word = (h >> self.filter_shift) as usize;
        (word, 1 << ((h >> 32) & 63) | 1 << ((h >> 40) & 63))
    }

    fn find(&self, id: i64) -> Option<u32> {
        let h = mix(id as u64);
        let (word, bits) = self.filter_of(h);
        if self.filter[word] & bits != bits {
            return None;
        }
        let mut s = h as usize & self.mask;
        loop {
            match self.slots[s] {
                (_, FREE) => return None,
                (x, k) if x == id => return Some(k),
                _ => s = (s + 1) & self.mask,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn xorshift(mut x: u64) -> impl FnMut() -> u64 {
        move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        }
    }

    /// A's and B's rows (id, print) into one table, as the first pass does.
    fn sketch(a: &[(u64, u64)], b: &[(u64, u64)], part: usize) -> Sketch {
        let mut t = Sketch::new(part);
        for (rows, count) in [(a, 1), (b, -1)] {
            for &(id, print) in rows {
                t.toggle(&Placed::new(id, print, part), count);
            }
        }
        t
    }

    #[test]
    fn unchanged_rows_cancel_and_the_differences_peel() {
        let mut next = xorshift(0x9E37_79B9_7F4A_7C15);
        let a: Vec<(u64, u64)> = (0..50_000).map(|_| (next(), next())).collect();
        let mut b = a.clone();
        b.reverse();
        let mut want = Vec::new();
        for r in b.drain(..200) {
            want.push(Element {
                id: r.0 as i64,
                side: 0,
            }); // removed
        }
        for (i, r) in b.iter_mut().enumerate().step_by(97) {
            r.1 ^= 1 << (i % 64); // changed: A's and B's versions
            want.push(Element {
                id: r.0 as i64,
                side: 0,
            });
            want.push(Element {
                id: r.0 as i64,
                side: 1,
            });
        }
        for _ in 0..300 {
            let id = next();
            b.push((id, 7)); // added
            want.push(Element {
                id: id as i64,
                side: 1,
            });
        }
        want.sort_unstable();
        let n = want.len();
        // The table follows the differences, not the 50 K rows.
        let mut got = sketch(&a, &b, n / 2).peel().expect("peels");
        got.sort_unstable();
        assert!(got == want, "{} elements peeled, {} differ", got.len(), n);
        // Too many differences for the table: it says so, never a wrong list.
        assert!(sketch(&a, &b, n / 4).peel().is_none());
        // An element twice in a side is never peeled as one.
        let twice = [(5, 9), (5, 9)];
        assert!(sketch(&twice, &[], 64).peel().is_none());
        // Nothing differs: nothing left.
        assert_eq!(sketch(&a, &a, 16).peel(), Some(Vec::new()));
    }

    #[test]
    fn merged_tables_are_the_table_of_all_rows() {
        let mut next = xorshift(42);
        let rows: Vec<(u64, u64)> = (0..2_000).map(|_| (next(), next())).collect();
        let whole = sketch(&rows, &rows[..1_500], 600);
        let mut one = sketch(&rows[..1_000], &[], 600);
        one.merge(&sketch(&rows[1_000..], &rows[..1_500], 600));
        assert_eq!(one.cells, whole.cells);
    }

    #[test]
    fn lookup_finds_its_ids_and_no_other() {
        let mut next = xorshift(7);
        let ids: Vec<i64> = (0..10_000).map(|_| next() as i64).collect();
        let l = Lookup::new(ids.iter().copied());
        for (k, &id) in ids.iter().enumerate() {
            assert_eq!(l.find(id), Some(k as u32));
        }
        let passed = (0..100_000)
            .filter(|_| l.find(next() as i64).is_some())
            .count();
        assert_eq!(passed, 0);
        assert_eq!(Lookup::new(std::iter::empty()).find(0), None);
    }
}
