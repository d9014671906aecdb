//! A remote object as a `ReadAt`: reads are served from aligned blocks (`blocks.rs`); a reader
//! that keeps reading where it stopped gets the following blocks streamed ahead of it by one
//! long request (`stream.rs`), up to `MAX_AHEAD` blocks ahead (bounded by half the block
//! cache); a seek stops the stream. A pass that does not need its bytes in order (a checksum)
//! reads in up to `PASS_READERS` parts at once, each a sequential reader with its own stream:
//! one connection gets what a store or a DataNode gives one reader, several get more.

use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use futures::{StreamExt, TryStreamExt};

use super::blocks::{Blocks, ObjectRef};
use super::runtime;
use super::stream::Stream;
use crate::source::cursor::Cursor;
use crate::source::read::each_run;
use crate::source::{
    checked_end, scratch, About, PartVisit, ReadAt, ReadCtx, SourceError, To, Visit,
};

/// Most blocks fetched ahead of a sequential reader.
const MAX_AHEAD: u64 = 8;
/// How far from where the last read ended a read may start and still count as sequential.
const SEQUENTIAL_SLACK: u64 = 4 << 20;
/// Most blocks of one large read requested at once.
const PARALLEL: usize = 8;
/// Most parts of an unordered pass read at once.
const PASS_READERS: u64 = 4;
/// Fewest blocks worth a part (and its two requests) of their own.
const PASS_PART_MIN: u64 = 4;

pub(crate) struct RemoteFile {
    about: About,
    obj: Arc<ObjectRef>,
    blocks: Arc<Blocks>,
    reader: Mutex<Reader>,
}

/// Where the reader is, and the read-ahead serving it.
struct Reader {
    /// End of the last read (`u64::MAX`: none yet).
    end: u64,
    stream: Option<Stream>,
}

impl Default for Reader {
    fn default() -> Reader {
        Reader {
            end: u64::MAX,
            stream: None,
        }
    }
}

impl std::fmt::Debug for RemoteFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RemoteFile")
            .field("url", &self.obj.url)
            .finish()
    }
}

impl RemoteFile {
    pub(crate) fn new(obj: ObjectRef, blocks: Arc<Blocks>) -> RemoteFile {
        let mtime = obj
            .last_modified
            .and_then(|t| u64::try_from(t.timestamp_millis()).ok())
            .map_or(SystemTime::UNIX_EPOCH, |ms| {
                SystemTime::UNIX_EPOCH + std::time::Duration::from_millis(ms)
            });
        let version = obj.etag.clone();
        RemoteFile {
            about: About {
                version: version.or_else(|| obj.last_modified.map(|t| t.to_rfc3339())),
                mtime,
                ..About::named(obj.url.clone(), obj.size)
            },
            obj: Arc::new(obj),
            blocks,
            reader: Mutex::new(Reader::default()),
        }
    }

    /// Keeps a stream ahead of a sequential reader (whose read ends in block `last`); stops
    /// it on a seek. The reader is the cursor's of `ctx` (an open file handle's), else the
    /// object's own.
    fn read_ahead(&self, ctx: &ReadCtx, offset: u64, end: u64, last: u64) {
        let step = |r: &mut Reader| self.advance(r, offset, end, last);
        if Cursor::with_state(ctx, self.obj.id, Reader::default, step).is_none() {
            step(&mut self.reader.lock().unwrap_or_else(|e| e.into_inner()));
        }
    }

    fn advance(&self, r: &mut Reader, offset: u64, end: u64, last: u64) {
        // The kernel's read-ahead sends several reads at once, answered by several threads:
        // they arrive a little out of order, and still form one sequential reader.
        let sequential = r.end != u64::MAX && offset.abs_diff(r.end) <= SEQUENTIAL_SLACK;
        r.end = if sequential { r.end.max(end) } else { end };
        if !sequential {
            r.stream = None;
            return;
        }
        if let Some(s) = r.stream.as_ref().filter(|s| !s.is_done()) {
            s.advance(last);
            return;
        }
        let bs = self.blocks.block_size;
        let final_block = self.obj.size.saturating_sub(1) / bs;
        let mut first = last + 1;
        while first <= final_block && self.blocks.cached(&self.obj, first).is_some() {
            first += 1;
        }
        // Blocks kept on disk are read from there, not fetched again.
        if first > final_block || self.blocks.on_disk(&self.obj, first) {
            r.stream = None;
            return;
        }
        let window = MAX_AHEAD.min(self.blocks.cap() / bs / 2).max(1);
        r.stream = Some(Stream::start(
            Arc::clone(&self.blocks),
            Arc::clone(&self.obj),
            first,
            last,
            window,
        ));
    }

