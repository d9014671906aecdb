//! Where a partition lies in a CRLF copy (formats/angel.md §9.7) when the meta's line counts
//! cannot say.
//!
//! §9.7 places a partition at `offset + lines in earlier partitions of the file`, which holds
//! only when every earlier partition's lines are exactly the records its meta counts and each
//! ends with LF. A partition after one whose last line has no LF, or any line the meta does
//! not count, shifts every later partition. Angel never writes CR, so every CR before an LF
//! was added by the copy: the original byte `t` is at `t + (added CRs whose LF is before t)`
//! in the copy, and its CR just before it when `t` is an LF. One pass over the file up to the partition's end finds that exactly.

use crate::source::{ReadAt, ReadCtx, ReadExt, SourceError};

/// The copy's bytes read per step of the pass.
const CHUNK: usize = 1 << 20;

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

    #[test]
    fn a_copy_too_short_is_none() {
        let file = MemSource::new("0", crlf(b"1\n2\n"));
        assert_eq!(window(&file, 2, 4).unwrap(), None);
        assert_eq!(window(&file, u64::MAX, 2).unwrap(), None);
    }
}
