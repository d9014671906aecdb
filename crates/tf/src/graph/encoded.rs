//! A graph written in the protobuf text format, served as the wire bytes it stands for
//! (`pbtxt::parse`), so that everything above reads it as it reads a binary graph.

use std::sync::Arc;

use super::pbtxt::{parse, Message};
use super::scan::GraphKind;
use crate::model::BoxError;
use crate::source::{serve_slice, About, ReadAt, ReadCtx, ReadExt, SourceError, To};

/// Text graphs bigger than this are refused: the text is parsed whole, in memory.
pub(crate) const MAX_TEXT: u64 = 4 << 30;

#[derive(Debug)]
pub(crate) struct Encoded {
    /// The text file's name, time and identity; the size of the wire bytes.
    about: About,
    bytes: Vec<u8>,
}

impl Encoded {
    /// Parses the whole of `text`, a `kind` message.
    pub(crate) fn new(text: Arc<dyn ReadAt>, kind: GraphKind) -> Result<Encoded, BoxError> {
        let size = text.size();
        if size > MAX_TEXT {
            let e = format!("a text graph of {size} bytes (at most {MAX_TEXT} are read)");
            return Err(e.into());
        }
        let len = usize::try_from(size)?;
        let top = match kind {
            GraphKind::GraphDef => Message::GraphDef,
            GraphKind::MetaGraphDef => Message::MetaGraphDef,
            GraphKind::SavedModel => Message::SavedModel,
        };
        let encode = |data: &[u8]| parse::encode(data, top);
        let bytes = text
            .with_bytes(ReadCtx::none(), 0, len, encode)?
            .map_err(|e| format!("protobuf text format, {e}"))?;
        let about = About {
            size: bytes.len() as u64,
            ..text.about().clone()
        };
        Ok(Encoded { about, bytes })
    }
}

impl ReadAt for Encoded {
    fn about(&self) -> &About {
        &self.about
    }
    fn read_with(&self, _: &ReadCtx, offset: u64, to: To<'_>) -> Result<(), SourceError> {
        serve_slice(&self.about.name, &self.bytes, offset, to)
    }
}
