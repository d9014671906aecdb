//! The size bound of a cache directory (`cache_max=`): every file modelfs keeps there
//! (a store per source, remote blocks) counts, and the least recently used go
//! first (use = modification time, refreshed on every hit).

use std::path::{Path, PathBuf};
use std::time::SystemTime;

/// The kinds of files modelfs keeps under a cache directory, by extension: a store per
/// source, remote blocks, and the per-file indexes and verdicts older versions kept.
pub const OURS: [&str; 4] = ["store", "blk", "idx", "ok"];

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
    evict_except(dir, target, None)
}

/// `evict`, sparing `keep` (the file its caller is writing) unless nothing else is left.
pub fn evict_except(dir: &Path, target: u64, keep: Option<&Path>) -> u64 {
    let mut files = scan(dir);
    // Oldest first, the spared file last of all.
    files.sort_by_key(|f| (Some(f.0.as_path()) == keep, f.2));
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
