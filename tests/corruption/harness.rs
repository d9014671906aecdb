//! The harness of the corruption suite: a counting allocator, a case runner that turns a
//! panic, a hang or an allocation beyond the bound into a test failure naming the case, and
//! snapshots (every directory listing and every tensor's bytes, through the model and through
//! every layout) that corrupted sources are compared against.

use std::alloc::{GlobalAlloc, Layout as AllocLayout, System};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use modelfs_io::source::ReadCtx;
use modelfs_layout::cache::ChunkCache;
use modelfs_layout::{Layout, LayoutCtx};
use modelfs_model::{DType, DirEntry, Model, Tensor};

// ---- allocation accounting ----

static CURRENT: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

/// The system allocator, counting live bytes and their peak (process-wide; the cases run one
/// at a time, see `serial`).
pub struct Counting;

fn grew(by: usize) {
    let now = CURRENT.fetch_add(by, Ordering::Relaxed) + by;
    PEAK.fetch_max(now, Ordering::Relaxed);
}

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: AllocLayout) -> *mut u8 {
        let p = System.alloc(l);
        if !p.is_null() {
            grew(l.size());
        }
        p
    }
    unsafe fn alloc_zeroed(&self, l: AllocLayout) -> *mut u8 {
        let p = System.alloc_zeroed(l);
        if !p.is_null() {
            grew(l.size());
        }
        p
    }
    unsafe fn dealloc(&self, p: *mut u8, l: AllocLayout) {
        System.dealloc(p, l);
        CURRENT.fetch_sub(l.size(), Ordering::Relaxed);
    }
    unsafe fn realloc(&self, p: *mut u8, l: AllocLayout, new: usize) -> *mut u8 {
        let q = System.realloc(p, l, new);
        if !q.is_null() {
            if new >= l.size() {
                grew(new - l.size());
            } else {
                CURRENT.fetch_sub(l.size() - new, Ordering::Relaxed);
            }
        }
        q
    }
}

static SERIAL: Mutex<()> = Mutex::new(());

/// Held by each test for its whole run, so allocation peaks belong to one case.
pub fn serial() -> MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

/// Longest a single case may take before it counts as a hang.
const CASE_TIMEOUT: Duration = Duration::from_secs(30);

/// Allocation allowed beyond the bytes of the files involved.
pub const ALLOC_SLACK: u64 = 64 << 20;

/// Runs `f` on its own thread: a panic, a run longer than `CASE_TIMEOUT` or a peak of live
/// heap above `alloc_bound` bytes (beyond what was live at the start) fails with `name`.
pub fn run_case<R: Send + 'static>(
    name: &str,
    alloc_bound: u64,
    f: impl FnOnce() -> R + Send + 'static,
) -> R {
    let start = CURRENT.load(Ordering::Relaxed);
    PEAK.store(start, Ordering::Relaxed);
    let began = Instant::now();
    let (tx, rx) = mpsc::channel();
    std::thread::Builder::new()
        .name(name.chars().take(60).collect())
        .spawn(move || {
            let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f));
            let _ = tx.send(r);
        })
        .expect("spawn case thread");
    let r = match rx.recv_timeout(CASE_TIMEOUT) {
        Ok(Ok(r)) => r,
        Ok(Err(p)) => {
            let msg = p
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default();
            panic!("case {name}: panicked: {msg}");
        }
        Err(_) => panic!("case {name}: still running after {CASE_TIMEOUT:?} (hang?)"),
    };
    let peak = PEAK.load(Ordering::Relaxed).saturating_sub(start) as u64;
    assert!(
        peak <= alloc_bound,
        "case {name}: peak allocation {peak} bytes exceeds the bound {alloc_bound} ({:?})",
        began.elapsed()
    );
    r
}

// ---- locations ----

/// `$MODELFS_SHARED`, `CARGO_MANIFEST_DIR/../shared` or `/work/shared`, if present.
pub use modelfs_model::testing::shared_dir;

pub fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures")
}

/// Copies the regular files of `from` (recursively) into `to`.
pub fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap().flatten() {
        let p = e.path();
        let t = to.join(e.file_name());
        if p.is_dir() {
            copy_tree(&p, &t);
        } else {
            std::fs::copy(&p, &t).unwrap();
        }
    }
}

/// Total bytes of the regular files under `dir`.
pub fn tree_bytes(dir: &Path) -> u64 {
    let mut n = 0;
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        n += if p.is_dir() {
            tree_bytes(&p)
        } else {
            e.metadata().map(|m| m.len()).unwrap_or(0)
        };
    }
    n
}

// ---- snapshots ----

/// What reading one thing gave: its bytes, or the error message.
pub type Outcome = Result<Vec<u8>, String>;

/// One tensor: through the model, and through every layout of the context.
#[derive(Clone, Debug, PartialEq)]
pub struct TensorOutcome {
    pub model: Outcome,
    pub layouts: Outcome,
}

