//! `GraphModel`: a graph file's constants, with the variables of its checkpoint if it has one
//! (SPEC §6). With variables, the constants live under `constants/`; alone (a frozen graph, a
//! `.meta` given by itself), they are the root's tensors. The graph is scanned on the first
//! look at the constants, not at open: a mount costs nothing more than the variables' own.

use std::collections::BTreeSet;
use std::sync::{Arc, OnceLock};

use super::encoded::Encoded;
use super::scan::{self, GraphKind, GraphScan};
use super::tensor_proto::ProtoTensor;
use super::{pbtxt, signatures};
use crate::model::{BoxError, DirEntry, Document, Model, ModelError, ModelSummary, Tensor};
use crate::source::{Memo, ReadAt, ReadCtx, ReadExt};

/// The directory of the constants when there are variables beside them.
pub(crate) const CONSTANTS: &[u8] = b"constants";
const SIGNATURES: &[u8] = b"signatures";
const SIGNATURES_TXT: &[u8] = b"signatures.txt";

pub(crate) struct GraphModel {
    file: Arc<dyn ReadAt>,
    kind: GraphKind,
    /// `file` is in the protobuf text format (read through `Encoded`).
    text: bool,
    variables: Option<Arc<dyn Model>>,
    scanned: Memo<Result<Scanned, String>>,
    /// That a hash table's sentinel keys are unknown (the graph unreadable) was logged: once
    /// per model, not per table opened.
    sentinels_unknown_logged: std::sync::atomic::AtomicBool,
}

struct Scanned {
    /// The wire bytes: the file, or what its text stands for.
    data: Arc<dyn ReadAt>,
    scan: GraphScan,
    /// Constant paths (the node name split on `/`), sorted, with their index in `scan.consts`.
    paths: Vec<(Vec<Vec<u8>>, usize)>,
    /// The paths listed: all but TF's save/restore plumbing (`is_plumbing`); the model
    /// still opens those by name, the mount (which walks listings) shows none.
    listed: Vec<Vec<Vec<u8>>>,
    /// `signatures/` file names (sorted) with their meta graph and signature index.
    signatures: Vec<(Vec<u8>, usize, usize)>,
    /// The name of each meta graph's `graph*.pbtxt`, in meta graph order (none if no graph).
    graphs: Vec<Option<Vec<u8>>>,
    /// Each DenseHashTable's empty and deleted keys, by its name in the checkpoint.
    sentinels: std::collections::BTreeMap<Vec<u8>, [i64; 2]>,
}

/// A small document rendered whole (a signature, the signatures' summary).
struct TextDoc {
    bytes: Vec<u8>,
    mtime: std::time::SystemTime,
}

impl Document for TextDoc {
    fn chunks(&self) -> u64 {
        1
    }
    fn render(&self, _chunk: u64, out: &mut Vec<u8>) -> Result<(), ModelError> {
        out.extend_from_slice(&self.bytes);
        Ok(())
    }
    fn mtime(&self) -> std::time::SystemTime {
        self.mtime
    }
}

impl GraphModel {
    pub(crate) fn new(
        file: Arc<dyn ReadAt>,
        kind: GraphKind,
        text: bool,
        variables: Option<Arc<dyn Model>>,
    ) -> Self {
        GraphModel {
            file,
            kind,
            text,
            variables,
            scanned: Memo::default(),
            sentinels_unknown_logged: Default::default(),
        }
    }

    fn scanned(&self) -> Result<&Scanned, ModelError> {
        let got = self.scanned.get_or_try(|| match self.scan_now() {
            Ok(s) => Ok(Ok(s)),
            // Not kept: the next look tries again.
            Err(e) if crate::source::is_transient(&*e) => Err(e),
            Err(e) => Ok(Err(e.to_string())),
        });
        match got {
            Ok(Ok(s)) => Ok(s),
            Ok(Err(e)) => Err(ModelError::data(self.file.name(), e.clone())),
            Err(e) => Err(ModelError::data(self.file.name(), e)),
        }
    }

