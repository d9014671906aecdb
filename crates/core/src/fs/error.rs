//! File-system errors, each carrying the errno the kernel (or the CLI) reports.

use modelfs_layout::LayoutError;
use modelfs_model::ModelError;

#[derive(Debug, thiserror::Error)]
pub enum FsError {
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
    /// The source changed under the mount: what was listed no longer matches the bytes.
    #[error("{0}")]
    Stale(String),
    /// Bad or unreadable source data; the message names the problem (it is logged).
    #[error("{0}")]
    Io(String),
    /// A read through a file handle that is not open.
    #[error("bad file handle")]
    BadHandle,
    /// The caller went away (Ctrl-C) before the work was done.
    #[error("interrupted")]
    Interrupted,
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
            FsError::Stale(_) => libc::ESTALE,
            FsError::Io(_) => libc::EIO,
            FsError::BadHandle => libc::EBADF,
            FsError::Interrupted => libc::EINTR,
        }
    }
}

impl From<ModelError> for FsError {
    fn from(e: ModelError) -> Self {
        match e {
            ModelError::NotFound(_) => FsError::NotFound,
            e if e.is_stale() => FsError::Stale(e.to_string()),
            other => FsError::Io(other.to_string()),
        }
    }
}

impl From<LayoutError> for FsError {
    fn from(e: LayoutError) -> Self {
        match e {
            LayoutError::Model(m) => m.into(),
            LayoutError::Interrupted => FsError::Interrupted,
            other => FsError::Io(other.to_string()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use modelfs_io::source::SourceError;

    #[derive(Debug, thiserror::Error)]
    #[error("decoding: {0}")]
    struct ReaderFault(#[source] SourceError);

    fn changed() -> SourceError {
        SourceError::Changed {
            path: "m.data".into(),
        }
    }

    /// A changed source is ESTALE however deep a reader wrapped it; other faults are EIO.
    #[test]
    fn changed_sources_are_stale_through_reader_errors() {
        let direct = FsError::from(ModelError::Source(changed()));
        assert_eq!(direct.errno(), libc::ESTALE);
        let wrapped = ModelError::data("tensor w", std::sync::Arc::new(ReaderFault(changed())));
        assert_eq!(FsError::from(wrapped).errno(), libc::ESTALE);
        let via_layout = LayoutError::Model(ModelError::data("w", ReaderFault(changed())));
        assert_eq!(FsError::from(via_layout).errno(), libc::ESTALE);
        let io = ModelError::Source(SourceError::OutOfBounds {
            path: "m.data".into(),
            offset: 8,
            len: 8,
            size: 4,
        });
        assert_eq!(FsError::from(io).errno(), libc::EIO);
        let bad = ModelError::data("w", modelfs_model::KnownProblem("bad".into()));
        assert_eq!(FsError::from(bad).errno(), libc::EIO);
    }
}
