//! numpy files: a `.npy` (one array, shown under its file's stem) or an `.npz` (a zip of
//! `<key>.npy` members, `np.savez`; keys split on `/` as a TF key is). Only headers are read at
//! mount: the zip's central directory and each member's `.npy` header. A stored member's array
//! is read in place, its zip CRC-32 checked on the first read (`verify=crc`); a deflated one
//! (`np.savez_compressed`) is decompressed as far as a read needs, its CRC-32 checked by a
//! pass of its own first (`inflate.rs`; a Fortran-order one by a pass over the member per read). Object arrays are pickles: refused, never unpickled.
//!
//! This is the crate `modelfs-numpy`, one of modelfs's readers: it knows only `modelfs-io` and
//! `modelfs-model`.
//!
//! ```
//! use modelfs_model::{DType, DirEntry};
//! let path = std::path::Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../../fixtures/numpy/dt_f4.npy"));
//! let model = modelfs_numpy::open(path, &Default::default()).unwrap();
//! assert_eq!(model.list_dir(&[]).unwrap(), [DirEntry::Tensor(b"dt_f4".to_vec())]);
//! let t = model.tensor(&[b"dt_f4".to_vec()]).unwrap();
//! assert_eq!(t.meta().dtype, DType::F32);
//! ```
#![deny(clippy::undocumented_unsafe_blocks)]

// The layers below, under the names every module of modelfs uses (`crate::source::ReadAt`).
pub(crate) use modelfs_io::source;
pub(crate) use modelfs_model as model;
#[cfg(test)]
pub(crate) use modelfs_model::testing;

mod inflate;
mod npy;
mod tensor;

use std::io::Read;
use std::path::Path;
use std::sync::Arc;

use crate::model::flat::Flat;
use crate::model::{Model, ModelError, OpenError, ReaderOptions};
use crate::source::seekable::Seekable;
use crate::source::{ReadAt, ReadExt, Storage};
use inflate::Inflated;
pub use npy::NpyError;
use npy::NpyHeader;
use tensor::{Member, NpyTensor};

/// Whether `path` is a numpy file this reader opens.
pub fn is_source(fs: &dyn Storage, path: &Path) -> bool {
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
    (name.ends_with(".npy") || name.ends_with(".npz")) && fs.is_file(path)
}

/// The model of the `.npy` or `.npz` at `path`.
pub fn open(path: &Path, opts: &ReaderOptions) -> Result<Arc<dyn Model>, OpenError> {
    let file = opts.open_file(path)?;
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
    let mut model = Flat::new("numpy");
    if let Some(stem) = name.strip_suffix(".npy") {
        let h = header_at(&*file, 0).map_err(|e| OpenError::unreadable(path, e))?;
        let t = NpyTensor::new(stem, &h, 0, file.size(), &file);
        model.add(stem, Arc::new(t), file.name());
    } else {
        npz(&file, &mut model, opts.verify).map_err(|e| OpenError::unreadable(path, e))?;
    }
    Ok(Arc::new(model))
}

