//! A plain (unpartitioned) bundle entry as a `model::Tensor`. Bytes come straight from the
//! mapped data file into the caller's buffer; the checksum is verified once, on first read,
//! and the verdict kept.

use std::sync::{Arc, OnceLock};

use bytes::Bytes;

use super::entry::{DataLoc, Entry};
use super::varlen::{VarError, VarIndex};
use super::Bundle;
use crate::codec::mask_crc;
use crate::dtype::{swap_in_place, swap_width};
use crate::model::{
    debug_check, Checksummed, DType, EachString, ModelError, ModelResult, RequestError, Strings,
    Tensor, TensorMeta,
};
use crate::source::{identity_string, ReadAt, ReadCtx, ReadExt, To};
use crate::store::Verified;

/// Tensors at least this large keep their checksum verdict in the bundle's verdict store
/// (checking them costs tens of milliseconds or more; small ones are cheaper to re-check than
/// a cache file is to read).
pub const PERSIST_VERDICT_MIN: u64 = 64 << 20;
/// Entries at least this large share their verdict between tensor objects
/// (`Bundle::shared_verdict`): checking them again costs more than a lookup in a map.
const SHARE_VERDICT_MIN: u64 = 1 << 20;

/// A checksum verdict worked out once: racing first readers wait for the one pass.
pub(crate) type Verdict = crate::source::Flight<Result<(), TensorFault>>;

/// Why a bundle tensor's bytes cannot be served (source errors travel as `ModelError::Source`).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub(crate) enum TensorFault {
    /// Found while reading the index (`TensorMeta::problem`).
    #[error("{0}")]
    Known(String),
    #[error("no data location")]
    NoLocation,
    #[error("{0} bytes do not fit in memory")]
    TooLarge(u64),
    /// The masked CRC-32C the index stores and the one of the bytes read (TF's own form).
    #[error(
        "checksum does not match: stored {stored:#010x}, read {read:#010x} (data file {file})"
    )]
    Checksum {
        file: String,
        stored: u32,
        read: u32,
    },
    #[error("{source} (data file {file})")]
    VarLen {
        file: String,
        #[source]
        source: VarError,
    },
    #[error("variant tensors in a big-endian bundle are not supported")]
    BigEndianVariant,
}

pub(crate) struct TfTensor {
    bundle: Arc<Bundle>,
    meta: TensorMeta,
    loc: Option<DataLoc>,
    /// Fixed-size dtypes: the checksum verdict of the first read (the bundle's, shared, for
    /// a large entry).
    verdict: Arc<Verdict>,
    /// Strings / variants: the element index (built and verified on first read).
    var_index: OnceLock<Result<VarIndex, VarError>>,
}

impl TfTensor {
    /// A tensor for `entry` stored under `name`. Opens the entry's data file (once per
    /// bundle) to check that the entry lies inside it; a failure becomes the tensor's problem.
    pub(crate) fn new(bundle: Arc<Bundle>, name: Vec<u8>, entry: &Entry) -> TfTensor {
        let mut problem = entry.problem.clone();
        if problem.is_none() {
            if let Some(loc) = entry.loc {
                problem = location_problem(&bundle, loc);
            }
        }
        let meta = TensorMeta {
            problem,
            note: entry.note.clone(),
            mtime: bundle.mtime,
            ..TensorMeta::new(name, entry.dtype, entry.shape.clone(), "tf-checkpoint")
        };
        let verdict = match entry.loc {
            Some(loc) if loc.size >= SHARE_VERDICT_MIN => bundle.shared_verdict(loc),
            _ => Arc::default(),
        };
        TfTensor {
            bundle,
            meta,
            loc: entry.loc,
            verdict,
            var_index: OnceLock::new(),
        }
    }

    pub(super) fn loc(&self) -> Option<DataLoc> {
        self.loc
    }

    /// Identity of the index file this entry was read from (its dtype, shape and location
    /// are fixed by that file's bytes).
    pub(super) fn index_identity(&self) -> Option<String> {
        identity_string(&**self.bundle.table.file())
    }

