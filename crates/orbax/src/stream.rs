//! A large compressed chunk read by range: a single-device array of a gigabyte is one zarr
//! chunk, one zstd (or deflate) stream with no random access. Its reads are served by a
//! producer: a thread of its own decodes the stream forward in blocks (`BLOCK`), up to
//! `AHEAD` past the furthest byte asked for, while readers copy out the blocks already there
//! — the decoding and the kernel's copies overlap on two cores, and a sequential reader never
//! starts over. Blocks more than `BEHIND` before the furthest read are let go: the kernel's
//! read-ahead and the mount's threads bring reads a little out of order, and those are served
//! from them; a read behind every producer of its chunk starts a new one from the start.
//!
//! At most `STREAMS` producers live in the process (the oldest is stopped), each holding at
//! most `AHEAD + BEHIND` plus a block: memory is bounded whatever is read. A producer's fault
//! (damage, or the source's) is given to the reads waiting and the producer is dropped: a
//! transient fault is not remembered, the next read starts over and meets it or not.
//!
//! Invariant: `Shared::blocks` hold the decoded bytes `[base, produced)`, back to back.

use std::collections::VecDeque;
use std::io::Read;
use std::sync::{Arc, Condvar, Mutex};

use crate::model::ModelError;
use crate::source::{ReadAt, SourceError, Span};
use crate::zarr::Compression;

const BLOCK: u64 = 1 << 20;
const AHEAD: u64 = 8 << 20;
const BEHIND: u64 = 8 << 20;
const STREAMS: usize = 4;
/// Compressed bytes read from the source at a time.
const BUFFER: usize = 1 << 20;

/// A chunk: its array and index (`chunks::Key`).
type Key = (u64, u64);

/// A producer's decoded blocks and what its readers ask of it.
struct Shared {
    blocks: VecDeque<Arc<Vec<u8>>>,
    base: u64,
    produced: u64,
    /// The furthest end a read has asked for.
    wanted: u64,
    /// Where each read in progress has got to (by a number of its own): nothing at or after
    /// the lowest is let go, and the producer gets no further than `AHEAD + BEHIND` past it.
    readers: Vec<(u64, u64)>,
    /// Why it stopped early: the message, and whether the source's fault may pass.
    fault: Option<(String, bool)>,
    /// Evicted, or faulted: it decodes no more.
    stopped: bool,
}

struct Producer {
    key: Key,
    shared: Mutex<Shared>,
    changed: Condvar,
}

static PRODUCERS: Mutex<Vec<Arc<Producer>>> = Mutex::new(Vec::new());

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
    fn decoder(&self) -> Result<Box<dyn Read + Send>, ModelError> {
        let raw = std::io::BufReader::with_capacity(
            BUFFER,
            Span::new(Arc::clone(self.file), self.offset, self.offset + self.len),
        );
        Ok(match self.compression {
            Compression::Zstd => Box::new(
                zstd::stream::read::Decoder::with_buffer(raw)
                    .map_err(|e| ModelError::data(self.name, format!("zstd: {e}")))?,
            ),
            Compression::Gzip => Box::new(flate2::read::GzDecoder::new(raw)),
            Compression::Zlib => Box::new(flate2::read::ZlibDecoder::new(raw)),
            Compression::None => Box::new(raw),
        })
    }

    /// A producer of this chunk that has not let `at` go, or a new one from the start.
    fn producer(&self, at: u64) -> Result<Arc<Producer>, ModelError> {
        let mut all = PRODUCERS.lock().unwrap_or_else(|e| e.into_inner());
        let found = all.iter().position(|p| {
            let s = p.shared.lock().unwrap_or_else(|e| e.into_inner());
            p.key == self.key && s.base <= at && !s.stopped
        });
        if let Some(i) = found {
            let p = all.remove(i);
            all.push(Arc::clone(&p));
            return Ok(p);
        }
        let decoder = self.decoder()?;
        let p = Arc::new(Producer {
            key: self.key,
            shared: Mutex::new(Shared {
                blocks: VecDeque::new(),
                base: 0,
                produced: 0,
                wanted: 0,
                readers: Vec::new(),
                fault: None,
                stopped: false,
            }),
            changed: Condvar::new(),
        });
        let (q, decoded) = (Arc::clone(&p), self.decoded);
        std::thread::spawn(move || produce(&q, decoder, decoded));
        all.push(Arc::clone(&p));
        if all.len() > STREAMS {
            let old = all.remove(0);
            old.shared.lock().unwrap_or_else(|e| e.into_inner()).stopped = true;
            old.changed.notify_all();
        }
        Ok(p)
    }

    /// Exactly `out.len()` decoded bytes from `at` (inside the chunk: the caller's check).
    pub(crate) fn read(&self, at: u64, out: &mut [u8]) -> Result<(), ModelError> {
        let end = at + out.len() as u64;
        debug_assert!(end <= self.decoded);
        static NEXT_READ: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let me = NEXT_READ.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        // A producer may let `at` go before this read is registered (another read far
        // ahead): then the read goes to a new one.
        for _ in 0..3 {
            let p = self.producer(at)?;
            let mut s = p.shared.lock().unwrap_or_else(|e| e.into_inner());
            if s.base > at {
                continue;
            }
            s.readers.push((me, at));
            s.wanted = s.wanted.max(end);
            p.changed.notify_all();
            // Copied block by block as they come (a read larger than what is kept ahead).
            let mut pos = at;
            let outcome = loop {
                while s.produced <= pos && !s.stopped {
                    s = p.changed.wait(s).unwrap_or_else(|e| e.into_inner());
                }
                if let Some((why, transient)) = &s.fault {
                    break Err(Some((why.clone(), *transient)));
                }
                // Evicted (the oldest of too many): the read goes to a new producer.
                if s.produced <= pos {
                    break Err(None);
                }
                let upto = end.min(s.produced);
                let mut blocks = Vec::new();
                let mut from = s.base;
                for b in &s.blocks {
                    let to = from + b.len() as u64;
                    if to > pos && from < upto {
                        blocks.push((from, Arc::clone(b)));
                    }
                    from = to;
                }
                drop(s);
                for (from, b) in blocks {
                    let lo = pos.max(from);
                    let hi = upto.min(from + b.len() as u64);
                    out[(lo - at) as usize..(hi - at) as usize]
                        .copy_from_slice(&b[(lo - from) as usize..(hi - from) as usize]);
                }
                pos = upto;
                s = p.shared.lock().unwrap_or_else(|e| e.into_inner());
                if let Some(r) = s.readers.iter_mut().find(|r| r.0 == me) {
                    r.1 = pos;
                }
                p.changed.notify_all();
                if pos == end {
                    break Ok(());
                }
            };
            s.readers.retain(|r| r.0 != me);
            drop(s);
            p.changed.notify_all();
            let Err(Some((why, transient))) = outcome else {
                match outcome {
                    Ok(()) => return Ok(()),
                    _ => continue,
                }
            };
            return Err({
                PRODUCERS
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .retain(|q| !Arc::ptr_eq(q, &p));
                match transient {
                    true => ModelError::Source(SourceError::Remote {
                        url: self.name.to_string(),
                        cause: why,
                    }),
                    false => ModelError::data(self.name, why),
                }
            });
        }
        Err(ModelError::data(
            self.name,
            "a read overtaken three times (try again)",
        ))
    }
}

