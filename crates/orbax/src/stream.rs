//! A large compressed chunk read by range: a single-device array of a gigabyte is one zarr
//! chunk, one zstd (or deflate) stream with no random access. A read decompresses from the
//! decoder of that chunk that has got furthest without passing it — left where an earlier
//! read ended, so a sequential reader never starts over — else from a new decoder at the
//! start. Decoders are kept in one small pool for the process (`POOL_MAX`); while one is at
//! work on a chunk, another read of that chunk waits for it rather than starting over.
//!
//! A reader going forward is decoded ahead of: after a read, a thread decodes the next
//! `AHEAD` bytes into the decoder's buffer while the caller hands the bytes on (the kernel's
//! copy and the decoding overlap on two cores). A fault there is not kept: the decoder is
//! dropped and the next read decodes again, meeting the fault (or not) itself.
//!
//! Invariant: a decoder's `buf` holds the decoded bytes `[base, base + buf.len())`, and its
//! stream has given exactly `base + buf.len()` bytes.

use std::io::Read;
use std::sync::{Arc, Condvar, Mutex};

use crate::model::ModelError;
use crate::source::{ReadAt, ReadCtx, ReadExt, SourceError};
use crate::zarr::Compression;

const POOL_MAX: usize = 4;
/// Bytes decoded ahead of a reader going forward.
const AHEAD: usize = 4 << 20;
/// Decoded bytes kept behind a read: the kernel's read-ahead (4 MiB) and the mount's threads
/// bring reads a little out of order, and a read behind every decoder starts over.
const BEHIND: u64 = 8 << 20;
/// Bytes decoded at a time.
const STEP: u64 = 1 << 20;
/// Compressed bytes read from the source at a time.
const BUFFER: usize = 1 << 20;

/// A chunk: its array and index (`chunks::Key`).
type Key = (u64, u64);

struct Decoder {
    key: Key,
    base: u64,
    buf: Vec<u8>,
    inner: Box<dyn Read + Send>,
}

impl Decoder {
    /// How far its stream has got.
    fn end(&self) -> u64 {
        self.base + self.buf.len() as u64
    }
}

struct Pool {
    idle: Vec<Decoder>,
    busy: Vec<Key>,
}

static POOL: Mutex<Pool> = Mutex::new(Pool {
    idle: Vec::new(),
    busy: Vec::new(),
});
static RETURNED: Condvar = Condvar::new();

/// The compressed bytes `[at, end)` of a file, as a reader.
struct Compressed {
    file: Arc<dyn ReadAt>,
    at: u64,
    end: u64,
}

impl Read for Compressed {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = (buf.len() as u64).min(self.end - self.at) as usize;
        if n > 0 {
            self.file
                .read_into(ReadCtx::none(), self.at, &mut buf[..n])
                .map_err(std::io::Error::other)?;
            self.at += n as u64;
        }
        Ok(n)
    }
}

/// A stored chunk: `len` bytes at `offset` of `file`, compressed by `compression`.
pub(crate) struct Stream<'a> {
    pub key: Key,
    pub file: &'a Arc<dyn ReadAt>,
    pub offset: u64,
    pub len: u64,
    pub compression: Compression,
    /// Bytes it decodes to.
    pub decoded: u64,
    /// For errors: the array and chunk.
    pub name: &'a str,
}