    /// Identity of this entry's bytes: the data file's identity and the entry's location and
    /// checksum. `None` for a tensor with a known problem or data not backed by a file.
    pub(super) fn location_identity(&self) -> Option<String> {
        if self.meta.problem.is_some() {
            return None;
        }
        let loc = self.loc?;
        let shard = self.bundle.shard(loc.shard).ok()?;
        let shard = identity_string(&*shard)?;
        Some(format!(
            "{shard}@{}+{}~{:08x}",
            loc.offset, loc.size, loc.crc
        ))
    }

    fn fail(&self, fault: TensorFault) -> ModelError {
        ModelError::data(
            format!(
                "{}: tensor {}",
                self.bundle.prefix_name,
                String::from_utf8_lossy(&self.meta.name)
            ),
            fault,
        )
    }

    /// The data file and location, or the tensor's known problem.
    fn data_file(&self) -> Result<(Arc<dyn ReadAt>, DataLoc), ModelError> {
        if let Some(p) = self.meta.problem.as_ref().or(self.meta.note.as_ref()) {
            return Err(self.fail(TensorFault::Known(p.clone())));
        }
        let loc = self.loc.ok_or_else(|| self.fail(TensorFault::NoLocation))?;
        Ok((self.bundle.shard(loc.shard)?, loc))
    }

    /// Elements `first..` into `out`, verified by the checksum pass first when `check`.
    fn read_fixed(
        &self,
        ctx: &ReadCtx,
        first: u64,
        out: &mut [u8],
        check: bool,
    ) -> Result<(), ModelError> {
        self.read_runs(ctx, &[first], out, check)
    }

    /// Runs of `out.len() / firsts.len()` bytes from each element of `firsts` into `out`,
    /// verified by the checksum pass first when `check`.
    fn read_runs(
        &self,
        ctx: &ReadCtx,
        firsts: &[u64],
        out: &mut [u8],
        check: bool,
    ) -> Result<(), ModelError> {
        let dtype = self.meta.dtype;
        if let Some(p) = &self.meta.problem {
            return Err(self.fail(TensorFault::Known(p.clone())));
        }
        let run = out.len() / firsts.len().max(1);
        debug_assert_eq!(run * firsts.len(), out.len());
        let elem = dtype.elem_size().unwrap_or(1) as u64;
        let (file, loc) = self.data_file()?;
        if check {
            self.verify_fixed(&*file, loc)?;
        }
        if out.is_empty() {
            return Ok(());
        }
        // The entry's stored bytes bound the read as well as its shape does.
        let start_of = |first: u64| {
            debug_check(&self.meta, first, run);
            first
                .checked_mul(elem)
                .filter(|s| s.checked_add(run as u64).is_some_and(|e| e <= loc.size))
                .ok_or(RequestError::OutOfRange {
                    first,
                    count: run as u64 / elem,
                    total: loc.size / elem,
                })
        };
        match firsts {
            // A read of one run (every plain read): no list of starts to build.
            &[first] => file.read_into(ctx, loc.offset + start_of(first)?, out)?,
            _ => {
                let starts = firsts
                    .iter()
                    .map(|&f| start_of(f))
                    .collect::<Result<Vec<_>, _>>()?;
                file.read_with(ctx, loc.offset, To::Runs(&starts, out))?
            }
        }
        if self.bundle.big_endian {
            swap_in_place(out, swap_width(dtype));
        }
        if dtype == DType::Bool {
            for b in out.iter_mut() {
                *b = (*b != 0) as u8;
            }
        }
        Ok(())
    }

    fn verify_fixed(&self, file: &dyn ReadAt, loc: DataLoc) -> Result<(), ModelError> {
        if !self.bundle.verify {
            return Ok(());
        }
        // Only verdicts on the bytes are kept: a failed read may succeed next time. Readers
        // racing on a first read wait for one checksum pass rather than each making one.
        let verdict = self.verdict.get_or_try(|| self.check_crc(file, loc))?;
        verdict.clone().map_err(|f| self.fail(f))
    }

