//! A mount that follows its source: a local source is watched (inotify), a remote one is
//! looked at again every period; when what it holds changed, the model is opened again and
//! shown in place of the old one (`Tree::replace_model`, which keeps unchanged members).
//!
//! Invariants:
//! - One thread per mount; it holds no lock of the tree while it opens the model.
//! - A look costs a listing: the model is opened again only when the source's fingerprint
//!   (its files and their identities) changed, and opening again reuses every member whose
//!   files are unchanged (`model::member`).
//! - Nothing saved after the open is missed: the first look is made as soon as the watch is
//!   in place, against the fingerprint taken before the open.
//! - A failed look (a fault, a model not whole) changes nothing; the next event or period
//!   looks again.

use std::path::{Path, PathBuf};
use std::sync::mpsc::{channel, Receiver, RecvTimeoutError};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::tree::Tree;
use modelfs_io::source::Storage;
use modelfs_model::Model;

pub(crate) use modelfs_detect::fingerprint::fingerprint;

/// Opens the source again (with the reader options of the first open, members included).
pub(crate) type Reopen = Box<dyn Fn() -> Result<Arc<dyn Model>, String> + Send>;

/// What a mount follows, and how.
pub struct Follow {
    /// The source as the storage names it (a directory, or a checkpoint prefix).
    pub(crate) path: PathBuf,
    pub(crate) storage: Arc<dyn Storage>,
    /// Watch with inotify (a local source).
    pub(crate) watch: bool,
    /// Look again this often whatever happened (a remote source).
    pub(crate) period: Option<Duration>,
    /// The source's fingerprint taken before the model shown was opened (`None`: not known;
    /// the first look then opens again if it can list).
    pub(crate) opened_from: Option<u64>,
    pub(crate) reopen: Reopen,
}

/// Events closer together than this are one change (a checkpoint is several files).
const QUIET: Duration = Duration::from_millis(150);
/// A stream of events is looked at no later than this after it began.
const AT_MOST: Duration = Duration::from_millis(800);

/// Starts following `follow` for `tree`; the thread ends when the tree is dropped.
pub fn start(tree: &Arc<Tree>, follow: Follow) {
    let (tx, rx) = channel::<()>();
    let mut watcher = None;
    if follow.watch {
        watcher = watch(&follow.path, tx);
    }
    let weak = Arc::downgrade(tree);
    let spawned = std::thread::Builder::new()
        .name("modelfs-follow".into())
        .spawn(move || {
            let _watcher = watcher;
            let mut last = follow.opened_from;
            // The first look is at once: what changed between the open and the watch (the
            // fork, a loaded machine) sent no event this watch could see.
            let mut first = true;
            loop {
                if !std::mem::take(&mut first) && !wait(&rx, follow.period) {
                    return;
                }
                let Some(tree) = weak.upgrade() else { return };
                follow.storage.look_again();
                let now = fingerprint(&*follow.storage, &follow.path);
                if now.is_none() || now == last {
                    continue;
                }
                match (follow.reopen)() {
                    Ok(model) => {
                        tree.replace_model(model);
                        last = now;
                    }
                    Err(e) => log::warn!(
                        "{}: not shown yet: {e}",
                        follow.storage.display(&follow.path)
                    ),
                }
            }
        });
    if let Err(e) = spawned {
        log::warn!("the source will not be followed: {e}");
    }
}

/// Waits for a change (events, or the period). False when the watcher is gone and there is
/// no period (nothing will ever come).
fn wait(rx: &Receiver<()>, period: Option<Duration>) -> bool {
    let first = match period {
        Some(p) => rx.recv_timeout(p),
        None => rx.recv().map_err(|_| RecvTimeoutError::Disconnected),
    };
    match first {
        Ok(()) => {}
        Err(RecvTimeoutError::Timeout) => return true,
        Err(RecvTimeoutError::Disconnected) => {
            if let Some(p) = period {
                std::thread::sleep(p);
                return true;
            }
            return false;
        }
    }
    let began = Instant::now();
    while began.elapsed() < AT_MOST {
        match rx.recv_timeout(QUIET) {
            Ok(()) => continue,
            Err(_) => break,
        }
    }
    true
}

