//! A source's fingerprint: its files and their identities, hashed. A mount follows its source
//! by it (`fs::live`), and a directory of models knows its unchanged members by it.

use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};
use std::path::Path;

use modelfs_io::source::{EntryKind, Storage};

/// Directory levels below the source that a fingerprint covers: a Serving
/// base's `version/variables/` is the deepest a model goes.
const DEPTH: usize = 4;
/// Entries a fingerprint lists at most (a source pointed at a huge tree stops there).
const MAX_ENTRIES: usize = 200_000;

/// What the source holds: every file under it (to `DEPTH`) with its identity, hashed; a
/// prefix's own files beside it. `None` when it cannot be listed now (a fault).
pub fn fingerprint(fs: &dyn Storage, path: &Path) -> Option<u64> {
    let mut h = DefaultHasher::new();
    match fs.kind(path).ok()? {
        Some(EntryKind::Dir) => {
            let mut seen = 0;
            if !hash_dir(fs, path, DEPTH, &mut seen, &mut h)? {
                // No listing (HTTP): the files a model there is found by.
                for f in ["checkpoint", "saved_model.pb", "variables/variables.index"] {
                    fs.stamp(&path.join(f)).ok()?.hash(&mut h);
                }
            }
        }
        kind @ (Some(EntryKind::File) | None) => {
            let dir = path.parent()?;
            // A prefix `P` (no file of that name) stands for `P` and `P.…`; a file `P.x` (an
            // index, a graph) for its siblings `P.…`. Not `P0…`: `ckpt-1` is not `ckpt-10`.
            let mut stem = path.file_name()?.as_encoded_bytes();
            if kind.is_some() {
                if let Some(dot) = stem.iter().rposition(|&b| b == b'.') {
                    stem = &stem[..dot];
                }
            }
            let ours = |n: &[u8]| {
                n == stem
                    || n.strip_prefix(stem)
                        .is_some_and(|r| r.first() == Some(&b'.'))
            };
            let mut entries = fs.list(dir).ok()?;
            entries.sort_by(|a, b| a.0.cmp(&b.0));
            for (name, _) in entries {
                if ours(name.as_encoded_bytes()) {
                    name.hash(&mut h);
                    fs.stamp(&dir.join(&name)).ok()?.hash(&mut h);
                }
            }
        }
    }
    Some(h.finish())
}

/// Hashes `dir`'s files and their identities, `depth` levels down. `Some(false)`: the
/// storage cannot list.
fn hash_dir(
    fs: &dyn Storage,
    dir: &Path,
    depth: usize,
    seen: &mut usize,
    h: &mut DefaultHasher,
) -> Option<bool> {
    let mut entries = match fs.list(dir) {
        Ok(e) => e,
        Err(modelfs_io::source::SourceError::NoListing { .. }) => return Some(false),
        Err(_) => return None,
    };
    entries.sort_by(|a, b| a.0.cmp(&b.0));
    for (name, kind) in entries {
        *seen += 1;
        if *seen > MAX_ENTRIES {
            break;
        }
        name.hash(h);
        let p = dir.join(&name);
        match kind {
            EntryKind::File => fs.stamp(&p).ok()?.hash(h),
            EntryKind::Dir if depth > 1 => {
                hash_dir(fs, &p, depth - 1, seen, h)?;
            }
            EntryKind::Dir => {}
        }
    }
    Some(true)
}
