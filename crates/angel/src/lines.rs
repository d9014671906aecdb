//! The line index of a text partition, built as far as reads need it: the byte offset of
//! every `STRIDE`-th line, found by scanning the partition from its start in pieces
//! (`memchr`), only up to the furthest line asked for so far. The first bytes of a 1 GB
//! partition therefore cost one piece, not a pass over the partition.
//!
//! Invariants: `Scan::strides[i]` is the offset (from `start`) of line `i × STRIDE`, for every
//! such line before `scanned`; once the scan reaches `len` it has checked that the partition
//! holds exactly `lines` lines ending LF (CR LF in a CRLF copy) — the last one may end at the
//! partition's end without LF, as Java writers leave some — and appends `len`. A failed
//! check is returned to the read that reached it and the state is left as it was (a transient
//! fault is never remembered; a malformed end fails every read that needs it).

use std::sync::{Arc, Condvar, Mutex};

use super::decode::DecodeFault;
use crate::source::{ReadAt, ReadCtx, ReadExt};
use crate::store::{Offsets, Store};

/// Lines between two indexed line offsets.
pub(crate) const STRIDE: u64 = 1024;

/// Bytes scanned at a time: the first pieces are smaller, each as big as what was scanned
/// before it, so that a look at the head of a partition reads little of a cold disk (one
/// stride of an embedding's lines is ~150 KB), and a long scan reads big pieces.
const FIRST_PIECE: u64 = 256 << 10;
const PIECE: u64 = 4 << 20;

/// Bytes whose LFs are counted at once: a few % of a stride of typical lines, so few blocks
/// reach an indexed line and need their LFs one by one.
const BLOCK: usize = 1024;

type Res<T> = Result<T, DecodeFault>;

pub(crate) struct LineIndex {
    start: u64,
    len: u64,
    lines: u64,
    /// Every line must end CR LF (a CRLF copy, §9.7).
    crlf: bool,
    scan: Mutex<Scan>,
    /// Signalled when a scan of a piece ends (`Scan::busy` cleared).
    turn: Condvar,
    /// Where the complete index is saved, and its key there.
    store: Option<(Arc<dyn Store>, String)>,
}

#[derive(Clone)]
struct Scan {
    strides: Vec<u64>,
    scanned: u64,
    found: u64,
    prev: u8,
    done: bool,
    /// A reader is scanning the next piece.
    busy: bool,
}

impl LineIndex {
    pub(crate) fn new(start: u64, len: u64, lines: u64, crlf: bool) -> LineIndex {
        LineIndex {
            start,
            len,
            lines,
            crlf,
            scan: Mutex::new(Scan {
                strides: vec![0],
                scanned: 0,
                found: 0,
                prev: b'\n',
                done: false,
                busy: false,
            }),
            turn: Condvar::new(),
            store: None,
        }
    }

    /// Keeps the complete index in `store` under the identity `file` of the data file (so a
    /// remount seeks at once), and takes it from there when a previous mount saved it: it was
    /// checked then against exactly these bytes.
    pub(crate) fn persist(&mut self, store: Arc<dyn Store>, file: &str) {
        let key = format!(
            "angel-lines:v1\0{file}\0{}\0{}\0{}\0{}",
            self.start, self.len, self.lines, self.crlf
        );
        if let Some(Offsets(strides)) = store.get(&key) {
            // Line strides (lines 0, STRIDE, … before `lines`), then `len`.
            let want = self.lines.div_ceil(STRIDE).max(1) + 1;
            if strides.len() as u64 == want && strides.last() == Some(&self.len) {
                let s = self.scan.get_mut().unwrap_or_else(|e| e.into_inner());
                *s = Scan {
                    strides,
                    scanned: self.len,
                    found: self.lines,
                    prev: b'\n',
                    done: true,
                    busy: false,
                };
            }
        }
        self.store = Some((store, key));
    }

    pub(crate) fn start(&self) -> u64 {
        self.start
    }

    /// The partition's length in bytes from `start`: a span ending here holds the last line,
    /// which may lack its LF.
    pub(crate) fn end(&self) -> u64 {
        self.len
    }

    /// Byte offsets (from `start`) of line `s0 × STRIDE` and of line `s1 × STRIDE` (the end of
    /// the partition when that line is past the last), scanning as far as needed.
    pub(crate) fn span(&self, file: &dyn ReadAt, s0: usize, s1: usize) -> Res<(u64, u64)> {
        loop {
            let snapshot = {
                let mut g = self.scan.lock().unwrap_or_else(|e| e.into_inner());
                loop {
                    if let Some(&a) = g.strides.get(s0) {
                        if let Some(&b) = g.strides.get(s1) {
                            return Ok((a, b));
                        }
                        if g.done {
                            return Ok((a, self.len));
                        }
                    } else if g.done {
                        return Err("a line past the partition's end".into());
                    }
                    // One scanner at a time: readers racing ahead would scan the same piece
                    // twice. The others wait for its piece (the lock is not held meanwhile).
                    if !g.busy {
                        break;
                    }
                    g = self.turn.wait(g).unwrap_or_else(|e| e.into_inner());
                }
                g.busy = true;
                g.clone()
            };
            // Scanned without the lock; only the busy holder extends the scan.
            let mut turn = Turn(Some(self));
            let next = self.extend(file, snapshot);
            turn.0 = None;
            let mut g = self.scan.lock().unwrap_or_else(|e| e.into_inner());
            g.busy = false;
            self.turn.notify_all();
            let next = next?;
            debug_assert!(next.scanned > g.scanned);
            let complete = next.done.then(|| next.strides.clone());
            *g = Scan {
                busy: false,
                ..next
            };
            drop(g);
            if let (Some(strides), Some((store, key))) = (complete, &self.store) {
                store.put(key, &Offsets(strides));
            }
        }
    }

