//! An outcome worked out once from a source's bytes — a parsed index, a graph's scan, a view —
//! where a transient fault of the source is not an outcome: it is returned to the caller that
//! met it and the next caller tries again (README: a transient fault is never remembered).

use std::sync::{Condvar, Mutex, OnceLock};

use super::SourceError;

pub struct Memo<T> {
    cell: OnceLock<T>,
}

impl<T> Default for Memo<T> {
    fn default() -> Self {
        Memo {
            cell: OnceLock::new(),
        }
    }
}

impl<T> Memo<T> {
    /// The outcome, worked out by `f` when not yet known. `f` gives `Err` for a transient
    /// fault (nothing is kept); what it gives as `Ok` — a value or a lasting failure — is kept.
    /// No lock is held while `f` runs: callers racing on the first use may each run it, and
    /// the first outcome kept is the one every caller then sees.
    pub fn get_or_try<E>(&self, f: impl FnOnce() -> Result<T, E>) -> Result<&T, E> {
        if let Some(v) = self.cell.get() {
            return Ok(v);
        }
        let v = f()?;
        Ok(self.cell.get_or_init(|| v))
    }

    /// The outcome if already known.
    pub fn get(&self) -> Option<&T> {
        self.cell.get()
    }
}

/// Like `Memo`, for work too big to repeat (a checksum pass over a large tensor on every
/// core): callers racing on the first use wait for the one working it out instead of each
/// doing it again. No lock is held while the work runs (waiters sleep on a condition
/// variable); a transient fault is not kept, and a waiter then takes the work over.
pub struct Flight<T> {
    cell: OnceLock<T>,
    /// True while one caller works the outcome out.
    busy: Mutex<bool>,
    idle: Condvar,
}

impl<T> Default for Flight<T> {
    fn default() -> Self {
        Flight {
            cell: OnceLock::new(),
            busy: Mutex::new(false),
            idle: Condvar::new(),
        }
    }
}

impl<T> Flight<T> {
    /// The outcome, worked out by `f` (by one caller at a time) when not yet known.
    pub fn get_or_try<E>(&self, f: impl FnOnce() -> Result<T, E>) -> Result<&T, E> {
        if let Some(v) = self.cell.get() {
            return Ok(v);
        }
        {
            let mut busy = self.busy.lock().unwrap_or_else(|e| e.into_inner());
            while *busy {
                busy = self.idle.wait(busy).unwrap_or_else(|e| e.into_inner());
            }
            if let Some(v) = self.cell.get() {
                return Ok(v);
            }
            *busy = true;
        }
        let got = f().map(|v| self.cell.get_or_init(|| v));
        *self.busy.lock().unwrap_or_else(|e| e.into_inner()) = false;
        self.idle.notify_all();
        got
    }

    /// The outcome if already known.
    pub fn get(&self) -> Option<&T> {
        self.cell.get()
    }
}

/// True when `e` or any error in its source chain is a transient source fault.
pub fn is_transient(e: &(dyn std::error::Error + 'static)) -> bool {
    let mut cause = Some(e);
    while let Some(c) = cause {
        if c.downcast_ref::<SourceError>()
            .is_some_and(SourceError::is_transient)
        {
            return true;
        }
        cause = c.source();
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn racing_callers_wait_for_one_flight_and_a_fault_is_retried() {
        use std::sync::atomic::{AtomicU32, Ordering};
        let f: Flight<u32> = Flight::default();
        let runs = AtomicU32::new(0);
        std::thread::scope(|s| {
            for _ in 0..8 {
                s.spawn(|| {
                    let got = f.get_or_try(|| {
                        runs.fetch_add(1, Ordering::SeqCst);
                        std::thread::sleep(std::time::Duration::from_millis(50));
                        Ok::<u32, ()>(7)
                    });
                    assert_eq!(got, Ok(&7));
                });
            }
        });
        assert_eq!(runs.load(Ordering::SeqCst), 1);
        let g: Flight<u32> = Flight::default();
        assert_eq!(
            g.get_or_try(|| Err::<u32, &str>("transient")),
            Err("transient")
        );
        assert_eq!(g.get_or_try(|| Ok::<u32, &str>(3)), Ok(&3));
    }

    #[test]
    fn transient_faults_are_not_kept() {
        let m: Memo<Result<u32, String>> = Memo::default();
        let remote = || SourceError::Remote {
            url: "s3://b/k".into(),
            cause: "timeout".into(),
        };
        assert!(m.get_or_try(|| Err(remote())).is_err());
        assert!(m.get().is_none());
        assert_eq!(
            m.get_or_try(|| Ok::<_, SourceError>(Err("bad".into())))
                .unwrap(),
            &Err("bad".to_string())
        );
        // A lasting outcome stays.
        assert_eq!(
            m.get_or_try(|| Ok::<_, SourceError>(Ok(1))).unwrap(),
            &Err("bad".to_string())
        );
        assert!(is_transient(&remote()));
        let io = SourceError::Changed { path: "x".into() };
        assert!(!is_transient(&io));
    }
}