    /// The checksum verdict on the tensor's bytes; `Err` only when they cannot be read.
    fn check_crc(
        &self,
        file: &dyn ReadAt,
        loc: DataLoc,
    ) -> Result<Result<(), TensorFault>, ModelError> {
        // A large tensor whose exact bytes (same files by identity, same location and
        // checksum) were verified before, by this or an earlier mount, is not re-read.
        let remembered = (loc.size >= PERSIST_VERDICT_MIN)
            .then(|| self.bundle.verdict_store().zip(self.cache_identity()))
            .flatten()
            .map(|(store, id)| (store, format!("crc32c {id}")));
        if let Some((store, key)) = &remembered {
            if store.get::<Verified>(key).is_some() {
                return Ok(Ok(()));
            }
        }
        if usize::try_from(loc.size).is_err() {
            return Ok(Err(TensorFault::TooLarge(loc.size)));
        }
        // As the source hands the bytes over (a mapped file: in large pieces, each on every
        // core; a remote object: its blocks on several connections at once, kept for the
        // reads that follow), the parts' checksums combined.
        let crc = crate::codec::crc32c_of(file, ReadCtx::none(), loc.offset, loc.size)?;
        let read = mask_crc(crc);
        if read != loc.crc {
            let file = self.bundle.shard_name(loc.shard).to_string();
            let stored = loc.crc;
            return Ok(Err(TensorFault::Checksum { file, stored, read }));
        }
        // A file rewritten during the read proves nothing about either version.
        if let Some((store, key)) = &remembered {
            store.put(key, &Verified);
        }
        Ok(Ok(()))
    }
}

/// Why the entry's bytes cannot be where it says, if they cannot.
fn location_problem(bundle: &Bundle, loc: DataLoc) -> Option<String> {
    let file = match bundle.shard(loc.shard) {
        Ok(f) => f,
        // Left to the read, which fails now and may succeed later.
        Err(crate::model::ModelError::Source(e)) if e.is_transient() => return None,
        Err(e) => return Some(e.to_string()),
    };
    match loc.offset.checked_add(loc.size) {
        Some(end) if end <= file.size() => None,
        _ => Some(format!(
            "bytes {}..{}+{} lie past the end of data file {} ({} bytes)",
            loc.offset,
            loc.offset,
            loc.size,
            bundle.shard_name(loc.shard),
            file.size()
        )),
    }
}

impl Tensor for TfTensor {
    fn meta(&self) -> &TensorMeta {
        &self.meta
    }

    /// Index file identity + data file identity + location + key: any rewrite of either file
    /// changes it, so a stored text index is never used for other bytes.
    fn cache_identity(&self) -> Option<String> {
        let index = self.index_identity()?;
        let data = self.location_identity()?;
        Some(format!(
            "tf\0{index}\0{data}\0{}",
            self.meta.name.escape_ascii()
        ))
    }

    fn fill_elements(&self, ctx: &ReadCtx, first: u64, out: &mut [u8]) -> Result<(), ModelError> {
        self.read_fixed(ctx, first, out, true)
    }

    fn stored_run(&self) -> Option<crate::model::StoredRun> {
        let dtype = self.meta.dtype;
        // As `lend` serves them: little-endian, not bools; strings in the bundle's encoding.
        if self.bundle.big_endian || dtype == DType::Bool || self.meta.problem.is_some() {
            return None;
        }
        if dtype.elem_size().is_none() && dtype != DType::Str {
            return None;
        }
        let (file, loc) = self.data_file().ok()?;
        Some(crate::model::StoredRun {
            file,
            offset: loc.offset,
            len: loc.size,
        })
    }

    fn lend(&self, ctx: &ReadCtx, first: u64, len: usize) -> Option<ModelResult<Bytes>> {
        let dtype = self.meta.dtype;
        // Only bytes served as stored: no byte swap, no bool normalisation; a known problem
        // is `fill_elements`'s to report.
        if self.bundle.big_endian || dtype == DType::Bool || self.meta.problem.is_some() {
            return None;
        }
        debug_check(&self.meta, first, len);
        let elem = dtype.elem_size()? as u64;
        let (file, loc) = self.data_file().ok()?;
        let start = first
            .checked_mul(elem)
            .filter(|s| s.checked_add(len as u64).is_some_and(|e| e <= loc.size))?;
        let got = file.read(ctx, loc.offset + start, len);
        Some((|| {
            self.verify_fixed(&*file, loc)?;
            let bytes = got?;
            Ok(bytes)
        })())
    }

