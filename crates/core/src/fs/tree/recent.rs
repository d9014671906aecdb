//! The tensors a tree asked its model for lately, kept to be asked again. A reader may make a
//! new tensor object for every `Model::tensor` call (a TF hash table: with an empty key-index
//! slot each time): a row lookup that asked for its table every time would build the table's
//! key index again for every row (a pass over every key), and each file of a tensor would
//! hold a tensor object of its own.

use std::sync::{Arc, Mutex, Weak};

use super::FsError;
use crate::fs::listing::ModelPath;
use modelfs_model::{Model, Tensor};

/// Tables kept for row lookups.
pub(super) const ROW_TABLES: usize = 16;
/// Tensors kept for the files being opened: a tensor's files (`.json`, `.npy`, `.txt`, …)
/// are listed, and so stat'ed and opened, one after another, and share one object.
pub(super) const FILE_TENSORS: usize = 64;

/// A tensor by (its model's address, its path), with the model it came from: an entry whose
/// model is gone or replaced is never served (a new model may take the old one's address).
type Cache = lru::LruCache<(usize, ModelPath), (Weak<dyn Model>, Arc<dyn Tensor>)>;

/// The last `most` tensors asked for.
pub(crate) struct Recent {
    cache: Mutex<Option<Cache>>,
    most: usize,
}

impl Recent {
    pub(super) fn new(most: usize) -> Recent {
        Recent {
            cache: Mutex::new(None),
            most: most.max(1),
        }
    }

    /// The tensor at `path` of `model`, the object asked for before where kept. The lock is
    /// never held while a tensor is opened.
    pub(super) fn get(
        &self,
        model: &Arc<dyn Model>,
        path: &ModelPath,
    ) -> Result<Arc<dyn Tensor>, FsError> {
        let key = (Arc::as_ptr(model) as *const () as usize, path.clone());
        let lock = || self.cache.lock().unwrap_or_else(|e| e.into_inner());
        let kept = lock().as_mut().and_then(|c| {
            let (m, t) = c.get(&key)?;
            let same = m.upgrade().is_some_and(|m| Arc::ptr_eq(&m, model));
            same.then(|| t.clone())
        });
        if let Some(t) = kept {
            return Ok(t);
        }
        let t = model.tensor(path)?;
        let mut g = lock();
        let most = std::num::NonZeroUsize::new(self.most).expect("most > 0");
        let cache = g.get_or_insert_with(|| lru::LruCache::new(most));
        cache.put(key, (Arc::downgrade(model), t.clone()));
        Ok(t)
    }

    /// Forgets every tensor (the model was replaced).
    pub(super) fn clear(&self) {
        *self.cache.lock().unwrap_or_else(|e| e.into_inner()) = None;
    }
}
