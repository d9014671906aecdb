//! One tensor of a `torch.save` archive: a strided view (size, stride, storage offset) of a
//! storage, which is the stored member `data/<key>` of the zip. Tensors saved from one
//! storage (a weight and its transpose) read the same member. Reads give row-major
//! little-endian elements, as every other reader's do.

use std::sync::{Arc, OnceLock};

use bytes::Bytes;

use super::walk::TensorSpec;
use crate::codec::zip::{data_start, LOCAL_HEADER};
use crate::model::strided::Strided;
use crate::model::{base_name, debug_check, DType, ModelError, SourceFormat, Tensor, TensorMeta};
use crate::source::ReadAt;

/// A storage: a stored member of the archive, whose bytes start after its local header.
pub(crate) struct Storage {
    pub(crate) key: String,
    /// Where its local header is, and its length (from the central directory).
    pub(crate) header: u64,
    pub(crate) len: u64,
    /// Where its bytes start: read from the local header on the first read (listing the
    /// archive reads none of its members).
    start: OnceLock<u64>,
}

impl Storage {
    pub(crate) fn new(key: String, header: u64, len: u64) -> Storage {
        Storage {
            key,
            header,
            len,
            start: OnceLock::new(),
        }
    }

    /// Where the storage's bytes start; a fault reading the header is not kept.
    fn start(&self, file: &dyn ReadAt) -> Result<u64, ModelError> {
        if let Some(&s) = self.start.get() {
            return Ok(s);
        }
        let bad = |why: &str| ModelError::data(file.name(), format!("storage {}: {why}", self.key));
        let n = (LOCAL_HEADER as u64).min(file.size().saturating_sub(self.header));
        let h = file.read_at(self.header, n as usize)?;
        let s = data_start(self.header, &h)
            .ok_or_else(|| bad("no local header where the directory says"))?;
        if s.checked_add(self.len).is_none_or(|e| e > file.size()) {
            return Err(bad("ends past the file"));
        }
        file.check_consistent()?;
        Ok(*self.start.get_or_init(|| s))
    }
}

pub(crate) struct TorchTensor {
    meta: TensorMeta,
    file: Arc<dyn ReadAt>,
    storage: Option<Arc<Storage>>,
    view: Strided,
    /// The elements are the storage's `offset..` in row-major order: read (and lent) in place.
    contiguous: bool,
    offset: u64,
    big_endian: bool,
    identity: Option<String>,
}

impl TorchTensor {
    /// The tensor `spec` named `name`, over `storage` (`None`: the archive has no such member).
    pub(crate) fn new(
        name: &str,
        spec: &TensorSpec,
        storage: Option<&Arc<Storage>>,
        big_endian: bool,
        file: &Arc<dyn ReadAt>,
    ) -> TorchTensor {
        let mut extra = serde_json::Map::new();
        // The base name, as a TF partition's `"file"`: two copies of a model give the same `.json`.
        extra.insert("file".into(), base_name(file.name()).into());
        if !spec.torch_dtype.is_empty() {
            extra.insert("torch_dtype".into(), spec.torch_dtype.clone().into());
        }
        if !spec.storage.is_empty() {
            extra.insert("storage".into(), spec.storage.clone().into());
            extra.insert("storage_offset".into(), spec.offset.into());
            extra.insert("stride".into(), spec.stride.clone().into());
        }
        let width = spec.dtype.elem_size().unwrap_or(1);
        let view = Strided::new(&spec.shape, &spec.stride, spec.offset, width);
        let mut problem = spec.problem.clone();
        if problem.is_none() {
            problem = match (storage, view.extent()) {
                (None, _) => Some(format!(
                    "its storage {} is not in the archive",
                    spec.storage
                )),
                (_, None) => Some("its extent overflows".into()),
                (Some(s), Some(e)) => match e.checked_mul(width as u64) {
                    Some(b) if b <= s.len => None,
                    _ => Some(format!(
                        "it reaches {e} elements into storage {}, which has {} bytes",
                        s.key, s.len
                    )),
                },
            };
        }
        TorchTensor {
            meta: TensorMeta {
                stored: None,
                name: name.as_bytes().to_vec(),
                dtype: spec.dtype,
                shape: spec.shape.clone(),
                format: SourceFormat::Pytorch,
                partitions: Vec::new(),
                sparse: false,
                extra,
                problem,
                mtime: file.mtime(),
            },
            file: Arc::clone(file),
            storage: storage.cloned(),
            contiguous: view.is_contiguous(),
            view,
            offset: spec.offset,
            big_endian,
            identity: crate::source::identity_string(&**file).map(|f| format!("{f}:{name}")),
        }
    }

    /// The storage's first byte (the tensor has no problem, so it has a storage).
    fn base(&self) -> Result<u64, ModelError> {
        match &self.storage {
            Some(s) => s.start(&*self.file),
            None => Err(ModelError::data(self.file.name(), "no storage")),
        }
    }

    fn width(&self) -> u64 {
        self.meta.dtype.elem_size().unwrap_or(1) as u64
    }
}

impl Tensor for TorchTensor {
    fn meta(&self) -> &TensorMeta {
        &self.meta
    }

    fn fill_elements(&self, first: u64, out: &mut [u8]) -> Result<(), ModelError> {
        debug_check(&self.meta, first, out.len());
        self.meta.no_problem(self.file.name())?;
        let base = self.base()?;
        // In bounds: `new` bounded the view's extent by the storage's length.
        match self.contiguous {
            true => {
                let at = base + (self.offset + first) * self.width();
                self.file.read_into(at, out)?
            }
            false => self.view.fill(&*self.file, base, first, out)?,
        }
        if self.big_endian {
            // A complex number is two floats, each swapped on its own.
            let part = match self.meta.dtype {
                DType::C64 | DType::C128 => self.width() / 2,
                _ => self.width(),
            };
            out.chunks_exact_mut(part as usize)
                .for_each(<[u8]>::reverse);
        }
        if self.meta.dtype == DType::Bool {
            out.iter_mut().for_each(|b| *b = u8::from(*b != 0));
        }
        self.file.check_consistent()?;
        Ok(())
    }

    fn stored_run(&self) -> Option<crate::model::StoredRun> {
        let plain = self.contiguous && !self.big_endian && self.meta.dtype != DType::Bool;
        if !plain || self.meta.problem.is_some() {
            return None;
        }
        let offset = self.offset.checked_mul(self.width())?;
        let at = self.base().ok()?.checked_add(offset)?;
        crate::model::StoredRun::elements(&self.file, at, &self.meta)
    }

    fn lend(&self, first: u64, len: usize) -> Option<Result<Bytes, ModelError>> {
        let plain = self.contiguous && !self.big_endian && self.meta.dtype != DType::Bool;
        if !plain || self.meta.problem.is_some() {
            return None;
        }
        debug_check(&self.meta, first, len);
        Some((|| {
            let at = self.base()? + (self.offset + first) * self.width();
            let got = self.file.read(at, len)?;
            self.file.check_consistent()?;
            Ok(got)
        })())
    }

    fn cache_identity(&self) -> Option<String> {
        self.identity.clone()
    }
}
