//! In-memory `Model` / `Tensor` doubles and a trivial content opener, for tests of the tree
//! and the CLI without a real reader or real layouts.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use crate::layout::{FileContent, Layout, LayoutCtx, LayoutError};
use crate::model::{
    DType, DirEntry, Model, ModelError, ModelSummary, PartitionMeta, SourceFormat, Tensor,
    TensorMeta,
};

/// A dense tensor held in memory (little-endian element bytes).
pub struct MemTensor {
    pub meta: TensorMeta,
    pub data: Vec<u8>,
    pub parts: Vec<Arc<MemTensor>>,
}

impl MemTensor {
    pub fn f32(name: &str, shape: &[u64], values: &[f32]) -> MemTensor {
        MemTensor {
            meta: meta(name, DType::F32, shape),
            data: values.iter().flat_map(|v| v.to_le_bytes()).collect(),
            parts: Vec::new(),
        }
    }

    /// Splits a rank-1 f32 tensor into partitions of the given lengths.
    pub fn partitioned(name: &str, values: &[f32], lens: &[u64], part_ids: bool) -> MemTensor {
        let mut whole = MemTensor::f32(name, &[values.len() as u64], values);
        let mut start = 0u64;
        for (i, &len) in lens.iter().enumerate() {
            let slice = &values[start as usize..(start + len) as usize];
            let mut extra = serde_json::Map::new();
            if part_ids {
                extra.insert("partId".into(), serde_json::json!(10 + i));
            }
            whole.meta.partitions.push(PartitionMeta {
                extent: vec![(start, len)],
                file: "mem".into(),
                offset: start * 4,
                length: len * 4,
                extra,
            });
            whole
                .parts
                .push(Arc::new(MemTensor::f32(name, &[len], slice)));
            start += len;
        }
        whole
    }
}

pub fn meta(name: &str, dtype: DType, shape: &[u64]) -> TensorMeta {
    TensorMeta {
        name: name.as_bytes().to_vec(),
        dtype,
        shape: shape.to_vec(),
        format: SourceFormat::TfCheckpoint,
        partitions: Vec::new(),
        sparse: false,
        extra: serde_json::Map::new(),
        problem: None,
        mtime: SystemTime::UNIX_EPOCH + Duration::from_secs(1_600_000_000),
    }
}

impl Tensor for MemTensor {
    fn meta(&self) -> &TensorMeta {
        &self.meta
    }

    fn read_elements(&self, first: u64, out: &mut [u8]) -> Result<(), ModelError> {
        if let Some(p) = &self.meta.problem {
            return Err(ModelError::Corrupt(p.clone()));
        }
        let size = self
            .meta
            .dtype
            .elem_size()
            .ok_or_else(|| ModelError::Unsupported("size".into()))?;
        let start = usize::try_from(first)
            .ok()
            .and_then(|f| f.checked_mul(size));
        let src = start
            .and_then(|s| self.data.get(s..s.checked_add(out.len())?))
            .ok_or_else(|| ModelError::Corrupt("read past end".into()))?;
        out.copy_from_slice(src);
        Ok(())
    }

    fn partition(&self, i: usize) -> Result<Arc<dyn Tensor>, ModelError> {
        self.parts
            .get(i)
            .map(|p| p.clone() as Arc<dyn Tensor>)
            .ok_or_else(|| ModelError::NotFound(format!("partition {i}")))
    }
}

/// A model whose tensors live at `/`-free raw component paths.
#[derive(Default)]
pub struct MemModel {
    pub tensors: BTreeMap<Vec<Vec<u8>>, Arc<MemTensor>>,
    /// (directory, name, target)
    pub symlinks: Vec<(Vec<Vec<u8>>, Vec<u8>, Vec<u8>)>,
}

pub fn key(s: &str) -> Vec<Vec<u8>> {
    s.split('/').map(|c| c.as_bytes().to_vec()).collect()
}

impl MemModel {
    pub fn add(&mut self, path: Vec<Vec<u8>>, t: MemTensor) -> &mut Self {
        self.tensors.insert(path, Arc::new(t));
        self
    }
}

