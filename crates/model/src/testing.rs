//! In-memory doubles of the `model` traits for tests (unit tests, the integration tests and
//! the fuzzers, through the `testkit` feature): a tensor held in memory, a model of such
//! tensors, and a model wrapper that counts data reads (to prove that listing decodes nothing).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::SystemTime;

use crate::source::ReadCtx;
use crate::ModelResult;
use crate::{
    Checksummed, DType, DirEntry, EachString, KnownProblem, Model, ModelError, ModelSummary,
    PartitionMeta, RequestError, Sparse, SparseRows, Strings, Tensor, TensorMeta,
};

/// `n` deterministic pseudo-random floats in [-1, 1) (an LCG), for throughput tests.
pub fn pseudo_random_f32(n: u64) -> Vec<f32> {
    let mut x = 12345u32;
    (0..n)
        .map(|_| {
            x = x.wrapping_mul(1664525).wrapping_add(1013904223);
            (x >> 8) as f32 / 16777216.0 * 2.0 - 1.0
        })
        .collect()
}

/// Little-endian float32 bytes as numbers (what a test compares a read with).
pub fn f32s(b: &[u8]) -> Vec<f32> {
    b.chunks_exact(4)
        .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
        .collect()
}

/// Damaged copies of `good` for a "damaged files never panic" test, each handed to `f`: its
/// prefixes at `cut`-byte steps, then copies with one byte flipped at `flip`-byte steps.
pub fn for_each_damaged(good: &[u8], cut: usize, flip: usize, mut f: impl FnMut(&[u8])) {
    for n in (0..good.len()).step_by(cut) {
        f(&good[..n]);
    }
    let mut bad = good.to_vec();
    for i in (0..good.len()).step_by(flip) {
        bad[i] ^= 0x5a;
        f(&bad);
        bad[i] ^= 0x5a;
    }
}

/// A tensor held in memory: dense element bytes, strings, or sparse rows.
pub struct MemTensor {
    pub meta: TensorMeta,
    pub data: Vec<u8>,
    pub strings: Vec<Vec<u8>>,
    pub sparse_rows: Option<Arc<SparseRows>>,
    /// When set, every data read fails with this message.
    pub fail: Option<String>,
    /// Sub-tensors returned by `partition(i)`.
    pub parts: Vec<Arc<dyn Tensor>>,
    /// Whether a reader of every byte may confirm its CRC32C itself (`deferred_crc32c`), as
    /// of a TF bundle entry.
    pub checksummed: bool,
}

fn meta(dtype: DType, shape: &[u64]) -> TensorMeta {
    TensorMeta {
        mtime: SystemTime::UNIX_EPOCH,
        ..TensorMeta::new(
            b"test/tensor".to_vec(),
            dtype,
            shape.to_vec(),
            "tf-checkpoint",
        )
    }
}

impl MemTensor {
    /// A dense tensor from little-endian element bytes.
    pub fn new(dtype: DType, shape: &[u64], data: Vec<u8>) -> Self {
        MemTensor {
            meta: meta(dtype, shape),
            data,
            strings: Vec::new(),
            sparse_rows: None,
            fail: None,
            parts: Vec::new(),
            checksummed: false,
        }
    }

    pub fn f32(shape: &[u64], values: &[f32]) -> Self {
        Self::new(
            DType::F32,
            shape,
            values.iter().flat_map(|v| v.to_le_bytes()).collect(),
        )
    }

    pub fn f64(shape: &[u64], values: &[f64]) -> Self {
        Self::new(
            DType::F64,
            shape,
            values.iter().flat_map(|v| v.to_le_bytes()).collect(),
        )
    }

    pub fn i64(shape: &[u64], values: &[i64]) -> Self {
        Self::new(
            DType::I64,
            shape,
            values.iter().flat_map(|v| v.to_le_bytes()).collect(),
        )
    }

    pub fn strings(shape: &[u64], strings: Vec<Vec<u8>>) -> Self {
        let mut t = Self::new(DType::Str, shape, Vec::new());
        t.strings = strings;
        t
    }