    /// `len` bytes at `offset` (inside the object) as a view of their block, when they lie
    /// in one; `None` otherwise.
    fn in_one_block(
        &self,
        ctx: &ReadCtx,
        offset: u64,
        len: usize,
    ) -> Option<Result<bytes::Bytes, SourceError>> {
        let bs = self.blocks.block_size;
        let end = offset + len as u64;
        let i = offset / bs;
        if len == 0 || (end - 1) / bs != i {
            return None;
        }
        self.read_ahead(ctx, offset, end, i);
        let got = runtime().block_on(self.blocks.get(&self.obj, i));
        Some(got.and_then(|block| {
            let from = (offset - self.blocks.range(&self.obj, i).start) as usize;
            let to = from + len;
            if to > block.len() {
                return Err(SourceError::Remote {
                    url: self.obj.url.clone(),
                    cause: format!("block {i} is short"),
                });
            }
            Ok(block.slice(from..to))
        }))
    }
}

impl ReadAt for RemoteFile {
    fn about(&self) -> &About {
        &self.about
    }

    /// Blocks are checked against the object's ETag as they arrive: nothing to check after.
    fn read_with(&self, ctx: &ReadCtx, offset: u64, to: To<'_>) -> Result<(), SourceError> {
        if let To::Runs(starts, out) = to {
            return each_run(&self.obj.url, offset, starts, out, |at, run| {
                checked_end(&self.obj.url, at, run.len() as u64, self.obj.size)?;
                self.fill(ctx, at, run)
            });
        }
        let end = checked_end(&self.obj.url, offset, to.len(), self.obj.size)?;
        match to {
            To::Fill(out) => self.fill(ctx, offset, out),
            To::Bytes(len, got) => {
                *got = match self.in_one_block(ctx, offset, len) {
                    Some(got) => got?,
                    None => scratch::filled(len, |out| self.fill(ctx, offset, out).map(|()| len))?,
                };
                Ok(())
            }
            To::Whole(len, visit) => {
                let got = match self.in_one_block(ctx, offset, len) {
                    Some(got) => got?,
                    None => scratch::filled(len, |out| self.fill(ctx, offset, out).map(|()| len))?,
                };
                visit(&got);
                Ok(())
            }
            To::Pieces(_, visit) => self.pieces(ctx, offset, end, visit),
            To::Parts(_, visit) => self.parts(ctx, offset, end, visit),
            To::Runs(..) => unreachable!("read run by run above"),
        }
    }
}

impl RemoteFile {
    /// Block by block, as a sequential reader: the first block by its own request, the rest by
    /// one streamed request running ahead (2 GETs for a tensor of any size), each block
    /// handed over as it arrives and kept in the block caches for the reads that follow.
    fn pieces(
        &self,
        ctx: &ReadCtx,
        offset: u64,
        end: u64,
        visit: Visit<'_>,
    ) -> Result<(), SourceError> {
        // Counts as continuing a read that ended here: the stream starts with the first piece.
        let start = |r: &mut Reader| r.end = offset;
        if Cursor::with_state(ctx, self.obj.id, Reader::default, start).is_none() {
            start(&mut self.reader.lock().unwrap_or_else(|e| e.into_inner()));
        }
        let bs = self.blocks.block_size;
        let mut at = offset;
        while at < end {
            let piece_end = end.min((at / bs + 1) * bs);
            let piece = match self.in_one_block(ctx, at, (piece_end - at) as usize) {
                Some(got) => got?,
                None => {
                    return Err(SourceError::Remote {
                        url: self.obj.url.clone(),
                        cause: format!("bytes {at}..{piece_end} are not one block"),
                    })
                }
            };
            visit(&piece);
            at = piece_end;
        }
        Ok(())
    }

