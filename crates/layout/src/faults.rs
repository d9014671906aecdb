//! The last read error of each tensor, which its `.json` shows as `last_error` (a user who
//! met EIO finds the cause beside the data, not only in the daemon's log), and whether an
//! error is new, so the log says each cause of each tensor once, not once per file and
//! request. Bounded: past `MAX` tensors new ones are not noted (and always logged).

use std::collections::HashMap;
use std::sync::Mutex;

/// Tensors whose last error is kept, at most.
const MAX: usize = 4096;

#[derive(Default)]
pub struct Faults {
    /// By tensor: the last error as shown, and its cause.
    last: Mutex<HashMap<Vec<u8>, (String, String)>>,
}

impl Faults {
    /// Notes `what` (caused by `cause`) as the last error of the tensor named `tensor`;
    /// true when that cause is new for it (to be logged).
    pub fn note(&self, tensor: &[u8], what: String, cause: &str) -> bool {
        let mut m = self.last.lock().unwrap_or_else(|e| e.into_inner());
        let new = m.get(tensor).is_none_or(|(_, c)| c != cause);
        if m.len() < MAX || m.contains_key(tensor) {
            m.insert(tensor.to_vec(), (what, cause.to_owned()));
        }
        new
    }

    /// Forgets every error: the source changed, and what its old version met says nothing of
    /// the new one (a table whose missing shard has arrived, a file rewritten whole).
    pub fn clear(&self) {
        self.last.lock().unwrap_or_else(|e| e.into_inner()).clear();
    }

    /// The last error noted for the tensor named `tensor`.
    pub(crate) fn last(&self, tensor: &[u8]) -> Option<String> {
        let m = self.last.lock().unwrap_or_else(|e| e.into_inner());
        m.get(tensor).map(|(what, _)| what.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_last_error_wins_and_the_table_is_bounded() {
        let f = Faults::default();
        assert!(f.note(b"a", "one".into(), "x"));
        assert!(!f.note(b"a", "two".into(), "x"));
        assert!(f.note(b"a", "two".into(), "y"));
        assert_eq!(f.last(b"a").as_deref(), Some("two"));
        for i in 0..MAX + 10 {
            f.note(format!("t{i}").as_bytes(), "x".into(), "x");
        }
        assert!(f.last.lock().unwrap().len() <= MAX);
        f.note(b"a", "three".into(), "z");
        assert_eq!(f.last(b"a").as_deref(), Some("three"));
    }
}
