//! Enumerating an Angel model directory (formats/angel.md §2). Only directory entries are
//! read here, never a meta or data file.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::source::{EntryKind, SourceError, Storage};

/// A matrix folder and the meta file to use in it.
#[derive(Clone, Debug)]
pub(crate) struct MatrixDir {
    /// The folder's name as bytes (the matrix's display name).
    pub(crate) name: Vec<u8>,
    pub(crate) dir: PathBuf,
    pub(crate) meta_path: PathBuf,
    /// Where the folder's files are.
    pub(crate) storage: Arc<dyn Storage>,
}

#[derive(Debug, Default)]
pub(crate) struct Scan {
    /// Sorted by name.
    pub(crate) matrices: Vec<MatrixDir>,
    /// Problems found while listing (unfinished saves, both metas present).
    pub(crate) problems: Vec<String>,
}

/// Entries every reader ignores: hidden files (incl. Hadoop `.F.crc`) and writer temporaries.
pub(crate) fn is_ignored(name: &[u8]) -> bool {
    name.starts_with(b".") || name.starts_with(b"_tmp.") || name.starts_with(b"_final.")
}

/// Bytes of a meta file compared with its twin, at most (metas are a few KB per partition).
const MAX_META_COMPARED: u64 = 64 << 20;

/// The meta file of `dir`: `_meta` (Angel ≥ 3.2) preferred over `meta` (2.x). The flag is set
/// when both exist and differ (Angel never writes both; a copy of `.angel/`, which offers
/// both names for one meta so that every Angel version loads it, has them equal).
pub(crate) fn meta_file(fs: &dyn Storage, dir: &Path) -> Option<(PathBuf, bool)> {
    let new = dir.join("_meta");
    let old = dir.join("meta");
    match (fs.is_file(&new), fs.is_file(&old)) {
        (true, false) => Some((new, false)),
        (true, true) => {
            let read = |p: &Path| fs.read_small(p, MAX_META_COMPARED).ok();
            let same = matches!((read(&new), read(&old)), (Some(a), Some(b)) if a == b);
            Some((new, !same))
        }
        (false, true) => Some((old, false)),
        _ => None,
    }
}

fn name_bytes(name: &std::ffi::OsStr) -> Vec<u8> {
    use std::os::unix::ffi::OsStrExt;
    name.as_bytes().to_vec()
}

/// A folder with `psmeta` or `_tmp.*` files but no meta: a crashed or unfinished save.
fn looks_unfinished(fs: &dyn Storage, dir: &Path) -> bool {
    fs.list(dir)
        .map(|entries| {
            entries.iter().any(|(n, _)| {
                let n = name_bytes(n);
                n == b"psmeta" || n.starts_with(b"_tmp.")
            })
        })
        .unwrap_or(false)
}

/// Lists the matrices of the model directory `root`.
pub(crate) fn scan(storage: &Arc<dyn Storage>, root: &Path) -> Result<Scan, SourceError> {
    let fs = &**storage;
    let mut out = Scan::default();
    for (file_name, kind) in fs.list(root)? {
        let name = name_bytes(&file_name);
        if is_ignored(&name) || kind != EntryKind::Dir {
            continue; // graph.json and any other top-level file
        }
        let path = root.join(&file_name);
        match meta_file(fs, &path) {
            Some((meta_path, both)) => {
                if both {
                    let msg = format!(
                        "{}: both _meta and meta exist and differ; using _meta",
                        fs.display(&path)
                    );
                    log::warn!("{msg}");
                    out.problems.push(msg);
                }
                out.matrices.push(MatrixDir {
                    name,
                    dir: path,
                    meta_path,
                    storage: Arc::clone(storage),
                });
            }
            None if looks_unfinished(fs, &path) => {
                let msg = format!(
                    "{}: unfinished Angel save (psmeta/_tmp files, no meta); not shown",
                    fs.display(&path)
                );
                log::warn!("{msg}");
                out.problems.push(msg);
            }
            None => {}
        }
    }
    out.matrices.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scan_rules() {
        let d = tempfile::tempdir().unwrap();
        let r = d.path();
        std::fs::write(r.join("graph.json"), b"{}").unwrap();
        for m in [
            "b", "a", ".hidden", "_tmp.x", "both", "twins", "crashed", "empty",
        ] {
            std::fs::create_dir(r.join(m)).unwrap();
        }
        std::fs::write(r.join("a/meta"), b"").unwrap();
        std::fs::write(r.join("b/_meta"), b"").unwrap();
        std::fs::write(r.join(".hidden/_meta"), b"").unwrap();
        std::fs::write(r.join("_tmp.x/_meta"), b"").unwrap();
        std::fs::write(r.join("both/_meta"), b"x").unwrap();
        std::fs::write(r.join("both/meta"), b"y").unwrap();
        // A copy of `.angel/`: one meta under both names, not a problem.
        std::fs::write(r.join("twins/_meta"), b"z").unwrap();
        std::fs::write(r.join("twins/meta"), b"z").unwrap();
        std::fs::write(r.join("crashed/psmeta"), b"").unwrap();
        let s = scan(&crate::source::local(), r).unwrap();
        let mut names: Vec<&[u8]> = s.matrices.iter().map(|m| &m.name[..]).collect();
        names.sort();
        assert_eq!(names, vec![&b"a"[..], b"b", b"both", b"twins"]);
        assert!(s
            .matrices
            .iter()
            .all(|m| m.name.len() < 3 || m.meta_path.ends_with("_meta")));
        assert_eq!(s.problems.len(), 2, "{:?}", s.problems);
        assert!(s.problems.iter().any(|p| p.contains("crashed")));
        assert!(s
            .problems
            .iter()
            .any(|p| p.contains("both") && p.contains("differ")));
    }
}
