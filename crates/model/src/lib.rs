//! The format-neutral view that every reader (TensorFlow, Angel, Monolith, safetensors, numpy,
//! PyTorch, GGUF) produces and that `layout`,
//! `fs` and `cli` consume: a tree of directories and tensors, each tensor with a dtype, a shape,
//! partitions and a way to read any range of its elements.
//!
//! Invariants:
//! - Element bytes handed out by `Tensor::read_elements` are little-endian, C order, in the
//!   element width of `DType::elem_size` (bfloat16 as its 16 bits, bool as one byte 0/1).
//! - A tree path is a list of raw *display* components (bytes, not yet escaped for the file
//!   system; escaping is `fs::names`' job). Readers undo their own key encodings (TF2 object
//!   keys) before handing components out.
//! - Listing a directory never requires decoding tensor data.
//!
//! This is the crate `modelfs-model`; each reader is a crate of its own on top of it, and the
//! renderers above know only this tree. With the `testkit` feature, `testing` holds in-memory
//! doubles (a tensor, a model) for the tests of the crates above.
//!
//! ```
//! use modelfs_model::{DType, TensorMeta};
//! let meta = TensorMeta::new(b"emb".to_vec(), DType::F32, vec![1000, 16], "tf-checkpoint");
//! assert_eq!(meta.num_elements(), Some(16_000));
//! assert_eq!(DType::F32.elem_size(), Some(4));
//! ```

#![deny(clippy::undocumented_unsafe_blocks)]

// The layers below, under the names every module of modelfs uses (`crate::source::ReadAt`).
pub(crate) use modelfs_io::{codec, source, store};

mod crc;
#[cfg(any(test, feature = "testkit"))]
pub mod expect;
pub mod float8;
pub mod rows;
pub mod scan;
mod tensor;

pub use crc::Crc;
pub use rows::default_key_kind;
pub mod flat;
pub mod member;
pub mod multi;
pub mod strided;
pub use member::{Member, Members, Opener};
pub use rows::{KeyKind, RowHit, MAX_ROW_BYTES};
pub use tensor::{debug_check, read_elements, WithMeta};
pub use tensor::{Checksummed, EachString, Keyed, Sparse, StoredRun, Strings, Tensor};

use std::borrow::Cow;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::SystemTime;

/// Element types. The first group is what SPEC §2 names; the rest are TF's rarer types,
/// stored as fixed-width integers or raw bytes, or not decodable at all.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DType {
    F16,
    BF16,
    F32,
    F64,
    I8,
    I16,
    I32,
    I64,
    U8,
    U16,
    U32,
    U64,
    Bool,
    C64,
    C128,
    Str,
    /// Quantized integers (raw, no scale): qint8, quint8, qint16, quint16, qint32.
    QInt8,
    QUInt8,
    QInt16,
    QUInt16,
    QInt32,
    /// One element per byte, low 4 (or 2) bits, sign-extended for the signed variants.
    Int4,
    UInt4,
    Int2,
    UInt2,
    /// float8 variants by TF code (24..=28), and float4_e2m1fn (33, one per byte): raw bytes.
    Float8(u8),
    /// DT_VARIANT: opaque per-element bytes.
    Variant,
    /// Anything else (resource, `_ref` types, future codes): listed, never decoded.
    Opaque(i32),
    /// Elements stored in blocks of an encoding of their own that no layout decodes (GGUF's
    /// `iq4_nl`, `tq1_0`, …), by the encoding's name: listed, served as stored (`.bin`).
    Blocks(&'static str),
}

impl DType {
    /// Width of one element in `read_elements` output; `None` for variable-size or opaque types.
    pub fn elem_size(self) -> Option<usize> {
        use DType::*;
        Some(match self {
            I8 | U8 | Bool | QInt8 | QUInt8 | Int4 | UInt4 | Int2 | UInt2 | Float8(_) => 1,
            F16 | BF16 | I16 | U16 | QInt16 | QUInt16 => 2,
            F32 | I32 | U32 | QInt32 => 4,
            F64 | I64 | U64 | C64 => 8,
            C128 => 16,
            Str | Variant | Opaque(_) | Blocks(_) => return None,
        })
    }

