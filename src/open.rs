//! Source detection (SPEC §1): decides what SOURCE is and opens the matching reader.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::model::Model;
use crate::options::Options;
use crate::tf::bundle::V1_MESSAGE;
use crate::tf::checkpoint_state::{resolve_prefix, CheckpointState};
use crate::tf::model::{block_cache_for, TfModel};
use crate::tf::multi::MultiModel;
use crate::tf::table::footer::TABLE_MAGIC;
use crate::tf::table::BlockCache;

/// Why a source could not be opened; the CLI prints it on one line and exits with status 2.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct OpenError(pub String);

/// Opens `path` as whatever source it is (TF prefix / index / data file / directory /
/// SavedModel / Angel model directory).
pub fn open_source(path: &Path, opts: &Options) -> Result<Arc<dyn Model>, OpenError> {
    let cache = block_cache_for(opts);
    if path.is_dir() {
        return open_dir(path, opts, cache);
    }
    let prefix = strip_checkpoint_suffix(path);
    if index_of(&prefix).is_file() {
        return open_prefix(&prefix, opts, cache);
    }
    if is_v1_checkpoint(&prefix) || is_v1_checkpoint(path) {
        return Err(OpenError(format!("{}: {V1_MESSAGE}", path.display())));
    }
    Err(OpenError(format!(
        "{}: no TensorFlow checkpoint there (looked for {}, a directory of checkpoints, a SavedModel or an Angel model directory)",
        path.display(),
        index_of(&prefix).display()
    )))
}

fn index_of(prefix: &Path) -> PathBuf {
    let mut s = prefix.as_os_str().to_owned();
    s.push(".index");
    PathBuf::from(s)
}

/// `P.index` → `P`; `P.data-00000-of-00001` → `P`; anything else unchanged.
pub fn strip_checkpoint_suffix(path: &Path) -> PathBuf {
    let bytes = path.as_os_str().as_bytes();
    if let Some(p) = bytes.strip_suffix(b".index") {
        return PathBuf::from(OsString::from_vec(p.to_vec()));
    }
    if let Some(pos) = find_last(bytes, b".data-") {
        let tail = &bytes[pos + 6..];
        let mut parts = tail.splitn(2, |&b| b == b'-');
        let (Some(a), Some(rest)) = (parts.next(), parts.next()) else {
            return path.to_path_buf();
        };
        let digits = |s: &[u8]| !s.is_empty() && s.iter().all(u8::is_ascii_digit);
        if let Some(b) = rest.strip_prefix(b"of-") {
            if digits(a) && digits(b) {
                return PathBuf::from(OsString::from_vec(bytes[..pos].to_vec()));
            }
        }
    }
    path.to_path_buf()
}

fn find_last(hay: &[u8], needle: &[u8]) -> Option<usize> {
    (0..=hay.len().checked_sub(needle.len())?)
        .rev()
        .find(|&i| &hay[i..i + needle.len()] == needle)
}

fn open_prefix(
    prefix: &Path,
    opts: &Options,
    cache: Arc<BlockCache>,
) -> Result<Arc<dyn Model>, OpenError> {
    TfModel::open(prefix, opts, cache)
        .map(|m| Arc::new(m) as Arc<dyn Model>)
        .map_err(|e| OpenError(e.to_string()))
}

/// A V1 checkpoint: a table file `P` (or `P-00000-of-0000N`) without `P.index` (§12).
fn is_v1_checkpoint(p: &Path) -> bool {
    if index_of(p).exists() {
        return false;
    }
    let ends_with_magic = |f: &Path| -> bool {
        use std::io::{Read, Seek, SeekFrom};
        let Ok(mut file) = std::fs::File::open(f) else {
            return false;
        };
        let Ok(meta) = file.metadata() else {
            return false;
        };
        if !meta.is_file() || meta.len() < 48 || file.seek(SeekFrom::End(-8)).is_err() {
            return false;
        }
        let mut tail = [0u8; 8];
        file.read_exact(&mut tail).is_ok() && tail == TABLE_MAGIC
    };
    if ends_with_magic(p) {
        return true;
    }
    let (Some(dir), Some(name)) = (p.parent(), p.file_name()) else {
        return false;
    };
    let Ok(rd) = std::fs::read_dir(if dir.as_os_str().is_empty() {
        Path::new(".")
    } else {
        dir
    }) else {
        return false;
    };
    let mut want = name.as_bytes().to_vec();
    want.extend_from_slice(b"-");
    rd.flatten().any(|e| {
        let n = e.file_name();
        let n = n.as_bytes();
        n.starts_with(&want)
            && n[want.len()..].windows(4).any(|w| w == b"-of-")
            && ends_with_magic(&e.path())
    })
}