    /// A sparse matrix `rows × cols` with the given stored entries.
    pub fn sparse(dtype: DType, rows: u64, cols: u64, s: SparseRows) -> Self {
        let mut t = Self::new(dtype, &[rows, cols], Vec::new());
        t.meta.sparse = true;
        t.meta.format = "angel";
        t.meta.role = crate::Role::Matrix;
        t.sparse_rows = Some(Arc::new(s));
        t
    }

    pub fn named(mut self, name: &[u8]) -> Self {
        self.meta.name = name.to_vec();
        self
    }

    /// A rank-1 f32 tensor split into partitions of the given lengths (labelled by Angel-style
    /// part ids `10 + i` when `part_ids`).
    pub fn partitioned(values: &[f32], lens: &[u64], part_ids: bool) -> Self {
        let mut whole = MemTensor::f32(&[values.len() as u64], values);
        let mut start = 0u64;
        for (i, &len) in lens.iter().enumerate() {
            let slice = &values[start as usize..(start + len) as usize];
            whole.meta.partitions.push(PartitionMeta {
                extent: vec![(start, len)],
                file: "mem".into(),
                offset: start * 4,
                length: len * 4,
                part_id: part_ids.then_some(10 + i as i32),
                extra: Default::default(),
            });
            whole.parts.push(MemTensor::f32(&[len], slice).arc());
            start += len;
        }
        whole
    }

    /// Its bytes' CRC32C confirmed by a reader of all of them (`deferred_crc32c`).
    pub fn checksummed(mut self) -> Self {
        self.checksummed = true;
        self
    }

    pub fn with_problem(mut self, p: &str) -> Self {
        self.meta.problem = Some(p.to_string());
        self.fail = Some(p.to_string());
        self
    }

    pub fn failing(mut self, msg: &str) -> Self {
        self.fail = Some(msg.to_string());
        self
    }

    pub fn arc(self) -> Arc<dyn Tensor> {
        Arc::new(self)
    }

    fn check(&self) -> Result<(), ModelError> {
        match &self.fail {
            Some(m) => Err(ModelError::data(
                String::from_utf8_lossy(&self.meta.name),
                KnownProblem(m.clone()),
            )),
            None => Ok(()),
        }
    }
}

impl Tensor for MemTensor {
    fn meta(&self) -> &TensorMeta {
        &self.meta
    }

    fn fill_elements(&self, _: &ReadCtx, first: u64, out: &mut [u8]) -> Result<(), ModelError> {
        self.check()?;
        let es = self
            .meta
            .dtype
            .elem_size()
            .ok_or_else(|| RequestError::NoFixedSize(self.meta.dtype.name().into_owned()))?
            as u64;
        let start = first.checked_mul(es);
        let end = start.and_then(|s| s.checked_add(out.len() as u64));
        match (start, end) {
            (Some(s), Some(e)) if e <= self.data.len() as u64 => {
                out.copy_from_slice(&self.data[s as usize..e as usize]);
                Ok(())
            }
            _ => Err(RequestError::OutOfRange {
                first,
                count: out.len() as u64 / es,
                total: self.data.len() as u64 / es,
            }
            .into()),
        }
    }

    fn partition(&self, i: usize) -> Result<Arc<dyn Tensor>, ModelError> {
        self.parts
            .get(i)
            .cloned()
            .ok_or_else(|| ModelError::NotFound(format!("partition {i}")))
    }

    crate::capabilities!(as_strings: Strings, as_sparse: Sparse, as_checksummed: Checksummed);
}

impl Checksummed for MemTensor {
    fn deferred_crc32c(&self) -> Option<u32> {
        self.checksummed.then(|| crc32c::crc32c(&self.data))
    }

    fn confirm_crc32c(&self, crc: u32) -> Result<(), ModelError> {
        match crc == crc32c::crc32c(&self.data) {
            true => Ok(()),
            false => Err(ModelError::data(
                String::from_utf8_lossy(&self.meta.name),
                KnownProblem("checksum mismatch".into()),
            )),
        }
    }
}

