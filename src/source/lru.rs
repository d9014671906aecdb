//! The size bound of a cache directory (`cache_max=`): every file modelfs keeps there
//! (chunk indexes, checksum verdicts, remote blocks) counts, and the least recently used go
//! first (use = modification time, refreshed on every hit).

use std::path::{Path, PathBuf};
use std::time::SystemTime;

/// The kinds of files modelfs keeps under a cache directory, by extension.
pub const OURS: [&str; 3] = ["idx", "ok", "blk"];

/// Every file of ours under `dir` (recursively): path, bytes, last use.
pub fn scan(dir: &Path) -> Vec<(PathBuf, u64, SystemTime)> {
    let mut out = Vec::new();
    let mut dirs = vec![dir.to_path_buf()];
    while let Some(d) = dirs.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in entries.flatten() {
            let Ok(m) = e.metadata() else { continue };
            let p = e.path();
            if m.is_dir() {
                dirs.push(p);
            } else if p.extension().is_some_and(|x| OURS.iter().any(|o| x == *o)) {
                out.push((p, m.len(), m.modified().unwrap_or(SystemTime::UNIX_EPOCH)));
            }
        }
    }
    out
}

/// Removes the least recently used files until at most `target` bytes remain; the bytes left.
pub fn evict(dir: &Path, target: u64) -> u64 {
    let mut files = scan(dir);
    files.sort_by_key(|f| f.2);
    let mut total: u64 = files.iter().map(|f| f.1).sum();
    for (path, len, _) in files {
        if total <= target {
            break;
        }
        if std::fs::remove_file(&path).is_ok() {
            total -= len;
        }
    }
    total
}

/// Marks `path` as just used.
pub fn touch(path: &Path) {
    if let Ok(f) = std::fs::File::options().append(true).open(path) {
        let _ = f.set_modified(SystemTime::now());
    }
}