    fn scan_now(&self) -> Result<Scanned, BoxError> {
        let data: Arc<dyn ReadAt> = match self.text {
            true => Arc::new(Encoded::new(self.file.clone(), self.kind)?),
            false => self.file.clone(),
        };
        let size = usize::try_from(data.size())?;
        let scan = data.with_bytes(ReadCtx::none(), 0, size, |b| scan::scan(b, self.kind))??;
        let mut paths: Vec<(Vec<Vec<u8>>, usize)> = scan
            .consts
            .iter()
            .enumerate()
            .map(|(i, c)| (split(&c.name), i))
            .collect();
        paths.sort();
        let mut scan = scan;
        scan.saver_scopes.extend(saver_scopes(&scan.consts));
        let listed = paths
            .iter()
            .filter(|(_, i)| !is_plumbing(&scan.consts[*i].name, &scan))
            .map(|(p, _)| p.clone())
            .collect();
        let signatures = signatures::names(&scan.metas)
            .into_iter()
            .map(|(n, m, s)| (format!("{n}.json").into_bytes(), m, s))
            .collect();
        let graphs = graph_names(&scan.metas);
        let sentinels = dense_sentinels(&scan, &data);
        Ok(Scanned {
            data,
            scan,
            paths,
            listed,
            signatures,
            graphs,
            sentinels,
        })
    }

    /// `t`, a variable at `path`, told its sentinel keys when it is a DenseHashTable the
    /// graph makes. The graph is scanned for it only when `t` is a hash table.
    fn with_sentinels(&self, path: &[Vec<u8>], t: Arc<dyn Tensor>) -> Arc<dyn Tensor> {
        let Some(keyed) = t
            .as_keyed()
            .filter(|_| t.meta().extra.contains_key("hash_table"))
        else {
            return t;
        };
        let s = match self.scanned() {
            Ok(s) => s,
            Err(e) => {
                if !self
                    .sentinels_unknown_logged
                    .swap(true, std::sync::atomic::Ordering::Relaxed)
                {
                    log::warn!(
                        "{}: DenseHashTable sentinel keys unknown (this and any other table's): {e}",
                        show(path)
                    );
                }
                return t;
            }
        };
        match s.sentinels.get(&path.join(&b'/')) {
            Some(keys) => keyed.with_sentinels(keys).unwrap_or(t),
            None => t,
        }
    }

    /// The constants' part of `path`: `Some(rest)` when `path` is among the constants.
    fn in_constants<'a>(&self, path: &'a [Vec<u8>]) -> Option<&'a [Vec<u8>]> {
        match &self.variables {
            None => Some(path),
            Some(_) => match path.split_first() {
                Some((first, rest)) if is_own(first, CONSTANTS) => Some(rest),
                _ => None,
            },
        }
    }

    fn list_constants(&self, dir: &[Vec<u8>]) -> Result<Vec<DirEntry>, ModelError> {
        let s = self.scanned()?;
        let paths: Vec<&Vec<Vec<u8>>> = s.listed.iter().collect();
        list_paths(&paths, dir)
    }

    fn constant(&self, path: &[Vec<u8>]) -> Result<Arc<dyn Tensor>, ModelError> {
        let s = self.scanned()?;
        let i = s
            .paths
            .binary_search_by(|(p, _)| p.as_slice().cmp(path))
            .map_err(|_| ModelError::NotFound(format!("no constant {}", show(path))))?;
        let c = &s.scan.consts[s.paths[i].1];
        let meta = ProtoTensor::graph_meta(&c.name, &c.op, &*s.data);
        Ok(Arc::new(ProtoTensor::new(
            s.data.clone(),
            c.value.clone(),
            meta,
        )))
    }
}

