//! Test helpers: a table writer mirroring LevelDB's (separators shortened as TF does,
//! optional Snappy blocks) and a `ReadAt` wrapper that records reads.

use std::borrow::Cow;
use std::sync::{Arc, Mutex};

use crate::source::{MemSource, ReadAt, SourceError};
use crate::tf::coding::{crc32c_extend, mask_crc, put_varint64};

use super::block::tests::build_block;
use super::footer::TABLE_MAGIC;

/// Shortest separator between `last` and `next` (§3.4).
pub fn separator(last: &[u8], next: &[u8]) -> Vec<u8> {
    let p = last.iter().zip(next).take_while(|(a, b)| a == b).count();
    if p < last.len() && p < next.len() && last[p] < 0xff && last[p] + 1 < next[p] {
        let mut s = last[..p].to_vec();
        s.push(last[p] + 1);
        return s;
    }
    last.to_vec()
}

/// Short successor of the last key (§3.4).
pub fn successor(last: &[u8]) -> Vec<u8> {
    for (i, &b) in last.iter().enumerate() {
        if b != 0xff {
            let mut s = last[..i].to_vec();
            s.push(b + 1);
            return s;
        }
    }
    last.to_vec()
}

pub struct TableBuilder {
    pub block_size: usize,
    pub snappy: bool,
    out: Vec<u8>,
    pending: Vec<(Vec<u8>, Vec<u8>)>,
    pending_bytes: usize,
    index: Vec<(Vec<u8>, Vec<u8>)>,
    last_block_last_key: Option<Vec<u8>>,
}

impl TableBuilder {
    pub fn new(block_size: usize, snappy: bool) -> Self {
        TableBuilder {
            block_size,
            snappy,
            out: Vec::new(),
            pending: Vec::new(),
            pending_bytes: 0,
            index: Vec::new(),
            last_block_last_key: None,
        }
    }

    fn write_raw_block(&mut self, contents: &[u8], compress: bool) -> Vec<u8> {
        let (stored, ty) = if compress {
            (
                snap::raw::Encoder::new().compress_vec(contents).unwrap(),
                1u8,
            )
        } else {
            (contents.to_vec(), 0u8)
        };
        let mut handle = Vec::new();
        put_varint64(&mut handle, self.out.len() as u64);
        put_varint64(&mut handle, stored.len() as u64);
        self.out.extend_from_slice(&stored);
        self.out.push(ty);
        let crc = mask_crc(crc32c_extend(crc32c_extend(0, &stored), &[ty]));
        self.out.extend_from_slice(&crc.to_le_bytes());
        handle
    }

    fn flush(&mut self, next_key: Option<&[u8]>) {
        if self.pending.is_empty() {
            return;
        }
        let refs: Vec<(&[u8], &[u8])> =
            self.pending.iter().map(|(k, v)| (&k[..], &v[..])).collect();
        let contents = build_block(&refs, 16);
        let handle = self.write_raw_block(&contents, self.snappy);
        let last = self.pending.last().unwrap().0.clone();
        let sep = match next_key {
            Some(n) => separator(&last, n),
            None => successor(&last),
        };
        self.index.push((sep, handle));
        self.last_block_last_key = Some(last);
        self.pending.clear();
        self.pending_bytes = 0;
    }

    pub fn add(&mut self, key: &[u8], value: &[u8]) {
        if self.pending_bytes >= self.block_size {
            self.flush(Some(key));
        }
        self.pending_bytes += key.len() + value.len() + 3;
        self.pending.push((key.to_vec(), value.to_vec()));
    }

    pub fn finish(mut self) -> Vec<u8> {
        self.flush(None);
        let meta = self.write_raw_block(&[0, 0, 0, 0, 1, 0, 0, 0], false);
        let refs: Vec<(&[u8], &[u8])> = self.index.iter().map(|(k, v)| (&k[..], &v[..])).collect();
        let index_contents = build_block(&refs, 1);
        let index = self.write_raw_block(&index_contents, false);
        let mut footer = meta;
        footer.extend_from_slice(&index);
        footer.resize(40, 0);
        footer.extend_from_slice(&TABLE_MAGIC);
        self.out.extend_from_slice(&footer);
        self.out
    }
}

/// Records every `(offset, len)` read.
#[derive(Debug)]
pub struct CountingReadAt {
    pub inner: MemSource,
    pub reads: Mutex<Vec<(u64, usize)>>,
}

impl CountingReadAt {
    pub fn new(name: &str, data: Vec<u8>) -> Arc<Self> {
        Arc::new(CountingReadAt {
            inner: MemSource::new(name, data),
            reads: Mutex::new(Vec::new()),
        })
    }
    pub fn take(&self) -> Vec<(u64, usize)> {
        std::mem::take(&mut *self.reads.lock().unwrap())
    }
}

impl ReadAt for CountingReadAt {
    fn size(&self) -> u64 {
        self.inner.size()
    }
    fn name(&self) -> &str {
        self.inner.name()
    }
    fn read_at(&self, offset: u64, len: usize) -> Result<Cow<'_, [u8]>, SourceError> {
        self.reads.lock().unwrap().push((offset, len));
        self.inner.read_at(offset, len)
    }
}
