//! Listing never decodes: walking every directory of every fixture (TF and Angel, every
//! layout), looking up every file, and stating and reading every `.json` and every file whose
//! size comes from metadata reads no tensor data and renders no text.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::testing::ctx;
use super::{FileKind, Tree, TreeConfig, ROOT_INO};
use crate::layout::Layout;
use crate::model::Model;
use crate::options::Options;
use crate::testing::{fixtures_dir, shared_dir, CountingModel};

/// Every source among the fixtures (and the real-world models when present).
fn sources() -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut add_children = |dir: &Path| {
        let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
            .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.is_dir())
            .collect();
        v.sort();
        out.extend(v);
    };
    add_children(&fixtures_dir().join("tf"));
    add_children(&fixtures_dir().join("angel"));
    if let Some(shared) = shared_dir() {
        add_children(&shared.join("realworld/angel"));
    }
    out
}

/// Opens `dir` as a source, or the source inside it (`model/` of an Angel case).
fn open(dir: &Path) -> Option<Arc<dyn Model>> {
    let opts = Options {
        cache_dir: None,
        ..Options::default()
    };
    [dir.to_path_buf(), dir.join("model")]
        .iter()
        .find_map(|p| crate::detect::model_at(p, &opts.reader()).ok())
}

/// Files whose size comes from metadata: `.json`, `.bin`, `.npy` and the Angel binary formats
/// of a dense tensor (a sparse one's binary size depends on its stored entries).
fn size_from_metadata(name: &str) -> bool {
    [".json", ".bin", ".npy"].iter().any(|s| name.ends_with(s))
}

#[test]
fn listing_and_json_do_no_work() {
    let mut checked = 0;
    for dir in sources() {
        let Some(model) = open(&dir) else { continue };
        let counting = Arc::new(CountingModel::new(model));
        let ctx = ctx(&Layout::all());
        let cfg = TreeConfig::for_user(None, None, std::time::SystemTime::UNIX_EPOCH);
        let tree = Tree::new(counting.clone(), ctx.clone(), cfg);
        let mut files = Vec::new();
        tree.walk(ROOT_INO, "", &mut |p, kind| {
            if kind == FileKind::File {
                files.push(p.to_string());
            }
        })
        .unwrap();
        for f in &files {
            let ino = tree.resolve(f.as_bytes()).unwrap();
            if size_from_metadata(f) {
                let size = tree.getattr(ino).unwrap().size;
                if f.ends_with(".json") {
                    let mut buf = vec![0u8; size as usize];
                    assert_eq!(tree.read(ino, 0, &mut buf).unwrap(), size as usize);
                }
            }
            if tree.file_source(ino).unwrap().is_none() {
                continue; // a reader's document (signatures, the graph): no tensor
            }
            tree.getxattr(ino, b"user.modelfs.shape").unwrap();
            checked += 1;
        }
        let shown = dir.display();
        assert_eq!(counting.reads(), 0, "{shown}: listing read tensor data");
        assert_eq!(
            ctx.cache.rendered_chunks(),
            0,
            "{shown}: listing rendered text"
        );
    }
    assert!(checked > 1000, "only {checked} files looked at");
}

/// A sparse matrix with few stored entries and a wide shape (an Angel LR) keeps its dense
/// text's size unknown: stating it renders nothing (it would render every column).
#[test]
fn a_wide_sparse_matrix_is_not_rendered_to_be_stated() {
    use crate::model::{DType, SparseRows};
    use crate::testing::{key, MemModel, MemTensor};
    let rows = SparseRows {
        rows: vec![0],
        row_ptr: vec![0, 2],
        cols: vec![3, 1 << 23],
        values: [1.5f32, -2.0]
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect(),
    };
    let mut m = MemModel::default();
    m.add(
        key("lr"),
        MemTensor::sparse(DType::F32, 1, 1 << 24, rows).named(b"lr"),
    );
    let ctx = ctx(&[Layout::Json, Layout::Txt, Layout::Libsvm]);
    let cfg = TreeConfig::for_user(None, None, std::time::SystemTime::UNIX_EPOCH);
    let tree = Tree::new(Arc::new(m), ctx.clone(), cfg);
    for f in ["lr.txt", "lr.json"] {
        let ino = tree.resolve(f.as_bytes()).unwrap();
        let started = std::time::Instant::now();
        let attr = tree.getattr(ino).unwrap();
        assert!(
            started.elapsed().as_millis() < 100,
            "{f}: {:?}",
            started.elapsed()
        );
        if f == "lr.txt" {
            assert!(!attr.exact, "lr.txt has a size before it was rendered");
        }
    }
    assert_eq!(ctx.cache.rendered_chunks(), 0, "stating rendered text");
}
