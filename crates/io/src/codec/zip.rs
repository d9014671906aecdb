//! A zip archive's directory, read from its end: the entries' names, methods, sizes, CRC-32s
//! and where their local headers are (`rc-zip`'s parser; this drives its reads). Nothing
//! before the central directory is read, so listing an archive reads none of its members:
//! where a member's bytes start is known only from its local header (`data_start`), which a
//! reader asks for when it first reads that member.

pub use rc_zip::parse::{Entry, Method};

/// Why an archive's directory could not be read.
#[derive(Debug, thiserror::Error)]
pub enum ZipError {
    #[error("not a zip archive, or a damaged one: {0}")]
    Format(String),
    #[error(transparent)]
    Read(Box<dyn std::error::Error + Send + Sync>),
}

/// The entries of the archive of `size` bytes that `read(offset, buf)` reads (exactly
/// `buf.len()` bytes at `offset`, all inside the archive).
pub fn entries<E>(
    size: u64,
    mut read: impl FnMut(u64, &mut [u8]) -> Result<(), E>,
) -> Result<Vec<Entry>, ZipError>
where
    E: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    zip64_in_bounds(size, &mut read)?;
    let mut fsm = rc_zip::fsm::ArchiveFsm::new(size);
    // The parser reads forward, so it needs at most the file's bytes; a damaged directory
    // that points past the end (or makes it ask again and again) ends here.
    let mut budget = size.saturating_add(1 << 20);
    loop {
        if let Some(offset) = fsm.wants_read() {
            let space = fsm.space();
            let n = (space.len() as u64).min(size.saturating_sub(offset)) as usize;
            if n == 0 || budget < n as u64 {
                return Err(ZipError::Format("its directory points past the end".into()));
            }
            budget -= n as u64;
            read(offset, &mut space[..n]).map_err(|e| ZipError::Read(e.into()))?;
            fsm.fill(n);
        }
        fsm = match fsm.process() {
            Ok(rc_zip::fsm::FsmResult::Continue(f)) => f,
            Ok(rc_zip::fsm::FsmResult::Done(archive)) => {
                return Ok(archive.entries().cloned().collect())
            }
            Err(e) => return Err(ZipError::Format(e.to_string())),
        };
    }
}

/// The end of central directory record (22 bytes, then a comment of up to 64 KiB).
const EOCD_SIG: [u8; 4] = *b"PK\x05\x06";
/// The ZIP64 locator (20 bytes, just before the EOCD) and the ZIP64 EOCD record it points at.
const LOCATOR_SIG: [u8; 4] = *b"PK\x06\x07";
const EOCD64_SIG: [u8; 4] = *b"PK\x06\x06";

/// Refuses a ZIP64 directory whose offset or size lies past the file, before the parser sees
/// it: such counts overflow its arithmetic (a fuzzer's find). Only the tail is read, which
/// the parser reads next anyway.
fn zip64_in_bounds<E>(
    size: u64,
    read: &mut impl FnMut(u64, &mut [u8]) -> Result<(), E>,
) -> Result<(), ZipError>
where
    E: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let mut get = |at: u64, n: u64| -> Result<Vec<u8>, ZipError> {
        let mut buf = vec![0u8; n as usize];
        read(at, &mut buf).map_err(|e| ZipError::Read(e.into()))?;
        Ok(buf)
    };
    let tail_len = size.min(22 + 0xffff + 20);
    let tail = get(size - tail_len, tail_len)?;
    let Some(eocd) = tail.windows(4).rposition(|w| w == EOCD_SIG) else {
        return Ok(()); // the parser says what is missing
    };
    let Some(loc) = eocd.checked_sub(20).map(|l| &tail[l..eocd]) else {
        return Ok(());
    };
    if loc[..4] != LOCATOR_SIG {
        return Ok(());
    }
    let at = u64::from_le_bytes(loc[8..16].try_into().expect("8 bytes"));
    if at.checked_add(56).is_none_or(|end| end > size) {
        return Err(ZipError::Format(
            "its ZIP64 directory record lies past the end".into(),
        ));
    }
    let rec = get(at, 56)?;
    if rec[..4] != EOCD64_SIG {
        return Ok(());
    }
    let dir_size = u64::from_le_bytes(rec[40..48].try_into().expect("8 bytes"));
    let dir_at = u64::from_le_bytes(rec[48..56].try_into().expect("8 bytes"));
    if dir_at.checked_add(dir_size).is_none_or(|end| end > size) {
        return Err(ZipError::Format(
            "its ZIP64 directory lies past the end".into(),
        ));
    }
    Ok(())
}