/// Every listing (keyed by the directory path) and every tensor (keyed by its path).
#[derive(Clone, Debug, Default)]
pub struct Snapshot {
    pub dirs: BTreeMap<Vec<Vec<u8>>, Outcome>,
    pub tensors: BTreeMap<Vec<Vec<u8>>, TensorOutcome>,
}

/// Bytes read per tensor or file at most (the fixtures are small; corrupt shapes are huge).
const READ_CAP: u64 = 1 << 20;

pub fn layout_ctx(layouts: Vec<Layout>) -> Arc<LayoutCtx> {
    Arc::new(LayoutCtx::new(
        layouts,
        ChunkCache::new(16 << 20).with_threads(1),
    ))
}

fn put_len(out: &mut Vec<u8>, n: u64) {
    out.extend_from_slice(&n.to_le_bytes());
}

/// The bytes of `t` through the model API: metadata, elements / strings / sparse entries, and
/// each partition's.
pub fn tensor_bytes(t: &dyn Tensor) -> Outcome {
    let meta = t.meta();
    let mut out = format!(
        "{} {:?} sparse={} parts={} problem={:?}\n",
        meta.dtype.name(),
        meta.shape,
        meta.sparse,
        meta.partitions.len(),
        meta.problem
    )
    .into_bytes();
    let Some(n) = meta.num_elements() else {
        // The reader must refuse it; its error is the outcome.
        t.read_elements(ReadCtx::none(), 0, &mut [])
            .map_err(|e| e.to_string())?;
        return Err("element count overflows, yet the tensor reads".into());
    };
    if meta.sparse {
        let s = t.sparse().map_err(|e| e.to_string())?;
        for v in [&s.rows, &s.row_ptr] {
            put_len(&mut out, v.len() as u64);
            v.iter().for_each(|x| put_len(&mut out, *x));
        }
        s.cols.iter().for_each(|c| put_len(&mut out, *c as u64));
        out.extend_from_slice(&s.values);
    } else if let Some(es) = meta.dtype.elem_size() {
        let want = n.min(READ_CAP / es as u64);
        let mut buf = vec![0u8; 4096 * es];
        let mut first = 0;
        while first < want {
            let k = (want - first).min(4096) as usize;
            t.read_elements(ReadCtx::none(), first, &mut buf[..k * es])
                .map_err(|e| e.to_string())?;
            out.extend_from_slice(&buf[..k * es]);
            first += k as u64;
        }
        if n == 0 && meta.problem.is_some() {
            // Nothing to read, but the tensor is known to be bad.
            t.read_elements(ReadCtx::none(), 0, &mut [])
                .map_err(|e| e.to_string())?;
        }
    } else if matches!(meta.dtype, DType::Str | DType::Variant) {
        let mut total = 0u64;
        t.for_each_string(ReadCtx::none(), 0, n.min(1 << 16), &mut |s| {
            if total < READ_CAP {
                put_len(&mut out, s.len() as u64);
                out.extend_from_slice(s);
                total += s.len() as u64 + 8;
            }
        })
        .map_err(|e| e.to_string())?;
    } else {
        t.read_elements(ReadCtx::none(), 0, &mut [])
            .map_err(|e| e.to_string())?;
    }
    for i in 0..meta.partitions.len() {
        let p = t.partition(i).map_err(|e| e.to_string())?;
        let b = tensor_bytes(&*p)?;
        put_len(&mut out, b.len() as u64);
        out.extend_from_slice(&b);
    }
    Ok(out)
}

/// Every layout's file of `t` (size, then up to `READ_CAP` bytes read in odd-sized pieces).
pub fn layout_bytes(t: &Arc<dyn Tensor>, ctx: &Arc<LayoutCtx>) -> Outcome {
    let mut out = Vec::new();
    for &l in &ctx.layouts {
        out.extend_from_slice(l.suffix().as_bytes());
        let Ok(file) = modelfs_layout::content(l, Arc::clone(t), ctx) else {
            out.extend_from_slice(b" none\n");
            continue;
        };
        let size = file.size().map_err(|e| format!("{}: {e}", l.suffix()))?;
        // The `.json` describes the tensor, problem included: it may legitimately change
        // when the tensor goes bad, so only its readability is compared.
        let keep = l != Layout::Json;
        if keep {
            put_len(&mut out, size);
        }
        let mut buf = vec![0u8; 40_000];
        let mut off = 0u64;
        while off < size.min(READ_CAP) {
            let got = file
                .read_at(off, &mut buf)
                .map_err(|e| format!("{}: {e}", l.suffix()))?;
            if got == 0 {
                return Err(format!("{}: short read at {off} of {size}", l.suffix()));
            }
            if keep {
                out.extend_from_slice(&buf[..got]);
            }
            off += got as u64;
        }
    }
    Ok(out)
}

/// Walks the whole tree of `model`.
pub fn snapshot(model: &dyn Model, ctx: Option<&Arc<LayoutCtx>>) -> Snapshot {
    let mut snap = Snapshot::default();
    walk(model, ctx, &mut Vec::new(), &mut snap, 0);
    snap
}