    /// Bytes `offset..end` in up to `PASS_READERS` block-aligned parts read at once, each by a
    /// reader of its own (a cursor, so each keeps its own stream ahead). Each stream holds at
    /// most its window of blocks ahead of its reader, so all of them together stay within the
    /// memory cache: no block fetched ahead is evicted before its reader gets to it.
    fn parts(
        &self,
        ctx: &ReadCtx,
        offset: u64,
        end: u64,
        visit: PartVisit<'_>,
    ) -> Result<(), SourceError> {
        let bs = self.blocks.block_size;
        let (first, last) = (offset / bs, end.saturating_sub(1) / bs);
        let count = (last + 1).saturating_sub(first);
        let window = MAX_AHEAD.min(self.blocks.cap() / bs / 2).max(1);
        let readers = (self.blocks.cap() / bs / window)
            .min(count / PASS_PART_MIN)
            .clamp(1, PASS_READERS);
        if readers == 1 || end <= offset {
            let mut in_order = crate::source::pieces_in_order(offset, visit);
            return self.pieces(ctx, offset, end, &mut in_order);
        }
        let per = count.div_ceil(readers);
        let bounds: Vec<(u64, u64)> = (0..readers)
            .map(|i| {
                let from = offset.max((first + i * per) * bs);
                let to = end.min((first + (i + 1) * per) * bs);
                (from, to)
            })
            .filter(|(from, to)| from < to)
            .collect();
        debug_assert_eq!(bounds.first().map(|b| b.0), Some(offset));
        debug_assert_eq!(bounds.last().map(|b| b.1), Some(end));
        debug_assert!(bounds.windows(2).all(|w| w[0].1 == w[1].0));
        let results: Vec<Result<(), SourceError>> = std::thread::scope(|s| {
            let handles: Vec<_> = bounds
                .iter()
                .map(|&(from, to)| {
                    s.spawn(move || {
                        let cursor = Arc::new(Cursor::default());
                        let own = ReadCtx::of(&cursor);
                        let mut in_order = crate::source::pieces_in_order(from, visit);
                        self.pieces(&own, from, to, &mut in_order)
                    })
                })
                .collect();
            handles
                .into_iter()
                .map(|h| {
                    h.join().unwrap_or_else(|_| {
                        Err(SourceError::Remote {
                            url: self.obj.url.clone(),
                            cause: "a reader of a checksum pass panicked".into(),
                        })
                    })
                })
                .collect()
        });
        results.into_iter().collect()
    }

    fn fill(&self, ctx: &ReadCtx, offset: u64, out: &mut [u8]) -> Result<(), SourceError> {
        if out.is_empty() {
            return Ok(());
        }
        let end = offset + out.len() as u64;
        let bs = self.blocks.block_size;
        let (first, last) = (offset / bs, (end - 1) / bs);
        self.read_ahead(ctx, offset, end, last);
        // Up to `PARALLEL` blocks of one read in flight, copied in order as they arrive,
        // straight from the block into the caller's buffer.
        runtime().block_on(async {
            let mut fetched = futures::stream::iter(first..=last)
                .map(|i| async move { self.blocks.get(&self.obj, i).await.map(|b| (i, b)) })
                .buffered(PARALLEL);
            while let Some((i, block)) = fetched.try_next().await? {
                let range = self.blocks.range(&self.obj, i);
                let start = range.start;
                let from = offset.max(start);
                let to = end.min(start + block.len() as u64);
                // The block must hold all of its range the read wants: a gap would be zeros.
                if to <= from || to < end.min(range.end) {
                    return Err(SourceError::Remote {
                        url: self.obj.url.clone(),
                        cause: format!("block {i} is short"),
                    });
                }
                out[(from - offset) as usize..(to - offset) as usize]
                    .copy_from_slice(&block[(from - start) as usize..(to - start) as usize]);
            }
            Ok::<(), SourceError>(())
        })
    }
}

/// The object `m/data` holding `data`, put into `store` and opened with 64 KiB blocks and
/// `cache` bytes of them (the tests of the remote source).
#[cfg(test)]
pub(crate) fn test_file(
    store: Arc<dyn object_store::ObjectStore>,
    data: &[u8],
    cache: u64,
) -> RemoteFile {
    use object_store::{ObjectStoreExt, PutPayload};
    let path = object_store::path::Path::from("m/data");
    let put = runtime()
        .block_on(store.put(&path, PutPayload::from(data.to_vec())))
        .unwrap();
    let obj = ObjectRef {
        id: 1,
        url: "mem://m/data".into(),
        path,
        size: data.len() as u64,
        etag: put.e_tag,
        last_modified: None,
    };
    RemoteFile::new(obj, Arc::new(Blocks::new(store, 64 << 10, cache, None)))
}

#[cfg(test)]
mod tests {
    use super::test_file;
    use super::*;
    use crate::source::ReadExt;
    use object_store::memory::InMemory;

    /// A remote file over an in-memory store with 64 KiB blocks.
    fn remote(data: &[u8]) -> RemoteFile {
        test_file(Arc::new(InMemory::new()), data, 1 << 20)
    }

    #[test]
    fn reads_within_a_block_are_views_of_it() {
        let data: Vec<u8> = (0..300_000u32).map(|i| (i * 7 % 251) as u8).collect();
        let f = remote(&data);
        let bs = 64 << 10;
        let ctx = ReadCtx::none();
        for (off, len) in [
            (0usize, 10usize),
            (5, bs - 5),
            (bs, bs),
            (bs - 1, 2),
            (299_990, 10),
        ] {
            let within = off / bs == (off + len - 1) / bs;
            let (a, b) = (
                f.read(ctx, off as u64, len).unwrap(),
                f.read(ctx, off as u64, len).unwrap(),
            );
            assert_eq!(&a[..], &data[off..off + len], "{off}+{len}");
            // Held together, two reads of one block point into it; copies would not.
            assert_eq!(a.as_ptr() == b.as_ptr(), within, "{off}+{len}");
            let mut out = vec![0u8; len];
            f.read_into(ctx, off as u64, &mut out).unwrap();
            assert_eq!(out, &data[off..off + len]);
        }
        assert!(f.read(ctx, 299_995, 10).is_err(), "past the end");
        assert!(f.read_into(ctx, 299_995, &mut [0u8; 10]).is_err());
    }

