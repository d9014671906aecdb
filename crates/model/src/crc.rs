//! Checksums confirmed by a reader of every byte, piece by piece.

/// The CRC32C of a run of bytes read in order, and its length: pieces' checksums combine into
/// the tensor's (a checksum confirmed by the reader of every byte, `Tensor::deferred_crc32c`).
#[derive(Clone, Copy, Debug, Default)]
pub struct Crc {
    crc: u32,
    len: u64,
}

impl Crc {
    pub fn add(&mut self, bytes: &[u8]) {
        self.crc = crc32c::crc32c_append(self.crc, bytes);
        self.len += bytes.len() as u64;
    }

    /// `self` followed by `next`.
    pub fn then(self, next: Crc) -> Crc {
        // Combining costs a few microseconds: nothing to combine with is the common case.
        if self.len == 0 {
            return next;
        }
        if next.len == 0 {
            return self;
        }
        Crc {
            crc: crc32c::crc32c_combine(self.crc, next.crc, next.len as usize),
            len: self.len + next.len,
        }
    }

    pub fn value(self) -> u32 {
        self.crc
    }
}
