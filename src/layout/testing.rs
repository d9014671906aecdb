//! In-memory tensors for tests (here and in other modules' tests).

use std::sync::Arc;
use std::time::SystemTime;

use crate::model::{DType, ModelError, SourceFormat, SparseRows, Tensor, TensorMeta};

/// `n` deterministic pseudo-random floats in [-1, 1) (an LCG), for throughput tests.
pub fn pseudo_random_f32(n: u64) -> Vec<f32> {
    let mut x = 12345u32;
    (0..n)
        .map(|_| {
            x = x.wrapping_mul(1664525).wrapping_add(1013904223);
            (x >> 8) as f32 / 16777216.0 * 2.0 - 1.0
        })
        .collect()
}

/// A tensor held in memory: dense element bytes, strings, or sparse rows.
pub struct MemTensor {
    pub meta: TensorMeta,
    pub data: Vec<u8>,
    pub strings: Vec<Vec<u8>>,
    pub sparse_rows: Option<Arc<SparseRows>>,
    /// When set, every data read fails with this message.
    pub fail: Option<String>,
    /// Sub-tensors returned by `partition(i)`.
    pub parts: Vec<Arc<dyn Tensor>>,
}

fn meta(dtype: DType, shape: &[u64]) -> TensorMeta {
    TensorMeta {
        name: b"test/tensor".to_vec(),
        dtype,
        shape: shape.to_vec(),
        format: SourceFormat::TfCheckpoint,
        partitions: Vec::new(),
        sparse: false,
        extra: Default::default(),
        problem: None,
        mtime: SystemTime::UNIX_EPOCH,
    }
}

impl MemTensor {
    /// A dense tensor from little-endian element bytes.
    pub fn new(dtype: DType, shape: &[u64], data: Vec<u8>) -> Self {
        MemTensor {
            meta: meta(dtype, shape),
            data,
            strings: Vec::new(),
            sparse_rows: None,
            fail: None,
            parts: Vec::new(),
        }
    }

    pub fn f32(shape: &[u64], values: &[f32]) -> Self {
        Self::new(
            DType::F32,
            shape,
            values.iter().flat_map(|v| v.to_le_bytes()).collect(),
        )
    }

    pub fn f64(shape: &[u64], values: &[f64]) -> Self {
        Self::new(
            DType::F64,
            shape,
            values.iter().flat_map(|v| v.to_le_bytes()).collect(),
        )
    }

    pub fn i64(shape: &[u64], values: &[i64]) -> Self {
        Self::new(
            DType::I64,
            shape,
            values.iter().flat_map(|v| v.to_le_bytes()).collect(),
        )
    }

    pub fn strings(shape: &[u64], strings: Vec<Vec<u8>>) -> Self {
        let mut t = Self::new(DType::Str, shape, Vec::new());
        t.strings = strings;
        t
    }

    /// A sparse matrix `rows × cols` with the given stored entries.
    pub fn sparse(dtype: DType, rows: u64, cols: u64, s: SparseRows) -> Self {
        let mut t = Self::new(dtype, &[rows, cols], Vec::new());
        t.meta.sparse = true;
        t.meta.format = SourceFormat::Angel;
        t.sparse_rows = Some(Arc::new(s));
        t
    }

    pub fn named(mut self, name: &[u8]) -> Self {
        self.meta.name = name.to_vec();
        self
    }

    pub fn with_problem(mut self, p: &str) -> Self {
        self.meta.problem = Some(p.to_string());
        self.fail = Some(p.to_string());
        self
    }

    pub fn failing(mut self, msg: &str) -> Self {
        self.fail = Some(msg.to_string());
        self
    }

    pub fn arc(self) -> Arc<dyn Tensor> {
        Arc::new(self)
    }

    fn check(&self) -> Result<(), ModelError> {
        match &self.fail {
            Some(m) => Err(ModelError::Corrupt(m.clone())),
            None => Ok(()),
        }
    }
}

impl Tensor for MemTensor {
    fn meta(&self) -> &TensorMeta {
        &self.meta
    }

    fn read_elements(&self, first: u64, out: &mut [u8]) -> Result<(), ModelError> {
        self.check()?;
        let es = self
            .meta
            .dtype
            .elem_size()
            .ok_or_else(|| ModelError::Unsupported("no fixed element size".into()))?
            as u64;
        let start = first.checked_mul(es);
        let end = start.and_then(|s| s.checked_add(out.len() as u64));
        match (start, end) {
            (Some(s), Some(e)) if e <= self.data.len() as u64 => {
                out.copy_from_slice(&self.data[s as usize..e as usize]);
                Ok(())
            }
            _ => Err(ModelError::Corrupt(format!(
                "read of elements from {first} past the end"
            ))),
        }
    }

    fn for_each_string(
        &self,
        first: u64,
        count: u64,
        f: &mut dyn FnMut(&[u8]),
    ) -> Result<(), ModelError> {
        self.check()?;
        let end = first
            .checked_add(count)
            .filter(|&e| e <= self.strings.len() as u64)
            .ok_or_else(|| ModelError::Corrupt("string read past the end".into()))?;
        for s in &self.strings[first as usize..end as usize] {
            f(s);
        }
        Ok(())
    }

    fn sparse(&self) -> Result<Arc<SparseRows>, ModelError> {
        self.check()?;
        self.sparse_rows
            .clone()
            .ok_or_else(|| ModelError::Unsupported("not a sparse tensor".into()))
    }

    fn partition(&self, i: usize) -> Result<Arc<dyn Tensor>, ModelError> {
        self.parts
            .get(i)
            .cloned()
            .ok_or_else(|| ModelError::NotFound(format!("partition {i}")))
    }
}