impl Strings for MemTensor {
    fn for_each_string(&self, _: &ReadCtx, first: u64, count: u64, f: EachString) -> ModelResult {
        self.check()?;
        let end = first
            .checked_add(count)
            .filter(|&e| e <= self.strings.len() as u64)
            .ok_or(RequestError::OutOfRange {
                first,
                count,
                total: self.strings.len() as u64,
            })?;
        for s in &self.strings[first as usize..end as usize] {
            f(s);
        }
        Ok(())
    }
}

impl Sparse for MemTensor {
    fn sparse(&self) -> Result<Arc<SparseRows>, ModelError> {
        self.check()?;
        self.sparse_rows
            .clone()
            .ok_or_else(|| RequestError::NotSparse.into())
    }
}

/// A symlink of a `MemModel`: (directory, name, target).
pub type MemSymlink = (Vec<Vec<u8>>, Vec<u8>, Vec<u8>);

/// A model whose tensors live at `/`-free raw component paths.
#[derive(Default)]
pub struct MemModel {
    pub tensors: BTreeMap<Vec<Vec<u8>>, Arc<MemTensor>>,
    pub symlinks: Vec<MemSymlink>,
}

pub use crate::key_path as key;

impl MemModel {
    pub fn add(&mut self, path: Vec<Vec<u8>>, t: MemTensor) -> &mut Self {
        self.tensors.insert(path, Arc::new(t));
        self
    }
}

impl Model for MemModel {
    fn list_dir(&self, dir: &[Vec<u8>]) -> Result<Vec<DirEntry>, ModelError> {
        let mut out = Vec::new();
        crate::flat::children(&self.tensors, dir, &mut out);
        let found = dir.is_empty() || !out.is_empty();
        for (d, name, target) in &self.symlinks {
            if d.as_slice() == dir {
                out.push(DirEntry::Symlink {
                    name: name.clone(),
                    target: target.clone(),
                });
            }
        }
        if !found {
            return Err(ModelError::NotFound("dir".into()));
        }
        out.sort();
        out.dedup();
        Ok(out)
    }

    fn tensor(&self, path: &[Vec<u8>]) -> Result<Arc<dyn Tensor>, ModelError> {
        self.tensors
            .get(path)
            .map(|t| t.clone() as Arc<dyn Tensor>)
            .ok_or_else(|| ModelError::NotFound("tensor".into()))
    }

    fn summary(&self) -> Result<ModelSummary, ModelError> {
        let mut s = ModelSummary {
            format: "memory".into(),
            ..Default::default()
        };
        for t in self.tensors.values() {
            s.tensors += 1;
            *s.dtypes
                .entry(t.meta.dtype.name().into_owned())
                .or_default() += 1;
            s.total_bytes += t.data.len() as u64;
            if let Some(p) = &t.meta.problem {
                s.problems.push(p.clone());
            }
            if let Some(n) = &t.meta.note {
                s.notes.push(n.clone());
            }
        }
        Ok(s)
    }
}

/// Wraps a model so that every data access of its tensors (and their partitions) is counted:
/// `read_elements`, `for_each_string` and `sparse`.
pub struct CountingModel {
    inner: Arc<dyn Model>,
    reads: Arc<AtomicU64>,
}

impl CountingModel {
    pub fn new(inner: Arc<dyn Model>) -> Self {
        CountingModel {
            inner,
            reads: Arc::new(AtomicU64::new(0)),
        }
    }

    /// Data accesses so far.
    pub fn reads(&self) -> u64 {
        self.reads.load(Ordering::Relaxed)
    }
}

struct CountingTensor {
    inner: Arc<dyn Tensor>,
    reads: Arc<AtomicU64>,
}

impl CountingTensor {
    fn wrap(inner: Arc<dyn Tensor>, reads: &Arc<AtomicU64>) -> Arc<dyn Tensor> {
        Arc::new(CountingTensor {
            inner,
            reads: reads.clone(),
        })
    }

    fn count(&self) {
        self.reads.fetch_add(1, Ordering::Relaxed);
    }
}

