//! Test helpers: the table writer (re-exported from `tf::writer`) and a `ReadAt` wrapper that
//! records reads.

use std::borrow::Cow;
use std::sync::{Arc, Mutex};

use crate::source::{MemSource, ReadAt, SourceError};

pub(crate) use crate::codec::table::TableBuilder;

/// Records every `(offset, len)` read.
#[derive(Debug)]
pub(crate) struct CountingReadAt {
    pub(crate) inner: MemSource,
    pub(crate) reads: Mutex<Vec<(u64, usize)>>,
}

impl CountingReadAt {
    pub(crate) fn new(name: &str, data: Vec<u8>) -> Arc<Self> {
        Arc::new(CountingReadAt {
            inner: MemSource::new(name, data),
            reads: Mutex::new(Vec::new()),
        })
    }
    pub(crate) fn take(&self) -> Vec<(u64, usize)> {
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