/// Where the lowest read in progress has got to (`wanted` when none is).
fn floor(s: &Shared) -> u64 {
    s.readers.iter().map(|r| r.1).min().unwrap_or(s.wanted)
}

/// How far the producer may decode now.
fn limit(s: &Shared, decoded: u64) -> u64 {
    let ahead = s.wanted.saturating_add(AHEAD);
    let held = floor(s).saturating_add(AHEAD + BEHIND);
    ahead.min(held).min(decoded)
}

/// The producer's thread: decodes `decoder` (of `decoded` bytes) into `p`'s blocks, ahead of
/// its readers, until the end, a fault, or eviction.
fn produce(p: &Producer, mut decoder: Box<dyn Read + Send>, decoded: u64) {
    let mut spare: Option<Vec<u8>> = None;
    loop {
        let at = {
            let mut s = p.shared.lock().unwrap_or_else(|e| e.into_inner());
            while !s.stopped && s.produced >= limit(&s, decoded) {
                if s.produced == decoded {
                    return;
                }
                s = p.changed.wait(s).unwrap_or_else(|e| e.into_inner());
            }
            if s.stopped {
                return;
            }
            // Let go of what is far behind the furthest read (reusing a block's memory).
            let keep = s.wanted.saturating_sub(BEHIND).min(floor(&s));
            while s
                .blocks
                .front()
                .is_some_and(|b| s.base + b.len() as u64 <= keep)
            {
                let b = s.blocks.pop_front().expect("a front block");
                s.base += b.len() as u64;
                spare = Arc::try_unwrap(b).ok().or(spare);
            }
            s.produced
        };
        let n = BLOCK.min(decoded - at) as usize;
        let mut block = spare.take().unwrap_or_default();
        block.resize(n, 0);
        let got = decoder.read_exact(&mut block).and_then(|()| {
            // At its end, a stream with more to give is not the chunk its shape says.
            match at + n as u64 == decoded && decoder.read(&mut [0u8; 1])? != 0 {
                true => Err(std::io::Error::other(
                    "the chunk decodes to more bytes than its shape",
                )),
                false => Ok(()),
            }
        });
        let mut s = p.shared.lock().unwrap_or_else(|e| e.into_inner());
        match got {
            Ok(()) => {
                s.blocks.push_back(Arc::new(block));
                s.produced += n as u64;
            }
            Err(e) => {
                let transient = e
                    .get_ref()
                    .and_then(|i| i.downcast_ref::<SourceError>())
                    .is_some_and(SourceError::is_transient);
                let why = match e.kind() {
                    std::io::ErrorKind::UnexpectedEof => {
                        "the chunk decodes to fewer bytes than its shape".to_string()
                    }
                    _ => format!("decoding: {e}"),
                };
                s.fault = Some((why, transient));
                s.stopped = true;
            }
        }
        let stop = s.stopped || s.produced == decoded;
        drop(s);
        p.changed.notify_all();
        if stop {
            return;
        }
    }
}