impl Tensor for CountingTensor {
    fn meta(&self) -> &TensorMeta {
        self.inner.meta()
    }
    fn fill_elements(&self, ctx: &ReadCtx, first: u64, out: &mut [u8]) -> Result<(), ModelError> {
        self.count();
        self.inner.read_elements(ctx, first, out)
    }
    fn cache_identity(&self) -> Option<String> {
        self.inner.cache_identity()
    }
    fn partition(&self, i: usize) -> Result<Arc<dyn Tensor>, ModelError> {
        Ok(CountingTensor::wrap(self.inner.partition(i)?, &self.reads))
    }

    crate::capabilities!(as_strings: Strings, as_sparse: Sparse, as_checksummed: Checksummed);
}

impl Strings for CountingTensor {
    fn for_each_string(&self, ctx: &ReadCtx, first: u64, count: u64, f: EachString) -> ModelResult {
        self.count();
        self.inner.for_each_string(ctx, first, count, f)
    }
}

impl Sparse for CountingTensor {
    fn sparse(&self) -> Result<Arc<SparseRows>, ModelError> {
        self.count();
        self.inner.sparse()
    }

    /// Data only when the shape is not metadata.
    fn sparse_shape(&self) -> Result<Arc<crate::SparseShape>, ModelError> {
        if !self.inner.sparse_shape_is_cheap() {
            self.count();
        }
        self.inner.sparse_shape()
    }

    fn sparse_shape_is_cheap(&self) -> bool {
        self.inner.sparse_shape_is_cheap()
    }

    fn read_entries(
        &self,
        ctx: &ReadCtx,
        first: u64,
        count: u64,
        out: &mut crate::Entries,
    ) -> Result<(), ModelError> {
        self.count();
        self.inner.entries()?.read_entries(ctx, first, count, out)
    }

    fn seek_col(&self, k: usize, col: i64) -> Result<u64, ModelError> {
        self.count();
        self.inner.entries()?.seek_col(k, col)
    }
}

impl Checksummed for CountingTensor {
    fn stored_crc32c(&self) -> Option<u32> {
        self.inner.stored_crc32c()
    }
}

impl Model for CountingModel {
    fn list_dir(&self, dir: &[Vec<u8>]) -> Result<Vec<DirEntry>, ModelError> {
        self.inner.list_dir(dir)
    }
    fn tensor(&self, path: &[Vec<u8>]) -> Result<Arc<dyn Tensor>, ModelError> {
        Ok(CountingTensor::wrap(self.inner.tensor(path)?, &self.reads))
    }
    fn document(&self, path: &[Vec<u8>]) -> Result<Arc<dyn crate::Document>, ModelError> {
        self.inner.document(path)
    }
    fn summary(&self) -> Result<ModelSummary, ModelError> {
        self.inner.summary()
    }
    fn model_roots(&self) -> Vec<Vec<Vec<u8>>> {
        self.inner.model_roots()
    }
    fn hidden_tensors(&self, root: &[Vec<u8>]) -> Vec<Arc<dyn Tensor>> {
        self.inner.hidden_tensors(root)
    }
}

/// The repository's root (the workspace's; this crate is `crates/model/` in it).
pub fn repo_dir() -> std::path::PathBuf {
    std::path::Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../..")).to_path_buf()
}

/// The repository's `fixtures/` directory.
pub fn fixtures_dir() -> std::path::PathBuf {
    repo_dir().join("fixtures")
}

/// True where a test must fail rather than skip for want of its data, FUSE or tools: in CI
/// (`CI=true`), or when `MODELFS_REQUIRE_FUSE=1` / `MODELFS_REQUIRE_SHARED=1` ask for it.
pub fn must_be_complete() -> bool {
    let is = |var: &str, value: &str| std::env::var(var).is_ok_and(|v| v == value);
    is("CI", "true") || is("MODELFS_REQUIRE_FUSE", "1") || is("MODELFS_REQUIRE_SHARED", "1")
}

