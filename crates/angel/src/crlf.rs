//! Where a text partition lies in a file with CRLF line endings (formats/angel.md §9.7).
//!
//! Two kinds of such files: a writer whose meta counts the CR bytes (its offsets and lengths
//! are exact in the file: `own_fit`), and a CRLF copy of an LF original whose meta counts the
//! LF-only bytes (`window`). The meta's own window is taken when it fits; the adjusted one
//! only when it does not.
//!
//! §9.7 places a partition at `offset + lines in earlier partitions of the file`, which holds
//! only when every earlier partition's lines are exactly the records its meta counts and each
//! ends with LF. A partition after one whose last line has no LF, or any line the meta does
//! not count, shifts every later partition. Angel never writes CR, so every CR before an LF
//! was added by the copy: the original byte `t` is at `t + (added CRs whose LF is before t)`
//! in the copy, and its CR just before it when `t` is an LF. One pass over the file up to the partition's end finds that exactly.

use crate::meta::{MatrixMeta, PartMeta};
use crate::source::{ReadAt, ReadCtx, ReadExt, SourceError};

/// The copy's bytes read per step of the pass.
const CHUNK: usize = 1 << 20;

/// How the meta's own window `start..start + len` holds a CRLF partition of `lines` lines.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Fit {
    /// It starts a line, holds exactly `lines` lines each ending CR LF, and ends with its last
    /// line's LF or at the file's end.
    Exact,
    /// As `Exact`, but its last line ends at the window's end without CR LF, before more
    /// bytes of the file: a partition left unterminated, or a window cut inside a line — to
    /// be taken only when no adjusted window fits.
    Unterminated,
    /// It does not hold the partition's lines.
    No,
}

/// Whether the meta's windows of `part`'s file end at the file's size `size`: the meta counts
/// this file's own bytes (a CRLF copy of an LF original is longer than its meta says, by its
/// CRs), so its own windows are to be taken even where a last line is left unterminated.
pub(crate) fn counts_file(meta: &MatrixMeta, part: &PartMeta, size: u64) -> bool {
    let ends = meta
        .parts
        .iter()
        .filter(|q| q.file_name == part.file_name)
        .map(|q| q.offset.checked_add(q.length));
    ends.max() == Some(Some(size))
}

/// Whether another partition of `part`'s file ends where it starts: in a file the meta counts
/// (`counts_file`), `part` may start without an LF before it (that one's last line left
/// unterminated).
pub(crate) fn follows_partition(meta: &MatrixMeta, part: &PartMeta) -> bool {
    meta.parts.iter().any(|q| {
        q.file_name == part.file_name
            && q.length > 0
            && q.offset.checked_add(q.length) == Some(part.offset)
    })
}

/// Whether the window `start..start + len` of `file` is a CRLF partition of `lines` lines
/// (see `Fit`): one pass over the window. `after_partition`: it may start without an LF
/// before it (`counts_file` and `follows_partition`).
pub(crate) fn own_fit(
    file: &dyn ReadAt,
    (start, len): (u64, u64),
    lines: u64,
    after_partition: bool,
) -> Result<Fit, SourceError> {
    let size = file.size();
    let Some(end) = start.checked_add(len).filter(|&e| e <= size) else {
        return Ok(Fit::No);
    };
    if lines == 0 || len == 0 {
        return Ok(if lines == 0 && len == 0 {
            Fit::Exact
        } else {
            Fit::No
        });
    }
    if start > 0 {
        let before = file.read_vec(start - 1, 1)?.first().copied();
        let starts = before == Some(b'\n') || (after_partition && before != Some(b'\r'));
        if !starts {
            return Ok(Fit::No);
        }
    }
    // LFs seen, and whether each followed a CR (`prev`: the byte before the piece).
    let (mut lfs, mut prev, mut all_crlf) = (0u64, 0u8, true);
    let mut at = start;
    while at < end && all_crlf && lfs <= lines {
        let n = (end - at).min(CHUNK as u64) as usize;
        let data = file.read(ReadCtx::none(), at, n)?;
        for i in memchr::memchr_iter(b'\n', &data) {
            let before = if i == 0 { prev } else { data[i - 1] };
            all_crlf &= before == b'\r';
            lfs += 1;
        }
        prev = data.last().copied().unwrap_or(prev);
        at += n as u64;
    }
    if !all_crlf {
        return Ok(Fit::No);
    }
    Ok(match prev {
        b'\n' if lfs == lines => Fit::Exact,
        // A CR last: the window cuts a CR LF in two.
        b'\n' | b'\r' => Fit::No,
        _ if lfs + 1 != lines => Fit::No,
        _ if end == size => Fit::Exact,
        _ => Fit::Unterminated,
    })
}

