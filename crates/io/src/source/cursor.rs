//! Where one reader is: the read-ahead state of each object it reads, owned by its open file
//! handle. Two `cat`s of one file are two readers, each with its own stream ahead of it; one
//! reader's seek does not stop the other's read-ahead.
//!
//! A handle makes its cursor current on the thread that serves its read (`enter`), and a
//! source that keeps read-ahead state asks for the current one (`with_state`). Reads without a
//! handle (a text chunk rendered by a worker, a checksum pass) have no cursor: the source
//! falls back to state of its own.
//!
//! Invariants: a cursor keeps the state of at most `SLOTS` objects (the most recently read);
//! `enter` restores the previous cursor of the thread when its guard drops, so nested reads
//! (a view reading its parts) see the innermost handle's cursor.

use std::any::Any;
use std::cell::RefCell;
use std::sync::{Arc, Mutex};

/// Objects whose state a cursor keeps: a file reads one object, a view over parts a few.
const SLOTS: usize = 4;

#[derive(Default)]
pub struct Cursor {
    /// (object key, its state), the most recently used first.
    slots: Mutex<Vec<(u64, Box<dyn Any + Send>)>>,
}

impl std::fmt::Debug for Cursor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cursor").finish_non_exhaustive()
    }
}

thread_local! {
    static CURRENT: RefCell<Option<Arc<Cursor>>> = const { RefCell::new(None) };
}

/// While alive, its cursor is this thread's current one.
pub struct Entered {
    previous: Option<Arc<Cursor>>,
}

impl Drop for Entered {
    fn drop(&mut self) {
        let previous = self.previous.take();
        let _ = CURRENT.try_with(|c| *c.borrow_mut() = previous);
    }
}

impl Cursor {
    /// Makes `self` the current cursor of this thread until the guard drops.
    pub fn enter(self: &Arc<Self>) -> Entered {
        let previous = CURRENT
            .try_with(|c| c.borrow_mut().replace(Arc::clone(self)))
            .ok()
            .flatten();
        Entered { previous }
    }

    /// `f` of the state the current cursor keeps for object `key` (`init` the first time);
    /// `None` when this thread has no current cursor.
    pub(crate) fn with_state<T: Send + 'static, R>(
        key: u64,
        init: impl FnOnce() -> T,
        f: impl FnOnce(&mut T) -> R,
    ) -> Option<R> {
        let cursor = CURRENT.try_with(|c| c.borrow().clone()).ok().flatten()?;
        let mut slots = cursor.slots.lock().unwrap_or_else(|e| e.into_inner());
        let at = slots.iter().position(|(k, s)| *k == key && s.is::<T>());
        let (k, state) = match at {
            Some(i) => slots.remove(i),
            None => (key, Box::new(init()) as Box<dyn Any + Send>),
        };
        slots.insert(0, (k, state));
        slots.truncate(SLOTS);
        debug_assert!(slots.len() <= SLOTS);
        slots[0].1.downcast_mut::<T>().map(f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bump(key: u64) -> Option<u32> {
        Cursor::with_state(
            key,
            || 0u32,
            |n| {
                *n += 1;
                *n
            },
        )
    }

    #[test]
    fn state_is_per_cursor_and_per_object() {
        assert_eq!(bump(1), None, "no cursor: no state");
        let (a, b) = (Arc::new(Cursor::default()), Arc::new(Cursor::default()));
        {
            let _in_a = a.enter();
            assert_eq!(bump(1), Some(1));
            assert_eq!(bump(1), Some(2));
            {
                let _in_b = b.enter();
                assert_eq!(bump(1), Some(1), "another reader starts afresh");
            }
            assert_eq!(bump(1), Some(3), "the outer cursor is current again");
            assert_eq!(bump(2), Some(1));
        }
        assert_eq!(bump(1), None);
    }

    #[test]
    fn only_the_latest_objects_are_kept() {
        let a = Arc::new(Cursor::default());
        let _in = a.enter();
        for key in 0..=SLOTS as u64 {
            bump(key);
        }
        assert_eq!(a.slots.lock().unwrap().len(), SLOTS);
        assert_eq!(bump(0), Some(1), "the oldest was let go");
        assert_eq!(bump(SLOTS as u64), Some(2));
    }
}
