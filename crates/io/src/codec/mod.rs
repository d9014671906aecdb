//! Wire encodings shared by the readers and the views, below them all (readers may not
//! import each other): varints, little-endian fixed integers and the masked CRC32C of the TF
//! table and bundle formats and of TFRecord framing (formats/tf-checkpoint.md §2), and the
//! protobuf wire format read in place (`wire`), and the LevelDB table, read and written (`table`).
//!
//! Every decoder takes the remaining input and returns the value plus the bytes consumed, or
//! `None` when the input ends early or the varint is over-long; callers turn `None` into their
//! own corruption error.

pub mod angel;
pub mod le;
pub mod table;
pub mod wire;
pub mod zip;

use crate::source::{ReadAt, ReadCtx, SourceError, To};

/// Added to the rotated CRC by `mask` (LevelDB's `kMaskDelta`).
const MASK_DELTA: u32 = 0xa282_ead8;

/// Masks a CRC for storage (§2): rotate right by 15, add the delta.
pub fn mask_crc(crc: u32) -> u32 {
    crc.rotate_right(15).wrapping_add(MASK_DELTA)
}

/// Inverse of `mask_crc`.
pub fn unmask_crc(masked: u32) -> u32 {
    masked.wrapping_sub(MASK_DELTA).rotate_left(15)
}

/// CRC32C of `data`, continuing from `crc` (the CRC of the bytes before `data`).
pub fn crc32c_extend(crc: u32, data: &[u8]) -> u32 {
    crc32c::crc32c_append(crc, data)
}

/// CRC32C of `data` (from 0), computed on up to `threads` threads for large inputs: each
/// thread checksums one contiguous part (at least `PARALLEL_CRC_MIN` bytes) and the parts'
/// CRCs are combined. Same result as `crc32c_extend(0, data)`.
pub fn crc32c_parallel(data: &[u8], threads: usize) -> u32 {
    let parts = threads.min(data.len() / PARALLEL_CRC_MIN).max(1);
    if parts == 1 {
        return crc32c_extend(0, data);
    }
    let part = data.len().div_ceil(parts);
    let crcs: Vec<(u32, usize)> = std::thread::scope(|s| {
        let handles: Vec<_> = data
            .chunks(part)
            .map(|c| s.spawn(move || (crc32c::crc32c(c), c.len())))
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or((0, usize::MAX)))
            .collect()
    });
    crcs.into_iter().enumerate().fold(0, |acc, (i, (c, len))| {
        if i == 0 {
            c
        } else {
            crc32c::crc32c_combine(acc, c, len)
        }
    })
}

/// The CRC32C of the bytes `offset..offset + len` (a checksum pass): parts checksummed
/// as the source hands them, on several threads where it fetches them so, and combined.
pub fn crc32c_of<R: ReadAt + ?Sized>(
    file: &R,
    ctx: &ReadCtx,
    offset: u64,
    len: u64,
) -> Result<u32, SourceError> {
    let cores = crate::source::cores();
    let parts = std::sync::Mutex::new(Vec::new());
    file.read_with(
        ctx,
        offset,
        To::Parts(len, &|at, piece| {
            // An empty piece holds no bytes (and may carry any offset).
            if piece.is_empty() {
                return;
            }
            let threads = if piece.len() >= 2 * PARALLEL_CRC_MIN {
                cores
            } else {
                1
            };
            let crc = crc32c_parallel(piece, threads);
            let mut p = parts.lock().unwrap_or_else(|e| e.into_inner());
            p.push((at, piece.len() as u64, crc));
        }),
    )?;
    let mut parts = parts.into_inner().unwrap_or_else(|e| e.into_inner());
    parts.sort_unstable_by_key(|&(at, ..)| at);
    // Every byte once: a source that handed over a gap or an overlap would make a verdict
    // on bytes nobody read.
    let mut at = offset;
    let mut crc = 0u32;
    for (from, n, c) in parts {
        if from != at {
            let why = format!("a checksum pass was handed bytes {from}.. where {at}.. was due");
            return Err(uncovered(file.about(), why));
        }
        crc = if at == offset {
            c
        } else {
            crc32c::crc32c_combine(crc, c, n as usize)
        };
        at += n;
    }
    if at != offset + len {
        let why = format!("a checksum pass ended at {at}, not {}", offset + len);
        return Err(uncovered(file.about(), why));
    }
    Ok(crc)
}

/// A source that broke `To::Parts`' promise (every byte once): a defect, never a verdict.
fn uncovered(about: &crate::source::About, why: String) -> SourceError {
    debug_assert!(false, "{}: {why}", about.name);
    let source = std::io::Error::new(std::io::ErrorKind::InvalidData, why);
    SourceError::Io {
        path: about.name.clone(),
        source,
    }
}

/// Smallest part worth a thread of its own in `crc32c_parallel`.
pub const PARALLEL_CRC_MIN: usize = 32 << 20;

/// Decodes a varint64 (at most 10 bytes) from the start of `buf`.
pub fn decode_varint64(buf: &[u8]) -> Option<(u64, usize)> {
    let mut value: u64 = 0;
    for (i, &byte) in buf.iter().enumerate().take(10) {
        let bits = u64::from(byte & 0x7f);
        // The 10th byte may only contribute the top bit of a u64.
        if i == 9 && bits > 1 {
            return None;
        }
        value |= bits << (7 * i);
        if byte & 0x80 == 0 {
            return Some((value, i + 1));
        }
    }
    None
}

