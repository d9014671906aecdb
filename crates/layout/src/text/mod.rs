//! Chunked text files: a text layout is a sequence of chunks (runs of elements or records),
//! each rendered on its own. The chunk-offset index (byte length of every chunk, as prefix
//! sums) is learnt front to back, only as far as someone needs it: a read learns the chunks it
//! reads (and the read-ahead the ones after them), `size` learns them all. Every rendered chunk
//! teaches the index its length, whoever rendered it and why (`crew`). A read at any offset
//! renders only the chunks it touches (once the index covers them), keeping them in the shared
//! `ChunkCache`. Once complete, the index is remembered in the cache and the persistent store,
//! so the exact size outlives the file object and the mount.
//!
//! Every text layout (generic and Angel) is a `ChunkSource` wrapped in `ChunkedText`.

mod crew;
mod learnt;
#[cfg(test)]
mod tests;

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;

use self::crew::Crew;
use super::cache::{self, ChunkCache, ChunkOffsets, OffsetsKey, Owner};
use super::{FileContent, LayoutError, Requester};
use crate::source::{scratch, ReadCtx};
use crate::store::Offsets;

/// Elements per chunk for element-per-record text layouts: small enough that a random read
/// renders well under a megabyte, large enough that the index stays tiny (8 bytes per chunk).
pub const CHUNK_ELEMENTS: u64 = 32 * 1024;

/// Refuse indexes beyond this many chunks (2^32 × 32 Ki elements is far past any real tensor;
/// a shape claiming more is nonsense and must not make us allocate).
const MAX_CHUNKS: u64 = 1 << 32;

/// How often a waiting request looks at its caller (Ctrl-C) and reports progress.
const POLL: Duration = Duration::from_millis(10);

/// A text file as independently renderable chunks. Rendering must be deterministic: the same
/// chunk always gives the same bytes.
pub(crate) trait ChunkSource: Send + Sync {
    fn num_chunks(&self) -> u64;
    /// Appends chunk `chunk`'s bytes to `out`.
    fn render(&self, ctx: &ReadCtx, chunk: u64, out: &mut Vec<u8>) -> Result<(), LayoutError>;
}

/// How far the index must reach.
#[derive(Clone, Copy)]
enum Need {
    /// A read of `.0..=.1`: past `.1` (or to the end if the file is shorter).
    Past(u64, u64),
    All,
}

/// A `FileContent` serving a `ChunkSource` at any offset.
pub(crate) struct ChunkedText {
    crew: Arc<Crew>,
    owner: Owner,
    key: OffsetsKey,
}

/// What a waiting request asked of the crew; undone when it stops waiting.
struct Enlisted<'a> {
    crew: &'a Crew,
    background: Option<bool>,
}

impl Drop for Enlisted<'_> {
    fn drop(&mut self) {
        if let Some(bg) = self.background {
            let mut st = self.crew.lock();
            if bg {
                st.background -= 1;
            } else {
                st.urgent -= 1;
            }
        }
    }
}

impl ChunkedText {
    /// `tag` names the layout and its parameters (e.g. `"txt"`, `"ColIdValueText,sep=,"`): two
    /// files of one tensor with different tags never share an index.
    pub(crate) fn new(
        source: Arc<dyn ChunkSource>,
        owner: impl Into<Owner>,
        tag: &str,
        cache: Arc<ChunkCache>,
    ) -> Self {
        let owner = owner.into();
        let key = match owner.cache_identity() {
            Some(id) => OffsetsKey::Stable(format!("{id}\u{0}{tag}\u{0}v1")),
            None => OffsetsKey::Object {
                addr: owner.addr(),
                tag: tag.to_string(),
            },
        };
        ChunkedText {
            crew: Arc::new(Crew::new(source, cache)),
            owner,
            key,
        }
    }

    /// The complete chunk-offset index, learnt now if need be.
    #[cfg(test)]
    pub(crate) fn offsets(&self) -> Result<Arc<ChunkOffsets>, LayoutError> {
        self.offsets_for(&super::Patient)
    }

    fn offsets_for(&self, req: &dyn Requester) -> Result<Arc<ChunkOffsets>, LayoutError> {
        self.learn(Need::All, req)?
            .ok_or(LayoutError::Internal("index incomplete after learning all"))
    }

