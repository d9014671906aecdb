//! Test helpers: the table writer (re-exported from `tf::writer`) and a `ReadAt` wrapper that
//! records reads.

use std::sync::{Arc, Mutex};

use crate::source::{About, MemSource, ReadAt, ReadCtx, SourceError, To};

pub use crate::codec::table::TableBuilder;

/// Records every `(offset, len)` read.
#[derive(Debug)]
pub struct CountingReadAt {
    pub(crate) inner: MemSource,
    pub(crate) reads: Mutex<Vec<(u64, usize)>>,
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
    fn about(&self) -> &About {
        self.inner.about()
    }
    fn read_with(&self, ctx: &ReadCtx, offset: u64, to: To<'_>) -> Result<(), SourceError> {
        self.reads.lock().unwrap().push((offset, to.len() as usize));
        self.inner.read_with(ctx, offset, to)
    }
}

/// The 123-byte index of §3.5, byte for byte.
pub fn worked_example() -> Vec<u8> {
    let mut v = vec![0x00, 0x00, 0x06, 0x08, 0x01, 0x1a, 0x02, 0x08, 0x01];
    v.extend_from_slice(&[0x00, 0x07, 0x0b]);
    v.extend_from_slice(b"counter");
    v.extend_from_slice(&[
        0x08, 0x01, 0x12, 0x00, 0x28, 0x04, 0x35, 0xa6, 0x7b, 0x11, 0x3a,
    ]);
    v.extend_from_slice(&[0, 0, 0, 0, 1, 0, 0, 0]);
    v.extend_from_slice(&[0x00, 0x5f, 0xa0, 0x10, 0x73]);
    v.extend_from_slice(&[0, 0, 0, 0, 1, 0, 0, 0, 0x00, 0xc0, 0xf2, 0xa1, 0xb0]);
    v.extend_from_slice(&[0x00, 0x01, 0x02, 0x64, 0x00, 0x26]);
    v.extend_from_slice(&[0, 0, 0, 0, 1, 0, 0, 0]);
    v.extend_from_slice(&[0x00, 0x22, 0xb1, 0x61, 0x03]);
    v.extend_from_slice(&[0x2b, 0x08, 0x38, 0x0e]);
    v.resize(0x73, 0);
    v.extend_from_slice(&super::footer::TABLE_MAGIC);
    assert_eq!(v.len(), 123);
    v
}
