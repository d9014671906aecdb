//! Where one reader is: the read-ahead state of each object it reads, owned by its open file
//! handle. Two `cat`s of one file are two readers, each with its own stream ahead of it; one
//! reader's seek does not stop the other's read-ahead.
//!
//! A handle's reads carry its cursor down to the source (`ReadCtx::of`), and a source that
//! keeps read-ahead state asks the read's context for it (`with_state`). Reads without a
//! handle (a checksum pass, a lookup) have no cursor: the source falls back to state of its
//! own.
//!
//! Invariants: a cursor keeps the state of at most `SLOTS` objects (the most recently read).

use std::any::Any;
use std::sync::Mutex;

use super::ReadCtx;

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

impl Cursor {
    /// `f` of the state the cursor of `ctx` keeps for object `key` (`init` the first time);
    /// `None` when the read has no cursor.
    pub(crate) fn with_state<T: Send + 'static, R>(
        ctx: &ReadCtx,
        key: u64,
        init: impl FnOnce() -> T,
        f: impl FnOnce(&mut T) -> R,
    ) -> Option<R> {
        let cursor = ctx.cursor()?;
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
    use std::sync::Arc;

    fn bump(ctx: &ReadCtx, key: u64) -> Option<u32> {
        Cursor::with_state(
            ctx,
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
        assert_eq!(bump(ReadCtx::none(), 1), None, "no cursor: no state");
        let (a, b) = (Arc::new(Cursor::default()), Arc::new(Cursor::default()));
        let (in_a, in_b) = (ReadCtx::of(&a), ReadCtx::of(&b));
        assert_eq!(bump(&in_a, 1), Some(1));
        assert_eq!(bump(&in_a, 1), Some(2));
        assert_eq!(bump(&in_b, 1), Some(1), "another reader starts afresh");
        assert_eq!(bump(&in_a, 1), Some(3));
        assert_eq!(
            bump(&in_a.lending(), 1),
            Some(4),
            "a lending read is the same reader's"
        );
        assert_eq!(bump(&in_a, 2), Some(1));
    }

    #[test]
    fn only_the_latest_objects_are_kept() {
        let a = Arc::new(Cursor::default());
        let ctx = ReadCtx::of(&a);
        for key in 0..=SLOTS as u64 {
            bump(&ctx, key);
        }
        assert_eq!(a.slots.lock().unwrap().len(), SLOTS);
        assert_eq!(bump(&ctx, 0), Some(1), "the oldest was let go");
        assert_eq!(bump(&ctx, SLOTS as u64), Some(2));
    }
}