    crate::model::capabilities!(as_strings: Strings, as_checksummed: Checksummed);
}

impl Strings for TfTensor {
    fn for_each_string(&self, ctx: &ReadCtx, first: u64, count: u64, f: EachString) -> ModelResult {
        let dtype = self.meta.dtype;
        if dtype != DType::Str && dtype != DType::Variant {
            return Err(RequestError::NotStrings(dtype.name().into_owned()).into());
        }
        let (file, loc) = self.data_file()?;
        if dtype == DType::Variant && self.bundle.big_endian {
            return Err(self.fail(TensorFault::BigEndianVariant));
        }
        let size =
            usize::try_from(loc.size).map_err(|_| self.fail(TensorFault::TooLarge(loc.size)))?;
        let each = |data: &[u8]| -> Result<(), ModelError> {
            let n = self.meta.num_elements().unwrap_or(0);
            let index = self.var_index.get_or_init(|| {
                let verify = self.bundle.verify;
                match dtype {
                    DType::Str => {
                        VarIndex::build_strings(data, n, self.bundle.big_endian, verify, loc.crc)
                    }
                    _ => VarIndex::build_variants(data, n, verify, loc.crc),
                }
            });
            // Name the data file: the problem is in its bytes, not in the index.
            let in_file = |source: VarError| {
                self.fail(TensorFault::VarLen {
                    file: self.bundle.shard_name(loc.shard),
                    source,
                })
            };
            let index = index.as_ref().map_err(|e| in_file(e.clone()))?;
            index.for_each(data, first, count, f).map_err(in_file)?;
            Ok(())
        };
        // The strings handed to `f` may come from the mapping: a file rewritten in place
        // while they were read fails the read (callers drop what `f` collected).
        file.with_bytes(ctx, loc.offset, size, each)?
    }
}

impl Checksummed for TfTensor {
    /// The entry's checksum covers exactly the bytes served when they are stored
    /// little-endian with a fixed width (strings and byte-swapped data differ).
    fn stored_crc32c(&self) -> Option<u32> {
        let fixed = self.meta.dtype.elem_size().is_some() && self.meta.dtype != DType::Bool;
        (fixed && !self.bundle.big_endian && self.meta.problem.is_none()).then_some(self.loc?.crc)
    }

    fn fill_elements_unverified(&self, ctx: &ReadCtx, first: u64, out: &mut [u8]) -> ModelResult {
        self.read_fixed(ctx, first, out, false)
    }

    fn fill_runs_unverified(&self, ctx: &ReadCtx, firsts: &[u64], out: &mut [u8]) -> ModelResult {
        self.read_runs(ctx, firsts, out, false)
    }

    fn deferred_crc32c(&self) -> Option<u32> {
        let fixed = self.meta.dtype.elem_size().is_some() && self.meta.dtype != DType::Bool;
        let unknown = self.bundle.verify && self.verdict.get().is_none();
        (fixed && unknown && !self.bundle.big_endian && self.meta.problem.is_none())
            .then_some(self.loc?.crc)
    }

    fn confirm_crc32c(&self, crc: u32) -> Result<(), ModelError> {
        let (_, loc) = self.data_file()?;
        let verdict = match mask_crc(crc) == loc.crc {
            true => Ok(()),
            false => Err(TensorFault::Checksum {
                file: self.bundle.shard_name(loc.shard).to_string(),
                stored: loc.crc,
                read: mask_crc(crc),
            }),
        };
        // Bytes that changed while read prove nothing: nothing is kept then.
        let verdict = self.verdict.get_or_try(|| Ok::<_, ModelError>(verdict))?;
        verdict.clone().map_err(|f| self.fail(f))
    }
}
