//! The last read error of each tensor, which its `.json` shows as `last_error` (a user who
//! met EIO finds the cause beside the data, not only in the daemon's log). Bounded: past
//! `MAX` tensors new ones are not noted (the log has every error).

use std::collections::HashMap;
use std::sync::Mutex;

/// Tensors whose last error is kept, at most.
const MAX: usize = 4096;

#[derive(Default)]
pub struct Faults {
    last: Mutex<HashMap<Vec<u8>, String>>,
}

impl Faults {
    /// Notes `what` as the last error of the tensor named `tensor`.
    pub(crate) fn note(&self, tensor: &[u8], what: String) {
        let mut m = self.last.lock().unwrap_or_else(|e| e.into_inner());
        if m.len() < MAX || m.contains_key(tensor) {
            m.insert(tensor.to_vec(), what);
        }
    }

    /// The last error noted for the tensor named `tensor`.
    pub(crate) fn last(&self, tensor: &[u8]) -> Option<String> {
        let m = self.last.lock().unwrap_or_else(|e| e.into_inner());
        m.get(tensor).cloned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_last_error_wins_and_the_table_is_bounded() {
        let f = Faults::default();
        f.note(b"a", "one".into());
        f.note(b"a", "two".into());
        assert_eq!(f.last(b"a").as_deref(), Some("two"));
        for i in 0..MAX + 10 {
            f.note(format!("t{i}").as_bytes(), "x".into());
        }
        assert!(f.last.lock().unwrap().len() <= MAX);
        f.note(b"a", "three".into());
        assert_eq!(f.last(b"a").as_deref(), Some("three"));
    }
}
