//! The GGUF header (llama.cpp's `gguf.md`, versions 2 and 3, little-endian): magic `GGUF`,
//! version, tensor count, metadata count, the metadata key-value pairs, the tensor infos, then
//! the data section at the next multiple of `general.alignment` (32 if absent).
//!
//! Invariants: every length and count is bounded by the bytes left in the file before
//! anything is allocated for it (each element read consumes at least one byte, so no count
//! can make a loop outrun the file); nested arrays end at `MAX_NESTING`.

use crate::source::{ReadAt, ReadExt, SourceError};

const MAGIC: &[u8; 4] = b"GGUF";
const DEFAULT_ALIGNMENT: u64 = 32;
const MAX_NESTING: usize = 8;
/// The most dimensions a tensor has (ggml's `GGML_MAX_DIMS` is 4).
const MAX_DIMS: u32 = 8;
/// Bytes read at a time while parsing.
const PIECE: u64 = 256 << 10;

#[derive(Debug, thiserror::Error)]
pub enum HeaderError {
    #[error("not a GGUF file (no GGUF magic)")]
    NotGguf,
    #[error("GGUF version {0}: only versions 2 and 3 are read")]
    Version(u32),
    #[error("the header ends before its {0}")]
    Truncated(&'static str),
    #[error("{0}")]
    Bad(String),
    #[error(transparent)]
    Source(#[from] SourceError),
}

/// One tensor's info.
#[derive(Clone, Debug)]
pub(crate) struct TensorInfo {
    pub(crate) name: String,
    /// ggml's order: `dims[0]` is the fastest-varying (the row length).
    pub(crate) dims: Vec<u64>,
    pub(crate) ggml_type: u32,
    /// From the start of the data section.
    pub(crate) offset: u64,
}

/// A metadata value; arrays keep their element type.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Meta {
    U(u64),
    I(i64),
    F(f64),
    Bool(bool),
    Str(String),
    Array(Vec<Meta>),
    /// An array read past without its elements (`read` without `keep_arrays`): its length.
    Skipped(u64),
}

impl Meta {
    pub(crate) fn json(&self) -> serde_json::Value {
        use serde_json::Value as J;
        match self {
            Meta::U(v) => J::from(*v),
            Meta::I(v) => J::from(*v),
            Meta::F(v) => serde_json::Number::from_f64(*v)
                .map(J::Number)
                .unwrap_or_else(|| J::String(v.to_string())),
            Meta::Bool(b) => J::Bool(*b),
            Meta::Str(s) => J::String(s.clone()),
            Meta::Array(a) => J::Array(a.iter().map(Meta::json).collect()),
            Meta::Skipped(n) => J::String(format!("<an array of {n}>")),
        }
    }
}

pub(crate) struct Header {
    pub(crate) version: u32,
    /// Metadata in file order.
    pub(crate) metadata: Vec<(String, Meta)>,
    pub(crate) tensors: Vec<TensorInfo>,
    /// Where the data section starts in the file.
    pub(crate) data_start: u64,
}

/// Reads the header of `file`; `keep_arrays` keeps arrays' elements (the document renders
/// them), else an array is kept as its element count only (`info` and the mount's memory
/// need no tokenizer vocabulary).
pub(crate) fn read(file: &dyn ReadAt, keep_arrays: bool) -> Result<Header, HeaderError> {
    let mut c = Cursor {
        file,
        pos: 0,
        buf: Vec::new(),
        buf_at: 0,
        keep_arrays,
    };
    if c.take(4, "magic")? != MAGIC.as_slice() {
        return Err(HeaderError::NotGguf);
    }
    let version = c.u32("version")?;
    if !(2..=3).contains(&version) {
        // A big-endian file reads its version byte-swapped.
        return Err(HeaderError::Version(version));
    }
    let n_tensors = c.u64("tensor count")?;
    let n_kv = c.u64("metadata count")?;
    let mut metadata = Vec::new();
    for _ in 0..n_kv {
        let key = c.string("metadata key")?;
        let ty = c.u32("metadata type")?;
        let v = c.value(ty, 0)?;
        metadata.push((key, v));
    }
    let mut tensors = Vec::new();
    for _ in 0..n_tensors {
        let name = c.string("tensor name")?;
        let n_dims = c.u32("tensor dimensions")?;
        if n_dims > MAX_DIMS {
            return Err(HeaderError::Bad(format!(
                "tensor {name}: {n_dims} dimensions"
            )));
        }
        let dims = (0..n_dims)
            .map(|_| c.u64("tensor dimension"))
            .collect::<Result<Vec<_>, _>>()?;
        let ggml_type = c.u32("tensor type")?;
        let offset = c.u64("tensor offset")?;
        tensors.push(TensorInfo {
            name,
            dims,
            ggml_type,
            offset,
        });
    }
    let alignment = match metadata.iter().find(|(k, _)| k == "general.alignment") {
        Some((_, Meta::U(a))) if *a > 0 && a.is_power_of_two() => *a,
        Some((_, v)) => return Err(HeaderError::Bad(format!("general.alignment {v:?}"))),
        None => DEFAULT_ALIGNMENT,
    };
    let data_start = c
        .pos
        .checked_next_multiple_of(alignment)
        .ok_or(HeaderError::Truncated("data section"))?;
    Ok(Header {
        version,
        metadata,
        tensors,
        data_start,
    })
}

struct Cursor<'a> {
    file: &'a dyn ReadAt,
    pos: u64,
    /// Bytes of the file from `buf_at`, read a piece at a time.
    buf: Vec<u8>,
    buf_at: u64,
    keep_arrays: bool,
}