/// Bytes of a local header before its name and extra field.
pub const LOCAL_HEADER: usize = 30;

/// Where the member whose local header is `header` (its first `LOCAL_HEADER` bytes, read at
/// `at`) has its data; `None` if it is not a local header.
pub fn data_start(at: u64, header: &[u8]) -> Option<u64> {
    if header.len() < LOCAL_HEADER || header[..4] != *b"PK\x03\x04" {
        return None;
    }
    let name = u16::from_le_bytes([header[26], header[27]]);
    let extra = u16::from_le_bytes([header[28], header[29]]);
    at.checked_add(LOCAL_HEADER as u64 + u64::from(name) + u64::from(extra))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn archive() -> Vec<u8> {
        let mut w = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
        let opts = zip::write::SimpleFileOptions::default()
            .compression_method(zip::CompressionMethod::Stored);
        w.start_file("a/data.pkl", opts).unwrap();
        w.write_all(b"hello").unwrap();
        w.start_file("a/data/0", opts).unwrap();
        w.write_all(&[7; 200 << 10]).unwrap();
        w.finish().unwrap().into_inner()
    }

    #[test]
    fn the_directory_and_a_members_data() {
        let z = archive();
        let mut reads = Vec::new();
        let e = entries(z.len() as u64, |at, buf: &mut [u8]| {
            reads.push(at);
            buf.copy_from_slice(&z[at as usize..at as usize + buf.len()]);
            Ok::<_, std::io::Error>(())
        })
        .unwrap();
        assert_eq!(e.len(), 2);
        assert_eq!(e[1].name, "a/data/0");
        assert_eq!(e[1].method, Method::Store);
        assert_eq!(e[1].uncompressed_size, 200 << 10);
        let at = e[1].header_offset;
        // Listing read the directory and the 64 KiB before the archive's end (where its end
        // record may be), nothing before.
        assert!(reads.iter().all(|&r| r > at + (100 << 10)), "{reads:?}");
        let start = data_start(at, &z[at as usize..]).unwrap() as usize;
        assert_eq!(&z[start..start + 10], &[7; 10]);
        assert_eq!(data_start(0, b"PK\x01\x02"), None);
    }

    /// A ZIP64 directory offset past the file (a fuzzer's find: it overflowed the parser's
    /// arithmetic) is refused before the parser sees it.
    #[test]
    fn a_zip64_directory_past_the_end_is_refused() {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../fixtures/torch/crash-zip64-directory-offset.pt"
        );
        let z = std::fs::read(path).unwrap();
        let r = entries(z.len() as u64, |at, buf: &mut [u8]| {
            buf.copy_from_slice(&z[at as usize..at as usize + buf.len()]);
            Ok::<_, std::io::Error>(())
        });
        let e = r.err().expect("refused").to_string();
        assert!(e.contains("ZIP64"), "{e}");
    }

    #[test]
    fn damaged_archives_are_errors() {
        let z = archive();
        for cut in [0, 10, z.len() - 30, z.len() - 1] {
            let z = &z[..cut];
            let r = entries(z.len() as u64, |at, buf: &mut [u8]| {
                buf.copy_from_slice(&z[at as usize..at as usize + buf.len()]);
                Ok::<_, std::io::Error>(())
            });
            assert!(r.is_err(), "{cut}");
        }
    }
}
