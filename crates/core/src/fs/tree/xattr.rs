//! What a tensor file shows, as metadata: its layout and tensor, and the extended attributes
//! that name its dtype and shape. Nothing here reads or renders tensor data.

use std::sync::Arc;

use super::{FileSource, FsError, Ino, Node, NodeKind, Tree};
use modelfs_model::Tensor;

/// Xattr names on every tensor file.
pub(crate) const XATTR_DTYPE: &str = "user.modelfs.dtype";
pub(crate) const XATTR_SHAPE: &str = "user.modelfs.shape";

impl Tree {
    /// The layout and tensor (or partition) behind file `ino`, `None` for directories and
    /// symlinks. Metadata only: nothing is read or rendered.
    pub fn file_source(&self, ino: Ino) -> Result<Option<FileSource>, FsError> {
        let node = self.node(ino)?;
        let NodeKind::File { layout, .. } = node.kind() else {
            return Ok(None);
        };
        Ok(self.tensor_of(&node)?.map(|t| (*layout, t)))
    }

    pub(super) fn tensor_of(&self, node: &Node) -> Result<Option<Arc<dyn Tensor>>, FsError> {
        let NodeKind::File {
            tensor, partition, ..
        } = node.kind()
        else {
            return Ok(None);
        };
        if let Some(t) = node.opened.get().and_then(|o| o.tensor.clone()) {
            return Ok(Some(t));
        }
        // Metadata only: do not require the content (size) to be computable.
        let mut t = self.model().tensor(tensor)?;
        if let Some(i) = partition {
            t = t.partition(*i)?;
        }
        Ok(Some(t))
    }

    /// Names of the extended attributes of `ino` (empty for directories and symlinks).
    pub(crate) fn listxattr(&self, ino: Ino) -> Result<Vec<&'static str>, FsError> {
        let node = self.node(ino)?;
        Ok(match node.kind() {
            NodeKind::File { .. } => vec![XATTR_DTYPE, XATTR_SHAPE],
            _ => Vec::new(),
        })
    }

    /// Value of extended attribute `name`: dtype name (`float32`), or shape as `[3, 4]`
    /// (`[]` for a scalar).
    ///
    /// Only the `user.` namespace exists here. Other namespaces (`security.selinux`,
    /// `system.posix_acl_access`, which `ls -l` asks for on every file) answer EOPNOTSUPP
    /// rather than ENODATA: tools such as coreutils then remember the file system as
    /// unsupported and stop asking, which saves two FUSE round trips per file in `ls -l`.
    pub(crate) fn getxattr(&self, ino: Ino, name: &[u8]) -> Result<Vec<u8>, FsError> {
        if !name.starts_with(b"user.") {
            return Err(FsError::NotSupported);
        }
        let node = self.node(ino)?;
        let tensor = self.tensor_of(&node)?.ok_or(FsError::NoData)?;
        let meta = tensor.meta();
        if name == XATTR_DTYPE.as_bytes() {
            Ok(meta.dtype.name().as_bytes().to_vec())
        } else if name == XATTR_SHAPE.as_bytes() {
            Ok(shape_text(&meta.shape).into_bytes())
        } else {
            Err(FsError::NoData)
        }
    }
}

/// `[3, 4]`, `[]` for a scalar.
pub(crate) fn shape_text(shape: &[u64]) -> String {
    let dims: Vec<String> = shape.iter().map(u64::to_string).collect();
    format!("[{}]", dims.join(", "))
}

/// How to answer a getxattr/listxattr with a caller buffer of `size` bytes.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum XattrReply {
    Size(u32),
    Data(Vec<u8>),
}

pub(crate) fn xattr_reply(value: Vec<u8>, size: u32) -> Result<XattrReply, FsError> {
    let len = u32::try_from(value.len()).map_err(|_| FsError::Range)?;
    if size == 0 {
        Ok(XattrReply::Size(len))
    } else if len > size {
        Err(FsError::Range)
    } else {
        Ok(XattrReply::Data(value))
    }
}

/// NUL-terminated names, as listxattr returns them.
pub(crate) fn xattr_list_bytes(names: &[&str]) -> Vec<u8> {
    let mut out = Vec::new();
    for n in names {
        out.extend_from_slice(n.as_bytes());
        out.push(0);
    }
    out
}
