//! The 48-byte table footer (§3.1) and block handles.

use super::TableError;
use crate::codec::decode_varint64;

pub(crate) const FOOTER_LEN: u64 = 48;
pub use crate::codec::table::TABLE_MAGIC;
/// Type byte plus masked CRC after every block.
pub(crate) const TRAILER_LEN: u64 = 5;

/// Where a block's contents are: `size` excludes the 5-byte trailer that follows.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct BlockHandle {
    pub offset: u64,
    pub size: u64,
}

impl BlockHandle {
    /// Decodes a handle from the start of `buf`; returns it and the bytes consumed.
    pub fn decode(buf: &[u8]) -> Option<(BlockHandle, usize)> {
        let (offset, a) = decode_varint64(buf)?;
        let (size, b) = decode_varint64(buf.get(a..)?)?;
        Some((BlockHandle { offset, size }, a + b))
    }

    /// Requires `offset + size + 5 ≤ limit` (the start of the footer), checked.
    pub(crate) fn check_within(&self, limit: u64, what: &str) -> Result<(), TableError> {
        let end = self
            .offset
            .checked_add(self.size)
            .and_then(|e| e.checked_add(TRAILER_LEN));
        match end {
            Some(end) if end <= limit => Ok(()),
            _ => Err(TableError::Corrupt(format!(
                "{what} block handle (offset {}, size {}) points past the end of the table",
                self.offset, self.size
            ))),
        }
    }
}

/// Decoded footer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Footer {
    pub metaindex: BlockHandle,
    pub index: BlockHandle,
}

impl Footer {
    /// Decodes the last 48 bytes of a file of `file_len` bytes. Handles are read from bytes
    /// 0..40 only; the padding is not checked (TF does not).
    pub fn decode(bytes: &[u8], file_len: u64) -> Result<Footer, TableError> {
        if bytes.len() as u64 != FOOTER_LEN {
            return Err(TableError::NotATable(
                "file is shorter than a table footer".into(),
            ));
        }
        if bytes[40..48] != TABLE_MAGIC {
            return Err(TableError::NotATable("bad table magic number".into()));
        }
        let handles = &bytes[..40];
        let bad = || TableError::Corrupt("unreadable table footer".into());
        let (metaindex, used) = BlockHandle::decode(handles).ok_or_else(bad)?;
        let (index, _) = BlockHandle::decode(&handles[used..]).ok_or_else(bad)?;
        let limit = file_len - FOOTER_LEN; // caller guarantees file_len ≥ 48
        metaindex.check_within(limit, "metaindex")?;
        index.check_within(limit, "index")?;
        Ok(Footer { metaindex, index })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn footer_bytes(handles: &[u8]) -> Vec<u8> {
        let mut f = handles.to_vec();
        f.resize(40, 0);
        f.extend_from_slice(&TABLE_MAGIC);
        f
    }

    #[test]
    fn decodes_and_bounds() {
        let f = footer_bytes(&[0x2b, 0x08, 0x38, 0x0e]);
        let footer = Footer::decode(&f, 123).unwrap();
        assert_eq!(
            footer.index,
            BlockHandle {
                offset: 56,
                size: 14
            }
        );
        assert_eq!(
            footer.metaindex,
            BlockHandle {
                offset: 43,
                size: 8
            }
        );
        // Index reaching into the footer.
        assert!(Footer::decode(&f, 122).is_err());
        // Non-zero padding tolerated.
        let mut g = f.clone();
        g[39] = 7;
        assert!(Footer::decode(&g, 123).is_ok());
        // Wrong magic.
        let mut h = f.clone();
        h[47] = 0;
        assert!(matches!(
            Footer::decode(&h, 123),
            Err(TableError::NotATable(_))
        ));
        // Varints running past byte 40.
        let mut v = vec![0xff; 40];
        v.extend_from_slice(&TABLE_MAGIC);
        assert!(Footer::decode(&v, 1000).is_err());
        // Overflowing handle.
        let mut big = Vec::new();
        crate::codec::put_varint64(&mut big, 0);
        crate::codec::put_varint64(&mut big, 8);
        crate::codec::put_varint64(&mut big, u64::MAX - 2);
        crate::codec::put_varint64(&mut big, 10);
        assert!(Footer::decode(&footer_bytes(&big), 1000).is_err());
    }
}