    /// The name shown in `.json` and xattrs (SPEC §2).
    pub fn name(self) -> Cow<'static, str> {
        use DType::*;
        Cow::Borrowed(match self {
            F16 => "float16",
            BF16 => "bfloat16",
            F32 => "float32",
            F64 => "float64",
            I8 => "int8",
            I16 => "int16",
            I32 => "int32",
            I64 => "int64",
            U8 => "uint8",
            U16 => "uint16",
            U32 => "uint32",
            U64 => "uint64",
            Bool => "bool",
            C64 => "complex64",
            C128 => "complex128",
            Str => "string",
            QInt8 => "qint8",
            QUInt8 => "quint8",
            QInt16 => "qint16",
            QUInt16 => "quint16",
            QInt32 => "qint32",
            Int4 => "int4",
            UInt4 => "uint4",
            Int2 => "int2",
            UInt2 => "uint2",
            Float8(24) => "float8_e5m2",
            Float8(25) => "float8_e4m3fn",
            Float8(26) => "float8_e4m3fnuz",
            Float8(27) => "float8_e4m3b11fnuz",
            Float8(28) => "float8_e5m2fnuz",
            Float8(33) => "float4_e2m1fn",
            Float8(_) => "float8",
            Variant => "variant",
            Opaque(0) => "invalid",
            Opaque(20) => "resource",
            Opaque(code) => return Cow::Owned(format!("dtype_{code}")),
            Blocks(name) => name,
        })
    }
}

/// Where one partition of a tensor lives and which part of the tensor it covers.
#[derive(Clone, Debug, PartialEq)]
pub struct PartitionMeta {
    /// Per dimension `(start, length)` within the full tensor (for Angel matrices: rows, cols).
    pub extent: Vec<(u64, u64)>,
    /// Source file (base name) holding the partition's bytes, its offset and length there.
    pub file: String,
    pub offset: u64,
    pub length: u64,
    /// The partition's own id where the format numbers partitions (Angel's `partId`); it names
    /// the partition's files (`NAME.parts/<id>.<layout>`), else its index does.
    pub part_id: Option<i32>,
    /// Reader-specific fields shown in the `.json`.
    pub extra: serde_json::Map<String, serde_json::Value>,
}

/// Everything known about a tensor without reading its data.
#[derive(Clone, Debug)]
pub struct TensorMeta {
    /// The original key / matrix name, as bytes.
    pub name: Vec<u8>,
    pub dtype: DType,
    pub shape: Vec<u64>,
    /// The name of the format its reader read (`tf-checkpoint`, `tf-graph`, `angel`,
    /// `monolith`, `safetensors`, `numpy`, `pytorch`, `gguf`), as `.json` shows it; nothing
    /// branches on it (what the layers above need is `role`).
    pub format: &'static str,
    /// Empty for an unpartitioned TF tensor.
    pub partitions: Vec<PartitionMeta>,
    /// True when only stored entries exist (Angel sparse matrices): read with `Tensor::sparse`.
    pub sparse: bool,
    /// Reader-specific fields for the `.json` (Angel: rowType, formatClassName, …).
    pub extra: serde_json::Map<String, serde_json::Value>,
    /// A problem already known from metadata (bad shape, missing slice, …); data reads fail.
    pub problem: Option<String>,
    /// Modification time of the source file(s).
    pub mtime: SystemTime,
    /// The tensor's bytes are in an encoding of their own (GGUF's quantized blocks): `.bin`
    /// serves them as stored (`Tensor::read_stored`); the element layouts serve its decoded
    /// elements, where `dtype` decodes.
    pub stored: Option<StoredForm>,
    /// What the tensor is, as far as the layers above need to know (its reader says; nothing
    /// above the readers asks which format a tensor came from).
    pub role: Role,
}

/// What a tensor is, as far as the renderers, views and commands need to know.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Role {
    /// A variable, a table, an array: what a model holds (the default).
    #[default]
    Value,
    /// A graph's constant, not a variable: whole-model views and table lists leave it out when
    /// the model has variables (a `.meta` beside a checkpoint).
    Constant,
    /// A parameter-server matrix, dense or sparse: its `.json` always says which, and its
    /// elements cost more to read than stored numbers (decoded from rows, merged from
    /// partitions), so its text is sized on first sight only when small by the sparse bound.
    Matrix,
    /// An embedding table dumped as (id, row) entries: rows labelled by id (`libsvm`) are among
    /// its default layouts.
    IdRows,
}