/// The steering repository's `shared/` (real-world models, conformance checks):
/// `$MODELFS_SHARED`, else `../shared` beside the repository. `None` when it is missing, which
/// fails the calling test instead when the run must be complete (`must_be_complete`): a test must not pass for want of its data.
pub fn shared_dir() -> Option<std::path::PathBuf> {
    let dir = std::env::var_os("MODELFS_SHARED")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| repo_dir().join("../shared"));
    if dir.join("realworld").is_dir() {
        return Some(dir);
    }
    assert!(
        !must_be_complete(),
        "{}: shared/realworld not found (set MODELFS_SHARED)",
        dir.display()
    );
    eprintln!("{}: shared/realworld not found; skipped", dir.display());
    None
}

/// The model directories of fixtures/ and ../shared/realworld: every directory `is_model`
/// accepts, not descended into, skipping recorded expectations (`expected*`, `*.expected`).
pub fn model_dirs(is_model: impl Fn(&std::path::Path) -> bool) -> Vec<std::path::PathBuf> {
    fn find(
        dir: &std::path::Path,
        is_model: &dyn Fn(&std::path::Path) -> bool,
        out: &mut Vec<std::path::PathBuf>,
    ) {
        let Ok(rd) = std::fs::read_dir(dir) else {
            return;
        };
        let mut subs: Vec<_> = rd
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.is_dir())
            .collect();
        subs.sort();
        for p in subs {
            let name = p
                .file_name()
                .unwrap_or_default()
                .to_string_lossy()
                .into_owned();
            if name.starts_with("expected") || name.ends_with(".expected") {
                continue;
            }
            if is_model(&p) {
                out.push(p);
            } else {
                find(&p, is_model, out);
            }
        }
    }
    let mut out = Vec::new();
    find(&fixtures_dir(), &is_model, &mut out);
    if let Some(shared) = shared_dir() {
        find(&shared.join("realworld"), &is_model, &mut out);
    }
    out
}

/// A storage whose file reads fail with a transient fault (as a remote store's after its
/// retries) while `down` is set: the failure-injecting double of `source::Storage`.
#[derive(Debug)]
pub struct FlakyStorage {
    inner: Arc<dyn crate::source::Storage>,
    pub down: Arc<std::sync::atomic::AtomicBool>,
}

impl FlakyStorage {
    pub fn new(inner: Arc<dyn crate::source::Storage>) -> Self {
        FlakyStorage {
            inner,
            down: Arc::new(std::sync::atomic::AtomicBool::new(false)),
        }
    }
}

#[derive(Debug)]
struct FlakyFile {
    inner: Arc<dyn crate::source::ReadAt>,
    down: Arc<std::sync::atomic::AtomicBool>,
}

/// Forwards the whole of `ReadAt` but `local_file` (a passthrough would read around the
/// faults): reads through it check, lend and stream as the inner file's do.
impl crate::source::ReadAt for FlakyFile {
    fn about(&self) -> &crate::source::About {
        self.inner.about()
    }
    fn read_with(
        &self,
        ctx: &ReadCtx,
        offset: u64,
        to: crate::source::To<'_>,
    ) -> Result<(), crate::source::SourceError> {
        if self.down.load(Ordering::SeqCst) {
            return Err(crate::source::SourceError::Remote {
                url: self.inner.about().name.clone(),
                cause: "injected: service unavailable".into(),
            });
        }
        self.inner.read_with(ctx, offset, to)
    }
    fn done_with(&self, offset: u64, len: u64) {
        self.inner.done_with(offset, len)
    }
}

impl crate::source::Storage for FlakyStorage {
    fn open(
        &self,
        path: &std::path::Path,
    ) -> Result<Arc<dyn crate::source::ReadAt>, crate::source::SourceError> {
        Ok(Arc::new(FlakyFile {
            inner: self.inner.open(path)?,
            down: self.down.clone(),
        }))
    }
    fn kind(
        &self,
        path: &std::path::Path,
    ) -> Result<Option<crate::source::EntryKind>, crate::source::SourceError> {
        self.inner.kind(path)
    }
    fn list(
        &self,
        dir: &std::path::Path,
    ) -> Result<Vec<(std::ffi::OsString, crate::source::EntryKind)>, crate::source::SourceError>
    {
        self.inner.list(dir)
    }
}