fn walk(
    model: &dyn Model,
    ctx: Option<&Arc<LayoutCtx>>,
    dir: &mut Vec<Vec<u8>>,
    snap: &mut Snapshot,
    depth: usize,
) {
    let entries = match model.list_dir(dir) {
        Ok(e) => e,
        Err(e) => {
            snap.dirs.insert(dir.clone(), Err(e.to_string()));
            return;
        }
    };
    snap.dirs
        .insert(dir.clone(), Ok(format!("{entries:?}").into_bytes()));
    if depth > 32 {
        return;
    }
    for e in entries {
        match e {
            DirEntry::Dir(name) => {
                dir.push(name);
                walk(model, ctx, dir, snap, depth + 1);
                dir.pop();
            }
            DirEntry::Reserved(name) => {
                dir.push(modelfs_model::own_component(&name));
                walk(model, ctx, dir, snap, depth + 1);
                dir.pop();
            }
            DirEntry::Document(name) => {
                dir.push(modelfs_model::own_component(&name));
                let outcome = document_bytes(model, dir);
                snap.tensors.insert(
                    dir.clone(),
                    TensorOutcome {
                        layouts: match ctx {
                            Some(_) => outcome.clone(),
                            None => outcome.clone().map(|_| Vec::new()),
                        },
                        model: outcome,
                    },
                );
                dir.pop();
            }
            DirEntry::Tensor(name) => {
                dir.push(name);
                let outcome = match model.tensor(dir) {
                    Err(e) => TensorOutcome {
                        model: Err(e.to_string()),
                        layouts: Err(e.to_string()),
                    },
                    Ok(t) => TensorOutcome {
                        model: tensor_bytes(&*t),
                        layouts: match ctx {
                            Some(c) => layout_bytes(&t, c),
                            None => Ok(Vec::new()),
                        },
                    },
                };
                snap.tensors.insert(dir.clone(), outcome);
                dir.pop();
            }
            DirEntry::Symlink { .. } | DirEntry::Alias { .. } => {}
        }
    }
}

/// A reader's document rendered whole (at most `READ_CAP` bytes' worth of chunks).
fn document_bytes(model: &dyn Model, path: &[Vec<u8>]) -> Outcome {
    let doc = model.document(path).map_err(|e| e.to_string())?;
    let mut out = Vec::new();
    for i in 0..doc.chunks() {
        doc.render(i, &mut out).map_err(|e| e.to_string())?;
        if out.len() as u64 > READ_CAP {
            break;
        }
    }
    Ok(out)
}

/// How a corrupted snapshot relates to the pristine one.
#[derive(Debug, Default)]
pub struct Verdict {
    /// Tensors read exactly as before.
    pub same: usize,
    /// Tensors (or listings) that now fail, with their messages.
    pub failed: Vec<(Vec<Vec<u8>>, String)>,
}

pub fn show(path: &[Vec<u8>]) -> String {
    path.iter()
        .map(|c| String::from_utf8_lossy(c).into_owned())
        .collect::<Vec<_>>()
        .join("/")
}

/// The rule of the suite: everything in `bad` either fails or equals `good` exactly; nothing
/// new appears that reads successfully. Returns what failed.
pub fn compare(case: &str, good: &Snapshot, bad: &Snapshot) -> Verdict {
    let mut v = Verdict::default();
    for (path, b) in &bad.dirs {
        match (b, good.dirs.get(path)) {
            (Err(m), _) => v.failed.push((path.clone(), m.clone())),
            (Ok(x), Some(Ok(y))) if x == y => {}
            (Ok(x), _) => panic!(
                "case {case}: listing of /{} changed without an error: {}",
                show(path),
                String::from_utf8_lossy(x)
            ),
        }
    }
    for (path, b) in &bad.tensors {
        let g = good.tensors.get(path);
        match (&b.model, g.map(|g| &g.model)) {
            (Err(m), _) => {
                v.failed.push((path.clone(), m.clone()));
                continue;
            }
            (Ok(x), Some(Ok(y))) if x == y => v.same += 1,
            (Ok(_), _) => panic!(
                "case {case}: tensor /{} reads successfully with different bytes",
                show(path)
            ),
        }
        match (&b.layouts, g.map(|g| &g.layouts)) {
            (Err(m), _) => v.failed.push((path.clone(), m.clone())),
            (Ok(x), Some(Ok(y))) if x == y => {}
            (Ok(_), _) => panic!(
                "case {case}: a layout file of /{} reads successfully with different bytes",
                show(path)
            ),
        }
    }
    v
}

/// Every error message names a file (one of `names`) so that the log line says where.
pub fn assert_named(case: &str, v: &Verdict, names: &[&str]) {
    for (path, m) in &v.failed {
        assert!(
            names.iter().any(|n| m.contains(n)),
            "case {case}: error for /{} does not name the file ({names:?}): {m}",
            show(path)
        );
    }
}
