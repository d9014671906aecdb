//! The hidden views of each model root (`.tf/`, `.angel/`, …) as the tree keeps them: one
//! slot per (root, view), built on its first lookup. An owned part of the tree with its own
//! lock, held only to find or add a slot, never while a view is built.
//!
//! Invariant: a slot keeps a built view or a lasting fault; a transient fault is not kept (the
//! next lookup builds again).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use super::ModelPath;
use crate::fs::error::FsError;
use modelfs_io::source::Memo;
use modelfs_layout::LayoutCtx;
use modelfs_model::Model;
use modelfs_views::View;

type Slot = Arc<Memo<Result<Arc<View>, String>>>;

#[derive(Default)]
pub(crate) struct Views {
    slots: Mutex<HashMap<(ModelPath, usize), Slot>>,
}

impl Views {
    /// View `i` of `model` at `root`, built (metadata only) on first use.
    pub(crate) fn get(
        &self,
        i: usize,
        root: &ModelPath,
        model: &dyn Model,
        ctx: &Arc<LayoutCtx>,
    ) -> Result<Arc<View>, FsError> {
        let name = modelfs_views::NAMES.get(i).ok_or(FsError::NotFound)?;
        let slot = {
            let mut map = self
                .slots
                .lock()
                .map_err(|_| FsError::Io("view table poisoned".into()))?;
            map.entry((root.clone(), i)).or_default().clone()
        };
        let got = slot.get_or_try(|| match modelfs_views::build(name, model, root, ctx) {
            Ok(v) => Ok(Ok(Arc::new(v))),
            Err(e) => {
                log::error!("{name}: {e}");
                // A transient fault is not kept: the next look builds the view again.
                match modelfs_io::source::is_transient(&e) {
                    true => Err(e.to_string()),
                    false => Ok(Err(e.to_string())),
                }
            }
        });
        match got {
            Ok(r) => r.clone().map_err(FsError::Io),
            Err(e) => Err(FsError::Io(e)),
        }
    }

    /// Keeps the views of the roots `keep` says, after the source changed.
    pub(crate) fn retain(&self, keep: impl Fn(&ModelPath) -> bool) {
        if let Ok(mut map) = self.slots.lock() {
            map.retain(|(root, _), _| keep(root));
        }
    }
}
