//! Names a model directory answers to without listing them: `NAME.rows/` (rows by id) and a
//! tensor's hidden files (`NAME.safetensors`, `NAME.stats.json`). `ls`, `find` and `du` see
//! the model as its own tools list it; a lookup by name finds these. Lookup builds the file's
//! content object (metadata only) so that a tensor without that form is ENOENT at once.

use std::sync::Arc;

use super::{FsError, Ino, Opened, Tree};
use crate::fs::listing::{Child, Hidden, Listing, ModelPath, NodeKind};
use modelfs_layout::{FileContent, LayoutCtx};
use modelfs_model::Tensor;

/// The tensor of `listing` whose files are `base.<suffix>`.
pub(super) fn listed_tensor(listing: &Listing, base: &str) -> Option<ModelPath> {
    let prefix = format!("{base}.");
    listing.children.iter().find_map(|c| match &c.kind {
        NodeKind::File {
            tensor,
            partition: None,
            layout,
        } if c.name.strip_suffix(layout.suffix()) == Some(&prefix) => Some(tensor.clone()),
        _ => None,
    })
}

impl Tree {
    /// `name` in model directory `dir` (inode `parent`, listing `listing`) when it is none of
    /// the listed names: a rows directory or a hidden file of a listed tensor, else `NotFound`.
    pub(super) fn lookup_hidden(
        &self,
        parent: Ino,
        dir: &ModelPath,
        listing: &Listing,
        name: &[u8],
    ) -> Result<Ino, FsError> {
        let text = std::str::from_utf8(name).map_err(|_| FsError::NotFound)?;
        let Some((base, file)) = Hidden::split(text) else {
            let child = self.rows_dir_child(dir, listing, name)?;
            return self.child_ino(parent, &child);
        };
        let tensor = match listed_tensor(listing, base) {
            // A listed tensor's `.json` is a listed file, not looked up here.
            Some(_) if file == Hidden::Json => return Err(FsError::NotFound),
            Some(t) => t,
            None if file.of_unlisted() => self.unlisted_table(dir, base)?,
            None => return Err(FsError::NotFound),
        };
        let child = Child {
            name: text.to_string(),
            kind: NodeKind::Hidden {
                tensor: tensor.clone(),
                file,
            },
        };
        if let Some(ino) = self.known_child(parent, &child.name)? {
            return Ok(ino);
        }
        let opened = self.open_hidden(&tensor, file)?;
        let ino = self.child_ino(parent, &child)?;
        let _ = self.node(ino)?.opened.set(Arc::new(opened));
        Ok(ino)
    }

    /// Hidden file `file` of `tensor`; `NotFound` when the tensor has no such form.
    pub(super) fn open_hidden(&self, tensor: &ModelPath, file: Hidden) -> Result<Opened, FsError> {
        let t = self.model().tensor(tensor)?;
        let content = hidden_content(file, t.clone(), tensor, &self.ctx).map_err(|why| {
            log::info!(
                "{}.{}: none: {why}",
                String::from_utf8_lossy(&t.meta().name),
                file.suffix()
            );
            FsError::NotFound
        })?;
        // Stats are learnt like a text file's size: by the work of the first read.
        let cheap = content.known_size().is_some();
        Ok(Opened::new(Some(t.clone()), content, t.meta().mtime, cheap))
    }
}

/// The content of hidden file `h` of `tensor`, or why it has none (metadata only).
fn hidden_content(
    h: Hidden,
    tensor: Arc<dyn Tensor>,
    path: &ModelPath,
    ctx: &Arc<LayoutCtx>,
) -> Result<Arc<dyn FileContent>, String> {
    match h {
        Hidden::Safetensors => modelfs_views::safetensors::single(tensor, ctx),
        Hidden::Stats => modelfs_stats::file(
            tensor,
            ctx.cache.offset_store().cloned(),
            crate::fs::names::mount_path(path),
        ),
        Hidden::Csr => modelfs_views::csr::file(tensor, ctx),
        Hidden::CsrIds => modelfs_views::csr::ids_file(tensor),
        Hidden::Json => Ok(modelfs_layout::json::json_content(tensor, ctx)),
    }
}
