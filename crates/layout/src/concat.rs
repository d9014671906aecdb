//! A file made of files back to back: a single-file view (`.safetensors`, `.npz`: headers we
//! write and tensors' bytes read on demand), an `.angel/` data file of several partitions
//! (text whose sizes are learnt by rendering). A read touches only the parts it covers, and
//! a read inside one part is that part's read (a view of its bytes where it has them).
//!
//! Invariants: `starts` is `[0, s0, s0 + s1, …, total]` over every part, once set; a part's
//! read within its size gives exactly what was asked (`exact`).

use std::sync::{Arc, OnceLock};

use bytes::Bytes;

use super::held::Whole;
use super::{FileContent, LayoutError, Requester};
use crate::source::scratch;

pub struct Concat {
    parts: Vec<Arc<dyn FileContent>>,
    /// Start of each part and the total, once every part's size is known.
    starts: OnceLock<Vec<u64>>,
}

/// A size that does not fit the file (a model whose view would exceed 2^64 bytes).
#[derive(Debug, thiserror::Error)]
#[error("a view's size overflows")]
pub struct TooBig;

impl Concat {
    /// Parts whose sizes may be unknown yet: they are learnt on the first size or read.
    pub fn new(parts: Vec<Arc<dyn FileContent>>) -> Concat {
        let c = Concat {
            parts,
            starts: OnceLock::new(),
        };
        let sizes: Option<Vec<u64>> = c.parts.iter().map(|p| p.known_size()).collect();
        if let Some(starts) = sizes.and_then(|s| prefix(&s)) {
            let _ = c.starts.set(starts);
        }
        c
    }

    fn starts(&self, req: &dyn Requester) -> Result<&[u64], LayoutError> {
        if let Some(s) = self.starts.get() {
            return Ok(s);
        }
        let mut sizes = Vec::with_capacity(self.parts.len());
        for p in &self.parts {
            sizes.push(p.size_for(req)?);
        }
        let starts = prefix(&sizes).ok_or(LayoutError::Overflow("a file of parts"))?;
        Ok(self.starts.get_or_init(|| starts))
    }
}

/// `[0, s0, s0 + s1, …, total]`, `None` on overflow.
fn prefix(sizes: &[u64]) -> Option<Vec<u64>> {
    let mut out = Vec::with_capacity(sizes.len() + 1);
    let mut at = 0u64;
    out.push(0);
    for &s in sizes {
        at = at.checked_add(s)?;
        out.push(at);
    }
    Some(out)
}

impl FileContent for Concat {
    fn known_size(&self) -> Option<u64> {
        self.starts.get()?.last().copied()
    }
    fn size_for(&self, req: &dyn Requester) -> Result<u64, LayoutError> {
        Ok(*self.starts(req)?.last().unwrap_or(&0))
    }
    fn rendered(&self) -> bool {
        self.parts.iter().any(|p| p.rendered())
    }
    fn read(&self, offset: u64, len: usize, req: &dyn Requester) -> Result<Bytes, LayoutError> {
        let starts = self.starts(req)?;
        debug_assert_eq!(starts.len(), self.parts.len() + 1);
        let total = *starts.last().unwrap_or(&0);
        let len = usize::try_from(total.saturating_sub(offset)).map_or(len, |l| l.min(len));
        // The part holding `offset`: the last start ≤ offset (past empty parts).
        let first = starts.partition_point(|&s| s <= offset).saturating_sub(1);
        // Inside one part (most of a big file's reads: inside a tensor): that part's read.
        if let Some(part) = self.parts.get(first) {
            if offset + len as u64 <= starts[first + 1] {
                return exact(part.read(offset - starts[first], len, req)?, len);
            }
        }
        scratch::filled(len, |buf: &mut [u8]| {
            let mut done = 0;
            for (i, part) in self.parts.iter().enumerate().skip(first) {
                if done == buf.len() {
                    break;
                }
                if req.gone() {
                    return Err(LayoutError::Interrupted);
                }
                let at = offset + done as u64;
                let want = usize::try_from(starts[i + 1] - at)
                    .map_or(buf.len() - done, |left| left.min(buf.len() - done));
                if want == 0 {
                    continue;
                }
                let got = exact(part.read(at - starts[i], want, req)?, want)?;
                buf[done..done + want].copy_from_slice(&got);
                done += want;
            }
            Ok(done)
        })
    }
}

