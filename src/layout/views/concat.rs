//! A file made of pieces back to back, each of a size known when the file is made: the
//! single-file views (`.safetensors`, `.npz`) are headers we write and tensors' bytes read on
//! demand. A read touches only the pieces it covers.

use std::sync::Arc;

use bytes::Bytes;

use crate::layout::{FileContent, LayoutError, Requester};
use crate::source::scratch;

pub(crate) struct Concat {
    /// `(start, size, piece)`; invariant: each piece starts where the one before ends, the
    /// first at 0, and `piece.known_size() == Some(size)`.
    pieces: Vec<(u64, u64, Arc<dyn FileContent>)>,
    size: u64,
}

/// A size that does not fit the file (a model whose view would exceed 2^64 bytes).
#[derive(Debug, thiserror::Error)]
#[error("a view's size overflows")]
pub(crate) struct TooBig;

#[derive(Default)]
pub(crate) struct ConcatBuilder {
    pieces: Vec<(u64, u64, Arc<dyn FileContent>)>,
    size: u64,
}

impl ConcatBuilder {
    /// The offset the next piece will start at.
    pub(crate) fn offset(&self) -> u64 {
        self.size
    }

    /// Appends a piece whose size is known (`known_size`), or fails.
    pub(crate) fn push(&mut self, piece: Arc<dyn FileContent>) -> Result<(), TooBig> {
        let size = piece.known_size().ok_or(TooBig)?;
        let end = self.size.checked_add(size).ok_or(TooBig)?;
        if size > 0 {
            self.pieces.push((self.size, size, piece));
        }
        self.size = end;
        Ok(())
    }

    pub(crate) fn bytes(&mut self, b: Vec<u8>) -> Result<(), TooBig> {
        self.push(Arc::new(super::Whole(b.into())))
    }

    pub(crate) fn finish(self) -> Concat {
        debug_assert!(self.pieces.windows(2).all(|w| w[0].0 + w[0].1 == w[1].0));
        Concat {
            pieces: self.pieces,
            size: self.size,
        }
    }
}

impl Concat {
    /// The index of the piece holding byte `offset` (or `pieces.len()` past the end).
    fn piece_at(&self, offset: u64) -> usize {
        self.pieces
            .partition_point(|(start, size, _)| start + size <= offset)
    }
}

impl FileContent for Concat {
    fn known_size(&self) -> Option<u64> {
        Some(self.size)
    }
    fn size_for(&self, _req: &dyn Requester) -> Result<u64, LayoutError> {
        Ok(self.size)
    }
    fn read(&self, offset: u64, len: usize, req: &dyn Requester) -> Result<Bytes, LayoutError> {
        let len = usize::try_from(self.size.saturating_sub(offset)).map_or(len, |l| l.min(len));
        let i = self.piece_at(offset);
        // A read inside one piece (most of a big file's reads: inside a tensor) is the
        // piece's read, a view of its bytes where it has them.
        if let Some((start, size, piece)) = self.pieces.get(i) {
            if offset + len as u64 <= start + size {
                return exact(piece.read(offset - start, len, req)?, len);
            }
        }
        scratch::filled(len, |buf: &mut [u8]| {
            let mut done = 0;
            for (start, size, piece) in &self.pieces[i..] {
                if done == buf.len() {
                    break;
                }
                if req.gone() {
                    return Err(LayoutError::Interrupted);
                }
                let at = offset + done as u64;
                let want = usize::try_from(start + size - at)
                    .map_or(buf.len() - done, |left| left.min(buf.len() - done));
                let got = exact(piece.read(at - start, want, req)?, want)?;
                buf[done..done + want].copy_from_slice(&got);
                done += want;
            }
            Ok(done)
        })
    }
}

/// `got`, which must be `want` bytes: a piece is as long as the view says.
pub(super) fn exact(got: Bytes, want: usize) -> Result<Bytes, LayoutError> {
    if got.len() != want {
        return Err(LayoutError::Mismatch {
            what: "view piece read",
            got: got.len() as u64,
            want: want as u64,
        });
    }
    Ok(got)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_across_pieces_equal_the_pieces_back_to_back() {
        let mut b = ConcatBuilder::default();
        b.bytes(b"abc".to_vec()).unwrap();
        b.bytes(Vec::new()).unwrap();
        b.bytes(b"defgh".to_vec()).unwrap();
        b.bytes(b"i".to_vec()).unwrap();
        let c = b.finish();
        assert_eq!(c.known_size(), Some(9));
        for from in 0..10u64 {
            for len in 0..12usize {
                let mut buf = vec![0u8; len];
                let n = c.read_at(from, &mut buf).unwrap();
                let want = &b"abcdefghi"[(from as usize).min(9)..];
                let want = &want[..want.len().min(len)];
                assert_eq!(&buf[..n], want, "{from} {len}");
            }
        }
    }
}
