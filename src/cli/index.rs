//! `modelfs index SOURCE`: precomputes the exact size (chunk index) of every text file of the
//! mount that the same `-o` options would give, so that the persistent index store under
//! `cache_dir` answers later mounts' `stat` without rendering.
//!
//! Files are sized by `threads` workers taking them from a shared counter (a big tensor's
//! index build is itself parallel). Progress goes to stderr, redrawn in place, only when
//! stderr is a terminal: percent of the work, rate in values per second, ETA. Work is counted
//! in tensor values for text layouts (what rendering costs) and 1 per other file.

use std::io::Write;
use std::path::Path;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use std::io::IsTerminal;

use modelfs_core::fs::{FileKind, Ino, Tree, TreeConfig, ROOT_INO};
use modelfs_core::options::Options;
use modelfs_layout::cache::ChunkCache;
use modelfs_model::Tensor;

use super::{open_model, source_mtime, Failure, EXIT_SOURCE, EXIT_USAGE};

/// What one run did.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct IndexReport {
    pub(crate) files: u64,
    pub(crate) text_files: u64,
    pub(crate) failed: u64,
}

pub(crate) fn index(source: &Path, opts: &Options) -> Result<(), Failure> {
    if opts.cache_dir.is_none() {
        return Err(Failure::new(
            EXIT_USAGE,
            "index needs a cache directory (cache_dir=none was given)",
        ));
    }
    if let Some(dir) = &opts.cache_dir {
        std::fs::create_dir_all(dir).map_err(|e| {
            Failure::new(
                EXIT_SOURCE,
                format!("cache directory {}: {e}", dir.display()),
            )
        })?;
    }
    let model = open_model(source, opts)?;
    let mut cfg = TreeConfig::for_user(opts.uid, opts.gid, source_mtime(source));
    cfg.text_size = modelfs_core::options::TextSize::Exact;
    let ctx = modelfs_core::fs::layout_ctx(opts, &super::store_name(source));
    let tree = Tree::new(model.clone(), ctx.clone(), cfg);
    let started = Instant::now();
    let progress = std::io::stderr().is_terminal().then_some(&*ctx.cache);
    let report = index_tree(&tree, opts.threads, progress)?;
    let mut keyed = 0;
    index_keys(&*model, &mut Vec::new(), &mut keyed);
    eprintln!(
        "modelfs: indexed {} files ({} text){} in {:.1} s{}",
        report.files,
        report.text_files,
        match keyed {
            0 => String::new(),
            n => format!(" and the keys of {n} hash tables"),
        },
        started.elapsed().as_secs_f64(),
        if report.failed > 0 {
            format!("; {} could not be read (see the log)", report.failed)
        } else {
            String::new()
        }
    );
    if report.failed > 0 && report.failed == report.files {
        return Err(Failure::new(EXIT_SOURCE, "no file could be read"));
    }
    let unsaved = ctx.cache.offset_store().map_or(0, |s| s.failures());
    if unsaved > 0 {
        return Err(Failure::new(
            EXIT_SOURCE,
            format!("{unsaved} text sizes could not be saved in the cache directory (see above)"),
        ));
    }
    Ok(())
}

/// Builds the key index of every listed hash table under `dir` (one pass over its keys, kept under
/// `cache_dir`), so a later mount's first lookup by id finds it built. Failures are logged by
/// the readers and left for the lookups to meet.
fn index_keys(model: &dyn modelfs_model::Model, dir: &mut Vec<Vec<u8>>, built: &mut u64) {
    use modelfs_model::{own_component, DirEntry, KeyKind};
    let Ok(entries) = model.list_dir(dir) else {
        return;
    };
    for e in entries {
        let (component, tensor) = match e {
            DirEntry::Dir(n) => (n, false),
            DirEntry::Reserved(n) => (own_component(&n), false),
            DirEntry::Tensor(n) => (n, true),
            _ => continue,
        };
        dir.push(component);
        if !tensor {
            index_keys(model, dir, built);
        } else if let Ok(t) = model.tensor(dir) {
            if t.key_kind() == Some(KeyKind::HashKey) && t.row_by_id(0, &mut Vec::new()).is_ok() {
                *built += 1;
            }
        }
        dir.pop();
    }
}

/// One file to size and its weight in the progress count.
struct Job {
    ino: Ino,
    weight: u64,
    text: bool,
}

