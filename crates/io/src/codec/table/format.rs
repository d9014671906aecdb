//! Reading one block from the file (§3.2): trailer check, then decompression.

use super::block::Block;
use super::footer::{BlockHandle, TRAILER_LEN};
use super::TableError;
use crate::codec::{crc32c_extend, fixed32_at, unmask_crc};
use crate::source::{ReadAt, ReadExt};

const TYPE_RAW: u8 = 0;
const TYPE_SNAPPY: u8 = 1;

/// Reads, checks and decodes the block at `handle` (already bound-checked against the file).
pub(crate) fn read_block(file: &dyn ReadAt, handle: BlockHandle) -> Result<Block, TableError> {
    let corrupt = |msg: String| TableError::Corrupt(format!("{}: {msg}", file.name()));
    let total = handle
        .size
        .checked_add(TRAILER_LEN)
        .filter(|&t| t <= file.size())
        .ok_or_else(|| corrupt(format!("block at offset {} is past the end", handle.offset)))?;
    let total = usize::try_from(total).map_err(|_| corrupt("block too large".into()))?;
    let bytes = file.read_vec(handle.offset, total)?;
    let n = total - TRAILER_LEN as usize;
    let (contents, trailer) = bytes.split_at(n);
    let block_type = trailer[0];
    let stored = fixed32_at(trailer, 1).unwrap_or(0);
    let actual = crc32c_extend(crc32c_extend(0, contents), &[block_type]);
    if unmask_crc(stored) != actual {
        return Err(corrupt(format!(
            "block checksum mismatch (block at offset {})",
            handle.offset
        )));
    }
    let data: Box<[u8]> = match block_type {
        TYPE_RAW => contents.into(),
        TYPE_SNAPPY => decompress_snappy(contents).map_err(|m| {
            corrupt(format!(
                "corrupt Snappy block at offset {}: {m}",
                handle.offset
            ))
        })?,
        t => {
            return Err(corrupt(format!(
                "bad block type {t} at offset {}",
                handle.offset
            )))
        }
    };
    Block::decode(data).map_err(|source| TableError::Block {
        file: file.name().to_string(),
        offset: handle.offset,
        source,
    })
}

/// Raw (block-format) Snappy; the preamble is bounded by what the input could expand to
/// before anything is allocated.
pub(crate) fn decompress_snappy(input: &[u8]) -> Result<Box<[u8]>, String> {
    let len = snap::raw::decompress_len(input).map_err(|e| e.to_string())?;
    let bound = (input.len() as u64).saturating_mul(22).saturating_add(64);
    if len as u64 > bound {
        return Err(format!(
            "claims {len} bytes from {} compressed",
            input.len()
        ));
    }
    let mut out = vec![0u8; len];
    let written = snap::raw::Decoder::new()
        .decompress(input, &mut out)
        .map_err(|e| e.to_string())?;
    if written != len {
        return Err("decompressed length differs from the preamble".into());
    }
    Ok(out.into_boxed_slice())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn snappy_vector_and_bounds() {
        assert_eq!(
            &*decompress_snappy(&[0x08, 0x00, 0x61, 0x0d, 0x01]).unwrap(),
            b"aaaaaaaa"
        );
        // Absurd preamble (4 GiB from 6 bytes) refused before allocating.
        assert!(decompress_snappy(&[0xff, 0xff, 0xff, 0xff, 0x0f, 0x00]).is_err());
        // Output shorter than the preamble.
        assert!(decompress_snappy(&[0x09, 0x00, 0x61, 0x0d, 0x01]).is_err());
        // Copy offset before the start.
        assert!(decompress_snappy(&[0x04, 0x01, 0x05]).is_err());
    }
}
