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
