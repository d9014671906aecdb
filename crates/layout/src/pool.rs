//! Items of work shared out over all cores, results in item order (so that what is combined
//! from them does not depend on scheduling). Each worker keeps its own scratch state (read
//! buffers) across the items it takes.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use crate::{LayoutError, Requester};

/// `f(state, k)` for every `k` in `0..items`, on all cores; stops with `Interrupted` once
/// `req` is gone. `progress` is told after each item.
pub fn each<S, T: Send>(
    items: usize,
    req: &dyn Requester,
    init: impl Fn() -> S + Sync,
    f: impl Fn(&mut S, usize) -> T + Sync,
) -> Result<Vec<T>, LayoutError> {
    let results: Mutex<Vec<Option<T>>> = Mutex::new((0..items).map(|_| None).collect());
    let next = AtomicUsize::new(0);
    let done = AtomicUsize::new(0);
    let workers = crate::source::cores();
    std::thread::scope(|s| {
        for _ in 0..workers.min(items) {
            s.spawn(|| {
                let mut state = init();
                loop {
                    let k = next.fetch_add(1, Ordering::Relaxed);
                    if k >= items || req.gone() {
                        break;
                    }
                    let r = f(&mut state, k);
                    if let Ok(mut res) = results.lock() {
                        res[k] = Some(r);
                    }
                    let d = done.fetch_add(1, Ordering::Relaxed) + 1;
                    req.progress(d as u64, items as u64);
                }
            });
        }
    });
    if req.gone() {
        return Err(LayoutError::Interrupted);
    }
    results
        .into_inner()
        .map_err(|_| LayoutError::WorkerPanicked)?
        .into_iter()
        .map(|r| r.ok_or(LayoutError::WorkerPanicked))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Patient;

    #[test]
    fn results_come_in_item_order() {
        let got = each(
            1000,
            &Patient,
            || 0u64,
            |seen, k| {
                *seen += 1;
                k * 2
            },
        )
        .unwrap();
        assert_eq!(got, (0..1000).map(|k| k * 2).collect::<Vec<_>>());
        assert!(each(0, &Patient, || (), |_, k| k).unwrap().is_empty());
    }
}
