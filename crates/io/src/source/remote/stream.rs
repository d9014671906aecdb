//! Read-ahead for a sequential reader as one long GET (mountpoint-s3's prefetcher is the
//! model): a single request for the blocks after the reader, whose body is cut into blocks as
//! it arrives. Stores charge per request and answer each after a first-byte delay, so one
//! request per run of blocks beats one per block.
//!
//! Invariants: the stream produces block `i` only while the reader is at most `window` blocks
//! behind it, so what it holds is bounded (the TCP connection waits meanwhile); it claims a
//! block before producing it and skips blocks someone else claimed or cached; when it stops
//! (the reader seeks away, the request fails) the blocks it claimed are released unanswered
//! and their waiters fetch them themselves.

use std::collections::BTreeMap;
use std::sync::Arc;

use futures::StreamExt;
use tokio::sync::watch;

use super::blocks::{Blocks, Claim, ObjectRef};
use super::runtime;

/// Most blocks one streaming request covers (8 MiB blocks: 2 GiB).
const MAX_BLOCKS: u64 = 256;

/// A running stream; dropping it stops the request.
pub(crate) struct Stream {
    reader: watch::Sender<u64>,
    task: tokio::task::JoinHandle<()>,
}

impl Stream {
    /// Streams blocks from `first` (at most `MAX_BLOCKS`, never past the object's end) for a
    /// reader now at block `reader_at`, staying at most `window` blocks ahead of it.
    pub(crate) fn start(
        blocks: Arc<Blocks>,
        obj: Arc<ObjectRef>,
        first: u64,
        reader_at: u64,
        window: u64,
    ) -> Stream {
        let (reader, rx) = watch::channel(reader_at);
        let last_block = obj.size.saturating_sub(1) / blocks.block_size;
        let last = last_block.min(first.saturating_add(MAX_BLOCKS - 1));
        let task = runtime().spawn(run(blocks, obj, first..=last, rx, window));
        Stream { reader, task }
    }

    /// The reader has reached block `block`.
    pub(crate) fn advance(&self, block: u64) {
        self.reader.send_if_modified(|at| {
            let moved = block > *at;
            *at = (*at).max(block);
            moved
        });
    }

    /// Whether the stream has ended (every block produced, or stopped by a fault).
    pub(crate) fn is_done(&self) -> bool {
        self.task.is_finished()
    }
}

impl Drop for Stream {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn run(
    blocks: Arc<Blocks>,
    obj: Arc<ObjectRef>,
    wanted: std::ops::RangeInclusive<u64>,
    mut reader: watch::Receiver<u64>,
    window: u64,
) {
    let (first, last) = (*wanted.start(), *wanted.end());
    let mut held = BTreeMap::new();
    let mut claimed = first;
    let mut claim_up_to = |edge: u64, held: &mut BTreeMap<u64, _>| {
        while claimed <= edge.min(last) {
            if let Claim::Produce(tx) = blocks.claim(&obj, claimed) {
                held.insert(claimed, tx);
            }
            claimed += 1;
        }
    };
    // Claimed before the request, so that the reader waits for these instead of asking.
    claim_up_to(reader.borrow().saturating_add(window), &mut held);
    let range = blocks.range(&obj, first).start..blocks.range(&obj, last).end;
    let mut body = match blocks.request(&obj, range).await {
        Ok(r) => r.into_stream(),
        Err(e) => {
            log::debug!("read-ahead stopped: {e}");
            return;
        }
    };
    // Bytes of the body past the block being filled.
    let mut rest = bytes::Bytes::new();
    for i in first..=last {
        if reader
            .wait_for(|&at| i <= at.saturating_add(window))
            .await
            .is_err()
        {
            return;
        }
        let at = *reader.borrow();
        claim_up_to(at.saturating_add(window), &mut held);
        // Claims reach at most `window` blocks past the reader, and block `i` is not past it.
        debug_assert!(held
            .keys()
            .all(|&k| k >= i && k <= at.saturating_add(window)));
        let r = blocks.range(&obj, i);
        let want = (r.end - r.start) as usize;
        // A recycled buffer per block, filled straight from the body's chunks.
        let mut buf = blocks.pool.take(want);
        loop {
            let take = rest.len().min(want - buf.len());
            buf.extend_from_slice(&rest.split_to(take));
            if buf.len() == want {
                break;
            }
            match body.next().await {
                Some(Ok(chunk)) => rest = chunk,
                Some(Err(e)) => {
                    log::debug!("read-ahead of {} stopped: {e}", obj.url);
                    return;
                }
                None => {
                    log::debug!("read-ahead of {}: the response ended early", obj.url);
                    return;
                }
            }
        }
        debug_assert_eq!(buf.len() as u64, r.end - r.start);
        let block = blocks.pool.freeze(buf);
        if let Some(tx) = held.remove(&i) {
            blocks.keep_on_disk(&obj, i, block.clone()).await;
            let _ = blocks.publish(&obj, i, &tx, Ok(block));
        }
    }
}
