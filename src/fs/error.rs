//! File-system errors, each carrying the errno the kernel (or the CLI) reports.

use crate::layout::LayoutError;
use crate::model::ModelError;

#[derive(Debug, thiserror::Error)]
pub(crate) enum FsError {
    #[error("no such file or directory")]
    NotFound,
    #[error("not a directory")]
    NotDir,
    #[error("is a directory")]
    IsDir,
    #[error("read-only file system")]
    ReadOnly,
    #[error("no such attribute")]
    NoData,
    /// An extended-attribute namespace modelfs does not implement (`security.*`, `system.*`).
    #[error("operation not supported")]
    NotSupported,
    #[error("buffer too small")]
    Range,
    #[error("too many levels of symbolic links")]
    Loop,
    #[error("invalid argument")]
    Invalid,
    /// Bad or unreadable source data; the message names the problem (it is logged).
    #[error("{0}")]
    Io(String),
}

impl FsError {
    pub(crate) fn errno(&self) -> i32 {
        match self {
            FsError::NotFound => libc::ENOENT,
            FsError::NotDir => libc::ENOTDIR,
            FsError::IsDir => libc::EISDIR,
            FsError::ReadOnly => libc::EROFS,
            FsError::NoData => libc::ENODATA,
            FsError::NotSupported => libc::EOPNOTSUPP,
            FsError::Range => libc::ERANGE,
            FsError::Loop => libc::ELOOP,
            FsError::Invalid => libc::EINVAL,
            FsError::Io(_) => libc::EIO,
        }
    }
}

impl From<ModelError> for FsError {
    fn from(e: ModelError) -> Self {
        match e {
            ModelError::NotFound(_) => FsError::NotFound,
            other => FsError::Io(other.to_string()),
        }
    }
}

impl From<LayoutError> for FsError {
    fn from(e: LayoutError) -> Self {
        match e {
            LayoutError::Model(m) => FsError::Io(m.to_string()),
            LayoutError::Other(s) => FsError::Io(s),
        }
    }
}