/// Sizes every file of `tree` on `threads` workers. With `progress` (the tree's chunk cache),
/// draws progress on stderr: finished files' weights, or, while a big text file is being
/// indexed, the values its rendered chunks cover (whichever is further).
pub(crate) fn index_tree(
    tree: &Tree,
    threads: usize,
    progress: Option<&ChunkCache>,
) -> Result<IndexReport, Failure> {
    tree.store_every_size();
    let mut jobs = Vec::new();
    collect(tree, ROOT_INO, &mut jobs)
        .map_err(|e| Failure::new(EXIT_SOURCE, format!("listing the tree: {e}")))?;
    // Biggest first: the long builds start early and the small ones fill the gaps.
    jobs.sort_by_key(|j| std::cmp::Reverse(j.weight));
    let total: u64 = jobs.iter().map(|j| j.weight).sum();
    let next = AtomicUsize::new(0);
    let done = AtomicU64::new(0);
    let done_other = AtomicU64::new(0);
    let failed = AtomicU64::new(0);
    let finished = AtomicUsize::new(0);
    let workers = threads.clamp(1, jobs.len().max(1));
    let started = Instant::now();
    std::thread::scope(|s| {
        for _ in 0..workers {
            s.spawn(|| {
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some(job) = jobs.get(i) else { break };
                    if tree.getattr(job.ino).is_err() {
                        failed.fetch_add(1, Ordering::Relaxed);
                    }
                    done.fetch_add(job.weight, Ordering::Relaxed);
                    if !job.text {
                        done_other.fetch_add(job.weight, Ordering::Relaxed);
                    }
                }
                finished.fetch_add(1, Ordering::Relaxed);
            });
        }
        if let Some(cache) = progress {
            let rendered_at_start = rendered_values(cache);
            let mut err = std::io::stderr().lock();
            while finished.load(Ordering::Relaxed) < workers {
                std::thread::sleep(Duration::from_millis(200));
                let rendered = rendered_values(cache) - rendered_at_start;
                let partial = done_other
                    .load(Ordering::Relaxed)
                    .saturating_add(rendered)
                    .min(total);
                let shown = done.load(Ordering::Relaxed).max(partial);
                let line = progress_line(shown, total, started.elapsed());
                let _ = write!(err, "\r\x1b[2K{line}");
                let _ = err.flush();
            }
            let _ = write!(err, "\r\x1b[2K");
            let _ = err.flush();
        }
    });
    Ok(IndexReport {
        files: jobs.len() as u64,
        text_files: jobs.iter().filter(|j| j.text).count() as u64,
        failed: failed.into_inner(),
    })
}

/// `42.0% 12.3M values/s ETA 0:07`.
pub(crate) fn progress_line(done: u64, total: u64, elapsed: Duration) -> String {
    let pct = if total == 0 {
        100.0
    } else {
        done as f64 * 100.0 / total as f64
    };
    let secs = elapsed.as_secs_f64();
    let rate = if secs > 0.0 { done as f64 / secs } else { 0.0 };
    let eta = if rate > 0.0 {
        let left = (total.saturating_sub(done)) as f64 / rate;
        let left = left.min(99.0 * 3600.0) as u64;
        format!("{}:{:02}", left / 60, left % 60)
    } else {
        "?".into()
    };
    format!("indexing {pct:5.1}%  {}  ETA {eta}", human_rate(rate))
}

fn human_rate(rate: f64) -> String {
    if rate >= 1e9 {
        format!("{:.1}G values/s", rate / 1e9)
    } else if rate >= 1e6 {
        format!("{:.1}M values/s", rate / 1e6)
    } else if rate >= 1e3 {
        format!("{:.1}k values/s", rate / 1e3)
    } else {
        format!("{rate:.0} values/s")
    }
}

/// Every file under `dir`, depth-first (symlinks are not followed: they lead into the tree).
fn collect(tree: &Tree, dir: Ino, jobs: &mut Vec<Job>) -> Result<(), modelfs_core::fs::FsError> {
    let mut items = Vec::new();
    tree.readdir(dir, 0, |item| {
        items.push(item.owned());
        true
    })?;
    for item in items {
        match item.kind {
            FileKind::Dir => collect(tree, item.ino, jobs)?,
            FileKind::Symlink => {}
            FileKind::File => {
                let (text, weight) = match tree.file_source(item.ino)? {
                    Some((layout, t)) if layout.is_text() => (true, values_of(&*t)),
                    _ => (false, 0),
                };
                jobs.push(Job {
                    ino: item.ino,
                    weight: weight.saturating_add(1),
                    text,
                });
            }
        }
    }
    Ok(())
}

/// Values a text rendering of the tensor (or partition) goes through: its dense element count,
/// or the stored bytes of a sparse one (a proxy; decoding dominates there).
fn values_of(t: &dyn Tensor) -> u64 {
    let meta = t.meta();
    if meta.sparse {
        meta.partitions.iter().map(|p| p.length).sum::<u64>()
    } else {
        meta.num_elements().unwrap_or(0)
    }
}

/// About how many tensor values the rendered chunks covered (for the progress display).
fn rendered_values(cache: &modelfs_layout::cache::ChunkCache) -> u64 {
    cache
        .rendered_chunks()
        .saturating_mul(modelfs_layout::text::CHUNK_ELEMENTS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn progress_line_shows_percent_rate_eta() {
        let l = progress_line(250, 1000, Duration::from_secs(10));
        assert!(l.contains(" 25.0%"), "{l}");
        assert!(l.contains("25 values/s"), "{l}");
        assert!(l.contains("ETA 0:30"), "{l}");
        let l = progress_line(3_000_000, 6_000_000, Duration::from_secs(1));
        assert!(l.contains("3.0M values/s") && l.contains("ETA 0:01"), "{l}");
        assert!(progress_line(0, 0, Duration::ZERO).contains("100.0%"));
        assert!(progress_line(0, 10, Duration::ZERO).contains("ETA ?"));
    }

    #[test]
    fn text_layouts() {
        use modelfs_layout::{AngelFormat, Layout};
        assert!(Layout::Txt.is_text() && Layout::Libsvm.is_text());
        assert!(!Layout::Npy.is_text() && !Layout::Json.is_text());
        assert!(Layout::Angel(AngelFormat::TextColumn).is_text());
        assert!(!Layout::Angel(AngelFormat::ValueBinary).is_text());
    }
}