/// How a tensor's bytes are stored when they are not its elements.
#[derive(Clone, Debug, PartialEq)]
pub struct StoredForm {
    /// The encoding's name (`Q8_0`).
    pub encoding: String,
    pub bytes: u64,
}

impl TensorMeta {
    /// A tensor's metadata with its name, dtype, shape and reader only: unpartitioned, dense,
    /// no extra `.json` fields, no problem, elements as stored, mtime the epoch. Readers fill
    /// the rest by struct update (`TensorMeta { mtime, ..TensorMeta::new(…) }`), so a new field
    /// touches only the readers that set it.
    pub fn new(name: Vec<u8>, dtype: DType, shape: Vec<u64>, format: &'static str) -> TensorMeta {
        TensorMeta {
            name,
            dtype,
            shape,
            format,
            partitions: Vec::new(),
            sparse: false,
            extra: serde_json::Map::new(),
            problem: None,
            mtime: SystemTime::UNIX_EPOCH,
            stored: None,
            role: Role::Value,
        }
    }

    /// Number of elements of the dense tensor, `None` on overflow.
    pub fn num_elements(&self) -> Option<u64> {
        self.shape
            .iter()
            .try_fold(1u64, |acc, &d| acc.checked_mul(d))
    }

    /// The bytes the tensor takes where it is stored: its stored form's (GGUF's quantized
    /// blocks), else its elements'; `None` on overflow or for a dtype of no fixed width.
    pub fn stored_bytes(&self) -> Option<u64> {
        match &self.stored {
            Some(form) => Some(form.bytes),
            None => self
                .num_elements()?
                .checked_mul(self.dtype.elem_size()? as u64),
        }
    }

    /// `Err` naming the tensor in `file` when its metadata names a problem: what a reader's
    /// data reads return for it.
    pub fn no_problem(&self, file: &str) -> Result<(), ModelError> {
        match &self.problem {
            Some(p) => Err(ModelError::data(
                format!("{} in {file}", self.name.escape_ascii()),
                p.clone(),
            )),
            None => Ok(()),
        }
    }

    /// The 2-D view of SPEC §3: (rows, cols). Rank 0/1: one row.
    pub fn rows_cols(&self) -> Option<(u64, u64)> {
        match self.shape.len() {
            0 => Some((1, 1)),
            1 => Some((1, self.shape[0])),
            _ => {
                let cols = *self.shape.last().unwrap();
                let rows = self.shape[..self.shape.len() - 1]
                    .iter()
                    .try_fold(1u64, |acc, &d| acc.checked_mul(d))?;
                Some((rows, cols))
            }
        }
    }
}

/// The last component of a file's name (a path or a URL), as `.json` shows a source file.
pub fn base_name(name: &str) -> &str {
    name.rsplit('/').next().unwrap_or(name)
}

/// A reader's own typed error, kept whole (with its source chain) inside `ModelError`.
pub type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

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

/// A tensor whose metadata already told why it cannot be read (`TensorMeta::problem`).
#[derive(Debug, Clone, thiserror::Error)]
#[error("{0}")]
pub struct KnownProblem(pub String);

/// Stored entries of a sparse matrix, compressed by row (CSR). Rows without entries that
/// were saved still appear in `rows` with an empty range (libsvm prints them as `<row>`).
#[derive(Debug, Default, Clone)]
pub struct SparseRows {
    /// Row ids, strictly ascending.
    pub rows: Vec<u64>,
    /// `row_ptr[i]..row_ptr[i+1]` indexes `cols`/`values` for `rows[i]`; len = rows.len() + 1.
    pub row_ptr: Vec<u64>,
    /// Column ids, strictly ascending within a row. Long-key matrices may have negative ids.
    pub cols: Vec<i64>,
    /// Values as little-endian element bytes of the tensor's dtype, `elem_size` each.
    pub values: Vec<u8>,
}

impl SparseRows {
    pub fn nnz(&self) -> u64 {
        self.cols.len() as u64
    }
}

