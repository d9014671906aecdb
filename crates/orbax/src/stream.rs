//! A large compressed chunk read by range: a single-device array of a gigabyte is one zarr
//! chunk, one zstd (or deflate) stream with no random access. A read decompresses from the
//! decoder of that chunk that has got furthest without passing it — left where an earlier
//! read ended, so a sequential reader never starts over — else from a new decoder at the
//! start. Decoders are kept in one small pool for the process (`POOL_MAX`); while one is at
//! work on a chunk, another read of that chunk waits for it rather than starting over.

use std::io::Read;
use std::sync::{Arc, Condvar, Mutex};

use crate::model::ModelError;
use crate::source::{ReadAt, ReadCtx, ReadExt, SourceError};
use crate::zarr::Compression;

const POOL_MAX: usize = 4;
/// Compressed bytes read from the source at a time.
const BUFFER: usize = 1 << 20;

/// A chunk: its array and index (`chunks::Key`).
type Key = (u64, u64);

struct Decoder {
    key: Key,
    pos: u64,
    inner: Box<dyn Read + Send>,
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
            pos: 0,
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
                .filter(|(_, d)| d.key == self.key && d.pos <= at)
                .max_by_key(|(_, d)| d.pos)
                .map(|(i, _)| i);
            pool.busy.push(self.key);
            best.map(|i| pool.idle.remove(i))
        };
        let got = (|| {
            let mut d = match kept {
                Some(d) => d,
                None => self.fresh()?,
            };
            let skip = at - d.pos;
            let skipped = std::io::copy(&mut (&mut d.inner).take(skip), &mut std::io::sink())
                .map_err(|e| self.fault(e))?;
            if skipped != skip {
                return Err(ModelError::data(
                    self.name,
                    "the chunk decodes to fewer bytes than its shape",
                ));
            }
            d.inner.read_exact(out).map_err(|e| match e.kind() {
                std::io::ErrorKind::UnexpectedEof => {
                    ModelError::data(self.name, "the chunk decodes to fewer bytes than its shape")
                }
                _ => self.fault(e),
            })?;
            d.pos = at + out.len() as u64;
            // At its end, a stream with more to give is not the chunk its shape says.
            if d.pos == self.decoded && d.inner.read(&mut [0u8; 1]).map_err(|e| self.fault(e))? != 0
            {
                return Err(ModelError::data(
                    self.name,
                    "the chunk decodes to more bytes than its shape",
                ));
            }
            Ok(d)
        })();
        let mut pool = POOL.lock().unwrap_or_else(|e| e.into_inner());
        pool.busy.retain(|k| *k != self.key);
        let result = got.map(|d| {
            pool.idle.push(d);
            if pool.idle.len() > POOL_MAX {
                pool.idle.remove(0);
            }
        });
        drop(pool);
        RETURNED.notify_all();
        result
    }
}
