//! A deflated `.npz` member (`np.savez_compressed`) read by range: deflate has no random
//! access, so a read decompresses from the nearest decoder at or before it — one left where an
//! earlier read ended (a sequential reader never starts over), else a new one from the start.
//! Decoders are kept in one small pool for the whole process (`POOL_MAX`), so memory does not
//! grow with the number of members or readers. The zip CRC-32 of the whole member is checked
//! by a pass of its own before the first byte is served (`verify=crc`), and the verdict kept.

use std::io::Read;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use flate2::read::DeflateDecoder;

use crate::model::ModelError;
use crate::source::{ReadAt, ReadExt};

/// Decoders kept, over all members (each holds its 32 KiB window and buffers).
const POOL_MAX: usize = 4;
/// Bytes per step of a skip or a checksum pass.
const STEP: usize = 256 << 10;

static NEXT_ID: AtomicU64 = AtomicU64::new(1);
static POOL: Mutex<Vec<(u64, Decoder)>> = Mutex::new(Vec::new());

pub(crate) struct Inflated {
    id: u64,
    file: Arc<dyn ReadAt>,
    /// The compressed bytes, `[start, end)` of the file.
    start: u64,
    end: u64,
    /// The uncompressed length and CRC-32 the zip directory gives.
    len: u64,
    crc: u32,
    verify: bool,
    verdict: OnceLock<Result<(), String>>,
}

/// A decoder and how many uncompressed bytes it has given.
struct Decoder {
    inner: DeflateDecoder<std::io::BufReader<crate::source::Span>>,
    pos: u64,
}

impl Inflated {
    /// The member whose compressed bytes are `[start, end)` of `file`, `len` bytes and CRC-32
    /// `crc` uncompressed (`end` within the file: checked by the caller).
    pub(crate) fn new(
        file: &Arc<dyn ReadAt>,
        (start, end): (u64, u64),
        len: u64,
        crc: u32,
        verify: bool,
    ) -> Inflated {
        debug_assert!(start <= end && end <= file.size());
        Inflated {
            id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
            file: Arc::clone(file),
            start,
            end,
            len,
            crc,
            verify,
            verdict: OnceLock::new(),
        }
    }

    pub(crate) fn len(&self) -> u64 {
        self.len
    }

    fn fresh(&self) -> Decoder {
        let c = crate::source::Span::new(Arc::clone(&self.file), self.start, self.end);
        Decoder {
            inner: DeflateDecoder::new(std::io::BufReader::with_capacity(64 << 10, c)),
            pos: 0,
        }
    }

    fn fault(&self, e: impl std::fmt::Display) -> ModelError {
        ModelError::data(self.file.name(), format!("a deflated member: {e}"))
    }

    /// Exactly `out.len()` uncompressed bytes at `at` (within `len`).
    pub(crate) fn read(&self, at: u64, out: &mut [u8]) -> Result<(), ModelError> {
        self.verified()?;
        // The pooled decoder of this member furthest along but not past `at`; the pool's lock
        // is not held while decompressing.
        let kept = {
            let mut pool = POOL.lock().unwrap_or_else(|e| e.into_inner());
            let best = pool
                .iter()
                .enumerate()
                .filter(|(_, (id, d))| *id == self.id && d.pos <= at)
                .max_by_key(|(_, (_, d))| d.pos)
                .map(|(i, _)| i);
            best.map(|i| pool.remove(i).1)
        };
        let mut d = kept.unwrap_or_else(|| self.fresh());
        let skip = at - d.pos;
        let skipped = std::io::copy(&mut (&mut d.inner).take(skip), &mut std::io::sink())
            .map_err(|e| self.fault(e))?;
        if skipped != skip {
            return Err(self.fault("the stream ends early"));
        }
        d.inner.read_exact(out).map_err(|e| self.fault(e))?;
        d.pos = at + out.len() as u64;
        let mut pool = POOL.lock().unwrap_or_else(|e| e.into_inner());
        pool.push((self.id, d));
        if pool.len() > POOL_MAX {
            pool.remove(0);
        }
        Ok(())
    }

    /// The CRC-32 verdict: one pass over the whole member before its first byte is served; a
    /// source fault is returned and not kept.
    fn verified(&self) -> Result<(), ModelError> {
        if !self.verify {
            return Ok(());
        }
        let verdict = match self.verdict.get() {
            Some(v) => v,
            None => {
                let mut d = self.fresh();
                let mut h = crc32fast::Hasher::new();
                let mut buf = vec![0u8; STEP];
                let mut total = 0u64;
                let outcome = loop {
                    match d.inner.read(&mut buf) {
                        Ok(0) => break Ok(()),
                        Ok(n) => {
                            h.update(&buf[..n]);
                            total += n as u64;
                            if total > self.len {
                                break Err("more bytes than the zip directory says".to_string());
                            }
                        }
                        // The source's fault is not a verdict; bad deflate data is.
                        Err(e)
                            if e.get_ref()
                                .is_some_and(|i| i.is::<crate::source::SourceError>()) =>
                        {
                            return Err(self.fault(e));
                        }
                        Err(e) => break Err(e.to_string()),
                    }
                };
                let c = h.finalize();
                self.verdict.get_or_init(|| {
                    outcome?;
                    if total != self.len {
                        return Err(format!("{total} bytes, {} in the zip directory", self.len));
                    }
                    match c == self.crc {
                        true => Ok(()),
                        false => Err(format!(
                            "zip CRC-32 {c:08x} of the member, {:08x} expected",
                            self.crc
                        )),
                    }
                })
            }
        };
        verdict.clone().map_err(|e| self.fault(e))
    }
}
