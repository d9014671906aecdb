//! The models inside a source that holds several (a directory of checkpoints, a TF Serving
//! base): each opened on first use, and the same object across looks at a changing source
//! while its files stay the same.
//!
//! Invariants:
//! - A member's `id` is unique for the process: a directory looked at again shows a member
//!   with the same id exactly when its files are unchanged (same `stamp`), so the file system
//!   keeps that subtree (inode numbers, opened files, sizes learnt) and drops the others.
//! - A member that no one opened holds its path, its stamp and its opener: nothing read.
//! - `Members` keeps only weak references: a member lives while a model shows it.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};

use super::{Model, ModelError, OpenError};
use crate::source::Flight;

pub type Opener = Box<dyn Fn() -> Result<Arc<dyn Model>, OpenError> + Send + Sync>;

pub struct Member {
    id: u64,
    stamp: String,
    open: Opener,
    /// `Err`: a lasting failure to open, told to every caller.
    opened: Flight<Result<Arc<dyn Model>, String>>,
}

static NEXT_ID: AtomicU64 = AtomicU64::new(1);

impl Member {
    pub fn new(stamp: String, open: Opener) -> Arc<Member> {
        Arc::new(Member {
            id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
            stamp,
            open,
            opened: Flight::default(),
        })
    }

    /// Unique for the process; see the module comment.
    pub fn id(&self) -> u64 {
        self.id
    }

    /// The member's model, opened on first use. A transient fault is not kept.
    pub fn model(&self) -> Result<Arc<dyn Model>, ModelError> {
        let got = self.opened.get_or_try(|| match (self.open)() {
            Ok(m) => Ok(Ok(m)),
            Err(e) if crate::source::is_transient(&e) => Err(e.to_string()),
            Err(e) => {
                log::warn!("{e}");
                Ok(Err(e.to_string()))
            }
        });
        match got {
            Ok(Ok(m)) => Ok(Arc::clone(m)),
            Ok(Err(e)) => Err(ModelError::data("checkpoint", e.clone())),
            Err(e) => Err(ModelError::Source(crate::source::SourceError::Remote {
                url: String::new(),
                cause: e,
            })),
        }
    }

    /// Opened already (for summaries that should not open everything).
    pub fn is_open(&self) -> bool {
        self.opened.get().is_some()
    }
}

/// The members made for a source, by path, so that looking again finds the unchanged ones.
#[derive(Default)]
pub struct Members {
    map: Mutex<HashMap<PathBuf, Weak<Member>>>,
}

impl Members {
    /// The member made before at `path` if it is still shown and its files still have
    /// identity `stamp`.
    pub fn get(&self, path: &Path, stamp: &str) -> Option<Arc<Member>> {
        let map = self.map.lock().unwrap_or_else(|e| e.into_inner());
        map.get(path)
            .and_then(Weak::upgrade)
            .filter(|m| m.stamp == stamp)
    }

    /// The member at `path` whose files have identity `stamp`: the one made before if it is
    /// still shown and its files are unchanged, else a new one from `open`.
    pub fn get_or_make(&self, path: &Path, stamp: String, open: Opener) -> Arc<Member> {
        if let Some(m) = self.get(path, &stamp) {
            return m;
        }
        let mut map = self.map.lock().unwrap_or_else(|e| e.into_inner());
        // Members no model shows any more: their entries go, so the map stays the size of
        // what is shown.
        map.retain(|_, w| w.strong_count() > 0);
        let m = Member::new(stamp, open);
        map.insert(path.to_path_buf(), Arc::downgrade(&m));
        m
    }
}

impl std::fmt::Debug for Members {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Members").finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opener(calls: Arc<AtomicU64>) -> Opener {
        Box::new(move || {
            calls.fetch_add(1, Ordering::SeqCst);
            Err(OpenError::Missing {
                path: PathBuf::from("x"),
            })
        })
    }

    #[test]
    fn the_same_files_give_the_same_member_and_changed_ones_a_new_one() {
        let members = Members::default();
        let calls = Arc::new(AtomicU64::new(0));
        let a = members.get_or_make(Path::new("d/a"), "1".into(), opener(calls.clone()));
        let again = members.get_or_make(Path::new("d/a"), "1".into(), opener(calls.clone()));
        assert_eq!(a.id(), again.id());
        let changed = members.get_or_make(Path::new("d/a"), "2".into(), opener(calls.clone()));
        assert_ne!(a.id(), changed.id());
        // Nothing is opened by being listed.
        assert_eq!(calls.load(Ordering::SeqCst), 0);
        assert!(a.model().is_err() && a.model().is_err());
        assert_eq!(calls.load(Ordering::SeqCst), 1, "a lasting failure is kept");
        // A member no one shows is not found again.
        let id = changed.id();
        drop((a, again, changed));
        let fresh = members.get_or_make(Path::new("d/a"), "2".into(), opener(calls));
        assert_ne!(fresh.id(), id);
        assert_eq!(members.map.lock().unwrap().len(), 1);
    }
}