/// The functions TF generates to save and restore a SavedModel's objects and to initialize
/// and destroy its resources (`tf.saved_model.save`): their constants are tensor names,
/// shard patterns and return markers, not the model's.
const PLUMBING_FUNCTIONS: &[&str] = &[
    "__inference__traced_save_",
    "__inference__traced_restore_",
    "__inference_save_fn_",
    "__inference_restore_fn_",
    "__inference__initializer_",
    "__inference__destroyer_",
];

/// The name scope of every TF1 `Saver` in the graph, also those its `SaverDef` does not name
/// (a SavedModel builder adds `save_1` beside the program's own `save`): the scopes holding
/// a `SaveV2` or `RestoreV2` op's `tensor_names`.
fn saver_scopes(consts: &[scan::Const]) -> Vec<String> {
    let mut out: Vec<String> = consts
        .iter()
        .filter_map(|c| {
            let n = c.name.as_str();
            n.strip_suffix("/SaveV2/tensor_names")
                .or_else(|| n.strip_suffix("/RestoreV2/tensor_names"))
                .map(str::to_string)
        })
        .collect();
    out.sort();
    out.dedup();
    out
}

/// A constant (its name qualified by its function) of TF's save/restore plumbing: in one of
/// `PLUMBING_FUNCTIONS`, an input of a TF2 save call (`GraphScan::save_inputs`), or under a
/// TF1 `Saver`'s name scope (`save/SaveV2/tensor_names`).
fn is_plumbing(name: &str, scan: &GraphScan) -> bool {
    let first = name.split('/').next().unwrap_or(name);
    PLUMBING_FUNCTIONS.iter().any(|f| first.starts_with(f))
        || scan.save_inputs.iter().any(|i| i == name)
        || scan.saver_scopes.iter().any(|s| {
            name.strip_prefix(s.as_str())
                .is_some_and(|r| r.starts_with('/'))
        })
}

/// Each DenseHashTable's empty and deleted keys (`dense::tables`), those whose keys are
/// integer `Const`s of one element read.
fn dense_sentinels(
    scan: &GraphScan,
    data: &Arc<dyn ReadAt>,
) -> std::collections::BTreeMap<Vec<u8>, [i64; 2]> {
    let key = |name: &str| -> Option<i64> {
        let c = scan.consts.iter().find(|c| c.name == name)?;
        let meta = ProtoTensor::graph_meta(name, &c.op, &**data);
        let t: Arc<dyn Tensor> = Arc::new(ProtoTensor::new(data.clone(), c.value.clone(), meta));
        let m = t.meta();
        if m.problem.is_some() || m.num_elements() != Some(1) {
            return None;
        }
        let mut b = [0u8; 8];
        match m.dtype {
            crate::model::DType::I64 => t.read_elements(ReadCtx::none(), 0, &mut b).ok()?,
            crate::model::DType::I32 => t.read_elements(ReadCtx::none(), 0, &mut b[..4]).ok()?,
            _ => return None,
        }
        Some(match m.dtype {
            crate::model::DType::I32 => i32::from_le_bytes([b[0], b[1], b[2], b[3]]) as i64,
            _ => i64::from_le_bytes(b),
        })
    };
    let mut out = std::collections::BTreeMap::new();
    for (table, [empty, deleted]) in super::dense::tables(&scan.dense_ops, &scan.objects) {
        match (key(&empty), key(&deleted)) {
            (Some(e), Some(d)) => {
                out.insert(table.into_bytes(), [e, d]);
            }
            _ => log::warn!("DenseHashTable {table}: its empty and deleted keys are not constants"),
        }
    }
    out
}

