//! Variable-length tensors: DT_STRING (§6.1) and DT_VARIANT (§6.2).
//!
//! The first access builds a `VarIndex` over the tensor's bytes (one pass that also checks
//! structure and, if asked, the checksums) keeping one checkpoint every `STRIDE` elements, so
//! later reads of element `i` decode at most `STRIDE` lengths before reaching it. Memory is
//! bounded by `size / STRIDE`, never by the element count the entry claims.

use crate::codec::{crc32c_extend, decode_varint64, mask_crc, unmask_crc};

const STRIDE: u64 = 256;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum VarKind {
    Str,
    Variant,
}

#[derive(Debug)]
pub(crate) struct VarIndex {
    kind: VarKind,
    n: u64,
    /// For element `k · STRIDE`: (offset of its length varint, offset of its bytes). Offsets are
    /// relative to the tensor's first byte. For variants the length varint starts the element.
    checkpoints: Vec<(usize, usize)>,
}

/// Why a variable-length tensor cannot be read.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub(crate) enum VarError {
    #[error("{0}")]
    Malformed(String),
    #[error("the length checksum does not match")]
    LengthChecksum,
    #[error("checksum does not match ({0})")]
    Checksum(&'static str),
    #[error("elements {first}..+{count} are outside the tensor's {total}")]
    OutOfRange { first: u64, count: u64, total: u64 },
}

impl From<String> for VarError {
    fn from(msg: String) -> Self {
        VarError::Malformed(msg)
    }
}

impl From<&str> for VarError {
    fn from(msg: &str) -> Self {
        VarError::Malformed(msg.to_string())
    }
}

fn bad(msg: &str) -> VarError {
    VarError::Malformed(msg.to_string())
}

impl VarIndex {
    /// Builds the index of `n` strings in `data` (the whole tensor), checking the lengths,
    /// the exact end and, when `verify`, the length checksum and the entry CRC `stored_crc`.
    pub(crate) fn build_strings(
        data: &[u8],
        n: u64,
        big_endian: bool,
        verify: bool,
        stored_crc: u32,
    ) -> Result<VarIndex, VarError> {
        // Every length takes at least one byte; the checksum four more.
        if n > data.len() as u64 {
            return Err(format!("{n} strings cannot fit in {} bytes", data.len()).into());
        }
        let mut checkpoints = Vec::with_capacity((n / STRIDE + 1) as usize);
        let mut pos = 0usize;
        let mut total: u64 = 0;
        let mut len_crc = 0u32;
        for i in 0..n {
            let (len, used) =
                decode_varint64(&data[pos..]).ok_or_else(|| bad("truncated string lengths"))?;
            if i % STRIDE == 0 {
                checkpoints.push((pos, total as usize)); // fixed up below
            }
            pos += used;
            total = total
                .checked_add(len)
                .filter(|&t| t <= data.len() as u64)
                .ok_or_else(|| bad("string lengths longer than expected"))?;
            if verify {
                len_crc = match u32::try_from(len) {
                    Ok(l32) if big_endian => crc32c_extend(len_crc, &l32.to_be_bytes()),
                    Ok(l32) => crc32c_extend(len_crc, &l32.to_le_bytes()),
                    Err(_) if big_endian => crc32c_extend(len_crc, &len.to_be_bytes()),
                    Err(_) => crc32c_extend(len_crc, &len.to_le_bytes()),
                };
            }
        }
        let checksum_bytes: [u8; 4] = data
            .get(pos..pos + 4)
            .and_then(|b| b.try_into().ok())
            .ok_or_else(|| bad("string tensor truncated before its length checksum"))?;
        let strings_at = pos + 4;
        if (strings_at as u64).checked_add(total) != Some(data.len() as u64) {
            return Err(format!(
                "string data ends at {} but the entry size is {}",
                strings_at as u64 + total,
                data.len()
            )
            .into());
        }
        if verify {
            let stored = if big_endian {
                u32::from_be_bytes(checksum_bytes)
            } else {
                u32::from_le_bytes(checksum_bytes)
            };
            if unmask_crc(stored) != len_crc {
                return Err(VarError::LengthChecksum);
            }
            let crc = crc32c_extend(crc32c_extend(len_crc, &checksum_bytes), &data[strings_at..]);
            if mask_crc(crc) != stored_crc {
                return Err(VarError::Checksum("string tensor"));
            }
        }
        for c in &mut checkpoints {
            c.1 += strings_at;
        }
        Ok(VarIndex {
            kind: VarKind::Str,
            n,
            checkpoints,
        })
    }

