//! A remote object as a `ReadAt`: reads are served from aligned blocks (`blocks.rs`); a reader
//! that keeps reading where it stopped gets the following blocks fetched ahead of it, in a
//! window that doubles with every sequential read up to `MAX_AHEAD` blocks (mountpoint-s3's
//! prefetcher is the model), and falls back to nothing ahead on a seek.

use std::borrow::Cow;
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use futures::{StreamExt, TryStreamExt};

use super::blocks::{Blocks, ObjectRef};
use super::runtime;
use crate::source::{checked_range, ReadAt, SourceError};

/// Most blocks fetched ahead of a sequential reader.
const MAX_AHEAD: u64 = 8;
/// Most blocks of one large read requested at once.
const PARALLEL: usize = 8;

pub(crate) struct RemoteFile {
    obj: Arc<ObjectRef>,
    blocks: Arc<Blocks>,
    /// (end of the last read, blocks to fetch ahead).
    stream: Mutex<(u64, u64)>,
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
        RemoteFile {
            obj: Arc::new(obj),
            blocks,
            stream: Mutex::new((u64::MAX, 0)),
        }
    }

    /// Blocks to fetch ahead of a read of `offset..end`: more while the reader is sequential.
    fn ahead(&self, offset: u64, end: u64) -> u64 {
        let mut s = self.stream.lock().unwrap_or_else(|e| e.into_inner());
        let ahead = if offset == s.0 {
            (s.1 * 2).clamp(1, MAX_AHEAD)
        } else {
            0
        };
        *s = (end, ahead);
        ahead
    }

    fn prefetch(&self, first: u64, count: u64) {
        let last = self.obj.size.saturating_sub(1) / self.blocks.block_size;
        for index in first..first.saturating_add(count).min(last.saturating_add(1)) {
            if self.blocks.cached(&self.obj, index).is_some() {
                continue;
            }
            let (obj, blocks) = (Arc::clone(&self.obj), Arc::clone(&self.blocks));
            // Failures are left to the read that needs the block (it retries and reports).
            runtime().spawn(async move {
                let _ = blocks.get(&obj, index).await;
            });
        }
    }
}

impl ReadAt for RemoteFile {
    fn size(&self) -> u64 {
        self.obj.size
    }

    fn name(&self) -> &str {
        &self.obj.url
    }

    fn mtime(&self) -> SystemTime {
        self.obj
            .last_modified
            .and_then(|t| u64::try_from(t.timestamp_millis()).ok())
            .map_or(SystemTime::UNIX_EPOCH, |ms| {
                SystemTime::UNIX_EPOCH + std::time::Duration::from_millis(ms)
            })
    }

    fn version(&self) -> Option<String> {
        let etag = self.obj.etag.clone();
        etag.or_else(|| self.obj.last_modified.map(|t| t.to_rfc3339()))
    }

    fn read_at(&self, offset: u64, len: usize) -> Result<Cow<'_, [u8]>, SourceError> {
        checked_range(&self.obj.url, offset, len, self.obj.size)?;
        if len == 0 {
            return Ok(Cow::Borrowed(&[]));
        }
        let end = offset + len as u64;
        let bs = self.blocks.block_size;
        let (first, last) = (offset / bs, (end - 1) / bs);
        let ahead = self.ahead(offset, end);
        if ahead > 0 {
            self.prefetch(last + 1, ahead);
        }
        let mut out = Vec::with_capacity(len);
        // Up to `PARALLEL` blocks of one read in flight, copied in order as they arrive.
        runtime().block_on(async {
            let mut fetched = futures::stream::iter(first..=last)
                .map(|i| async move { self.blocks.get(&self.obj, i).await.map(|b| (i, b)) })
                .buffered(PARALLEL);
            while let Some((i, block)) = fetched.try_next().await? {
                let start = self.blocks.range(&self.obj, i).start;
                let from = offset.max(start) - start;
                let to = end.min(start + block.len() as u64) - start;
                out.extend_from_slice(&block[from as usize..to as usize]);
            }
            Ok::<(), SourceError>(())
        })?;
        Ok(Cow::Owned(out))
    }
}