/// `modelfs info` lines: nodes by op, constants, and each meta graph's signatures.
fn graph_details(scan: &GraphScan, const_bytes: u64, plumbing: u64) -> Vec<String> {
    let mut ops: Vec<(&String, &u64)> = scan.ops.iter().collect();
    ops.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
    let ops: Vec<String> = ops.iter().map(|(op, n)| format!("{op} {n}")).collect();
    let mut out = vec![
        format!(
            "graph: {} nodes in {} meta graph(s); by op: {}",
            scan.nodes,
            scan.metas.len(),
            if ops.is_empty() {
                "-".into()
            } else {
                ops.join(", ")
            }
        ),
        format!(
            "constants: {}, {} bytes (and {plumbing} of TF's save/restore plumbing, not listed)",
            scan.consts.len() as u64 - plumbing,
            const_bytes
        ),
    ];
    for m in &scan.metas {
        if m.signatures.is_empty() {
            continue;
        }
        out.push(format!("signatures [{}]:", m.tags.join(", ")));
        for sig in &m.signatures {
            let args = |a: &[super::scan::Arg]| {
                a.iter()
                    .map(|a| {
                        let t = &a.info;
                        let shape = t.shape.as_ref().map_or("?".to_string(), |d| {
                            let d: Vec<String> = d.iter().map(i64::to_string).collect();
                            format!("[{}]", d.join(","))
                        });
                        let kind = match &t.encoding {
                            super::scan::Encoding::Dense => "",
                            super::scan::Encoding::CooSparse { .. } => " sparse",
                            super::scan::Encoding::Composite { .. } => " composite",
                        };
                        let dtype = crate::dtype::name(t.dtype);
                        format!("{}: {dtype} {shape}{kind}", a.key)
                    })
                    .collect::<Vec<_>>()
                    .join(", ")
            };
            out.push(format!(
                "  {}: ({}) -> ({})",
                sig.key,
                args(&sig.inputs),
                args(&sig.outputs)
            ));
        }
    }
    out
}

/// `graph.pbtxt`, or with several meta graphs `graph.<tags>.pbtxt` (`graph.<index>.pbtxt`
/// where the tags do not tell them apart).
fn graph_names(metas: &[super::scan::MetaGraph]) -> Vec<Option<Vec<u8>>> {
    let with_graph = metas.iter().filter(|m| m.graph.is_some()).count();
    let tags: Vec<String> = metas.iter().map(|m| m.tags.join(",")).collect();
    metas
        .iter()
        .enumerate()
        .map(|(i, m)| {
            m.graph.as_ref()?;
            let t = &tags[i];
            let name = if with_graph == 1 {
                "graph.pbtxt".to_string()
            } else if !t.is_empty() && tags.iter().filter(|x| *x == t).count() == 1 {
                format!("graph.{t}.pbtxt")
            } else {
                format!("graph.{i}.pbtxt")
            };
            Some(name.into_bytes())
        })
        .collect()
}

/// The entries of `dir` among sorted tensor `paths` (each a list of components).
pub(crate) fn list_paths<P: AsRef<[Vec<u8>]>>(
    paths: &[P],
    dir: &[Vec<u8>],
) -> Result<Vec<DirEntry>, ModelError> {
    let start = paths.partition_point(|p| p.as_ref() < dir);
    let mut out = BTreeSet::new();
    for p in &paths[start..] {
        let p = p.as_ref();
        if !p.starts_with(dir) {
            break;
        }
        match p.len() - dir.len() {
            0 => {}
            1 => {
                out.insert(DirEntry::Tensor(p[dir.len()].clone()));
            }
            _ => {
                out.insert(DirEntry::Dir(p[dir.len()].clone()));
            }
        }
    }
    if out.is_empty() && !dir.is_empty() {
        return Err(ModelError::NotFound(format!("no directory {}", show(dir))));
    }
    Ok(out.into_iter().collect())
}

/// Whether model path component `c` is the reader's own entry `name` (`own_component`).
fn is_own(c: &[u8], name: &[u8]) -> bool {
    c.split_first() == Some((&0, name))
}

use crate::model::key_path as split;

fn show(path: &[Vec<u8>]) -> String {
    path.iter()
        .map(|c| String::from_utf8_lossy(c))
        .collect::<Vec<_>>()
        .join("/")
}

/// `graph*.pbtxt`: one meta graph's `GraphDef` as text, cut into chunks on first use.
struct GraphText {
    file: Arc<dyn ReadAt>,
    graph: std::ops::Range<usize>,
    chunking: OnceLock<Result<pbtxt::Chunking, String>>,
}