/// An inotify watch of the source's directory (the parent of a prefix), recursive: new
/// files and directories, removals and renames, files written and closed.
fn watch(path: &Path, tx: std::sync::mpsc::Sender<()>) -> Option<notify::RecommendedWatcher> {
    use notify::{EventKind, RecursiveMode, Watcher};
    let (dir, mode) = match path.is_dir() {
        true => (path.to_path_buf(), RecursiveMode::Recursive),
        false => (path.parent()?.to_path_buf(), RecursiveMode::NonRecursive),
    };
    let handler = move |ev: notify::Result<notify::Event>| {
        let Ok(ev) = ev else { return };
        // Reads and metadata touches change nothing a model shows.
        if matches!(
            ev.kind,
            EventKind::Access(_) | EventKind::Any | EventKind::Other
        ) {
            return;
        }
        let _ = tx.send(());
    };
    let mut w = match notify::recommended_watcher(handler) {
        Ok(w) => w,
        Err(e) => {
            log::warn!("{}: not watched: {e}", dir.display());
            return None;
        }
    };
    if let Err(e) = w.watch(&dir, mode) {
        log::warn!("{}: not watched: {e}", dir.display());
        return None;
    }
    Some(w)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fingerprint_changes_with_the_files_and_only_then() {
        let dir = tempfile::tempdir().unwrap();
        let fs = modelfs_io::source::local();
        std::fs::write(dir.path().join("a.index"), b"1").unwrap();
        let first = fingerprint(&*fs, dir.path()).unwrap();
        assert_eq!(fingerprint(&*fs, dir.path()), Some(first));
        std::fs::create_dir(dir.path().join("3")).unwrap();
        std::fs::write(dir.path().join("3/saved_model.pb"), b"x").unwrap();
        let second = fingerprint(&*fs, dir.path()).unwrap();
        assert_ne!(first, second);
        std::fs::write(dir.path().join("3/saved_model.pb"), b"xy").unwrap();
        assert_ne!(fingerprint(&*fs, dir.path()).unwrap(), second);
        // A prefix: its own files, not its neighbours' (not `a1.index` either).
        let prefix = dir.path().join("a");
        let p1 = fingerprint(&*fs, &prefix).unwrap();
        for other in ["b.index", "a1.index", "a1.data-00000-of-00001"] {
            std::fs::write(dir.path().join(other), b"2").unwrap();
            assert_eq!(fingerprint(&*fs, &prefix), Some(p1), "{other}");
        }
        let by_index = fingerprint(&*fs, &dir.path().join("a.index")).unwrap();
        std::fs::write(dir.path().join("a.data-00000-of-00001"), b"2").unwrap();
        assert_ne!(fingerprint(&*fs, &prefix), Some(p1));
        // The source named by its index file covers the data beside it.
        assert_ne!(
            fingerprint(&*fs, &dir.path().join("a.index")),
            Some(by_index)
        );
    }

    /// A save finished after the model was opened and before the watch was in place sends
    /// no event the watch sees; the first look still finds it (it once waited for the next
    /// save: `latest` stayed behind on a loaded CI machine).
    #[test]
    fn a_change_before_the_watch_is_shown_without_an_event() {
        use crate::fs::testing::ctx;
        use crate::fs::TreeConfig;
        use crate::fs::ROOT_INO;
        let steps = modelfs_model::testing::fixtures_dir().join("live/manager");
        let dir = tempfile::tempdir().unwrap();
        let copy = |step: &str| {
            for e in std::fs::read_dir(steps.join(step)).unwrap() {
                let e = e.unwrap();
                std::fs::copy(e.path(), dir.path().join(e.file_name())).unwrap();
            }
        };
        copy("after-1");
        let storage = modelfs_io::source::local();
        let opts = modelfs_model::ReaderOptions::default();
        let opened_from = fingerprint(&*storage, dir.path());
        let model = modelfs_detect::model_at(dir.path(), &opts).unwrap();
        let cfg = TreeConfig {
            uid: 0,
            gid: 0,
            mtime: std::time::SystemTime::UNIX_EPOCH,
            text_size: crate::options::TextSize::Exact,
        };
        let tree = Arc::new(Tree::new(model, ctx(&[modelfs_layout::Layout::Txt]), cfg));
        copy("after-2");
        let path = dir.path().to_path_buf();
        let reopen_at = path.clone();
        start(
            &tree,
            Follow {
                path,
                storage,
                watch: true,
                period: None,
                opened_from,
                reopen: Box::new(move || {
                    modelfs_detect::model_at(&reopen_at, &opts).map_err(|e| e.to_string())
                }),
            },
        );
        let began = Instant::now();
        while tree.lookup_ino(ROOT_INO, b"ckpt-2").is_err() {
            assert!(
                began.elapsed() < Duration::from_secs(10),
                "ckpt-2, saved before the watch, never shown"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}