/// The members of an `.npz` into `model`.
fn npz(file: &Arc<dyn ReadAt>, model: &mut Flat, verify: bool) -> Result<(), ModelError> {
    let zip_err = |e: zip::result::ZipError| ModelError::data(file.name(), e);
    let mut zip = zip::ZipArchive::new(Seekable::new(file)).map_err(zip_err)?;
    for i in 0..zip.len() {
        let (name, method, at, csize, size, crc) = {
            let m = zip.by_index_raw(i).map_err(zip_err)?;
            let (at, c) = (m.data_start(), m.compressed_size());
            (
                m.name().to_string(),
                m.compression(),
                at,
                c,
                m.size(),
                m.crc32(),
            )
        };
        let stored = method == zip::CompressionMethod::Stored;
        let Some(key) = name.strip_suffix(".npy") else {
            model.detail(format!("member {name}: not an array (.npy), not shown"));
            continue;
        };
        let end = at.checked_add(size).filter(|&e| e <= file.size());
        let t = match (stored, end) {
            (true, Some(end)) => match header_at(&**file, at) {
                Ok(h) => {
                    let t = NpyTensor::new(key, &h, at, end, file);
                    match verify {
                        true => t.verified_by(Member { at, end, crc }),
                        false => t,
                    }
                }
                Err(e) => NpyTensor::unreadable(key, e.to_string(), file),
            },
            (true, None) => {
                return Err(ModelError::data(
                    file.name(),
                    format!("member {name} ends past the file"),
                ))
            }
            // Deflated: the header is read from the start of the stream to list the array.
            (false, _) if method == zip::CompressionMethod::Deflated => {
                let cend = at.checked_add(csize).filter(|&e| e <= file.size());
                let cend = cend.ok_or_else(|| {
                    ModelError::data(file.name(), format!("member {name} ends past the file"))
                })?;
                match deflated_header(&mut zip.by_index(i).map_err(zip_err)?) {
                    Ok(h) => {
                        let inflated = Inflated::new(file, (at, cend), size, crc, verify);
                        NpyTensor::new(key, &h, 0, inflated.len(), file)
                            .inflated_from(Arc::new(inflated))
                    }
                    Err(e) => NpyTensor::unreadable(key, e.to_string(), file),
                }
            }
            (false, _) => {
                model.detail(format!("member {name}: compressed by {method}, not shown"));
                continue;
            }
        };
        model.add(key, Arc::new(t), file.name());
    }
    Ok(())
}

/// The `.npy` header at `at` of `file`.
fn header_at(file: &dyn ReadAt, at: u64) -> Result<NpyHeader, ModelError> {
    let name = file.name().to_string();
    let bad = |e: NpyError| ModelError::data(&name, e);
    let first = file.read_vec(at, 12.min(file.size().saturating_sub(at)) as usize)?;
    let (prefix, len) = npy::prefix(&first).map_err(bad)?;
    let start = at + prefix;
    if start.checked_add(len).is_none_or(|e| e > file.size()) {
        return Err(ModelError::data(
            &name,
            "the .npy header ends past the file",
        ));
    }
    let text = file.read_vec(start, len as usize)?;
    npy::parse(&text, prefix + len).map_err(bad)
}

/// The `.npy` header at the start of a decompressing reader.
fn deflated_header(r: &mut impl Read) -> Result<NpyHeader, ModelError> {
    let mut first = [0u8; 12];
    r.read_exact(&mut first)
        .map_err(|e| ModelError::data("a deflated member", e))?;
    let (prefix, len) =
        npy::prefix(&first).map_err(|e| ModelError::data("a deflated member", e))?;
    let mut text = first[prefix as usize..].to_vec();
    let more = (len as usize).saturating_sub(text.len());
    let mut rest = Vec::new();
    r.take(more as u64)
        .read_to_end(&mut rest)
        .map_err(|e| ModelError::data("a deflated member", e))?;
    text.extend_from_slice(&rest);
    text.truncate(len as usize);
    npy::parse(&text, prefix + len).map_err(|e| ModelError::data("a deflated member", e))
}

/// The fuzz target's entry (`fuzz/fuzz_targets/numpy.rs`): `data` as an `.npy` and as an
/// `.npz`, opened and every array's first elements read. Any `Err` is fine; a panic, a hang
/// or a huge allocation is a bug.
#[cfg(any(test, feature = "testkit"))]
pub fn fuzz_file(data: &[u8]) {
    let file: Arc<dyn ReadAt> = Arc::new(crate::source::MemSource::new("f", data.to_vec()));
    let mut model = Flat::new("numpy");
    if let Ok(h) = header_at(&*file, 0) {
        model.add(
            "a",
            Arc::new(NpyTensor::new("a", &h, 0, file.size(), &file)),
            "f",
        );
    }
    let _ = npz(&file, &mut model, true);
    crate::model::testing::fuzz_walk(&model);
}

#[cfg(test)]
mod real_tests;
#[cfg(test)]
mod tests;
