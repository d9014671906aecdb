//! Why a matrix (or one partition) cannot be read: shared by the whole-matrix reader
//! (`matrix`) and the reads by range (`stream`), which must not name each other.

use super::{decode, merge};

/// Why a matrix (or one partition) cannot be read.
#[derive(Debug, thiserror::Error)]
pub(crate) enum MatrixFault {
    /// Found while loading the meta (`TensorMeta::problem`).
    #[error("{0}")]
    Known(String),
    #[error("{0}")]
    Decode(#[from] decode::DecodeError),
    #[error("{0}")]
    Duplicate(#[from] merge::DuplicateEntry),
}

impl MatrixFault {
    pub(super) fn is_transient(&self) -> bool {
        matches!(self, MatrixFault::Decode(d) if matches!(&d.fault, decode::DecodeFault::Source(s) if s.is_transient()))
    }
}