impl GraphText {
    fn chunking(&self, buf: &[u8]) -> Result<&pbtxt::Chunking, ModelError> {
        self.chunking
            .get_or_init(|| {
                pbtxt::Chunking::new(buf, self.graph.clone(), pbtxt::CHUNK_INPUT)
                    .map_err(|e| e.to_string())
            })
            .as_ref()
            .map_err(|e| ModelError::data(self.file.name(), e.clone()))
    }

    /// `f` of the whole graph file.
    fn with_whole<T>(&self, f: impl FnOnce(&[u8]) -> T) -> Result<T, ModelError> {
        let size =
            usize::try_from(self.file.size()).map_err(|e| ModelError::data(self.file.name(), e))?;
        Ok(self.file.with_bytes(ReadCtx::none(), 0, size, f)?)
    }
}

impl Document for GraphText {
    fn chunks(&self) -> u64 {
        // Known without reading: the cut is by input position.
        ((self.graph.end - self.graph.start) / pbtxt::CHUNK_INPUT) as u64 + 1
    }

    fn render(&self, chunk: u64, out: &mut Vec<u8>) -> Result<(), ModelError> {
        self.with_whole(|buf| {
            let c = self.chunking(buf)?;
            c.render(buf, chunk, out)
                .map_err(|e| ModelError::data(self.file.name(), e))
        })?
    }

    fn mtime(&self) -> std::time::SystemTime {
        self.file.mtime()
    }

    fn cache_identity(&self) -> Option<String> {
        let id = crate::source::identity_string(&*self.file)?;
        Some(format!("{id}\u{0}graph@{}", self.graph.start))
    }
}

impl GraphModel {
    /// The reader's own entries at the root: `signatures/`, `signatures.txt`, `graph*.pbtxt`
    /// (none while the graph cannot be scanned: the variables still show).
    fn own_entries(&self) -> Vec<DirEntry> {
        let s = match self.scanned() {
            Ok(s) => s,
            Err(e) => {
                log::error!("{e}");
                return Vec::new();
            }
        };
        let mut out = Vec::new();
        if !s.signatures.is_empty() {
            out.push(DirEntry::Reserved(SIGNATURES.to_vec()));
            out.push(DirEntry::Document(SIGNATURES_TXT.to_vec()));
        }
        out.extend(s.graphs.iter().flatten().cloned().map(DirEntry::Document));
        out
    }

    fn mtime(&self) -> std::time::SystemTime {
        self.file.mtime()
    }
}

impl Model for GraphModel {
    fn list_dir(&self, dir: &[Vec<u8>]) -> Result<Vec<DirEntry>, ModelError> {
        if let [first] = dir {
            if is_own(first, SIGNATURES) {
                let s = self.scanned()?;
                if !s.signatures.is_empty() {
                    return Ok(s
                        .signatures
                        .iter()
                        .map(|(n, _, _)| DirEntry::Document(n.clone()))
                        .collect());
                }
            }
        }
        let mut out = if let Some(rest) = self.in_constants(dir) {
            self.list_constants(rest)?
        } else {
            let vars = self
                .variables
                .as_ref()
                .ok_or_else(|| ModelError::NotFound(format!("no directory {}", show(dir))))?;
            vars.list_dir(dir)?
        };
        if dir.is_empty() {
            if self.variables.is_some() {
                out.push(DirEntry::Reserved(CONSTANTS.to_vec()));
            }
            out.extend(self.own_entries());
            out.sort();
            out.dedup();
        }
        Ok(out)
    }

    fn hidden_tensors(&self, root: &[Vec<u8>]) -> Vec<Arc<dyn Tensor>> {
        self.variables
            .as_ref()
            .map_or_else(Vec::new, |v| v.hidden_tensors(root))
    }

