//! One tensor of a `torch.save` archive: a strided view (size, stride, storage offset) of a
//! storage, which is the stored member `data/<key>` of the zip. Tensors saved from one
//! storage (a weight and its transpose) read the same member. Reads give row-major
//! little-endian elements, as every other reader's do.

use std::sync::{Arc, OnceLock};

use bytes::Bytes;

use super::walk::TensorSpec;
use crate::codec::zip::{data_start, LOCAL_HEADER};
use crate::model::strided::Strided;
use crate::model::{base_name, debug_check, DType, ModelError, Tensor, TensorMeta};
use crate::source::{Flight, ReadAt, ReadCtx, ReadExt};
use crate::store::{Store, Verified};

/// A storage: a run of the file holding its bytes — a stored member of a zip archive, or a
/// counted run of a legacy file (`legacy.rs`).
pub(crate) struct Storage {
    pub(crate) key: String,
    /// Its length in bytes (from the zip's directory, or its element count times its width).
    pub(crate) len: u64,
    at: At,
    /// Where its bytes start, once read (only success is kept: a fault is not a verdict).
    start: OnceLock<u64>,
    /// A zip member's CRC-32 (its directory's), checked over the whole member before any of
    /// its bytes is served (`verify=crc`).
    crc32: Option<u32>,
    /// Readers racing on a first read wait for one pass; only verdicts on the bytes are kept.
    verdict: Flight<Result<(), String>>,
    /// Where a large storage's verdict outlives the mount (`cache_dir`).
    remember: Option<Arc<dyn Store>>,
}

/// How a storage's first byte is found.
enum At {
    /// After the local header at this offset (listing the archive reads none of its members).
    ZipHeader(u64),
    /// After the 8-byte little-endian element count at this offset, which must read `numel`.
    Counted { count: u64, numel: u64 },
}

/// Storages at least this large keep their verdict under `cache_dir` (as TF tensors do).
const PERSIST_VERDICT_MIN: u64 = 64 << 20;

impl Storage {
    /// The stored zip member `key` whose local header is at `header`; `crc32` is checked
    /// before its bytes are served, if given.
    pub(crate) fn zip(key: String, header: u64, len: u64, crc32: Option<u32>) -> Storage {
        Storage {
            key,
            len,
            at: At::ZipHeader(header),
            start: OnceLock::new(),
            crc32,
            verdict: Flight::default(),
            remember: None,
        }
    }

    /// Keeps the verdict of a large storage in `store` across mounts.
    pub(crate) fn remembered_in(mut self, store: Option<Arc<dyn Store>>) -> Storage {
        self.remember = store.filter(|_| self.len >= PERSIST_VERDICT_MIN);
        self
    }

    /// A legacy storage of `numel` elements (`len` bytes) whose count is at `count`.
    pub(crate) fn counted(key: String, count: u64, numel: u64, len: u64) -> Storage {
        Storage {
            key,
            len,
            at: At::Counted { count, numel },
            start: OnceLock::new(),
            crc32: None,
            verdict: Flight::default(),
            remember: None,
        }
    }

    fn bad(&self, file: &dyn ReadAt, why: &str) -> ModelError {
        ModelError::data(file.name(), format!("storage {}: {why}", self.key))
    }

    /// Where the storage's bytes start; a fault reading the header is not kept.
    fn start(&self, file: &dyn ReadAt) -> Result<u64, ModelError> {
        if let Some(&s) = self.start.get() {
            return Ok(s);
        }
        let s = match self.at {
            At::ZipHeader(header) => {
                let n = (LOCAL_HEADER as u64).min(file.size().saturating_sub(header));
                let h = file.read_vec(header, n as usize)?;
                data_start(header, &h)
                    .ok_or_else(|| self.bad(file, "no local header where the directory says"))?
            }
            At::Counted { count, numel } => {
                if count.checked_add(8).is_none_or(|e| e > file.size()) {
                    return Err(self.bad(file, "its element count is past the end of the file"));
                }
                let h = file.read_vec(count, 8)?;
                let got = u64::from_le_bytes(h[..8].try_into().expect("8 bytes read"));
                if got != numel {
                    let why = format!("its element count reads {got}, the pickle says {numel}");
                    return Err(self.bad(file, &why));
                }
                count + 8
            }
        };
        if s.checked_add(self.len).is_none_or(|e| e > file.size()) {
            return Err(self.bad(file, "ends past the file"));
        }
        Ok(*self.start.get_or_init(|| s))
    }