    /// Builds the index of `n` variant elements (`varint len ‖ bytes ‖ masked running CRC`).
    pub(crate) fn build_variants(
        data: &[u8],
        n: u64,
        verify: bool,
        stored_crc: u32,
    ) -> Result<VarIndex, VarError> {
        if n > data.len() as u64 / 5 {
            return Err(format!("{n} variant elements cannot fit in {} bytes", data.len()).into());
        }
        let mut checkpoints = Vec::with_capacity((n / STRIDE + 1) as usize);
        let mut pos = 0usize;
        let mut crc = 0u32;
        for i in 0..n {
            let (len, used) =
                decode_varint64(&data[pos..]).ok_or_else(|| bad("truncated variant length"))?;
            let bytes_at = pos + used;
            if i % STRIDE == 0 {
                checkpoints.push((pos, bytes_at));
            }
            let end = (bytes_at as u64)
                .checked_add(len)
                .filter(|&e| e + 4 <= data.len() as u64)
                .ok_or_else(|| bad("variant element runs past the entry"))?
                as usize;
            let stored = u32::from_le_bytes(data[end..end + 4].try_into().unwrap_or_default());
            if verify {
                crc = crc32c_extend(crc32c_extend(crc, &len.to_le_bytes()), &data[bytes_at..end]);
                if mask_crc(crc) != stored {
                    return Err(VarError::Checksum("variant element"));
                }
                crc = crc32c_extend(crc, &data[end..end + 4]);
            }
            pos = end + 4;
        }
        if pos != data.len() {
            return Err(format!(
                "variant data ends at {pos} but the entry size is {}",
                data.len()
            )
            .into());
        }
        if verify && mask_crc(crc) != stored_crc {
            return Err(VarError::Checksum("variant tensor"));
        }
        Ok(VarIndex {
            kind: VarKind::Variant,
            n,
            checkpoints,
        })
    }

