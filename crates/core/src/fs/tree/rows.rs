//! `NAME.rows/`: rows of a keyed tensor by id. Like the hidden views, the directory is there by
//! name only (so `ls`, `find` and `du` see the model as before), and it lists nothing but its
//! `README`: a table has 10^8+ ids. A lookup of `<id>.txt` / `.json` / `.npy` finds the row
//! (a seek, not a scan) and renders it whole; an id the tensor lacks is ENOENT.
//!
//! Unlike every other lookup, this one reads tensor data: the answer to "is there a row 42"
//! is in the data. It is bounded by one row's reads.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use super::{FsError, Ino, Opened, Tree};
use crate::fs::listing::{Child, Listing, ModelPath, NodeKind};
use modelfs_layout::held::Whole;
use modelfs_layout::rows::{self as layout_rows, RowContent, RowFile};
use modelfs_layout::FileContent;
use modelfs_model::Tensor;

/// The one name a rows directory lists.
pub(super) const README: &[u8] = b"README";
const ROWS_SUFFIX: &str = ".rows";

pub(super) fn listing(tensor: &ModelPath) -> Listing {
    Listing {
        children: vec![Child {
            name: "README".into(),
            kind: NodeKind::RowsReadme {
                tensor: tensor.clone(),
            },
        }],
    }
}

impl Opened {
    /// A small file held whole, its size known.
    fn whole(bytes: Vec<u8>, tensor: Arc<dyn Tensor>) -> Opened {
        Opened::sized(Arc::new(Whole(bytes.into())), tensor)
    }

    /// A small file of known size.
    fn sized(content: Arc<dyn FileContent>, tensor: Arc<dyn Tensor>) -> Opened {
        let size = content.known_size().unwrap_or(0);
        let o = Opened::new(Some(tensor.clone()), content, tensor.meta().mtime, true);
        o.size.store(size, Ordering::Relaxed);
        o
    }
}

impl Tree {
    /// `NAME.rows` of directory `dir` (whose `listing` is given): the keyed tensor `NAME` it
    /// lists (by any of its files), or a hash table there by name only (TF saves a table as its
    /// `-keys` and `-values` tensors, which are what is listed, as TensorFlow lists them).
    pub(super) fn rows_dir_child(
        &self,
        dir: &ModelPath,
        listing: &Listing,
        name: &[u8],
    ) -> Result<Child, FsError> {
        let base = std::str::from_utf8(name)
            .ok()
            .and_then(|n| n.strip_suffix(ROWS_SUFFIX))
            .ok_or(FsError::NotFound)?;
        let tensor = match super::hidden::listed_tensor(listing, base) {
            Some(t) => {
                if self.model().tensor(&t)?.key_kind().is_none() {
                    return Err(FsError::NotFound);
                }
                t
            }
            None => self.unlisted_table(dir, base)?,
        };
        Ok(Child {
            name: format!("{base}{ROWS_SUFFIX}"),
            kind: NodeKind::Rows { tensor },
        })
    }

    /// The hash table in `dir` named `base` that the listing does not show (a TF hash table
    /// is listed as its two saved tensors), else `NotFound`.
    pub(super) fn unlisted_table(&self, dir: &ModelPath, base: &str) -> Result<ModelPath, FsError> {
        // Only a plain name (nothing escaped) can name a table that is not listed.
        if base.contains('%') || base.is_empty() {
            return Err(FsError::NotFound);
        }
        let mut path = dir.to_vec();
        path.push(base.as_bytes().to_vec());
        let t = self.model().tensor(&path).map_err(|_| FsError::NotFound)?;
        if t.key_kind() != Some(modelfs_model::KeyKind::HashKey) {
            return Err(FsError::NotFound);
        }
        Ok(Arc::from(path))
    }

    /// `<id>.<suffix>` in the rows directory `parent` of `tensor`: found (and rendered, so its
    /// size is exact at once) or `NotFound`.
    pub(super) fn lookup_row(
        &self,
        parent: Ino,
        tensor: &ModelPath,
        name: &[u8],
    ) -> Result<Ino, FsError> {
        let (id, file) = RowFile::parse_name(name).ok_or(FsError::NotFound)?;
        let child = Child {
            name: String::from_utf8_lossy(name).into_owned(),
            kind: NodeKind::Row {
                tensor: tensor.clone(),
                id,
                file,
            },
        };
        // Known already: it was found before (the source does not change).
        if let Some(ino) = self.known_child(parent, &child.name)? {
            return Ok(ino);
        }
        let opened = self.open_row(tensor, id, file)?;
        let ino = self.child_ino(parent, &child)?;
        let _ = self.node(ino)?.opened.set(Arc::new(opened));
        Ok(ino)
    }

    pub(super) fn open_row(
        &self,
        tensor: &ModelPath,
        id: i64,
        file: RowFile,
    ) -> Result<Opened, FsError> {
        let t = self.row_tables.get(&self.model(), tensor)?;
        let content = RowContent::open(t.clone(), id, file, self.ctx.rows.clone())
            .map_err(|e| {
                let e = FsError::from(e);
                log::error!("{}: row {id}: {e}", String::from_utf8_lossy(&t.meta().name));
                e
            })?
            .ok_or(FsError::NotFound)?;
        Ok(Opened::sized(Arc::new(content), t))
    }

    pub(super) fn open_rows_readme(&self, tensor: &ModelPath) -> Result<Opened, FsError> {
        let t = self.row_tables.get(&self.model(), tensor)?;
        Ok(Opened::whole(layout_rows::readme(&*t), t))
    }
}