/// The row structure of a sparse tensor without its entries: `SparseRows::rows` and
/// `row_ptr`. Entries are numbered in CSR order (row by row, columns ascending).
#[derive(Debug, Default, Clone)]
pub struct SparseShape {
    pub rows: Vec<u64>,
    /// len = rows.len() + 1, non-decreasing; the last is the entry count.
    pub row_ptr: Vec<u64>,
}

impl SparseShape {
    pub fn nnz(&self) -> u64 {
        self.row_ptr.last().copied().unwrap_or(0)
    }
}

/// Values of a matrix stored by column, a range of columns at a time
/// (`Sparse::read_column_block`): value `i` is at column `cols[i]` of stored row `rows[i]`
/// (an index into `SparseShape::rows`), little-endian element bytes.
#[derive(Debug, Default)]
pub struct ColumnBlock {
    pub cols: Vec<i64>,
    pub rows: Vec<u32>,
    pub values: Vec<u8>,
}

impl ColumnBlock {
    pub(crate) fn clear(&mut self) {
        self.cols.clear();
        self.rows.clear();
        self.values.clear();
    }
}

/// Entries of a sparse tensor read by range (`Tensor::read_entries`).
#[derive(Debug, Default)]
pub struct Entries {
    pub cols: Vec<i64>,
    /// Little-endian element bytes of the tensor's dtype.
    pub values: Vec<u8>,
}

impl Entries {
    pub fn clear(&mut self) {
        self.cols.clear();
        self.values.clear();
    }
}

/// Fills `out` (elements of `es` bytes, C order over `cols` columns, from element `first`)
/// with the dense form of the sparse tensor `t` of shape `shape`, reading only the entries
/// that land in `out` (`Tensor::seek_col`, `Tensor::read_entries`). `t`'s row ids and columns
/// are shifted by `row_base` and `col_base` (a window of a bigger matrix); entries outside
/// `0..cols` are ignored.
#[allow(clippy::too_many_arguments)]
pub fn fill_dense_by_range(
    t: &dyn Sparse,
    shape: &SparseShape,
    row_base: u64,
    col_base: i64,
    cols: u64,
    es: usize,
    first: u64,
    out: &mut [u8],
) -> Result<(), ModelError> {
    if es == 0 || out.len() % es != 0 {
        return Err(RequestError::PartialElement {
            len: out.len(),
            elem: es,
        }
        .into());
    }
    out.fill(0);
    let n = (out.len() / es) as u64;
    if n == 0 || cols == 0 {
        return Ok(());
    }
    let end = first.checked_add(n).ok_or(RequestError::OutOfRange {
        first,
        count: n,
        total: u64::MAX,
    })?;
    let (r0, r1) = (first / cols, (end - 1) / cols);
    let global =
        |c: u64| (c as i128 + col_base as i128).clamp(i64::MIN as i128, i64::MAX as i128) as i64;
    let mut k = shape
        .rows
        .partition_point(|&r| r < r0.saturating_add(row_base));
    let mut got = Entries::default();
    while k < shape.rows.len() && shape.rows[k] - row_base <= r1 {
        let row = shape.rows[k] - row_base;
        // This row's local columns in [first, end).
        let lo = first.saturating_sub(row * cols);
        let hi = (end - row * cols).min(cols);
        let e0 = t.seek_col(k, global(lo))?;
        let e1 = if hi == cols {
            shape.row_ptr[k + 1]
        } else {
            t.seek_col(k, global(hi))?
        };
        got.clear();
        t.read_entries(e0, e1.saturating_sub(e0), &mut got)?;
        if got.values.len() != got.cols.len() * es {
            return Err(RequestError::PartialElement {
                len: got.values.len(),
                elem: es,
            }
            .into());
        }
        for (i, &c) in got.cols.iter().enumerate() {
            let local = c as i128 - col_base as i128;
            if local < lo as i128 || local >= hi as i128 {
                continue;
            }
            let at = (row * cols + local as u64 - first) as usize * es;
            out[at..at + es].copy_from_slice(&got.values[i * es..(i + 1) * es]);
        }
        k += 1;
    }
    Ok(())
}

