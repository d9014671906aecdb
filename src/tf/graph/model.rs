//! `GraphModel`: a graph file's constants, with the variables of its checkpoint if it has one
//! (SPEC §6). With variables, the constants live under `constants/`; alone (a frozen graph, a
//! `.meta` given by itself), they are the root's tensors. The graph is scanned on the first
//! look at the constants, not at open: a mount costs nothing more than the variables' own.

use std::collections::BTreeSet;
use std::sync::{Arc, OnceLock};

use super::scan::{self, GraphKind, GraphScan};
use super::tensor_proto::ProtoTensor;
use crate::model::{DirEntry, Model, ModelError, ModelSummary, Tensor};
use crate::source::ReadAt;

/// The directory of the constants when there are variables beside them.
pub(crate) const CONSTANTS: &[u8] = b"constants";

pub(crate) struct GraphModel {
    file: Arc<dyn ReadAt>,
    kind: GraphKind,
    variables: Option<Arc<dyn Model>>,
    scanned: OnceLock<Result<Scanned, String>>,
}

struct Scanned {
    scan: GraphScan,
    /// Constant paths (the node name split on `/`), sorted, with their index in `scan.consts`.
    paths: Vec<(Vec<Vec<u8>>, usize)>,
}

impl GraphModel {
    pub(crate) fn new(
        file: Arc<dyn ReadAt>,
        kind: GraphKind,
        variables: Option<Arc<dyn Model>>,
    ) -> Self {
        GraphModel {
            file,
            kind,
            variables,
            scanned: OnceLock::new(),
        }
    }

    fn scanned(&self) -> Result<&Scanned, ModelError> {
        let r = self.scanned.get_or_init(|| {
            let size = usize::try_from(self.file.size()).map_err(|e| e.to_string())?;
            let bytes = self.file.read_at(0, size).map_err(|e| e.to_string())?;
            let scan = scan::scan(&bytes, self.kind).map_err(|e| e.to_string())?;
            drop(bytes);
            self.file.check_consistent().map_err(|e| e.to_string())?;
            let mut paths: Vec<(Vec<Vec<u8>>, usize)> = scan
                .consts
                .iter()
                .enumerate()
                .map(|(i, c)| (split(&c.name), i))
                .collect();
            paths.sort();
            Ok(Scanned { scan, paths })
        });
        r.as_ref()
            .map_err(|e| ModelError::data(self.file.name(), e.clone()))
    }

    /// The constants' part of `path`: `Some(rest)` when `path` is among the constants.
    fn in_constants<'a>(&self, path: &'a [Vec<u8>]) -> Option<&'a [Vec<u8>]> {
        match &self.variables {
            None => Some(path),
            Some(_) => match path.split_first() {
                Some((first, rest)) if first == CONSTANTS => Some(rest),
                _ => None,
            },
        }
    }

    fn list_constants(&self, dir: &[Vec<u8>]) -> Result<Vec<DirEntry>, ModelError> {
        let s = self.scanned()?;
        let paths: Vec<&Vec<Vec<u8>>> = s.paths.iter().map(|(p, _)| p).collect();
        list_paths(&paths, dir)
    }

    fn constant(&self, path: &[Vec<u8>]) -> Result<Arc<dyn Tensor>, ModelError> {
        let s = self.scanned()?;
        let i = s
            .paths
            .binary_search_by(|(p, _)| p.as_slice().cmp(path))
            .map_err(|_| ModelError::NotFound(format!("no constant {}", show(path))))?;
        let c = &s.scan.consts[s.paths[i].1];
        let meta = ProtoTensor::graph_meta(&c.name, &c.op, &*self.file);
        Ok(Arc::new(ProtoTensor::new(
            self.file.clone(),
            c.value.clone(),
            meta,
        )))
    }
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

fn split(name: &str) -> Vec<Vec<u8>> {
    name.split('/').map(|c| c.as_bytes().to_vec()).collect()
}

fn show(path: &[Vec<u8>]) -> String {
    path.iter()
        .map(|c| String::from_utf8_lossy(c))
        .collect::<Vec<_>>()
        .join("/")
}

impl Model for GraphModel {
    fn list_dir(&self, dir: &[Vec<u8>]) -> Result<Vec<DirEntry>, ModelError> {
        if let Some(rest) = self.in_constants(dir) {
            return self.list_constants(rest);
        }
        let vars = self
            .variables
            .as_ref()
            .ok_or_else(|| ModelError::NotFound(format!("no directory {}", show(dir))))?;
        let mut out = vars.list_dir(dir)?;
        if dir.is_empty() {
            out.push(DirEntry::Dir(CONSTANTS.to_vec()));
            out.sort();
            out.dedup();
        }
        Ok(out)
    }

    fn tensor(&self, path: &[Vec<u8>]) -> Result<Arc<dyn Tensor>, ModelError> {
        match (self.in_constants(path), &self.variables) {
            (Some(rest), _) => self.constant(rest),
            (None, Some(vars)) => vars.tensor(path),
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
                for c in &g.scan.consts {
                    s.tensors += 1;
                    *s.dtypes
                        .entry(c.value.dtype.name().into_owned())
                        .or_default() += 1;
                    s.total_bytes = s
                        .total_bytes
                        .saturating_add(c.value.content.as_ref().map_or(0, |r| r.end - r.start));
                    if let Some(p) = &c.value.problem {
                        s.problems.push(format!("constant {}: {p}", c.name));
                    }
                }
            }
            Err(e) => s.problems.push(e.to_string()),
        }
        Ok(s)
    }
}
