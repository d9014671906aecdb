//! A run of a source as a `std::io::Read`: what a streaming decoder (deflate, zstd) takes to
//! decompress bytes stored at an offset of a file, read in the decoder's own pieces.

use std::io::Read;
use std::sync::Arc;

use super::{ReadAt, ReadCtx, ReadExt};

/// Bytes `[at, end)` of `file`, read forward. A source fault is the `io::Error`'s inner
/// error (a `SourceError`), so a caller can tell it from bad data.
pub struct Span {
    file: Arc<dyn ReadAt>,
    at: u64,
    end: u64,
}

impl Span {
    /// Bytes `[start, end)` of `file` (the caller has checked them inside it).
    pub fn new(file: Arc<dyn ReadAt>, start: u64, end: u64) -> Span {
        debug_assert!(start <= end && end <= file.size());
        Span {
            file,
            at: start,
            end,
        }
    }
}

impl Read for Span {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = (buf.len() as u64).min(self.end.saturating_sub(self.at)) as usize;
        if n > 0 {
            self.file
                .read_into(ReadCtx::none(), self.at, &mut buf[..n])
                .map_err(std::io::Error::other)?;
            self.at += n as u64;
        }
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::source::MemSource;

    #[test]
    fn reads_its_run_and_stops_at_its_end() {
        let file: Arc<dyn ReadAt> = Arc::new(MemSource::new("m", (0u8..100).collect::<Vec<_>>()));
        let mut s = Span::new(file, 10, 25);
        let mut out = Vec::new();
        s.read_to_end(&mut out).unwrap();
        assert_eq!(out, (10u8..25).collect::<Vec<_>>());
    }
}