/// `Tensor::read_entries` of entries held in memory.
pub fn entries_in(
    s: &SparseRows,
    es: usize,
    first: u64,
    count: u64,
    out: &mut Entries,
) -> Result<(), ModelError> {
    let end = first.checked_add(count).filter(|&e| e <= s.nnz());
    let Some(end) = end else {
        return Err(RequestError::OutOfRange {
            first,
            count,
            total: s.nnz(),
        }
        .into());
    };
    let (a, b) = (first as usize, end as usize);
    out.cols.extend_from_slice(&s.cols[a..b]);
    out.values.extend_from_slice(&s.values[a * es..b * es]);
    Ok(())
}

/// `Tensor::seek_col` of entries held in memory.
pub fn seek_col_in(s: &SparseRows, k: usize, col: i64) -> Result<u64, ModelError> {
    match (s.row_ptr.get(k), s.row_ptr.get(k + 1)) {
        (Some(&a), Some(&b)) if a <= b && b <= s.nnz() => {
            let (a, b) = (a as usize, b as usize);
            Ok((a + s.cols[a..b].partition_point(|&c| c < col)) as u64)
        }
        _ => Err(RequestError::OutOfRange {
            first: k as u64,
            count: 1,
            total: s.rows.len() as u64,
        }
        .into()),
    }
}

/// One child of a directory in the model tree.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum DirEntry {
    Dir(Vec<u8>),
    Tensor(Vec<u8>),
    /// A symbolic link (e.g. `latest` in a multi-checkpoint directory) to a sibling path.
    Symlink {
        name: Vec<u8>,
        target: Vec<u8>,
    },
    /// A file the reader renders itself (`Model::document`), shown under exactly this name.
    Document(Vec<u8>),
    /// Another name for the tensor at `target` (a path relative to this directory; `..`
    /// goes up): the file system shows a symbolic link per file of that tensor.
    Alias {
        name: Vec<u8>,
        target: Vec<Vec<u8>>,
    },
    /// A directory the reader adds (`constants/`, `signatures/`, `by-name/`): its name wins
    /// over a key's (SPEC §6), which the file system then shows escaped.
    Reserved(Vec<u8>),
}

/// The model path component of a reader's own entry (`DirEntry::Reserved`, `::Document`)
/// named `name`: the name after a NUL byte. The file system shows `name`; the marker keeps the
/// entry's path apart from a key's component of the same name (which it shows escaped), so
/// `constants/x` of the reader and a variable `constants/x` stay two files. (A key component
/// that itself starts with NUL and equals a marked name is the one case that would collide.)
pub fn own_component(name: &[u8]) -> Vec<u8> {
    let mut c = Vec::with_capacity(name.len() + 1);
    c.push(0);
    c.extend_from_slice(name);
    c
}

/// A file that is not a layout of one tensor (a signature, the graph as text), rendered by its
/// reader in independently renderable chunks, like a text layout.
///
/// Invariant: rendering is deterministic (the same chunk always gives the same bytes), and
/// `chunks` is known without rendering anything.
pub trait Document: Send + Sync {
    fn chunks(&self) -> u64;
    /// Appends chunk `chunk`'s bytes to `out`.
    fn render(&self, chunk: u64, out: &mut Vec<u8>) -> Result<(), ModelError>;
    /// The source file's modification time.
    fn mtime(&self) -> SystemTime;
    /// Small enough to render whole on first sight (its size is then exact at once).
    fn small(&self) -> bool {
        self.chunks() <= 1
    }
    /// Like `Tensor::cache_identity`: lets the size outlive the object and the mount.
    fn cache_identity(&self) -> Option<String> {
        None
    }
}

/// What the readers take from the command line's options.
#[derive(Clone)]
pub struct ReaderOptions {
    /// Check each tensor's checksum on its first read (`verify=crc`).
    pub verify: bool,
    /// Separator of Angel text formats.
    pub sep: String,
    /// Memory for decoded index blocks (TF tables).
    pub block_cache_bytes: u64,
    /// Where checksum verdicts of large tensors persist (`cache_dir`), if anywhere.
    pub verdicts: Option<Arc<dyn crate::store::Store>>,
    /// Where readers' indexes of data files persist (`cache_dir`: an Angel text partition's
    /// line index), if anywhere.
    pub indexes: Option<Arc<dyn crate::store::Store>>,
    /// Where hash tables' key indexes persist (`cache_dir`), if anywhere.
    pub key_index_dir: Option<PathBuf>,
    /// Where the source's files are (local, S3, HTTP).
    pub storage: Arc<dyn crate::source::Storage>,
    /// The members opened from this source (checkpoints of a directory, Serving versions),
    /// found again when the source is looked at again.
    pub members: Arc<Members>,
}

