//! TFRecord framing (formats/monolith.md): `length` u64 LE, masked CRC32C of those 8 bytes
//! (u32 LE), `length` bytes of data, masked CRC32C of the data (u32 LE).
//!
//! Invariants: a record is used only when both CRCs hold and it lies wholly inside the file;
//! lengths are checked against what exists before anything is allocated.

use crate::codec::le;
use crate::source::SourceError;

/// Bytes of framing around a record's data.
pub(crate) const FRAMING: u64 = 16;
/// The longest record accepted: an entry is an id and its floats (and optimizer state); one
/// of more than this is damage, not an embedding.
pub(crate) const MAX_RECORD: u64 = 64 << 20;

#[derive(Debug, thiserror::Error)]
pub(crate) enum RecordError {
    #[error("{0}")]
    Source(#[from] SourceError),
    #[error("record at {at}: truncated ({need} bytes needed, {have} left)")]
    Truncated { at: u64, need: u64, have: u64 },
    #[error("record at {at}: length checksum mismatch")]
    LengthCrc { at: u64 },
    #[error("record at {at}: data checksum mismatch")]
    DataCrc { at: u64 },
    #[error("record at {at}: {len} bytes, more than a record can be ({MAX_RECORD})")]
    TooLong { at: u64, len: u64 },
}

impl RecordError {
    pub(crate) fn is_transient(&self) -> bool {
        matches!(self, RecordError::Source(s) if s.is_transient())
    }
}

/// TF's masked CRC32C.
pub(crate) fn masked_crc(data: &[u8]) -> u32 {
    crate::codec::mask_crc(crc32c::crc32c(data))
}

/// What the bytes at a record's start say.
pub(crate) enum Framed {
    /// A whole record: its data at `data` within the bytes given, `len` bytes in all.
    Whole {
        data: std::ops::Range<usize>,
        len: u64,
    },
    /// The record is longer than the bytes given: this many are needed from its start.
    Need(u64),
}

/// The record at the start of `buf`, which holds the file from offset `at` on, `left` bytes of
/// the file remaining from there (`buf` may hold fewer).
pub(crate) fn frame(buf: &[u8], at: u64, left: u64) -> Result<Framed, RecordError> {
    if left < 12 {
        return Err(RecordError::Truncated {
            at,
            need: 12,
            have: left,
        });
    }
    if buf.len() < 12 {
        return Ok(Framed::Need(12));
    }
    if le::u32_at(buf, 8) != Some(masked_crc(&buf[..8])) {
        return Err(RecordError::LengthCrc { at });
    }
    let Some(len) = le::u64_at(buf, 0) else {
        return Ok(Framed::Need(12));
    };
    if len > MAX_RECORD {
        return Err(RecordError::TooLong { at, len });
    }
    let need = len + FRAMING;
    if need > left {
        return Err(RecordError::Truncated {
            at,
            need,
            have: left,
        });
    }
    if (buf.len() as u64) < need {
        return Ok(Framed::Need(need));
    }
    let end = 12 + len as usize;
    if le::u32_at(buf, end) != Some(masked_crc(&buf[12..end])) {
        return Err(RecordError::DataCrc { at });
    }
    Ok(Framed::Whole {
        data: 12..end,
        len: need,
    })
}

/// Appends one record holding `data` to `out` (the test writer's and the fuzzer's).
#[cfg(any(test, feature = "testkit"))]
pub fn write_record(data: &[u8], out: &mut Vec<u8>) {
    let len = (data.len() as u64).to_le_bytes();
    out.extend_from_slice(&len);
    out.extend_from_slice(&masked_crc(&len).to_le_bytes());
    out.extend_from_slice(data);
    out.extend_from_slice(&masked_crc(data).to_le_bytes());
}