    /// The variables' hash tables: a graph beside them (a `.meta`, a SavedModel) hides none.
    fn unlisted_tables(&self) -> Result<Vec<Vec<Vec<u8>>>, ModelError> {
        self.variables
            .as_ref()
            .map_or_else(|| Ok(Vec::new()), |v| v.unlisted_tables())
    }

    fn document(&self, path: &[Vec<u8>]) -> Result<Arc<dyn Document>, ModelError> {
        let missing = || ModelError::NotFound(format!("no document {}", show(path)));
        let s = self.scanned()?;
        let bytes = match path {
            [name] if is_own(name, SIGNATURES_TXT) && !s.signatures.is_empty() => {
                signatures::text(&s.scan.metas)
            }
            [dir, name] if is_own(dir, SIGNATURES) && name.first() == Some(&0) => {
                let name = &name[1..];
                let &(_, m, i) = s
                    .signatures
                    .iter()
                    .find(|(n, _, _)| n == name)
                    .ok_or_else(missing)?;
                let meta = &s.scan.metas[m];
                signatures::json(meta, &meta.signatures[i])
            }
            [name] => {
                let i = s
                    .graphs
                    .iter()
                    .position(|g| g.as_deref().is_some_and(|g| is_own(name, g)))
                    .ok_or_else(missing)?;
                let r = s.scan.metas[i].graph.clone().ok_or_else(missing)?;
                let graph = usize::try_from(r.start).unwrap_or(usize::MAX)
                    ..usize::try_from(r.end).unwrap_or(usize::MAX);
                return Ok(Arc::new(GraphText {
                    file: s.data.clone(),
                    graph,
                    chunking: OnceLock::new(),
                }));
            }
            _ => return Err(missing()),
        };
        Ok(Arc::new(TextDoc {
            bytes,
            mtime: self.mtime(),
        }))
    }

    fn tensor(&self, path: &[Vec<u8>]) -> Result<Arc<dyn Tensor>, ModelError> {
        match (self.in_constants(path), &self.variables) {
            (Some(rest), _) => self.constant(rest),
            (None, Some(vars)) => Ok(self.with_sentinels(path, vars.tensor(path)?)),
            (None, None) => Err(ModelError::NotFound(show(path))),
        }
    }

    fn summary(&self) -> Result<ModelSummary, ModelError> {
        let mut s = match &self.variables {
            Some(v) => v.summary()?,
            None => ModelSummary::default(),
        };
        s.format = match self.kind {
            GraphKind::SavedModel => "tf-savedmodel",
            GraphKind::MetaGraphDef if self.variables.is_some() => "tf-checkpoint with graph",
            GraphKind::MetaGraphDef => "tf-metagraph",
            GraphKind::GraphDef => "tf-graph",
        }
        .into();
        match self.scanned() {
            Ok(g) => {
                let mut const_bytes = 0u64;
                let mut plumbing = 0u64;
                for c in &g.scan.consts {
                    if is_plumbing(&c.name, &g.scan) {
                        plumbing += 1;
                        continue;
                    }
                    s.tensors += 1;
                    *s.dtypes
                        .entry(c.value.dtype.name().into_owned())
                        .or_default() += 1;
                    // The value's dense size (a repeat-last field stores far less).
                    let bytes = match c.value.dtype.elem_size() {
                        Some(w) => c
                            .value
                            .shape
                            .iter()
                            .try_fold(w as u64, |a, &d| a.checked_mul(d))
                            .unwrap_or(u64::MAX),
                        None => c.value.proto.end - c.value.proto.start,
                    };
                    const_bytes = const_bytes.saturating_add(bytes);
                    if let Some(p) = &c.value.problem {
                        s.problems.push(format!("constant {}: {p}", c.name));
                    }
                    if let Some(n) = &c.value.note {
                        s.notes.push(format!("constant {}: {n}", c.name));
                    }
                }
                s.total_bytes = s.total_bytes.saturating_add(const_bytes);
                s.details = graph_details(&g.scan, const_bytes, plumbing);
            }
            Err(e) => s.problems.push(e.to_string()),
        }
        Ok(s)
    }
}
