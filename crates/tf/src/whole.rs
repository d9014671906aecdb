//! Whether a checkpoint (or a Serving version) in a directory being written to is whole yet,
//! and what identifies its files (`model::member`'s stamp).
//!
//! TensorFlow writes a checkpoint's data shards first (BundleWriter writes `.tempstate` files
//! and renames them; MergeV2Checkpoints renames the shards of a sharded save into place), then
//! its `.index` (MergeV2Checkpoints writes it in place, so it can be seen half-written), then
//! the `checkpoint` state file (by rename). So a checkpoint is whole when its `.index` ends
//! with the table magic and every shard `P.data-i-of-N` is there. A Serving version is
//! renamed into the base directory whole; its variables are checked the same way.

use std::collections::BTreeSet;
use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use crate::codec::table::footer::TABLE_MAGIC;
use crate::source::{EntryKind, ReadExt, Storage};

/// A directory's entries as `Storage::list` gives them.
pub(super) type Entries = [(OsString, EntryKind)];

/// Whether file `f` ends with the table magic (a whole `.index`).
pub(super) fn ends_with_table_magic(fs: &dyn Storage, f: &Path) -> bool {
    if !fs.is_file(f) {
        return false;
    }
    let Ok(file) = fs.open(f) else {
        return false;
    };
    file.size() >= 48
        && file
            .read_vec(file.size() - 8, 8)
            .is_ok_and(|tail| *tail == TABLE_MAGIC)
}

/// The data shards of checkpoint `base` among `entries` when all `N` of one `-of-N` are
/// there: their names, in shard order. `None` when some are missing (still being written).
fn whole_shards(base: &[u8], entries: &Entries) -> Option<Vec<OsString>> {
    let mut want = base.to_vec();
    want.extend_from_slice(b".data-");
    let mut seen: BTreeSet<(u32, u32)> = BTreeSet::new();
    for (name, kind) in entries {
        let Some(rest) = name.as_bytes().strip_prefix(want.as_slice()) else {
            continue;
        };
        let text = std::str::from_utf8(rest).ok();
        let parsed = text.and_then(|t| t.split_once("-of-")).and_then(|(s, n)| {
            let digits = |x: &str| !x.is_empty() && x.bytes().all(|b| b.is_ascii_digit());
            (digits(s) && digits(n)).then(|| Some((s.parse().ok()?, n.parse().ok()?)))?
        });
        if let (Some(sn), EntryKind::File) = (parsed, kind) {
            seen.insert(sn);
        }
    }
    let n = seen.iter().next()?.1;
    let whole = n > 0
        && seen.len() == n as usize
        && seen
            .iter()
            .enumerate()
            .all(|(i, &(s, m))| m == n && s as usize == i);
    whole.then(|| {
        (0..n)
            .map(|s| {
                let mut name = base.to_vec();
                name.extend_from_slice(format!(".data-{s:05}-of-{n:05}").as_bytes());
                OsStr::from_bytes(&name).to_owned()
            })
            .collect()
    })
}

/// The stamp of checkpoint `base` in `dir` (whose entries are `entries`) if it is whole:
/// the identities of its `.index`, `.meta` (when there) and data shards. `known` says
/// whether a stamp was seen whole before (its index is then not read again). A storage that
/// cannot list (HTTP, `entries` `None`) serves whole files: the index alone is checked.
pub(super) fn checkpoint_stamp(
    fs: &dyn Storage,
    dir: &Path,
    base: &[u8],
    entries: Option<&Entries>,
    known: &dyn Fn(&str) -> bool,
) -> Option<String> {
    let (shards, entries) = match entries {
        Some(e) => (whole_shards(base, e)?, e),
        None => (Vec::new(), &[][..]),
    };
    let named = |suffix: &[u8]| {
        let mut n = base.to_vec();
        n.extend_from_slice(suffix);
        dir.join(OsStr::from_bytes(&n))
    };
    let index = named(b".index");
    let mut stamp = fs.stamp(&index).ok()??;
    let meta = named(b".meta");
    if entries.iter().any(|(n, _)| dir.join(n) == meta) {
        stamp.push('|');
        stamp.push_str(&fs.stamp(&meta).ok()??);
    }
    for s in &shards {
        stamp.push('|');
        stamp.push_str(&fs.stamp(&dir.join(s)).ok()??);
    }
    (known(&stamp) || ends_with_table_magic(fs, &index)).then_some(stamp)
}

/// The stamp of Serving version directory `dir` if it is whole: its graph file and, when it
/// has variables, their checkpoint (`checkpoint_stamp`).
pub(super) fn version_stamp(
    fs: &dyn Storage,
    dir: &Path,
    graph_files: &[&str],
    known: &dyn Fn(&str) -> bool,
) -> Option<String> {
    let graph = graph_files
        .iter()
        .map(|f| dir.join(f))
        .find(|p| fs.is_file(p))?;
    let mut stamp = fs.stamp(&graph).ok()??;
    let variables = dir.join("variables");
    if fs.is_dir(&variables) || fs.is_file(&variables.join("variables.index")) {
        let entries = fs.list(&variables).ok();
        let v = checkpoint_stamp(fs, &variables, b"variables", entries.as_deref(), known)?;
        stamp.push('|');
        stamp.push_str(&v);
    }
    Some(stamp)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entries(names: &[&str]) -> Vec<(OsString, EntryKind)> {
        names
            .iter()
            .map(|n| (OsString::from(n), EntryKind::File))
            .collect()
    }

    #[test]
    fn shards_are_whole_when_all_of_them_are_there() {
        let all = entries(&[
            "m.data-00000-of-00002",
            "m.data-00001-of-00002",
            "m.index",
            "m2.data-00000-of-00001",
        ]);
        assert_eq!(whole_shards(b"m", &all).unwrap().len(), 2);
        let missing = entries(&["m.data-00001-of-00002", "m.index"]);
        assert!(whole_shards(b"m", &missing).is_none());
        let temp = entries(&["m.data-00000-of-00001.tempstate123", "m.index"]);
        assert!(whole_shards(b"m", &temp).is_none());
        assert!(whole_shards(b"m", &entries(&["m.index"])).is_none());
        let unnamed = entries(&[".data-00000-of-00001", ".index"]);
        assert_eq!(whole_shards(b"", &unnamed).unwrap().len(), 1);
    }

    #[test]
    fn a_half_written_index_is_not_whole_and_a_written_one_is() {
        let dir = tempfile::tempdir().unwrap();
        let src = crate::testing::fixtures_dir().join("tf/ckpt_manager/run");
        for f in ["ckpt-2.data-00000-of-00001", "ckpt-2.index"] {
            std::fs::copy(src.join(f), dir.path().join(f)).unwrap();
        }
        let fs = crate::source::local();
        let list = fs.list(dir.path()).unwrap();
        let never = |_: &str| false;
        let whole = checkpoint_stamp(&*fs, dir.path(), b"ckpt-2", Some(&list), &never);
        assert!(whole.is_some());
        let index = std::fs::read(src.join("ckpt-2.index")).unwrap();
        std::fs::write(dir.path().join("ckpt-2.index"), &index[..index.len() - 20]).unwrap();
        let half = checkpoint_stamp(&*fs, dir.path(), b"ckpt-2", Some(&list), &never);
        assert!(half.is_none());
        std::fs::remove_file(dir.path().join("ckpt-2.data-00000-of-00001")).unwrap();
        let list = fs.list(dir.path()).unwrap();
        assert!(checkpoint_stamp(&*fs, dir.path(), b"ckpt-2", Some(&list), &never).is_none());
    }
}
