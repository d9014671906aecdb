//! The errors of the tree: a read's (`ModelError`, `RequestError`, `KnownProblem`) and an
//! open's (`OpenError`), each keeping its source chain.

use std::path::{Path, PathBuf};

/// A reader's own typed error, kept whole (with its source chain) inside `ModelError`.
pub type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// What a read of a tensor gives (`Tensor`'s methods): `T`, or the read's fault.
pub type ModelResult<T = ()> = Result<T, ModelError>;

#[derive(Debug, thiserror::Error)]
pub enum ModelError {
    #[error("not found: {0}")]
    NotFound(String),
    // Not `transparent`: the source fault stays a link of the chain (`source::is_transient`).
    #[error("{0}")]
    Source(#[from] crate::source::SourceError),
    /// The stored data of `what` (a tensor, a partition, a file) is bad or unreadable; `source`
    /// is the reader's typed error.
    #[error("{what}: {source}")]
    Data {
        what: String,
        #[source]
        source: BoxError,
    },
    /// The request does not fit the tensor: the caller's mistake, not the data's.
    #[error(transparent)]
    Request(#[from] RequestError),
}

impl ModelError {
    pub fn data(what: impl Into<String>, source: impl Into<BoxError>) -> ModelError {
        ModelError::Data {
            what: what.into(),
            source: source.into(),
        }
    }

    /// True when the cause, anywhere in the chain, is a source that changed under the mount:
    /// the file system reports ESTALE for it, not EIO.
    pub fn is_stale(&self) -> bool {
        let mut cause: Option<&(dyn std::error::Error + 'static)> = match self {
            ModelError::Source(e) => Some(e),
            ModelError::Data { source, .. } => Some(&**source),
            _ => None,
        };
        while let Some(e) = cause {
            if let Some(crate::source::SourceError::Changed { .. }) = e.downcast_ref() {
                return true;
            }
            cause = e.source();
        }
        false
    }
}

/// A LevelDB table (a TF checkpoint's index) that fails: its source's fault as such, anything
/// else as bad data of the index.
impl From<crate::codec::table::TableError> for ModelError {
    fn from(e: crate::codec::table::TableError) -> Self {
        match e {
            crate::codec::table::TableError::Source(s) => ModelError::Source(s),
            other => ModelError::data("tensor index", other),
        }
    }
}

/// A request a tensor cannot serve whatever its data.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RequestError {
    #[error("{0} is not a string tensor")]
    NotStrings(String),
    #[error("not a sparse tensor")]
    NotSparse,
    #[error("{0} elements have no fixed size")]
    NoFixedSize(String),
    #[error("{0} elements have no numeric value")]
    NoValues(String),
    #[error("{len} bytes are not a whole number of {elem}-byte elements")]
    PartialElement { len: usize, elem: usize },
    #[error("a row of {width} elements is more than one answer ({max} bytes at most)")]
    RowTooWide { width: u64, max: u64 },
    #[error("elements {first}..+{count} are outside the tensor's {total}")]
    OutOfRange { first: u64, count: u64, total: u64 },
}

impl RequestError {
    /// `Ok` when elements `first..first + count` are among `total`; else `OutOfRange`.
    pub fn within(first: u64, count: u64, total: u64) -> Result<(), RequestError> {
        match first.checked_add(count) {
            Some(end) if end <= total => Ok(()),
            _ => Err(RequestError::OutOfRange {
                first,
                count,
                total,
            }),
        }
    }
}

/// A tensor whose metadata already told why it cannot be read (`TensorMeta::problem`).
#[derive(Debug, Clone, thiserror::Error)]
#[error("{0}")]
pub struct KnownProblem(pub String);

/// Why a source could not be opened as a model (the CLI prints it on one line, exit 2).
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    #[error("{path}: no such file or directory")]
    Missing { path: PathBuf },
    #[error("{path}: not recognised (looked for {looked_for})")]
    NotRecognised { path: PathBuf, looked_for: String },
    #[error("{path}: {what}")]
    Unsupported { path: PathBuf, what: String },
    #[error("{}", unreadable_text(path, &**source))]
    Unreadable {
        path: PathBuf,
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
}

/// `path: why`, without the path twice when `why` names it already (as itself, or as the URL
/// of a remote store's key: `gs://b/m: …` for path `m`).
fn unreadable_text(path: &Path, source: &(dyn std::error::Error + Send + Sync)) -> String {
    let why = source.to_string();
    let p = path.display().to_string();
    let named = why.split(": ").next().unwrap_or("");
    let as_url = named.contains("://") && named.ends_with(&format!("/{p}"));
    if named == p || as_url {
        why
    } else {
        format!("{p}: {why}")
    }
}

impl OpenError {
    pub fn unreadable(
        path: &Path,
        source: impl Into<Box<dyn std::error::Error + Send + Sync>>,
    ) -> Self {
        OpenError::Unreadable {
            path: path.to_path_buf(),
            source: source.into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A remote store's error names the key's URL: the key is not said again before it.
    #[test]
    fn an_unreadable_path_is_said_once() {
        let said = |path: &str, why: &str| OpenError::unreadable(Path::new(path), why).to_string();
        assert_eq!(said("m", "gs://b/m: no bucket"), "gs://b/m: no bucket");
        assert_eq!(said("a/m", "a/m: bad"), "a/m: bad");
        assert_eq!(said("m", "bad header"), "m: bad header");
        assert_eq!(said("m", "gs://b/mm: x"), "m: gs://b/mm: x");
    }
}