fn open_dir(
    dir: &Path,
    opts: &Options,
    cache: Arc<BlockCache>,
) -> Result<Arc<dyn Model>, OpenError> {
    // SavedModel: its variables bundle.
    let is_saved_model = ["saved_model.pb", "saved_model.pbtxt", "saved_model.cpb"]
        .iter()
        .any(|f| dir.join(f).is_file());
    let variables = dir.join("variables").join("variables");
    if is_saved_model {
        if index_of(&variables).is_file() {
            return open_prefix(&variables, opts, cache);
        }
        return Err(OpenError(format!(
            "{}: SavedModel without variables (looked for {})",
            dir.display(),
            index_of(&variables).display()
        )));
    }

    // Checkpoint prefixes: every `*.index`, plus those the state file names.
    let mut prefixes: BTreeMap<Vec<u8>, PathBuf> = BTreeMap::new();
    if let Ok(rd) = std::fs::read_dir(dir) {
        for e in rd.flatten() {
            let name = e.file_name();
            if let Some(base) = name.as_bytes().strip_suffix(b".index") {
                if e.path().is_file() && !base.is_empty() {
                    prefixes.insert(base.to_vec(), dir.join(OsString::from_vec(base.to_vec())));
                }
            }
        }
    }
    let state_path = dir.join("checkpoint");
    let state = if state_path.is_file() {
        CheckpointState::read(&state_path)
    } else {
        None
    };
    let mut latest = None;
    let mut v1_named = false;
    if let Some(st) = &state {
        let has_index = |p: &Path| index_of(p).is_file();
        let listed = st
            .all_model_checkpoint_paths
            .iter()
            .chain(st.model_checkpoint_path.iter());
        for p in listed {
            match resolve_prefix(dir, p, &has_index) {
                Some(resolved) => {
                    let base = resolved
                        .file_name()
                        .map(|n| n.as_bytes().to_vec())
                        .unwrap_or_default();
                    prefixes.entry(base).or_insert(resolved);
                }
                None => {
                    // Listed but gone (CheckpointManager deletes old ones), or V1.
                    let v1 = resolve_prefix(dir, p, &|q: &Path| is_v1_checkpoint(q)).is_some();
                    v1_named |= v1;
                    log::info!(
                        "{}: listed checkpoint {} not found",
                        state_path.display(),
                        String::from_utf8_lossy(p)
                    );
                }
            }
        }
        if let Some(p) = &st.model_checkpoint_path {
            if let Some(resolved) = resolve_prefix(dir, p, &has_index) {
                latest = resolved.file_name().map(|n| n.as_bytes().to_vec());
            }
        }
    }

    if prefixes.len() == 1 && state.is_none() {
        let (_, prefix) = prefixes.into_iter().next().unwrap_or_default();
        return open_prefix(&prefix, opts, cache);
    }
    if !prefixes.is_empty() {
        let mut children: Vec<(Vec<u8>, Arc<dyn Model>)> = Vec::new();
        let mut first_error = None;
        for (name, prefix) in prefixes {
            match TfModel::open(&prefix, opts, Arc::clone(&cache)) {
                Ok(m) => children.push((name, Arc::new(m))),
                Err(e) => {
                    log::warn!("{}: skipped: {e}", prefix.display());
                    first_error.get_or_insert(e.to_string());
                }
            }
        }
        if children.is_empty() {
            return Err(OpenError(first_error.unwrap_or_default()));
        }
        return Ok(Arc::new(MultiModel::new(children, latest)));
    }

    if v1_named || dir_has_v1(dir) {
        return Err(OpenError(format!("{}: {V1_MESSAGE}", dir.display())));
    }

    if crate::angel::is_model_dir(dir) {
        return crate::angel::open(dir, opts);
    }

    Err(OpenError(format!(
        "{}: not recognised (looked for *.index checkpoints, a `checkpoint` state file, a SavedModel with variables/variables.index, or an Angel model directory)",
        dir.display()
    )))
}

/// Any V1 table file in `dir` (`P` with table magic, no `P.index`)?
fn dir_has_v1(dir: &Path) -> bool {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return false;
    };
    rd.flatten().any(|e| {
        let n = e.file_name();
        let n = n.as_bytes();
        let looks_like =
            n.windows(4).any(|w| w == b"-of-") && !n.windows(6).any(|w| w == b".data-");
        looks_like && is_v1_checkpoint(&e.path())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strips_suffixes() {
        let s = |p: &str| {
            strip_checkpoint_suffix(Path::new(p))
                .to_string_lossy()
                .into_owned()
        };
        assert_eq!(s("d/model.ckpt-100.index"), "d/model.ckpt-100");
        assert_eq!(
            s("d/model.ckpt-100.data-00000-of-00001"),
            "d/model.ckpt-100"
        );
        assert_eq!(s("d/p.data-00007-of-123456"), "d/p");
        assert_eq!(s("d/p.data-x-of-1"), "d/p.data-x-of-1");
        assert_eq!(s("d/model.ckpt-100"), "d/model.ckpt-100");
    }
}