    /// Learns the index as far as `need` says; returns it when complete, `None` when the
    /// learnt prefix already covers `need`. A reader just past what is learnt gets the chunks
    /// it reads next rendered ahead (and kept); anyone else (a size, an offset far ahead) a
    /// size pass. The caller renders the frontier chunk itself when nobody else does, so it
    /// never waits on work that is not happening.
    fn learn(
        &self,
        need: Need,
        req: &dyn Requester,
    ) -> Result<Option<Arc<ChunkOffsets>>, LayoutError> {
        let crew = &self.crew;
        let chunks = crew.source.num_chunks();
        let background = req.background();
        let mut enlisted = Enlisted {
            crew,
            background: None,
        };
        let mut st = crew.lock();
        loop {
            if let Some(full) = &st.full {
                let full = full.clone();
                let publish = std::mem::take(&mut st.unpublished);
                drop(st);
                drop(enlisted);
                if publish {
                    self.publish(&full);
                }
                return Ok(Some(full));
            }
            if !st.looked {
                st.looked = true;
                drop(st);
                let known = self.look_up(chunks);
                st = crew.lock();
                if let (Some(i), None) = (known, &st.full) {
                    st.full = Some(i);
                    st.learnt.take();
                }
                continue;
            }
            let from = match need {
                Need::Past(_, b) if st.learnt.end() > b => return Ok(None),
                Need::Past(from, _) => Some(from),
                Need::All => None,
            };
            if chunks > MAX_CHUNKS {
                return Err(LayoutError::TooManyChunks(chunks));
            }
            if st.learnt.frontier() >= chunks {
                // Nothing to render (no chunks at all).
                crew.complete(&mut st);
                continue;
            }
            if req.gone() {
                return Err(LayoutError::Interrupted);
            }
            let frontier = st.learnt.frontier();
            // A read starting within a read-ahead window of the frontier reads the chunks
            // there next: they are rendered for it and kept.
            let near = from.is_some_and(|from| {
                let reach = st
                    .learnt
                    .average()
                    .map_or(u64::MAX, |avg| avg.saturating_mul(crew.window()));
                !background && from.saturating_sub(st.learnt.end()) < reach
            });
            if near {
                crew.queue_near_frontier(&mut st);
            } else if enlisted.background.is_none() {
                if background {
                    st.background += 1;
                } else {
                    st.urgent += 1;
                }
                enlisted.background = Some(background);
            }
            let hire = crew.hire(&mut st);
            // The niced background pass leaves a file being read to its reader.
            let mine = if background && !st.background_may_measure() {
                None
            } else {
                crew.claim_unlearnt(&mut st, req.ctx(), frontier, near)
            };
            req.progress(frontier, chunks);
            drop(st);
            crew.start(hire);
            if let Some(job) = mine {
                crew.run(job)?;
            } else {
                let st2 = crew.lock();
                if st2.full.is_none() && st2.is_inflight(frontier) {
                    drop(crew.wait(st2, POLL));
                } else if st2.full.is_none() && background {
                    drop(crew.wait(st2, POLL * 5));
                }
            }
            st = crew.lock();
        }
    }

    /// Hands a complete index learnt here to the cache and the persistent store. A mount
    /// does not store an index of one chunk: its size costs one chunk's render to learn
    /// again, and a model of 10^5 small tensors would otherwise keep 10^5 records (in the
    /// store's file and in every mount's memory) to save that; `modelfs index` stores all.
    fn publish(&self, index: &Arc<ChunkOffsets>) {
        let cache = &self.crew.cache;
        cache.keep_offsets(&self.key, &self.owner, index.clone());
        if let (OffsetsKey::Stable(k), true) = (&self.key, index.chunks() <= 1) {
            cache.keep_one_chunk(k, index.size());
            if !cache.stores_one_chunk() {
                return;
            }
        }
        if let (OffsetsKey::Stable(k), Some(store)) = (&self.key, cache.offset_store()) {
            store.put(k, &Offsets(index.offsets.clone()));
        }
    }

    /// The complete index if another file object, the one-chunk sizes or the persistent store
    /// has it.
    fn look_up(&self, chunks: u64) -> Option<Arc<ChunkOffsets>> {
        let cache = &self.crew.cache;
        if let Some(i) = cache.lookup_offsets(&self.key, &self.owner) {
            return Some(i);
        }
        let one = match &self.key {
            OffsetsKey::Stable(k) if chunks == 1 => cache.one_chunk(k),
            _ => None,
        };
        let offsets = match (&self.key, cache.offset_store(), one) {
            (_, _, Some(size)) => vec![0, size],
            (OffsetsKey::Stable(k), Some(store), None) if chunks <= MAX_CHUNKS => store
                .get::<Offsets>(k)
                .map(|o| o.0)
                .filter(|o| ChunkOffsets::is_valid(o, chunks))?,
            _ => return None,
        };
        let index = Arc::new(ChunkOffsets {
            namespace: self.crew.namespace,
            offsets,
        });
        cache.keep_offsets(&self.key, &self.owner, index.clone());
        Some(index)
    }

