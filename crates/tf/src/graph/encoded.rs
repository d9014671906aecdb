//! A graph written in the protobuf text format, served as the wire bytes it stands for
//! (`pbtxt::parse`), so that everything above reads it as it reads a binary graph.

use std::borrow::Cow;
use std::sync::Arc;
use std::time::SystemTime;

use super::pbtxt::{parse, Message};
use super::scan::GraphKind;
use crate::model::BoxError;
use crate::source::{checked_range, FileIdentity, ReadAt, SourceError};

/// Text graphs bigger than this are refused: the text is parsed whole, in memory.
pub(crate) const MAX_TEXT: u64 = 4 << 30;

#[derive(Debug)]
pub(crate) struct Encoded {
    /// The text file: name, time and identity are its own.
    text: Arc<dyn ReadAt>,
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
        let bytes = {
            let data = text.read_at(0, len)?;
            parse::encode(&data, top).map_err(|e| format!("protobuf text format, {e}"))?
        };
        text.check_consistent()?;
        Ok(Encoded { text, bytes })
    }
}

impl ReadAt for Encoded {
    fn size(&self) -> u64 {
        self.bytes.len() as u64
    }
    fn name(&self) -> &str {
        self.text.name()
    }
    fn read_at(&self, offset: u64, len: usize) -> Result<Cow<'_, [u8]>, SourceError> {
        let range = checked_range(self.text.name(), offset, len, self.size())?;
        Ok(Cow::Borrowed(&self.bytes[range]))
    }
    fn mtime(&self) -> SystemTime {
        self.text.mtime()
    }
    fn identity(&self) -> Option<FileIdentity> {
        self.text.identity()
    }
    fn version(&self) -> Option<String> {
        self.text.version()
    }
}