    /// Scans to the end: the whole partition's line count and final LF checked.
    #[cfg(any(test, feature = "testkit"))]
    pub(crate) fn finish(&self, file: &dyn ReadAt) -> Res<()> {
        self.span(file, 0, usize::MAX).map(|_| ())
    }

    /// The LF at `data[i]` (`data` read at `at`): one more line, checked, indexed when it
    /// starts a stride.
    #[inline]
    fn line_end(&self, s: &mut Scan, data: &[u8], at: u64, i: usize) -> Res<()> {
        if self.crlf {
            let before = if i == 0 { s.prev } else { data[i - 1] };
            if before != b'\r' {
                return Err("a line does not end CR LF".into());
            }
        }
        s.found += 1;
        if s.found > self.lines {
            return Err(format!("more lines than the {} the meta says", self.lines).into());
        }
        if s.found % STRIDE == 0 && s.found < self.lines {
            s.strides.push(at + i as u64 + 1);
        }
        Ok(())
    }

    /// `s` after scanning one more piece.
    fn extend(&self, file: &dyn ReadAt, mut s: Scan) -> Res<Scan> {
        let n = (self.len - s.scanned).min(s.scanned.clamp(FIRST_PIECE, PIECE));
        let at = s.scanned;
        let mut scan = |data: &[u8]| -> Res<()> {
            // A block at a time: one whose LFs neither reach the next indexed line nor need a
            // CR check is counted whole by `memchr`'s SIMD count (lines are ~20 bytes: one
            // step per line was most of a first read's scan).
            for (k, block) in data.chunks(BLOCK).enumerate() {
                if !self.crlf {
                    let c = memchr::memchr_iter(b'\n', block).count() as u64;
                    if c < STRIDE - s.found % STRIDE && s.found + c <= self.lines {
                        s.found += c;
                        continue;
                    }
                }
                for i in memchr::memchr_iter(b'\n', block) {
                    self.line_end(&mut s, data, at, k * BLOCK + i)?;
                }
            }
            if let Some(&last) = data.last() {
                s.prev = last;
            }
            Ok(())
        };
        file.with_bytes(ReadCtx::none(), self.start + at, n as usize, &mut scan)??;
        file.done_with(self.start + at, n);
        s.scanned += n;
        if s.scanned == self.len {
            if self.len > 0 && s.prev != b'\n' {
                // The last line ends at the partition's end, without LF.
                s.found += 1;
            }
            if s.found != self.lines {
                return Err(format!("{} lines where the meta says {}", s.found, self.lines).into());
            }
            s.strides.push(self.len);
            s.done = true;
        }
        Ok(s)
    }
}

/// While set, the scanner's turn: if the scan unwinds instead of returning, dropping it hands
/// the turn on (waiters must not sleep for ever).
struct Turn<'a>(Option<&'a LineIndex>);

impl Drop for Turn<'_> {
    fn drop(&mut self) {
        if let Some(index) = self.0 {
            let mut g = index.scan.lock().unwrap_or_else(|e| e.into_inner());
            g.busy = false;
            index.turn.notify_all();
        }
    }
}

#[cfg(test)]
mod tests {
    /// Every indexed offset is where a naive walk finds line `i × STRIDE`, with lines of
    /// random lengths (some empty, some long) across several pieces and blocks, LF and CR LF.
    #[test]
    fn every_stride_is_where_a_naive_walk_finds_it() {
        for crlf in [false, true] {
            let mut r = 0x9E37_79B9_7F4A_7C15u64;
            let mut text = Vec::new();
            let mut starts = Vec::new();
            while text.len() < 9 << 20 {
                starts.push(text.len() as u64);
                r ^= r << 13;
                r ^= r >> 7;
                r ^= r << 17;
                let n = match r % 100 {
                    0 => 3000,
                    1..=5 => 0,
                    k => k as usize / 4,
                };
                text.extend((0..n).map(|j| b'0' + (j % 10) as u8));
                text.extend_from_slice(if crlf { b"\r\n" } else { b"\n" });
            }
            let (len, lines) = (text.len() as u64, starts.len() as u64);
            let file = MemSource::new("p", text);
            let index = LineIndex::new(0, len, lines, crlf);
            for s in (0..lines.div_ceil(STRIDE) as usize).rev().step_by(7) {
                let want_b = starts
                    .get((s + 1) * STRIDE as usize)
                    .copied()
                    .unwrap_or(len);
                assert_eq!(
                    index.span(&file, s, s + 1).unwrap(),
                    (starts[s * STRIDE as usize], want_b),
                    "stride {s}"
                );
            }
        }
    }