impl Model for MemModel {
    fn list_dir(&self, dir: &[Vec<u8>]) -> Result<Vec<DirEntry>, ModelError> {
        let mut out = Vec::new();
        let mut found = dir.is_empty();
        for k in self.tensors.keys() {
            if k.len() > dir.len() && k.starts_with(dir) {
                found = true;
                let name = k[dir.len()].clone();
                out.push(if k.len() == dir.len() + 1 {
                    DirEntry::Tensor(name)
                } else {
                    DirEntry::Dir(name)
                });
            }
        }
        for (d, name, target) in &self.symlinks {
            if d.as_slice() == dir {
                out.push(DirEntry::Symlink {
                    name: name.clone(),
                    target: target.clone(),
                });
            }
        }
        if !found {
            return Err(ModelError::NotFound("dir".into()));
        }
        out.sort();
        out.dedup();
        Ok(out)
    }

    fn tensor(&self, path: &[Vec<u8>]) -> Result<Arc<dyn Tensor>, ModelError> {
        self.tensors
            .get(path)
            .map(|t| t.clone() as Arc<dyn Tensor>)
            .ok_or_else(|| ModelError::NotFound("tensor".into()))
    }

    fn summary(&self) -> Result<ModelSummary, ModelError> {
        let mut s = ModelSummary {
            format: "memory".into(),
            ..Default::default()
        };
        for t in self.tensors.values() {
            s.tensors += 1;
            *s.dtypes
                .entry(t.meta.dtype.name().into_owned())
                .or_default() += 1;
            s.total_bytes += t.data.len() as u64;
            if let Some(p) = &t.meta.problem {
                s.problems.push(p.clone());
            }
        }
        Ok(s)
    }
}

/// Trivial contents: `json` → `{"name":…}` line, `bin` → raw element bytes, `txt` → one
/// `{:?}` f32 per line (f32 tensors only); other layouts unavailable. A tensor with a
/// `problem` fails `size` (so the tree must answer EIO).
pub fn test_opener(
    layout: Layout,
    tensor: Arc<dyn Tensor>,
    _ctx: &Arc<LayoutCtx>,
) -> Option<Arc<dyn FileContent>> {
    let meta = tensor.meta();
    if let (Some(p), false) = (&meta.problem, layout == Layout::Json) {
        if matches!(layout, Layout::Bin | Layout::Txt) {
            return Some(Arc::new(MemContent {
                bytes: None,
                problem: Some(p.clone()),
            }));
        }
        return None;
    }
    let bytes = match layout {
        Layout::Json => {
            Some(format!("{{\"name\":{:?}}}\n", String::from_utf8_lossy(&meta.name)).into_bytes())
        }
        Layout::Bin | Layout::Txt => {
            if meta.dtype != DType::F32 {
                return None;
            }
            let n = meta.num_elements()? as usize;
            let mut raw = vec![0u8; n * 4];
            let ok = tensor.read_elements(0, &mut raw).is_ok();
            if !ok {
                None
            } else if layout == Layout::Bin {
                Some(raw)
            } else {
                let mut s = String::new();
                for c in raw.chunks_exact(4) {
                    s.push_str(&format!(
                        "{:?}\n",
                        f32::from_le_bytes([c[0], c[1], c[2], c[3]])
                    ));
                }
                Some(s.into_bytes())
            }
        }
        _ => return None,
    };
    Some(Arc::new(MemContent {
        bytes,
        problem: None,
    }))
}

/// A rendering context with the given layouts (default cache settings).
pub fn ctx(layouts: &[Layout]) -> Arc<LayoutCtx> {
    let mut opts = crate::options::Options::default();
    opts.layouts = layouts.to_vec();
    opts.cache_dir = None;
    super::layout_ctx(&opts)
}

/// Fixed bytes, or a failure for every size/read.
pub struct MemContent {
    pub bytes: Option<Vec<u8>>,
    pub problem: Option<String>,
}

impl FileContent for MemContent {
    fn size(&self) -> Result<u64, LayoutError> {
        match (&self.bytes, &self.problem) {
            (Some(b), None) => Ok(b.len() as u64),
            (_, Some(p)) => Err(LayoutError::Other(p.clone())),
            (None, None) => Err(LayoutError::Other("unreadable".into())),
        }
    }

    fn read_at(&self, offset: u64, buf: &mut [u8]) -> Result<usize, LayoutError> {
        let bytes = self
            .bytes
            .as_ref()
            .ok_or_else(|| LayoutError::Other("unreadable".into()))?;
        let start = usize::try_from(offset)
            .unwrap_or(usize::MAX)
            .min(bytes.len());
        let n = buf.len().min(bytes.len() - start);
        buf[..n].copy_from_slice(&bytes[start..start + n]);
        Ok(n)
    }
}
