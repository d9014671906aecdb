//! What both ways of matching two tables' rows by id share (`rowdelta`'s spill, `sketch`):
//! the error, the first pass's items, a hash, a cache hint.

use modelfs_layout::LayoutError;
use modelfs_model::scan::TableScan;

/// Why two tables could not be compared.
#[derive(Debug, thiserror::Error)]
pub enum RowDiffError {
    #[error("{0}")]
    Read(#[from] modelfs_model::ModelError),
    #[error("spill file: {0}")]
    Spill(#[from] std::io::Error),
    #[error("{0}")]
    Layout(#[from] LayoutError),
    #[error("rows of {a} and {b} elements cannot be compared")]
    Widths { a: u64, b: u64 },
    #[error("{0} rows: more than diff --rows numbers")]
    TooManyRows(u64),
    #[error("{a} and {b} rows cannot be compared")]
    Dtypes { a: String, b: String },
    /// The consumer of the differences stopped (its own error is with it).
    #[error("output: {0}")]
    Emit(std::io::Error),
}

/// Rows an item of a first pass holds, about: a spill's partitions' runs of one item are
/// then a few KiB each (read back with a call each), and a worker holds 3 MiB.
const ITEM_RECORDS: u64 = 1 << 17;

/// The items of a first pass over both sides: (side, first piece, end piece), a run of
/// pieces of about `ITEM_RECORDS` rows each (its checksums run on from piece to piece).
pub(super) fn work_items(sides: [&TableScan; 2]) -> Vec<(usize, usize, usize)> {
    let mut work = Vec::new();
    for (s, scan) in sides.iter().enumerate() {
        let per = (ITEM_RECORDS / scan.rows_per_piece().max(1)).max(1) as usize;
        let n = scan.pieces();
        work.extend((0..n).step_by(per).map(|k| (s, k, (k + per).min(n))));
    }
    work
}

/// Asks for `x`'s cache line ahead of its use.
#[inline(always)]
pub(super) fn prefetch<T>(x: &T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch is a hint: it never faults and changes no memory; `x` is a valid
    // reference besides.
    unsafe {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        _mm_prefetch::<_MM_HINT_T0>((x as *const T).cast::<i8>());
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = x;
}

/// splitmix64's finaliser: a hash of an id, independent of `rowdelta::partition_of`'s.
pub(super) fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}
