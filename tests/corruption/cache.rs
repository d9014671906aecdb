//! The persistent chunk-index store (`-o cache_dir=`): its files can rot or be tampered
//! with. A corrupt index file must never crash, over-allocate or make a text file serve
//! wrong bytes: each text file reads exactly as before or fails.

use std::path::Path;
use std::sync::Arc;

use modelfs_io::store::DiskStore;
use modelfs_layout::cache::ChunkCache;
use modelfs_layout::{AngelFormat, Layout, LayoutCtx};
use modelfs_model::testing::MemTensor;
use modelfs_model::{ModelError, Sparse, Strings, Tensor, TensorMeta};

use super::harness::*;
use modelfs_io::source::ReadCtx;

/// A tensor with a stable cache identity, so its text indexes go to the store.
struct Stable(Arc<dyn Tensor>, String);

impl Tensor for Stable {
    fn meta(&self) -> &TensorMeta {
        self.0.meta()
    }
    fn fill_elements(&self, ctx: &ReadCtx, first: u64, out: &mut [u8]) -> Result<(), ModelError> {
        self.0.read_elements(ctx, first, out)
    }
    fn as_strings(&self) -> Option<&dyn Strings> {
        self.0.as_strings()
    }
    fn as_sparse(&self) -> Option<&dyn Sparse> {
        self.0.as_sparse()
    }
    fn cache_identity(&self) -> Option<String> {
        Some(self.1.clone())
    }
}

const LAYOUTS: [Layout; 4] = [
    Layout::Txt,
    Layout::Csv,
    Layout::Angel(AngelFormat::ColIdValueText),
    Layout::Angel(AngelFormat::TextColumn),
];

fn tensors() -> Vec<Arc<dyn Tensor>> {
    let vals: Vec<f32> = (0..60_000).map(|i| (i as f32 * 0.37).sin() * 1e5).collect();
    let strings: Vec<Vec<u8>> = (0..5000).map(|i| format!("s,{i}\n").into_bytes()).collect();
    vec![
        Arc::new(Stable(
            MemTensor::f32(&[300, 200], &vals).arc(),
            "f32".into(),
        )),
        Arc::new(Stable(
            MemTensor::strings(&[5000], strings).arc(),
            "str".into(),
        )),
    ]
}

fn ctx(store: &Path) -> Arc<LayoutCtx> {
    let cache = ChunkCache::new(8 << 20).with_threads(1);
    cache.set_offset_store(Arc::new(DiskStore::new(store, "corruption", u64::MAX)));
    Arc::new(LayoutCtx::new(LAYOUTS.to_vec(), cache))
}

/// Every layout file of every tensor, whole.
fn render_all(store: &Path) -> Vec<Result<Vec<u8>, String>> {
    let c = ctx(store);
    let mut out = Vec::new();
    for t in tensors() {
        for l in LAYOUTS {
            let Ok(f) = modelfs_layout::content(l, Arc::clone(&t), &c) else {
                continue;
            };
            out.push((|| {
                let size = f.size().map_err(|e| e.to_string())?;
                let mut all = Vec::new();
                let mut buf = vec![0u8; 70_000];
                while (all.len() as u64) < size.min(64 << 20) {
                    let n = f
                        .read_at(all.len() as u64, &mut buf)
                        .map_err(|e| e.to_string())?;
                    if n == 0 {
                        return Err(format!("short read at {} of {size}", all.len()));
                    }
                    all.extend_from_slice(&buf[..n]);
                }
                Ok(all)
            })());
        }
    }
    out
}

#[test]
fn corrupt_persistent_chunk_indexes() {
    let _g = serial();
    let tmp = tempfile::tempdir().unwrap();
    let store = tmp.path().join("idx");
    let good = render_all(&store);
    assert!(good.iter().all(Result::is_ok));
    let mut files: Vec<_> = std::fs::read_dir(&store)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no index files were written");
    for f in &files {
        let pristine = std::fs::read(f).unwrap();
        let n = pristine.len();
        let mut variants: Vec<(String, Vec<u8>)> = Vec::new();
        // Offsets made huge but still non-decreasing, from the last one back.
        for back in [1usize, 2, n / 16] {
            let mut b = pristine.clone();
            let mut at = n.saturating_sub(8 * back);
            while at + 8 <= n {
                let v = u64::from_le_bytes(b[at..at + 8].try_into().unwrap()) | (1 << 50);
                b[at..at + 8].copy_from_slice(&v.to_le_bytes());
                at += 8;
            }
            variants.push((format!("last {back} offsets + 2^50"), b));
        }
        // One offset slightly off (still valid-looking).
        let mut b = pristine.clone();
        b[n - 8 * 2] ^= 1;
        variants.push(("an offset off by one".into(), b));
        for pos in (0..n).step_by(n / 40 + 1) {
            let mut b = pristine.clone();
            b[pos] ^= 0xff;
            variants.push((format!("byte {pos} flipped"), b));
        }
        for (what, bytes) in variants {
            std::fs::write(f, &bytes).unwrap();
            let case = format!("{}: {what}", f.display());
            let s = store.clone();
            let bad = run_case(&case, ALLOC_SLACK, move || render_all(&s));
            for (g, b) in good.iter().zip(&bad) {
                if let Ok(b) = b {
                    assert!(
                        g.as_ref().ok() == Some(b),
                        "case {case}: a text file serves different bytes"
                    );
                }
            }
        }
        std::fs::write(f, &pristine).unwrap();
    }
}
