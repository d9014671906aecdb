//! Contents that hold their bytes: a small file held whole (`Whole`), and one made whole on
//! its first read and kept (`Made`: an index that needs every checksum, a meta that needs
//! every partition's length, a tensor's statistics). A read of either is a view of the held
//! bytes, never a copy.

use bytes::Bytes;
use std::sync::OnceLock;

use super::{FileContent, LayoutError, Requester};

/// A small file held whole.
pub struct Whole(pub bytes::Bytes);

impl FileContent for Whole {
    fn known_size(&self) -> Option<u64> {
        Some(self.0.len() as u64)
    }
    fn read(&self, offset: u64, len: usize, _req: &dyn Requester) -> Result<Bytes, LayoutError> {
        Ok(slice_at(&self.0, offset, len))
    }
}

/// How a small file's bytes are made whole (an index that needs every checksum, a meta that
/// needs every partition's length).
pub trait Make: Send + Sync {
    /// The bytes, for `req` (whose interruption stops the work).
    fn make(&self, req: &dyn Requester) -> Result<Vec<u8>, LayoutError>;
    /// Their length before they are made, when metadata fixes it.
    fn size(&self) -> Option<u64> {
        None
    }
}

/// A file made by `M` on first need and kept.
pub struct Made<M> {
    make: M,
    bytes: OnceLock<bytes::Bytes>,
}

impl<M: Make> Made<M> {
    pub fn new(make: M) -> Self {
        Made {
            make,
            bytes: OnceLock::new(),
        }
    }

    fn bytes(&self, req: &dyn Requester) -> Result<&bytes::Bytes, LayoutError> {
        if let Some(b) = self.bytes.get() {
            return Ok(b);
        }
        let b = self.make.make(req)?;
        if let Some(want) = self.make.size().filter(|&s| s != b.len() as u64) {
            return Err(LayoutError::Mismatch {
                what: "view file length",
                got: b.len() as u64,
                want,
            });
        }
        Ok(self.bytes.get_or_init(|| b.into()))
    }
}

impl<M: Make> FileContent for Made<M> {
    fn known_size(&self) -> Option<u64> {
        self.bytes
            .get()
            .map(|b| b.len() as u64)
            .or_else(|| self.make.size())
    }
    fn size_for(&self, req: &dyn Requester) -> Result<u64, LayoutError> {
        match self.known_size() {
            Some(s) => Ok(s),
            None => Ok(self.bytes(req)?.len() as u64),
        }
    }
    fn read(&self, offset: u64, len: usize, req: &dyn Requester) -> Result<Bytes, LayoutError> {
        Ok(slice_at(self.bytes(req)?, offset, len))
    }
}

/// Up to `len` bytes of `b` from `offset`, without a copy (none at or past the end).
pub fn slice_at(b: &bytes::Bytes, offset: u64, len: usize) -> bytes::Bytes {
    let from = usize::try_from(offset).unwrap_or(usize::MAX).min(b.len());
    b.slice(from..from + len.min(b.len() - from))
}