impl Default for ReaderOptions {
    fn default() -> Self {
        ReaderOptions {
            verify: true,
            sep: ",".into(),
            block_cache_bytes: 64 << 20,
            verdicts: None,
            indexes: None,
            key_index_dir: None,
            storage: crate::source::local(),
            members: Arc::default(),
        }
    }
}

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

/// `path: why`, without the path twice when `why` names it already.
fn unreadable_text(path: &Path, source: &(dyn std::error::Error + Send + Sync)) -> String {
    let why = source.to_string();
    if why.starts_with(&path.display().to_string()) {
        why
    } else {
        format!("{}: {why}", path.display())
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

/// Summary for `modelfs info`.
#[derive(Clone, Debug, Default)]
pub struct ModelSummary {
    pub format: String,
    pub tensors: u64,
    pub dtypes: std::collections::BTreeMap<String, u64>,
    pub total_bytes: u64,
    pub problems: Vec<String>,
    /// A directory of several checkpoints: each one's own summary, by name.
    pub parts: Vec<(String, ModelSummary)>,
    /// More the reader tells (a graph's nodes by op, constants, signatures), line by line.
    pub details: Vec<String>,
}

/// A mounted source: a tree of directories and tensors.
pub trait Model: Send + Sync {
    /// Children of the directory at `dir` (display components from the root), sorted, with
    /// `Dir` and `Tensor` entries of the same name both present when a key is a leaf and a
    /// prefix. `NotFound` if `dir` is not a directory.
    fn list_dir(&self, dir: &[Vec<u8>]) -> Result<Vec<DirEntry>, ModelError>;

    /// The tensor at `path`, `NotFound` if there is none.
    fn tensor(&self, path: &[Vec<u8>]) -> Result<Arc<dyn Tensor>, ModelError>;

    /// The document listed as `DirEntry::Document` at `path`.
    fn document(&self, path: &[Vec<u8>]) -> Result<Arc<dyn Document>, ModelError> {
        Err(ModelError::NotFound(format!("{} documents", path.len())))
    }

    /// Walks everything (for `info`); may be slow on huge models.
    fn summary(&self) -> Result<ModelSummary, ModelError>;

    /// Tensors of the model at `root` (a model root) that its tree does not show but a
    /// whole-model copy must carry: a TF2 checkpoint's object graph, without which
    /// `tf.train.Checkpoint.restore` cannot match objects.
    fn hidden_tensors(&self, root: &[Vec<u8>]) -> Vec<Arc<dyn Tensor>> {
        let _ = root;
        Vec::new()
    }

    /// Keyed tables the tree does not list, found by name (a TF hash table is listed as its
    /// two saved tensors): their paths.
    fn unlisted_tables(&self) -> Result<Vec<Vec<Vec<u8>>>, ModelError> {
        Ok(Vec::new())
    }

    /// The directories that are whole models of their own, each with its own views (SPEC §7):
    /// the root, or each checkpoint of a directory of several.
    fn model_roots(&self) -> Vec<Vec<Vec<u8>>> {
        vec![Vec::new()]
    }

    /// The models shown side by side at the root (a directory of checkpoints, a Serving
    /// base), by name, with their member ids (`member`): when the source is looked at again,
    /// the file system keeps the subtree of each name whose id is unchanged. `None`: one model.
    fn members(&self) -> Option<Vec<(Vec<u8>, u64)>> {
        None
    }

    /// Whether member `name` (`members`) is opened yet; `None` if there is no such member.
    /// Its directory's `stat` does not open it (`ls -l` of 500 checkpoints opens none).
    fn member_opened(&self, name: &[u8]) -> Option<bool> {
        let _ = name;
        None
    }
}

#[cfg(any(test, feature = "testkit"))]
pub mod testing;
