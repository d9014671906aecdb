//! GGUF files (llama.cpp, versions 2 and 3): the header's metadata is the root's
//! `__metadata__.json` (rendered from the file when read: a tokenizer's vocabulary is not
//! kept in memory), and each tensor is shown in numpy's order under its name (dotted names
//! stay one file each, as in safetensors). Plain types read in place; Q4_0, Q4_1, Q5_0, Q5_1,
//! Q8_0 and the K-quants are dequantized to float32 for the element layouts, exactly as
//! gguf-py does; every type's `.bin` is its bytes as stored; other types are `.bin` only.
//!
//! This is the crate `modelfs-gguf`, one of modelfs's readers: it knows only `modelfs-io` and
//! `modelfs-model`, and gives a file as a `model::Model`.
//!
//! ```
//! use modelfs_model::DirEntry;
//! let path = std::path::Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../../fixtures/gguf/plain.gguf"));
//! let model = modelfs_gguf::open(path, &Default::default()).unwrap();
//! let name = b"blk.0.attn_norm.weight".to_vec();
//! assert!(model.list_dir(&[]).unwrap().contains(&DirEntry::Tensor(name.clone())));
//! let t = model.tensor(&[name]).unwrap();
//! assert_eq!(t.meta().shape, [64]);
//! let mut first = [0u8; 4];
//! // A read for no open file handle: no read-ahead of its own to carry.
//! t.read_elements(modelfs_io::source::ReadCtx::none(), 0, &mut first).unwrap();
//! assert_eq!(first, [0x5d, 0xbf, 0xa0, 0xbe], "the float32 gguf-py reads there");
//! ```
#![deny(clippy::undocumented_unsafe_blocks)]

// The layers below, under the names every module of modelfs uses (`crate::source::ReadAt`).
pub(crate) use modelfs_io::source;
pub(crate) use modelfs_model as model;
#[cfg(test)]
pub(crate) use modelfs_model::testing;

mod header;
mod quant;
mod tensor;

use std::path::Path;
use std::sync::Arc;

use crate::model::flat::Flat;
use crate::model::{Document, Model, ModelError, OpenError, ReaderOptions};
use crate::source::{ReadAt, ReadExt, Storage};
pub use header::HeaderError;
use header::Meta;
use tensor::GgufTensor;

const METADATA: &[u8] = b"__metadata__.json";

/// Whether `path` is a GGUF file (its magic).
/// One paragraph naming every ggml type read and how it is shown (`modelfs --help`).
pub fn types_help() -> String {
    let [plain, quant, raw] = quant::types_by_decode();
    format!(
        "GGUF TYPES: {} as stored; {} dequantized to float32 (as gguf-py does); {} listed by \
         name, their blocks as stored (.bin).",
        plain.join(" "),
        quant.join(" "),
        raw.join(" ")
    )
}

pub fn is_source(fs: &dyn Storage, path: &Path) -> bool {
    if !fs.is_file(path) {
        return false;
    }
    let Ok(file) = fs.open(path) else {
        return false;
    };
    file.read_vec(0, 4.min(file.size()) as usize)
        .is_ok_and(|m| *m == *b"GGUF")
}

/// The model of the GGUF file at `path`.
pub fn open(path: &Path, opts: &ReaderOptions) -> Result<Arc<dyn Model>, OpenError> {
    let file = opts.open_file(path)?;
    let model = model_of(&file).map_err(|e| OpenError::unreadable(path, e))?;
    Ok(Arc::new(model))
}

fn model_of(file: &Arc<dyn ReadAt>) -> Result<Flat, ModelError> {
    let h = header::read(&**file, false).map_err(|e| ModelError::data(file.name(), e))?;
    let mut model = Flat::new("gguf");
    model.detail(format!(
        "GGUF version {}, {} metadata keys, {} tensors, data at {}",
        h.version,
        h.metadata.len(),
        h.tensors.len(),
        h.data_start
    ));
    for (k, v) in &h.metadata {
        model.detail(format!("metadata {k}: {}", v.json()));
    }
    for t in &h.tensors {
        let Some(ty) = quant::ggml_type(t.ggml_type) else {
            model.problem(format!("{}: ggml type {}: not known", t.name, t.ggml_type));
            continue;
        };
        let at = h.data_start.saturating_add(t.offset);
        let g = GgufTensor::new(&t.name, &t.dims, ty, at, t.offset, file);
        model.add(&t.name, Arc::new(g), file.name());
    }
    model.add_document(
        METADATA,
        Arc::new(MetadataDoc {
            file: Arc::clone(file),
        }),
    );
    Ok(model)
}

/// The header's metadata as a JSON object, in file order, arrays whole.
struct MetadataDoc {
    file: Arc<dyn ReadAt>,
}

impl Document for MetadataDoc {
    fn chunks(&self) -> u64 {
        1
    }
    fn render(&self, _chunk: u64, out: &mut Vec<u8>) -> Result<(), ModelError> {
        let h =
            header::read(&*self.file, true).map_err(|e| ModelError::data(self.file.name(), e))?;
        let mut m = serde_json::Map::new();
        for (k, v) in &h.metadata {
            m.insert(k.clone(), Meta::json(v));
        }
        let v = serde_json::to_vec_pretty(&m).map_err(|e| ModelError::data("__metadata__", e))?;
        out.extend_from_slice(&v);
        out.push(b'\n');
        Ok(())
    }
    fn mtime(&self) -> std::time::SystemTime {
        self.file.mtime()
    }
}

/// The fuzz target's entry for quantized blocks (`fuzz/fuzz_targets/gguf_blocks.rs`): `data`
/// as blocks of every type that is dequantized, each element of each whole block decoded.
#[cfg(any(test, feature = "testkit"))]
pub fn fuzz_blocks(data: &[u8]) {
    for id in 0..64 {
        let Some(ty) = quant::ggml_type(id) else {
            continue;
        };
        let quant::Decode::Quant(q) = ty.decode else {
            continue;
        };
        let mut out = vec![0u8; ty.block as usize * 4];
        for block in data.chunks_exact(ty.bytes as usize) {
            q.dequantize(block, 0, &mut out);
        }
    }
}

/// The fuzz target's entry (`fuzz/fuzz_targets/gguf.rs`): `data` as a GGUF file, opened,
/// its metadata rendered, every tensor's first and last elements and stored bytes read. Any
/// `Err` is fine; a panic, a hang or a huge allocation is a bug.
#[cfg(any(test, feature = "testkit"))]
pub fn fuzz_file(data: &[u8]) {
    let file: Arc<dyn ReadAt> = Arc::new(crate::source::MemSource::new("f.gguf", data.to_vec()));
    let Ok(model) = model_of(&file) else {
        return;
    };
    crate::model::testing::fuzz_walk(&model);
}

#[cfg(test)]
mod tests;