    /// Calls `f` with elements `first..first + count` of `data` (the bytes the index was built
    /// over).
    pub(crate) fn for_each(
        &self,
        data: &[u8],
        first: u64,
        count: u64,
        f: &mut dyn FnMut(&[u8]),
    ) -> Result<(), VarError> {
        let end =
            first
                .checked_add(count)
                .filter(|&e| e <= self.n)
                .ok_or(VarError::OutOfRange {
                    first,
                    count,
                    total: self.n,
                })?;
        if count == 0 {
            return Ok(());
        }
        let cp = (first / STRIDE) as usize;
        let (mut len_at, mut bytes_at) = *self.checkpoints.get(cp).ok_or("bad index")?;
        // Data were validated by `build_*`: the decodes below cannot fail.
        for i in cp as u64 * STRIDE..end {
            let (len, used) =
                decode_varint64(data.get(len_at..).unwrap_or(&[])).ok_or("bad length")?;
            let len = len as usize;
            if self.kind == VarKind::Variant {
                bytes_at = len_at + used;
            }
            if i >= first {
                f(data.get(bytes_at..bytes_at + len).ok_or("bad length")?);
            }
            match self.kind {
                VarKind::Str => {
                    len_at += used;
                    bytes_at += len;
                }
                VarKind::Variant => len_at = bytes_at + len + 4,
            }
        }
        Ok(())
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    pub(crate) use crate::writer::encode_strings;

    fn collect(idx: &VarIndex, data: &[u8], first: u64, count: u64) -> Vec<Vec<u8>> {
        let mut out = Vec::new();
        idx.for_each(data, first, count, &mut |s| out.push(s.to_vec()))
            .unwrap();
        out
    }

    #[test]
    fn spec_example() {
        let data = [
            0x00, 0x02, 0x03, 0x4d, 0xa1, 0xd8, 0x2e, 0x61, 0x62, 0x78, 0x79, 0x7a,
        ];
        let idx = VarIndex::build_strings(&data, 3, false, true, 0x2cc5_8cc6).unwrap();
        assert_eq!(collect(&idx, &data, 0, 3), [&b""[..], b"ab", b"xyz"]);
        assert_eq!(collect(&idx, &data, 2, 1), [b"xyz"]);
        assert!(VarIndex::build_strings(&data, 3, false, true, 0x2cc5_8cc7).is_err());
        assert!(VarIndex::build_strings(&data, 3, false, false, 0).is_ok());
        // Length checksum wrong.
        let mut bad = data;
        bad[3] ^= 1;
        assert!(
            VarIndex::build_strings(&bad, 3, false, true, 0x2cc5_8cc6).unwrap_err()
                == VarError::LengthChecksum
        );
        // Not ending exactly.
        assert!(VarIndex::build_strings(&data[..11], 3, false, false, 0).is_err());
        // Huge N, tiny size.
        assert!(VarIndex::build_strings(&data, u64::MAX / 2, false, true, 0).is_err());
        // Empty string tensor.
        let (e, crc) = encode_strings(&[], false);
        assert_eq!(e, [0xd8, 0xea, 0x82, 0xa2]);
        assert!(VarIndex::build_strings(&e, 0, false, true, crc).is_ok());
        assert_eq!(
            encode_strings(&[b"", b"ab", b"xyz"], false),
            (data.to_vec(), 0x2cc5_8cc6)
        );
    }

    #[test]
    fn many_and_big_endian() {
        let owned: Vec<Vec<u8>> = (0..1000).map(|i| vec![(i % 256) as u8; i % 300]).collect();
        let items: Vec<&[u8]> = owned.iter().map(|v| &v[..]).collect();
        for be in [false, true] {
            let (data, crc) = encode_strings(&items, be);
            let idx = VarIndex::build_strings(&data, 1000, be, true, crc).unwrap();
            assert_eq!(collect(&idx, &data, 0, 1000), owned);
            assert_eq!(collect(&idx, &data, 517, 300), owned[517..817].to_vec());
            assert!(idx.for_each(&data, 999, 2, &mut |_| {}).is_err());
        }
    }

    #[test]
    fn long_length_uses_u64_term() {
        // Only the checksum computation: a length > u32::MAX contributes 8 bytes.
        let len: u64 = 1 << 32;
        let mut data = Vec::new();
        crate::codec::put_varint64(&mut data, len);
        let c = crc32c_extend(0, &len.to_le_bytes());
        data.extend_from_slice(&mask_crc(c).to_le_bytes());
        // The string itself is absent: the structural check fails after the checksum, which
        // proves the 8-byte term was used (a 4-byte term would fail as "length checksum").
        let err = VarIndex::build_strings(&data, 1, false, true, 0).unwrap_err();
        assert!(err.to_string().contains("longer than expected"), "{err}");
    }

    #[test]
    fn variants() {
        let elems: [&[u8]; 3] = [b"abc", b"", b"\x00\xff"];
        let mut data = Vec::new();
        let mut crc = 0u32;
        for e in elems {
            crate::codec::put_varint64(&mut data, e.len() as u64);
            data.extend_from_slice(e);
            crc = crc32c_extend(crc32c_extend(crc, &(e.len() as u64).to_le_bytes()), e);
            let m = mask_crc(crc).to_le_bytes();
            data.extend_from_slice(&m);
            crc = crc32c_extend(crc, &m);
        }
        let idx = VarIndex::build_variants(&data, 3, true, mask_crc(crc)).unwrap();
        assert_eq!(collect(&idx, &data, 0, 3), elems.map(|e| e.to_vec()));
        assert_eq!(
            collect(&idx, &data, 1, 2),
            elems[1..].iter().map(|e| e.to_vec()).collect::<Vec<_>>()
        );
        let mut bad = data.clone();
        bad[1] ^= 1;
        assert!(VarIndex::build_variants(&bad, 3, true, mask_crc(crc)).is_err());
        assert!(VarIndex::build_variants(&data, 4, true, mask_crc(crc)).is_err());
    }
}