impl Stream<'_> {
    fn fresh(&self) -> Result<Decoder, ModelError> {
        let raw = std::io::BufReader::with_capacity(
            BUFFER,
            Compressed {
                file: Arc::clone(self.file),
                at: self.offset,
                end: self.offset + self.len,
            },
        );
        let inner: Box<dyn Read + Send> = match self.compression {
            Compression::Zstd => Box::new(
                zstd::stream::read::Decoder::with_buffer(raw)
                    .map_err(|e| ModelError::data(self.name, format!("zstd: {e}")))?,
            ),
            Compression::Gzip => Box::new(flate2::read::GzDecoder::new(raw)),
            Compression::Zlib => Box::new(flate2::read::ZlibDecoder::new(raw)),
            Compression::None => Box::new(raw),
        };
        Ok(Decoder {
            key: self.key,
            base: 0,
            buf: Vec::new(),
            inner,
        })
    }

    /// A fault of a decoder: the source's own (kept as it is: it may be transient) or damage.
    fn fault(&self, e: std::io::Error) -> ModelError {
        match e.get_ref().and_then(|i| i.downcast_ref::<SourceError>()) {
            Some(_) => match e.into_inner().map(|i| i.downcast::<SourceError>()) {
                Some(Ok(s)) => ModelError::Source(*s),
                _ => ModelError::data(self.name, "a source fault"),
            },
            None => ModelError::data(self.name, format!("decoding: {e}")),
        }
    }

    /// Exactly `out.len()` decoded bytes from `at`.
    pub(crate) fn read(&self, at: u64, out: &mut [u8]) -> Result<(), ModelError> {
        let kept = {
            let mut pool = POOL.lock().unwrap_or_else(|e| e.into_inner());
            while pool.busy.contains(&self.key) {
                pool = RETURNED.wait(pool).unwrap_or_else(|e| e.into_inner());
            }
            let best = pool
                .idle
                .iter()
                .enumerate()
                .filter(|(_, d)| d.key == self.key && d.base <= at)
                .max_by_key(|(_, d)| d.end())
                .map(|(i, _)| i);
            pool.busy.push(self.key);
            best.map(|i| pool.idle.remove(i))
        };
        let got = (|| {
            let mut d = match kept {
                Some(d) => d,
                None => self.fresh()?,
            };
            let end = at + out.len() as u64;
            // Decoded forward into the buffer (never discarded: a read a little behind this
            // one may come next), in steps, letting go of what is far behind.
            while d.end() < end {
                trim(&mut d, at);
                let step = (end - d.end()).min(STEP) as usize;
                let have = d.buf.len();
                d.buf.resize(have + step, 0);
                d.inner
                    .read_exact(&mut d.buf[have..])
                    .map_err(|e| match e.kind() {
                        std::io::ErrorKind::UnexpectedEof => self.short(),
                        _ => self.fault(e),
                    })?;
            }
            let i = (at - d.base) as usize;
            out.copy_from_slice(&d.buf[i..i + out.len()]);
            // At its end, a stream with more to give is not the chunk its shape says.
            if d.end() == self.decoded
                && d.inner.read(&mut [0u8; 1]).map_err(|e| self.fault(e))? != 0
            {
                return Err(ModelError::data(
                    self.name,
                    "the chunk decodes to more bytes than its shape",
                ));
            }
            Ok(d)
        })();
        let next = at + out.len() as u64;
        match got {
            Ok(d) if d.end() < self.decoded && d.end() - next < AHEAD as u64 / 2 => {
                // Going forward with little left decoded: decode ahead, the key still busy.
                let decoded = self.decoded;
                std::thread::spawn(move || ahead(d, next, decoded));
                Ok(())
            }
            got => {
                let mut pool = POOL.lock().unwrap_or_else(|e| e.into_inner());
                pool.busy.retain(|k| *k != self.key);
                let result = got.map(|d| give_back(&mut pool, d));
                drop(pool);
                RETURNED.notify_all();
                result
            }
        }
    }

    fn short(&self) -> ModelError {
        ModelError::data(self.name, "the chunk decodes to fewer bytes than its shape")
    }
}

fn give_back(pool: &mut Pool, d: Decoder) {
    pool.idle.push(d);
    if pool.idle.len() > POOL_MAX {
        pool.idle.remove(0);
    }
}

/// Lets go of `d`'s decoded bytes more than `BEHIND` before `at`, once they are twice that
/// (moving the rest down costs then at most one copy of each byte).
fn trim(d: &mut Decoder, at: u64) {
    // Never past what the stream has given (a read far ahead lets all of it go).
    let keep = at.saturating_sub(BEHIND).min(d.end());
    if keep > d.base + BEHIND {
        let gone = keep - d.base;
        d.buf.drain(..gone as usize);
        d.base = keep;
    }
}

/// Decodes up to `AHEAD` more bytes into `d`'s buffer (letting go of what is more than
/// `BEHIND` before `from`), then gives `d` back; on a fault, drops it.
fn ahead(mut d: Decoder, from: u64, decoded: u64) {
    debug_assert!(d.base <= from && from <= d.end());
    trim(&mut d, from);
    let want = (AHEAD as u64).min(decoded - d.end()) as usize;
    let have = d.buf.len();
    d.buf.resize(have + want, 0);
    let ok = d.inner.read_exact(&mut d.buf[have..]).is_ok();
    let key = d.key;
    let mut pool = POOL.lock().unwrap_or_else(|e| e.into_inner());
    pool.busy.retain(|k| *k != key);
    if ok {
        give_back(&mut pool, d);
    }
    drop(pool);
    RETURNED.notify_all();
}
