//! Source detection (SPEC §1): decides what SOURCE is and opens the matching reader.

use std::path::Path;
use std::sync::Arc;

use crate::model::Model;
use crate::options::Options;

/// Why a source could not be opened; the CLI prints it on one line and exits with status 2.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct OpenError(pub String);

/// Opens `path` as whatever source it is (TF prefix / index / data file / directory /
/// SavedModel / Angel model directory).
pub fn open_source(path: &Path, opts: &Options) -> Result<Arc<dyn Model>, OpenError> {
    let _ = opts;
    Err(OpenError(format!(
        "{}: not yet implemented",
        path.display()
    )))
}
