//! A file whose content object needs decoded data to be built (a sparse tensor's entries), so
//! that building the tree or a `.json` never decodes: the build runs on the first `size` or
//! `read_at`. A failed build is retried on the next access (the cause may be transient); two
//! racing first readers may both build, and the first result stays.

use bytes::Bytes;
use std::sync::{Arc, OnceLock};

use super::{FileContent, LayoutError, Requester};

type Build = Box<dyn Fn() -> Result<Arc<dyn FileContent>, LayoutError> + Send + Sync>;

pub struct Lazy {
    build: Build,
    built: OnceLock<Arc<dyn FileContent>>,
}

impl Lazy {
    /// The file's content, built by `build` on first use.
    pub fn content(
        build: impl Fn() -> Result<Arc<dyn FileContent>, LayoutError> + Send + Sync + 'static,
    ) -> Arc<dyn FileContent> {
        Arc::new(Lazy {
            build: Box::new(build),
            built: OnceLock::new(),
        })
    }

    fn get(&self) -> Result<&Arc<dyn FileContent>, LayoutError> {
        if let Some(c) = self.built.get() {
            return Ok(c);
        }
        let c = (self.build)()?;
        Ok(self.built.get_or_init(|| c))
    }
}

impl FileContent for Lazy {
    fn known_size(&self) -> Option<u64> {
        self.built.get()?.known_size()
    }
    fn size_for(&self, req: &dyn Requester) -> Result<u64, LayoutError> {
        self.get()?.size_for(req)
    }
    fn read(&self, offset: u64, len: usize, req: &dyn Requester) -> Result<Bytes, LayoutError> {
        self.get()?.read(offset, len, req)
    }
    fn size_progress(&self) -> Option<(u64, u64)> {
        self.built.get()?.size_progress()
    }
    /// Not built yet: not known to be cheap to read ahead.
    fn rendered(&self) -> bool {
        self.built.get().is_none_or(|c| c.rendered())
    }
}
