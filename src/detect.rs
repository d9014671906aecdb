//! What a SOURCE is (SPEC §1): each reader recognises its own forms (`tf::detect`,
//! `angel::is_model_dir`); this asks them in turn.

use std::path::Path;
use std::sync::Arc;

use crate::model::{Model, OpenError, ReaderOptions};

/// The model at `path`, read by whichever reader recognises it.
pub fn model_at(path: &Path, opts: &ReaderOptions) -> Result<Arc<dyn Model>, OpenError> {
    if let Some(model) = crate::tf::detect::open(path, opts)? {
        return Ok(model);
    }
    let fs = &opts.storage;
    if crate::angel::is_model_dir(fs, path) {
        return crate::angel::open(path, opts);
    }
    let missing = match fs.is_local() {
        true => std::fs::symlink_metadata(path).is_err(),
        false => fs
            .kind(path)
            .map_err(|e| OpenError::unreadable(path, e))?
            .is_none(),
    };
    if missing {
        return Err(OpenError::Missing {
            path: path.to_path_buf(),
        });
    }
    let prefix = crate::tf::detect::strip_checkpoint_suffix(path);
    let looked_for = if fs.is_dir(path) {
        "*.index checkpoints, a `checkpoint` state file, a SavedModel with \
         variables/variables.index, or an Angel model directory"
            .to_string()
    } else {
        format!(
            "a TensorFlow checkpoint, {}",
            crate::tf::detect::index_path(&prefix).display()
        )
    };
    Err(OpenError::NotRecognised {
        path: path.to_path_buf(),
        looked_for,
    })
}
