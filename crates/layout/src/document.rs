//! A reader's document (`model::Document`: a signature, the graph as text) served like any
//! text layout: its chunks go through `ChunkedText`, so it has an exact size once learnt, any
//! offset renders only the chunks it touches, and rendered chunks share the mount's cache.

use std::sync::Arc;

use super::text::{ChunkSource, ChunkedText};
use super::{FileContent, LayoutCtx, LayoutError};
use crate::model::Document;
use crate::source::ReadCtx;

struct Chunks(Arc<dyn Document>);

impl ChunkSource for Chunks {
    fn num_chunks(&self) -> u64 {
        self.0.chunks()
    }

    fn render(&self, _: &ReadCtx, chunk: u64, out: &mut Vec<u8>) -> Result<(), LayoutError> {
        Ok(self.0.render(chunk, out)?)
    }
}

/// The file content of `doc`. Renders nothing until read or sized.
pub(crate) fn content(doc: Arc<dyn Document>, ctx: &LayoutCtx) -> Arc<dyn FileContent> {
    Arc::new(ChunkedText::new(
        Arc::new(Chunks(doc.clone())),
        super::cache::Owner::Doc(doc),
        "document",
        ctx.cache.clone(),
    ))
}
