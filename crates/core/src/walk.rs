//! Every tensor of a model with its path in the mount, from metadata only: what `list`,
//! `verify`, `check` and the API's `keys` walk.

use std::sync::Arc;

pub use crate::fs::names::mount_path;
use modelfs_model::{DirEntry, Model, ModelError, Tensor};

/// One tensor of the model, found by walking its directories (metadata only).
pub struct Found {
    pub path: String,
    pub tensor: Arc<dyn Tensor>,
}

/// Every tensor of `model` in listing order, with its path in the mount.
pub fn walk(model: &dyn Model) -> Result<Vec<Found>, ModelError> {
    let mut out = Vec::new();
    let mut stack: Vec<Vec<Vec<u8>>> = vec![Vec::new()];
    while let Some(dir) = stack.pop() {
        let mut subdirs = Vec::new();
        for e in model.list_dir(&dir)? {
            match e {
                DirEntry::Dir(name) => {
                    let mut p = dir.clone();
                    p.push(name);
                    subdirs.push(p);
                }
                DirEntry::Reserved(name) => {
                    let mut p = dir.clone();
                    p.push(modelfs_model::own_component(&name));
                    subdirs.push(p);
                }
                DirEntry::Tensor(name) => {
                    let mut p = dir.clone();
                    p.push(name);
                    let tensor = model.tensor(&p)?;
                    let path = mount_path(&p);
                    out.push(Found { path, tensor });
                }
                DirEntry::Symlink { .. } | DirEntry::Document(_) | DirEntry::Alias { .. } => {}
            }
        }
        stack.extend(subdirs.into_iter().rev());
    }
    Ok(out)
}