/// What a fuzz target reads of a tensor, the way a layout would ask: its first and last 64
/// elements (or strings), its stored form's head, a view of its first bytes. Nothing is
/// checked: any `Err` is fine; a panic, a hang or a huge allocation is a bug.
pub fn fuzz_touch(t: &dyn Tensor) {
    let meta = t.meta();
    let ctx = ReadCtx::none();
    if let Some(s) = &meta.stored {
        let _ = t.read_stored(ctx, 0, s.bytes.min(64) as usize);
    }
    if meta.problem.is_some() {
        return;
    }
    let n = meta.num_elements().unwrap_or(0).min(64);
    match meta.dtype.elem_size() {
        Some(w) => {
            let mut buf = vec![0u8; n as usize * w];
            let _ = t.read_elements(ctx, 0, &mut buf);
            let last = meta.num_elements().unwrap_or(0).saturating_sub(n);
            let _ = t.read_elements(ctx, last, &mut buf);
            let _ = t.read(ctx, 0, buf.len());
        }
        None => {
            let _ = t.for_each_string(ctx, 0, n, &mut |_| {});
        }
    }
}

/// What a fuzz target reads of a model: its summary, then every directory (16 levels at most),
/// every tensor (`fuzz_touch`) and the first chunks of every document.
pub fn fuzz_walk(model: &dyn Model) {
    let _ = model.summary();
    walk(model, &mut Vec::new(), 0);
}

fn walk(model: &dyn Model, dir: &mut Vec<Vec<u8>>, depth: usize) {
    let Ok(entries) = model.list_dir(dir) else {
        return;
    };
    if depth > 16 {
        return;
    }
    for e in entries {
        use crate::DirEntry::*;
        match e {
            Dir(n) => {
                dir.push(n);
                walk(model, dir, depth + 1);
                dir.pop();
            }
            Reserved(n) => {
                dir.push(crate::own_component(&n));
                walk(model, dir, depth + 1);
                dir.pop();
            }
            Tensor(n) => {
                dir.push(n);
                if let Ok(t) = model.tensor(dir) {
                    fuzz_touch(&*t);
                }
                dir.pop();
            }
            Document(n) => {
                dir.push(crate::own_component(&n));
                if let Ok(d) = model.document(dir) {
                    let mut out = Vec::new();
                    for k in 0..d.chunks().min(4) {
                        let _ = d.render(k, &mut out);
                    }
                }
                dir.pop();
            }
            Symlink { .. } | Alias { .. } => {}
        }
    }
}

#[cfg(test)]
mod read_checks {
    use std::sync::Arc;

    use crate::source::ReadCtx;

    use super::MemTensor;
    use crate::{ModelError, RequestError, Tensor};

    fn request(e: ModelError) -> RequestError {
        match e {
            ModelError::Request(r) => r,
            other => panic!("not a request error: {other}"),
        }
    }

    #[test]
    fn every_read_is_checked_once_before_a_reader_sees_it() {
        let t: Arc<dyn Tensor> = Arc::new(MemTensor::f32(&[2, 2], &[1.0, 2.0, 3.0, 4.0]));
        let mut out = [0u8; 8];
        t.read_elements(ReadCtx::none(), 2, &mut out).unwrap();
        assert_eq!(
            out,
            [3.0f32.to_le_bytes(), 4.0f32.to_le_bytes()].concat()[..]
        );
        assert!(matches!(
            request(
                t.read_elements(ReadCtx::none(), 0, &mut [0u8; 6])
                    .unwrap_err()
            ),
            RequestError::PartialElement { len: 6, elem: 4 }
        ));
        assert!(matches!(
            request(t.read_elements(ReadCtx::none(), 3, &mut out).unwrap_err()),
            RequestError::OutOfRange {
                first: 3,
                count: 2,
                total: 4
            }
        ));
        assert!(matches!(
            request(
                t.read_elements_unchecked(ReadCtx::none(), u64::MAX, &mut out)
                    .unwrap_err()
            ),
            RequestError::OutOfRange { .. }
        ));
        t.read_elements(ReadCtx::none(), 4, &mut []).unwrap();
    }
}