/// The copy-file window `(start, len)` of the partition stored at `offset..offset + length` of
/// the original, or `None` when the copy is too short to hold it.
pub(crate) fn window(
    file: &dyn ReadAt,
    offset: u64,
    length: u64,
) -> Result<Option<(u64, u64)>, SourceError> {
    let Some(end) = offset.checked_add(length) else {
        return Ok(None);
    };
    // The original positions whose copy position is wanted: the first byte, and the last.
    let last = end.checked_sub(1);
    let size = file.size();
    // Added CRs seen so far whose LF's original position is < offset, resp. <= last.
    let (mut before_first, mut before_last) = (0u64, 0u64);
    let mut added = 0u64;
    let mut at = 0u64;
    'scan: while at < size {
        // One byte more than the step, so a CR at its end sees the LF after it.
        let n = (size - at).min(CHUNK as u64 + 1) as usize;
        let data = file.read(ReadCtx::none(), at, n)?;
        let step = data.len().min(CHUNK);
        for i in memchr::memchr_iter(b'\r', &data[..step]) {
            if data.get(i + 1) != Some(&b'\n') {
                continue;
            }
            // This CR's LF, in the original: its copy position less the CRs added before it
            // and itself.
            let lf = at + i as u64 + 1 - (added + 1);
            added += 1;
            if lf > last.unwrap_or(offset).max(offset) {
                break 'scan;
            }
            before_first += u64::from(lf < offset);
            before_last += u64::from(last.is_some_and(|l| lf <= l));
        }
        if step == 0 {
            break;
        }
        at += step as u64;
    }
    let start = offset + before_first;
    let stop = match last {
        Some(l) => l + before_last + 1,
        None => start,
    };
    debug_assert!(stop >= start);
    if stop > size {
        return Ok(None);
    }
    // A bare LF right after the window: not a CRLF copy there (the copy would have a CR
    // before it), so the window would cut a line off its end.
    if stop < size && file.read_vec(stop, 1)?.first() == Some(&b'\n') {
        return Ok(None);
    }
    Ok(Some((start, stop - start)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::source::MemSource;

    fn crlf(b: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        for &c in b {
            if c == b'\n' {
                out.push(b'\r');
            }
            out.push(c);
        }
        out
    }

    /// Every partition of `orig` (given as (offset, length)) is found in its CRLF copy at the
    /// bytes that are its own with CRs added.
    fn check(orig: &[u8], parts: &[(u64, u64)]) {
        let copy = crlf(orig);
        let file = MemSource::new("0", copy.clone());
        for &(o, l) in parts {
            let (s, n) = window(&file, o, l).unwrap().expect("found");
            let want = crlf(&orig[o as usize..(o + l) as usize]);
            assert_eq!(
                &copy[s as usize..(s + n) as usize],
                &want[..],
                "part {o}+{l}"
            );
        }
    }

    #[test]
    fn partitions_after_terminated_and_unterminated_lines() {
        // Partition 0 ends without LF; partition 1 follows at once; partition 2 holds one
        // empty line; partition 3 is empty.
        let orig = b"0,1\n2,3\n4,5" as &[u8];
        let mut all = orig.to_vec();
        all.extend_from_slice(b"6,7\n8,9\n\n");
        check(&all, &[(0, 11), (11, 8), (19, 1), (20, 0), (3, 5)]);
    }

    #[test]
    fn chunk_edges_and_big_files() {
        // Lines of 7 bytes put a CR at each chunk edge sooner or later.
        let mut orig = Vec::new();
        while orig.len() < 3 * CHUNK {
            orig.extend_from_slice(b"12,3.5\n");
        }
        let n = orig.len() as u64;
        check(&orig, &[(0, 7), (7 * 150_000, 7 * 3), (n - 7, 7), (n, 0)]);
    }

    /// Found by fuzzing: a bare LF (not a CRLF copy's) right after the window would leave the
    /// window's last line cut off its LF, which a whole decode took and reads by range did not.
    #[test]
    fn a_bare_lf_after_the_window_is_none() {
        let file = MemSource::new("0", b"1,2\r\n3,4\n5,6\r\n".to_vec());
        assert_eq!(window(&file, 0, 7).unwrap(), None);
        // The same window before a CR LF is found.
        let file = MemSource::new("0", b"1,2\r\n3,4\r\n".to_vec());
        assert_eq!(window(&file, 0, 7).unwrap(), Some((0, 8)));
    }

    /// A meta that counts the CRs: its windows fit exactly (at the file's end also without a
    /// final LF); a window cut inside a line, holding a line too many or too few, not starting
    /// a line, or with a bare LF does not.
    #[test]
    fn own_windows_that_fit_and_do_not() {
        let file = MemSource::new("0", b"1,2\r\n3,4\r\n5,6\r\n7,8".to_vec());
        let fit = |o, l, n| own_fit(&file, (o, l), n, false).unwrap();
        assert_eq!(fit(0, 10, 2), Fit::Exact);
        assert_eq!(fit(5, 10, 2), Fit::Exact);
        assert_eq!(fit(10, 8, 2), Fit::Exact);
        assert_eq!(fit(15, 3, 1), Fit::Exact);
        assert_eq!(fit(0, 0, 0), Fit::Exact);
        // Ends inside line 2 (a partition left unterminated, or a cut).
        assert_eq!(fit(0, 8, 2), Fit::Unterminated);
        // Between CR and LF; a line too many or too few; not at a line's start; past the end.
        assert_eq!(fit(0, 9, 2), Fit::No);
        assert_eq!(fit(0, 10, 1), Fit::No);
        assert_eq!(fit(0, 10, 3), Fit::No);
        assert_eq!(fit(1, 9, 2), Fit::No);
        assert_eq!(fit(10, 9, 2), Fit::No);
        assert_eq!(fit(0, 0, 1), Fit::No);
        // Right after a partition left unterminated: only when the meta says one ends there.
        assert_eq!(fit(6, 4, 1), Fit::No);
        assert_eq!(own_fit(&file, (6, 4), 1, true).unwrap(), Fit::Exact);
        assert_eq!(own_fit(&file, (4, 6), 1, true).unwrap(), Fit::No);
        let file = MemSource::new("0", b"1,2\r\n3,4\n".to_vec());
        assert_eq!(own_fit(&file, (0, 9), 2, false).unwrap(), Fit::No);
    }

    /// An LF original's windows in its CRLF copy do not fit exactly as the copy's own (the
    /// count differs), also where they happen to start and end a line; one may fit as an
    /// unterminated partition, which is why that fit yields to any adjusted window.
    #[test]
    fn an_lf_originals_windows_do_not_fit_its_copy() {
        let orig = b"1\n2\n3\n44\n5\n";
        let copy = crlf(orig);
        let file = MemSource::new("0", copy.clone());
        // Lines 0..3 are the first 6 bytes; the copy's first 6 bytes are 2 lines.
        assert_eq!(&copy[..6], b"1\r\n2\r\n");
        assert_eq!(own_fit(&file, (0, 6), 3, false).unwrap(), Fit::No);
        assert_eq!(own_fit(&file, (6, 5), 2, false).unwrap(), Fit::Unterminated);
        assert_eq!(window(&file, 6, 5).unwrap(), Some((9, 7)));
    }

    #[test]
    fn a_copy_too_short_is_none() {
        let file = MemSource::new("0", crlf(b"1\n2\n"));
        assert_eq!(window(&file, 2, 4).unwrap(), None);
        assert_eq!(window(&file, u64::MAX, 2).unwrap(), None);
    }
}