    /// The storage's checksum verdict: one pass over all its bytes on the first read that
    /// asks; a source fault is returned and not kept (the next read tries again).
    pub(crate) fn verify(&self, file: &dyn ReadAt) -> Result<(), ModelError> {
        let Some(want) = self.crc32 else {
            return Ok(());
        };
        let verdict = self.verdict.get_or_try(|| {
            // The same bytes (the file by identity, the member and its checksum) passed before,
            // in this mount or an earlier one: not read again.
            let key = self.remember.as_ref().and_then(|store| {
                let id = crate::source::identity_string(file)?;
                Some((store, format!("crc32 {id}:{}:{want:08x}", self.key)))
            });
            if let Some((store, k)) = &key {
                if store.get::<Verified>(k).is_some() {
                    return Ok(Ok(()));
                }
            }
            let start = self.start(file)?;
            let mut h = crc32fast::Hasher::new();
            // Piece by piece as the source hands them (a remote object: its blocks as they
            // stream in, kept for the reads that follow).
            file.for_each_piece(ReadCtx::none(), start, self.len, &mut |piece| {
                h.update(piece)
            })?;
            // A file rewritten during the pass proves nothing about either version.
            let got = h.finalize();
            if got != want {
                return Ok(Err(format!(
                    "zip CRC-32 {got:08x} of member data/{}, {want:08x} expected",
                    self.key
                )));
            }
            if let Some((store, k)) = &key {
                store.put(k, &Verified);
            }
            Ok::<_, ModelError>(Ok(()))
        })?;
        verdict
            .clone()
            .map_err(|why| ModelError::data(file.name(), why))
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
        if problem.is_none() && spec.note.is_none() {
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
                extra,
                problem,
                note: spec.note.clone(),
                mtime: file.mtime(),
                ..TensorMeta::new(
                    name.as_bytes().to_vec(),
                    spec.dtype,
                    spec.shape.clone(),
                    "pytorch",
                )
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

    /// The storage's first byte, its checksum checked (the tensor has no problem, so it has
    /// a storage).
    fn base(&self) -> Result<u64, ModelError> {
        match &self.storage {
            Some(s) => {
                s.verify(&*self.file)?;
                s.start(&*self.file)
            }
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

    fn fill_elements(&self, ctx: &ReadCtx, first: u64, out: &mut [u8]) -> Result<(), ModelError> {
        self.meta.begin_read(first, out.len(), self.file.name())?;
        let base = self.base()?;
        // In bounds: `new` bounded the view's extent by the storage's length.
        match self.contiguous {
            true => {
                let at = base + (self.offset + first) * self.width();
                self.file.read_into(ctx, at, out)?
            }
            false => self.view.fill(ctx, &*self.file, base, first, out)?,
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
        Ok(())
    }

    fn stored_run(&self) -> Option<crate::model::StoredRun> {
        let plain = self.contiguous && !self.big_endian && self.meta.dtype != DType::Bool;
        if !plain || self.meta.problem.is_some() || self.meta.note.is_some() {
            return None;
        }
        let offset = self.offset.checked_mul(self.width())?;
        // Where the bytes are, not whether they are sound: whoever passes the run on reads
        // the tensor once first, which checks it.
        let at = self
            .storage
            .as_ref()?
            .start(&*self.file)
            .ok()?
            .checked_add(offset)?;
        crate::model::StoredRun::elements(&self.file, at, &self.meta)
    }

    fn lend(&self, ctx: &ReadCtx, first: u64, len: usize) -> Option<Result<Bytes, ModelError>> {
        let plain = self.contiguous && !self.big_endian && self.meta.dtype != DType::Bool;
        if !plain || self.meta.problem.is_some() || self.meta.note.is_some() {
            return None;
        }
        debug_check(&self.meta, first, len);
        Some((|| {
            let at = self.base()? + (self.offset + first) * self.width();
            let got = self.file.read(ctx, at, len)?;
            Ok(got)
        })())
    }

    fn cache_identity(&self) -> Option<String> {
        self.identity.clone()
    }
}