    #[test]
    fn two_readers_keep_their_own_read_ahead() {
        let data: Vec<u8> = (0..(2u32 << 20)).map(|i| (i * 13 % 251) as u8).collect();
        let f = remote(&data);
        let bs = 64 << 10;
        let (a, b) = (Arc::new(Cursor::default()), Arc::new(Cursor::default()));
        let (a, b) = (ReadCtx::of(&a), ReadCtx::of(&b));
        // Interleaved sequential readers at blocks 0.. and 16..: each read continues its own
        // reader's, so neither is a seek that stops the other's stream.
        for k in 0..4 {
            for (c, base) in [(&a, 0), (&b, 16)] {
                let off = (base + k) * bs;
                assert_eq!(
                    &f.read(c, off as u64, bs).unwrap()[..],
                    &data[off..off + bs]
                );
            }
        }
        for c in [&a, &b] {
            let streaming = Cursor::with_state(c, 1, Reader::default, |r| r.stream.is_some());
            assert_eq!(streaming, Some(true));
        }
        // Reads without a handle use the object's own reader; these had handles.
        assert_eq!(f.reader.lock().unwrap().end, u64::MAX);
    }

    #[test]
    fn pieces_are_the_bytes_block_by_block() {
        let data: Vec<u8> = (0..300_000u32).map(|i| (i * 7 % 251) as u8).collect();
        let f = remote(&data);
        let bs = 64 << 10;
        for (off, len) in [(0usize, 300_000usize), (1000, 200_000), (bs - 1, 2), (5, 0)] {
            let mut got = Vec::new();
            let mut pieces = 0;
            f.for_each_piece(ReadCtx::none(), off as u64, len as u64, &mut |p| {
                let start = off + got.len();
                assert_eq!(
                    start / bs,
                    (start + p.len() - 1) / bs,
                    "a piece spans blocks"
                );
                got.extend_from_slice(p);
                pieces += 1;
            })
            .unwrap();
            assert_eq!(got, &data[off..off + len]);
            assert_eq!(
                pieces,
                if len == 0 {
                    0
                } else {
                    (off + len - 1) / bs - off / bs + 1
                }
            );
        }
        let past = f.for_each_piece(ReadCtx::none(), 299_000, 2000, &mut |_| {});
        assert!(past.is_err());
    }

    #[test]
    fn a_checksum_pass_reads_parts_at_once() {
        let data: Vec<u8> = (0..(4u32 << 20)).map(|i| (i * 31 % 253) as u8).collect();
        let bs = 64 << 10;
        for (off, len) in [(0usize, 4usize << 20), (1000, 3 << 20), (bs - 1, 2), (5, 0)] {
            // A cache of the whole object: room for four readers' windows.
            let f = test_file(Arc::new(InMemory::new()), &data, 5 << 20);
            let seen = Mutex::new(Vec::new());
            f.read_with(
                ReadCtx::none(),
                off as u64,
                To::Parts(len as u64, &|at, p| {
                    let at = at as usize;
                    assert_eq!(p, &data[at..at + p.len()]);
                    seen.lock().unwrap().push((at, std::thread::current().id()));
                }),
            )
            .unwrap();
            let seen = seen.into_inner().unwrap();
            let threads: std::collections::HashSet<_> = seen.iter().map(|s| s.1).collect();
            // A pass of 48 blocks or more is read by four readers; a short one by its caller.
            let blocks = (off + len).div_ceil(bs) - off / bs;
            let readers = if blocks >= 16 { 4 } else { 1 };
            assert_eq!(threads.len(), readers.min(seen.len()), "{off}+{len}");
        }
        // In a small cache, fewer readers: their windows would not fit.
        let f = test_file(Arc::new(InMemory::new()), &data, 20 * bs as u64);
        let ids = Mutex::new(std::collections::HashSet::new());
        f.read_with(
            ReadCtx::none(),
            0,
            To::Parts(data.len() as u64, &|_, _| {
                ids.lock().unwrap().insert(std::thread::current().id());
            }),
        )
        .unwrap();
        assert_eq!(ids.into_inner().unwrap().len(), 2);
    }
}
