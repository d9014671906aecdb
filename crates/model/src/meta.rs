//! What a reader says of a tensor before any data is read: `TensorMeta` (built by
//! `TensorMeta::new` and struct update), its partitions, its stored form and its `Role`.

use std::time::SystemTime;

use crate::{DType, ModelError};

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
    /// Damage already known from metadata (bad shape, missing slice, …); data reads fail.
    pub problem: Option<String>,
    /// What modelfs does not decode of this tensor (a dtype, a block encoding), a note of the
    /// verdicts (`verdict`), never a problem: its elements are not served (their reads fail
    /// saying so), its stored bytes are where the reader has a stored form (`.bin`).
    pub note: Option<String>,
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
            note: None,
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

    /// The dtype as the commands show it: `Q4_K→float32` for elements stored in an encoding
    /// of their own (what is stored, then what reads give), else the dtype's name.
    pub fn dtype_shown(&self) -> String {
        match &self.stored {
            // An undecoded dtype (safetensors' `F4`) is stored as itself: named once.
            Some(form) if form.encoding != self.dtype.name() => {
                format!("{}→{}", form.encoding, self.dtype.name())
            }
            Some(_) | None => self.dtype.name().into_owned(),
        }
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

    /// How a reader's `fill_elements` starts: the request was checked by `read_elements`
    /// (asserted in debug builds), and a tensor whose metadata is broken reads as its problem,
    /// one whose elements are not decoded as its note.
    pub fn begin_read(&self, first: u64, len: usize, file: &str) -> Result<(), ModelError> {
        crate::tensor::debug_check(self, first, len);
        self.no_problem(file)?;
        match &self.note {
            Some(n) => Err(ModelError::data(
                format!("{} in {file}", self.name.escape_ascii()),
                n.clone(),
            )),
            None => Ok(()),
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

#[cfg(test)]
mod shown_tests {
    use super::*;

    #[test]
    fn a_stored_form_is_named_once_when_it_is_the_dtype() {
        let mut m = TensorMeta::new(b"w".to_vec(), DType::F32, vec![2], "gguf");
        assert_eq!(m.dtype_shown(), "float32");
        m.stored = Some(StoredForm {
            encoding: "Q4_K".into(),
            bytes: 144,
        });
        assert_eq!(m.dtype_shown(), "Q4_K→float32");
        m.dtype = DType::Blocks("F4");
        m.stored = Some(StoredForm {
            encoding: "F4".into(),
            bytes: 1,
        });
        assert_eq!(m.dtype_shown(), "F4");
    }
}
