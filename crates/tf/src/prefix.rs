//! A checkpoint prefix `P` and the names of its files (§1): `P.index`, and the directory
//! and base name the data shards `P.data-…` sit under. Both the detection and the reader
//! name files this way.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

pub const INDEX_SUFFIX: &[u8] = b".index";

/// `P` → `P.index`.
pub fn index_path(prefix: &Path) -> PathBuf {
    let mut s = prefix.as_os_str().to_owned();
    s.push(OsStr::from_bytes(INDEX_SUFFIX));
    PathBuf::from(s)
}

/// A prefix's directory and base name. A prefix ending in `/` (Keras `save_weights("dir/")`,
/// `Checkpoint.write("dir/")`: files `dir/.index`, `dir/.data-…`) has an empty base name in
/// that directory, where `Path::file_name` would name the directory itself.
pub fn split_prefix(prefix: &Path) -> (PathBuf, Vec<u8>) {
    let bytes = prefix.as_os_str().as_bytes();
    if let Some(dir) = bytes.strip_suffix(b"/") {
        return (PathBuf::from(OsStr::from_bytes(dir)), Vec::new());
    }
    let dir = prefix.parent().map(Path::to_path_buf).unwrap_or_default();
    let name = prefix.file_name().map(|n| n.as_bytes().to_vec());
    (dir, name.unwrap_or_default())
}