impl Cursor<'_> {
    fn take(&mut self, n: u64, what: &'static str) -> Result<&[u8], HeaderError> {
        let end = self
            .pos
            .checked_add(n)
            .filter(|&e| e <= self.file.size())
            .ok_or(HeaderError::Truncated(what))?;
        let buf_end = self.buf_at + self.buf.len() as u64;
        if self.pos < self.buf_at || end > buf_end {
            let len = n.max(PIECE).min(self.file.size() - self.pos);
            self.buf = self.file.read_vec(self.pos, len as usize)?;
            self.buf_at = self.pos;
        }
        let from = (self.pos - self.buf_at) as usize;
        self.pos = end;
        Ok(&self.buf[from..from + n as usize])
    }

    fn skip(&mut self, n: u64, what: &'static str) -> Result<(), HeaderError> {
        self.pos = self
            .pos
            .checked_add(n)
            .filter(|&e| e <= self.file.size())
            .ok_or(HeaderError::Truncated(what))?;
        Ok(())
    }

    fn array<const N: usize>(&mut self, what: &'static str) -> Result<[u8; N], HeaderError> {
        Ok(self.take(N as u64, what)?.try_into().expect("took N bytes"))
    }

    fn u32(&mut self, what: &'static str) -> Result<u32, HeaderError> {
        Ok(u32::from_le_bytes(self.array(what)?))
    }

    fn u64(&mut self, what: &'static str) -> Result<u64, HeaderError> {
        Ok(u64::from_le_bytes(self.array(what)?))
    }

    fn string(&mut self, what: &'static str) -> Result<String, HeaderError> {
        let n = self.u64(what)?;
        let b = self.take(n, what)?;
        Ok(String::from_utf8_lossy(b).into_owned())
    }

    fn value(&mut self, ty: u32, depth: usize) -> Result<Meta, HeaderError> {
        let w = "metadata value";
        Ok(match ty {
            0 => Meta::U(self.array::<1>(w)?[0].into()),
            1 => Meta::I(i8::from_le_bytes(self.array(w)?).into()),
            2 => Meta::U(u16::from_le_bytes(self.array(w)?).into()),
            3 => Meta::I(i16::from_le_bytes(self.array(w)?).into()),
            4 => Meta::U(u32::from_le_bytes(self.array(w)?).into()),
            5 => Meta::I(i32::from_le_bytes(self.array(w)?).into()),
            6 => Meta::F(f32::from_le_bytes(self.array(w)?).into()),
            7 => Meta::Bool(self.array::<1>(w)?[0] != 0),
            8 => Meta::Str(self.string(w)?),
            9 => {
                if depth >= MAX_NESTING {
                    return Err(HeaderError::Bad("arrays nested too deep".into()));
                }
                let elem = self.u32("array type")?;
                let n = self.u64("array length")?;
                if let (Some(w), false) = (width(elem), self.keep_arrays) {
                    // Fixed-width elements: bounded by the file, then stepped over.
                    let bytes = n.checked_mul(w).ok_or(HeaderError::Truncated("array"))?;
                    self.skip(bytes, "array")?;
                    return Ok(Meta::Skipped(n));
                }
                let mut items = Vec::new();
                for _ in 0..n {
                    let v = self.value(elem, depth + 1)?;
                    if self.keep_arrays {
                        items.push(v);
                    }
                }
                match self.keep_arrays {
                    true => Meta::Array(items),
                    false => Meta::Skipped(n),
                }
            }
            10 => Meta::U(self.u64(w)?),
            11 => Meta::I(i64::from_le_bytes(self.array(w)?)),
            12 => Meta::F(f64::from_le_bytes(self.array(w)?)),
            t => return Err(HeaderError::Bad(format!("metadata type {t}"))),
        })
    }
}

/// The width of a fixed-width metadata type.
fn width(ty: u32) -> Option<u64> {
    Some(match ty {
        0 | 1 | 7 => 1,
        2 | 3 => 2,
        4..=6 => 4,
        10..=12 => 8,
        _ => return None,
    })
}