/// `got`, which must be `want` bytes: a part is as long as its size said.
fn exact(got: Bytes, want: usize) -> Result<Bytes, LayoutError> {
    if got.len() != want {
        return Err(LayoutError::Mismatch {
            what: "a part's read",
            got: got.len() as u64,
            want: want as u64,
        });
    }
    Ok(got)
}

/// Builds a `Concat` of parts whose sizes are known as they are added (a view's header
/// needs the offsets of what follows it).
#[derive(Default)]
pub struct ConcatBuilder {
    parts: Vec<Arc<dyn FileContent>>,
    starts: Vec<u64>,
    size: u64,
}

impl ConcatBuilder {
    /// The offset the next part will start at.
    pub fn offset(&self) -> u64 {
        self.size
    }

    /// Appends a part whose size is known (`known_size`), or fails.
    pub fn push(&mut self, part: Arc<dyn FileContent>) -> Result<(), TooBig> {
        let size = part.known_size().ok_or(TooBig)?;
        let end = self.size.checked_add(size).ok_or(TooBig)?;
        if size > 0 {
            self.starts.push(self.size);
            self.parts.push(part);
        }
        self.size = end;
        Ok(())
    }

    pub fn bytes(&mut self, b: Vec<u8>) -> Result<(), TooBig> {
        self.push(Arc::new(Whole(b.into())))
    }

    pub fn finish(mut self) -> Concat {
        self.starts.push(self.size);
        let c = Concat {
            parts: self.parts,
            starts: OnceLock::new(),
        };
        let _ = c.starts.set(self.starts);
        c
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A part whose size is learnt only by asking (a text file).
    struct Unsized(Bytes);

    impl FileContent for Unsized {
        fn known_size(&self) -> Option<u64> {
            None
        }
        fn size_for(&self, _req: &dyn Requester) -> Result<u64, LayoutError> {
            Ok(self.0.len() as u64)
        }
        fn read(&self, offset: u64, len: usize, r: &dyn Requester) -> Result<Bytes, LayoutError> {
            Whole(self.0.clone()).read(offset, len, r)
        }
    }

    fn every_read_equals(c: &Concat, want: &[u8]) {
        for from in 0..want.len() as u64 + 2 {
            for len in 0..want.len() + 3 {
                let mut buf = vec![0u8; len];
                let n = c.read_at(from, &mut buf).unwrap();
                let w = &want[(from as usize).min(want.len())..];
                assert_eq!(&buf[..n], &w[..w.len().min(len)], "{from} {len}");
            }
        }
    }

    #[test]
    fn reads_across_parts_equal_the_parts_back_to_back() {
        let mut b = ConcatBuilder::default();
        for part in ["abc", "", "defgh", "i"] {
            b.bytes(part.as_bytes().to_vec()).unwrap();
        }
        let c = b.finish();
        assert_eq!(c.known_size(), Some(9));
        every_read_equals(&c, b"abcdefghi");
    }

    #[test]
    fn parts_of_unknown_size_are_learnt_on_first_read() {
        let parts: Vec<Arc<dyn FileContent>> = ["ab", "", "", "cde", "f"]
            .iter()
            .map(|p| Arc::new(Unsized(Bytes::from_static(p.as_bytes()))) as Arc<dyn FileContent>)
            .collect();
        let c = Concat::new(parts);
        assert_eq!(c.known_size(), None);
        every_read_equals(&c, b"abcdef");
        assert_eq!(c.known_size(), Some(6));
    }
}