    use super::*;
    use crate::source::{About, MemSource, SourceError, To};
    use std::sync::atomic::{AtomicU64, Ordering};

    /// Counts the bytes read through it.
    #[derive(Debug)]
    struct Counting(MemSource, AtomicU64);

    impl ReadAt for Counting {
        fn about(&self) -> &About {
            self.0.about()
        }
        fn read_with(&self, ctx: &ReadCtx, offset: u64, to: To<'_>) -> Result<(), SourceError> {
            self.1.fetch_add(to.len(), Ordering::Relaxed);
            self.0.read_with(ctx, offset, to)
        }
    }

    #[test]
    fn the_head_of_a_big_partition_reads_one_small_piece() {
        let lines = 2_000_000u64;
        let text: String = (0..lines).map(|i| format!("{i},0.5\n")).collect();
        let len = text.len() as u64;
        assert!(len > 4 * PIECE);
        let file = Counting(MemSource::new("p", text.into_bytes()), AtomicU64::new(0));
        let index = LineIndex::new(0, len, lines, false);
        let (a, b) = index.span(&file, 0, 1).unwrap();
        assert_eq!(a, 0);
        assert_eq!(
            b,
            "0,0.5\n".len() as u64
                + (1..1024)
                    .map(|i| format!("{i},0.5\n").len() as u64)
                    .sum::<u64>()
        );
        assert!(
            file.1.load(Ordering::Relaxed) <= FIRST_PIECE,
            "read past the first piece"
        );
        // The end: everything scanned once, the count checked, the last stride ends at len.
        let last = (lines / STRIDE) as usize;
        let (_, end) = index.span(&file, last, last + 1).unwrap();
        assert_eq!(end, len);
        assert_eq!(file.1.load(Ordering::Relaxed), len);
        // A count the meta gets wrong fails at the end, not before.
        let index = LineIndex::new(0, len, lines + 1, false);
        assert!(index.span(&file, 0, 1).is_ok());
        assert!(index.finish(&file).is_err());
    }

    /// A last line without LF is a line: a stride may start on it, the count holds, and a
    /// missing line is still found missing.
    #[test]
    fn a_last_line_without_lf_counts() {
        for lines in [1, STRIDE, STRIDE + 1, 3 * STRIDE + 1] {
            let mut text: Vec<u8> = (0..lines)
                .flat_map(|i| format!("{i},2.5\n").into_bytes())
                .collect();
            text.pop();
            let len = text.len() as u64;
            let file = MemSource::new("p", text.clone());
            let index = LineIndex::new(0, len, lines, false);
            index.finish(&file).unwrap();
            let last = ((lines - 1) / STRIDE) as usize;
            let start = (0..(last as u64 * STRIDE))
                .map(|i| format!("{i},2.5\n").len() as u64)
                .sum::<u64>();
            assert_eq!(index.span(&file, last, last + 1).unwrap(), (start, len));
            assert!(LineIndex::new(0, len, lines + 1, false)
                .finish(&file)
                .is_err());
            assert!(LineIndex::new(0, len, lines - 1, false)
                .finish(&file)
                .is_err());
        }
    }

    /// An index saved by a complete scan is what the next mount's index starts from: it
    /// reads nothing to find a line, and a wrong saved one is not used.
    #[test]
    fn a_complete_index_is_kept_for_the_next_mount() {
        let lines = 5000u64;
        let text: String = (0..lines).map(|i| format!("{i},1.5\n")).collect();
        let len = text.len() as u64;
        let file = Counting(MemSource::new("p", text.into_bytes()), AtomicU64::new(0));
        let store: Arc<dyn Store> = Arc::new(crate::store::MemStore::default());
        let mut first = LineIndex::new(0, len, lines, false);
        first.persist(store.clone(), "id");
        let want = first.span(&file, 3, 4).unwrap();
        first.finish(&file).unwrap();
        let read = file.1.load(Ordering::Relaxed);
        let mut again = LineIndex::new(0, len, lines, false);
        again.persist(store.clone(), "id");
        assert_eq!(again.span(&file, 3, 4).unwrap(), want);
        assert_eq!(
            file.1.load(Ordering::Relaxed),
            read,
            "the saved index was not used"
        );
        // Another identity or a different count finds nothing; a corrupt entry is ignored.
        let mut other = LineIndex::new(0, len, lines + 1, false);
        other.persist(store.clone(), "id");
        assert!(other.finish(&file).is_err());
        let key = format!("angel-lines:v1\0id\00\0{len}\0{lines}\0false");
        let mut rotten = Vec::new();
        crate::store::put_words(&mut rotten, &[0, 7, 3, len, len, len]);
        store.put_bytes(<Offsets as crate::store::Record>::KIND, &key, &rotten);
        let mut bad = LineIndex::new(0, len, lines, false);
        bad.persist(store, "id");
        assert_eq!(bad.span(&file, 3, 4).unwrap(), want);
    }
}