    /// Copies `offset..` into `buf` from chunks `spans` (index, start, end), which cover the
    /// range; returns the bytes written and the last chunk touched.
    fn copy_out(
        &self,
        ctx: &ReadCtx,
        namespace: u64,
        spans: &[(u64, u64, u64)],
        offset: u64,
        buf: &mut [u8],
    ) -> Result<(usize, u64), LayoutError> {
        let mut pos = offset;
        let mut written = 0usize;
        let mut last = 0;
        for &(i, start, end) in spans {
            if written == buf.len() {
                break;
            }
            last = i;
            if end <= pos {
                continue;
            }
            let chunk = self.crew.chunk(ctx, namespace, i, end - start)?;
            let from = usize::try_from(pos - start).map_err(|_| LayoutError::Overflow("offset"))?;
            let n = (chunk.len().saturating_sub(from)).min(buf.len() - written);
            buf[written..written + n].copy_from_slice(&chunk[from..from + n]);
            written += n;
            pos += n as u64;
        }
        Ok((written, last))
    }

    /// Tells the read-ahead about a read of `offset..end` ending in chunk `last`.
    fn after_read(&self, offset: u64, end: u64, last: u64) {
        let hire = {
            let mut st = self.crew.lock();
            self.crew.after_read(&mut st, offset, end, last)
        };
        self.crew.start(hire);
    }

    /// The crew (tests).
    #[cfg(test)]
    fn crew(&self) -> &Arc<Crew> {
        &self.crew
    }
}

/// The chunks of `offsets` (prefix sums) overlapping `offset..offset + len`.
fn spans(offsets: &[u64], offset: u64, len: usize) -> Vec<(u64, u64, u64)> {
    let chunks = offsets.len().saturating_sub(1);
    // The chunk holding `offset`: the last i with offsets[i] <= offset (skips empty chunks).
    let mut i = offsets.partition_point(|&o| o <= offset).saturating_sub(1);
    let stop = offset.saturating_add(len as u64);
    let mut out = Vec::new();
    while i < chunks && offsets[i] < stop {
        out.push((i as u64, offsets[i], offsets[i + 1]));
        i += 1;
    }
    out
}

impl FileContent for ChunkedText {
    fn rendered(&self) -> bool {
        true
    }
    fn known_size(&self) -> Option<u64> {
        let looked = {
            let mut st = self.crew.lock();
            if let Some(f) = st.full.clone() {
                if std::mem::take(&mut st.unpublished) {
                    drop(st);
                    self.publish(&f);
                }
                return Some(f.size());
            }
            st.looked
        };
        if looked {
            // Another object of the same key may have learnt it since.
            let i = self.crew.cache.lookup_offsets(&self.key, &self.owner)?;
            return Some(i.size());
        }
        let known = self.look_up(self.crew.source.num_chunks());
        let mut st = self.crew.lock();
        st.looked = true;
        if let (Some(i), None) = (&known, &st.full) {
            st.full = Some(i.clone());
            st.learnt.take();
        }
        known.map(|i| i.size())
    }

    fn size_for(&self, req: &dyn Requester) -> Result<u64, LayoutError> {
        Ok(self.offsets_for(req)?.size())
    }

    fn read(&self, offset: u64, len: usize, req: &dyn Requester) -> Result<Bytes, LayoutError> {
        if len == 0 {
            return Ok(Bytes::new());
        }
        let need = Need::Past(offset, offset.saturating_add(len as u64 - 1));
        let (namespace, spans) = match self.learn(need, req)? {
            Some(index) => {
                if offset >= index.size() {
                    return Ok(Bytes::new());
                }
                (index.namespace, spans(&index.offsets, offset, len))
            }
            // The learnt prefix covers the whole range.
            None => {
                let st = self.crew.lock();
                match &st.full {
                    // Completed meanwhile (the prefix moved into the index): read from that.
                    Some(index) => (index.namespace, spans(&index.offsets, offset, len)),
                    None => (self.crew.namespace, spans(st.learnt.prefix(), offset, len)),
                }
            }
        };
        // A read inside one chunk (most reads) is a view of the rendered chunk.
        if let &[(i, start, end)] = &spans[..] {
            let chunk = self.crew.chunk(req.ctx(), namespace, i, end - start)?;
            let from =
                usize::try_from(offset - start).map_err(|_| LayoutError::Overflow("offset"))?;
            let got = cache::lend(chunk, from, len);
            if !got.is_empty() {
                self.after_read(offset, offset + got.len() as u64, i);
            }
            return Ok(got);
        }
        scratch::filled(len, |buf| {
            let (written, last) = self.copy_out(req.ctx(), namespace, &spans, offset, buf)?;
            if written > 0 {
                self.after_read(offset, offset + written as u64, last);
            }
            Ok(written)
        })
    }

    fn size_progress(&self) -> Option<(u64, u64)> {
        let st = self.crew.lock();
        let total = self.crew.source.num_chunks();
        Some(match &st.full {
            Some(_) => (total, total),
            None => (st.learnt.frontier(), total),
        })
    }
}