/// Decodes a varint32 (at most 5 bytes, value fits u32) from the start of `buf`.
pub(crate) fn decode_varint32(buf: &[u8]) -> Option<(u32, usize)> {
    let mut value: u32 = 0;
    for (i, &byte) in buf.iter().enumerate().take(5) {
        let bits = u32::from(byte & 0x7f);
        if i == 4 && bits > 0x0f {
            return None;
        }
        value |= bits << (7 * i);
        if byte & 0x80 == 0 {
            return Some((value, i + 1));
        }
    }
    None
}

/// Appends `value` as a varint64 (used by tests and by key construction).
pub fn put_varint64(out: &mut Vec<u8>, mut value: u64) {
    while value >= 0x80 {
        out.push((value as u8) | 0x80);
        value >>= 7;
    }
    out.push(value as u8);
}

/// Little-endian u32 at `buf[at..at + 4]`, `None` if out of range.
pub(crate) fn fixed32_at(buf: &[u8], at: usize) -> Option<u32> {
    let end = at.checked_add(4)?;
    let bytes: [u8; 4] = buf.get(at..end)?.try_into().ok()?;
    Some(u32::from_le_bytes(bytes))
}

#[cfg(test)]
mod tests {

    /// A checksum pass over a remote object, read in parallel parts, and over a local one:
    /// the CRC32C of the bytes asked for, whatever the parts.
    #[test]
    fn a_checksum_pass_is_the_crc_of_its_bytes() {
        use crate::source::remote::test_file;
        use crate::source::{MemSource, ReadCtx};
        let data: Vec<u8> = (0..(4u32 << 20)).map(|i| (i * 31 % 253) as u8).collect();
        let bs = 64 << 10;
        let mem = MemSource::new("m", data.clone());
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("d"), &data).unwrap();
        let local = crate::source::local().open(&dir.path().join("d")).unwrap();
        for (off, len) in [
            (0usize, 4usize << 20),
            (1000, 3 << 20),
            (bs - 1, 2),
            (5, 0),
            (57, 0),
        ] {
            let remote = test_file(
                std::sync::Arc::new(object_store::memory::InMemory::new()),
                &data,
                5 << 20,
            );
            let want = crc32c::crc32c(&data[off..off + len]);
            let (o, l) = (off as u64, len as u64);
            assert_eq!(crc32c_of(&remote, ReadCtx::none(), o, l).unwrap(), want);
            assert_eq!(crc32c_of(&mem, ReadCtx::none(), o, l).unwrap(), want);
            assert_eq!(crc32c_of(&*local, ReadCtx::none(), o, l).unwrap(), want);
        }
        let remote = test_file(
            std::sync::Arc::new(object_store::memory::InMemory::new()),
            &data,
            5 << 20,
        );
        assert!(crc32c_of(&remote, ReadCtx::none(), 4 << 20, 1).is_err());
    }
    use super::*;

    #[test]
    fn parallel_crc_equals_serial() {
        let data: Vec<u8> = (0..(PARALLEL_CRC_MIN * 3 + 12345))
            .map(|i| (i * 31 % 251) as u8)
            .collect();
        let want = crc32c_extend(0, &data);
        for threads in [1, 2, 3, 4, 8] {
            assert_eq!(crc32c_parallel(&data, threads), want, "{threads}");
        }
        assert_eq!(
            crc32c_parallel(&data[..100], 4),
            crc32c_extend(0, &data[..100])
        );
    }

    #[test]
    fn crc_vectors() {
        assert_eq!(crc32c_extend(0, b"123456789"), 0xE306_9283);
        assert_eq!(crc32c_extend(0, b""), 0);
        assert_eq!(crc32c_extend(0, &[0, 0, 0, 0]), 0x4867_4bc7);
        assert_eq!(mask_crc(0), 0xa282_ead8);
        assert_eq!(mask_crc(crc32c_extend(0, &[0, 0, 0, 0])), 0x3a11_7ba6);
        assert_eq!(mask_crc(crc32c_extend(0, &[0, 0, 0, 0x3f])), 0x1f27_3806);
        for c in [0u32, 1, 0xdead_beef, u32::MAX] {
            assert_eq!(unmask_crc(mask_crc(c)), c);
        }
        let a = crc32c_extend(0, b"1234");
        assert_eq!(crc32c_extend(a, b"56789"), 0xE306_9283);
    }

    #[test]
    fn varints() {
        assert_eq!(decode_varint64(&[0x00]), Some((0, 1)));
        assert_eq!(decode_varint64(&[0xc8, 0x01]), Some((200, 2)));
        assert_eq!(decode_varint64(&[0x80]), None);
        assert_eq!(decode_varint64(&[0xff; 11]), None);
        let mut v = Vec::new();
        put_varint64(&mut v, u64::MAX);
        assert_eq!(v.len(), 10);
        assert_eq!(decode_varint64(&v), Some((u64::MAX, 10)));
        // An 11-bit overflow in the tenth byte is corruption.
        let mut bad = vec![0xff; 9];
        bad.push(0x02);
        assert_eq!(decode_varint64(&bad), None);
        assert_eq!(
            decode_varint32(&[0xff, 0xff, 0xff, 0xff, 0x0f]),
            Some((u32::MAX, 5))
        );
        assert_eq!(decode_varint32(&[0xff, 0xff, 0xff, 0xff, 0x1f]), None);
        assert_eq!(fixed32_at(&[1, 0, 0, 0, 9], 0), Some(1));
        assert_eq!(fixed32_at(&[1, 0, 0], 0), None);
        assert_eq!(fixed32_at(&[1, 0, 0, 0], usize::MAX), None);
    }
}
