//! One pass over a graph file (a frozen `GraphDef`, a `MetaGraphDef` (`P.meta`) or a
//! `SavedModel`), formats/tf-checkpoint.md §11: the `Const` nodes with where their values are,
//! the signatures, and the number of nodes per op. Positions only: nothing is copied.

use std::collections::BTreeMap;
use std::ops::Range;

use super::dense::{self, DenseOp, SavedObject};
use super::tensor_proto::{self, ProtoInfo};
use crate::codec::wire::{text, Fields, Value, WireError};

/// Which message the file holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum GraphKind {
    GraphDef,
    MetaGraphDef,
    SavedModel,
}

/// A `Const` node: its name (qualified by its function for library nodes), op, and value.
#[derive(Clone, Debug)]
pub(crate) struct Const {
    pub(crate) name: String,
    pub(crate) op: String,
    pub(crate) value: ProtoInfo,
}

/// An input or output of a signature.
#[derive(Clone, Debug, Default)]
pub(crate) struct Arg {
    pub(crate) key: String,
    pub(crate) info: TensorInfo,
}

/// A `TensorInfo`: a tensor by name, or what a sparse or composite tensor is made of.
#[derive(Clone, Debug, Default)]
pub(crate) struct TensorInfo {
    /// `op:index`; empty for a sparse or composite tensor (TF leaves it so).
    pub(crate) name: String,
    pub(crate) dtype: i32,
    /// `None`: unknown rank; -1 for an unknown dimension.
    pub(crate) shape: Option<Vec<i64>>,
    pub(crate) encoding: Encoding,
}

#[derive(Clone, Debug, Default)]
pub(crate) enum Encoding {
    #[default]
    Dense,
    /// `TensorInfo.coo_sparse`: the names of the three tensors of a `SparseTensor`.
    CooSparse {
        values: String,
        indices: String,
        dense_shape: String,
    },
    /// `TensorInfo.composite_tensor`: its type spec's class and its component tensors.
    Composite {
        type_spec: String,
        components: Vec<TensorInfo>,
    },
}

#[derive(Clone, Debug, Default)]
pub(crate) struct Signature {
    pub(crate) key: String,
    pub(crate) method: String,
    pub(crate) inputs: Vec<Arg>,
    pub(crate) outputs: Vec<Arg>,
}

#[derive(Clone, Debug, Default)]
pub(crate) struct MetaGraph {
    pub(crate) tags: Vec<String>,
    /// The `GraphDef`'s bytes in the file.
    pub(crate) graph: Option<Range<u64>>,
    pub(crate) signatures: Vec<Signature>,
}

/// Everything one scan learns.
#[derive(Clone, Debug, Default)]
pub(crate) struct GraphScan {
    pub(crate) metas: Vec<MetaGraph>,
    /// Every `Const` of every meta graph (first of a name wins), graph then library.
    pub(crate) consts: Vec<Const>,
    pub(crate) ops: BTreeMap<String, u64>,
    pub(crate) nodes: u64,
    /// Every DenseHashTable op, graph then library (`dense`).
    pub(crate) dense_ops: Vec<DenseOp>,
    /// Each meta graph's `SavedObjectGraph` (TF2 SavedModels).
    pub(crate) objects: Vec<Vec<SavedObject>>,
    /// The name scope of each meta graph's `Saver` (`save` of `save/Const:0`, its
    /// `SaverDef.filename_tensor_name`), when it has one.
    pub(crate) saver_scopes: Vec<String>,
    /// The top-level nodes a TF2 SavedModel's save function is called with
    /// (`StatefulPartitionedCall` of `__inference__traced_save_N`): its `saver_filename` and
    /// the `Const` holding the object graph the save writes — plumbing, not the model's.
    pub(crate) save_inputs: Vec<String>,
}

/// The function a TF2 SavedModel's save call runs.
const TRACED_SAVE: &str = "__inference__traced_save_";

/// Scans `buf` (the whole file) as `kind`.
pub(crate) fn scan(buf: &[u8], kind: GraphKind) -> Result<GraphScan, WireError> {
    let mut out = GraphScan::default();
    let mut seen = std::collections::HashSet::new();
    match kind {
        GraphKind::GraphDef => {
            graph_def(buf, 0..buf.len(), &mut out, &mut seen)?;
            out.metas.push(MetaGraph {
                graph: Some(0..buf.len() as u64),
                ..Default::default()
            });
        }
        GraphKind::MetaGraphDef => {
            let m = meta_graph(buf, 0..buf.len(), &mut out, &mut seen)?;
            out.metas.push(m);
        }
        GraphKind::SavedModel => {
            for f in Fields::new(buf) {
                let f = f?;
                if let (2, Some(r)) = (f.number, f.range()) {
                    let m = meta_graph(buf, r, &mut out, &mut seen)?;
                    out.metas.push(m);
                }
            }
        }
    }
    Ok(out)
}

type Seen = std::collections::HashSet<String>;

fn meta_graph(
    buf: &[u8],
    range: Range<usize>,
    out: &mut GraphScan,
    seen: &mut Seen,
) -> Result<MetaGraph, WireError> {
    let mut m = MetaGraph::default();
    for f in Fields::within(buf, range) {
        let f = f?;
        let Some(r) = f.range() else { continue };
        match f.number {
            1 => {
                for g in Fields::within(buf, r) {
                    let g = g?;
                    if g.number == 4 {
                        m.tags.push(text(buf, &g));
                    }
                }
            }
            2 => {
                m.graph = Some(r.start as u64..r.end as u64);
                graph_def(buf, r, out, seen)?;
            }
            // saver_def: SaverDef {filename_tensor_name 1}
            3 => {
                for g in Fields::within(buf, r) {
                    let g = g?;
                    if g.number == 1 {
                        let name = text(buf, &g);
                        if let Some((scope, _)) = name.rsplit_once('/') {
                            out.saver_scopes.push(scope.to_string());
                        }
                    }
                }
            }
            5 => m.signatures.push(signature_entry(buf, r)?),
            7 => out.objects.push(dense::saved_objects(buf, r)?),
            _ => {}
        }
    }
    m.signatures.sort_by(|a, b| a.key.cmp(&b.key));
    Ok(m)
}

fn graph_def(
    buf: &[u8],
    range: Range<usize>,
    out: &mut GraphScan,
    seen: &mut Seen,
) -> Result<(), WireError> {
    let mut library = Vec::new();
    for f in Fields::within(buf, range) {
        let f = f?;
        match (f.number, f.range()) {
            (1, Some(r)) => node(buf, r, "", out, seen)?,
            (2, Some(r)) => library.push(r),
            _ => {}
        }
    }
    for lib in library {
        for f in Fields::within(buf, lib) {
            let f = f?;
            let (1, Some(r)) = (f.number, f.range()) else {
                continue;
            };
            let mut name = String::new();
            let mut nodes = Vec::new();
            for g in Fields::within(buf, r) {
                let g = g?;
                match (g.number, g.range()) {
                    (1, Some(sig)) => {
                        for s in Fields::within(buf, sig) {
                            let s = s?;
                            if s.number == 1 {
                                name = text(buf, &s);
                            }
                        }
                    }
                    (3, Some(n)) => nodes.push(n),
                    _ => {}
                }
            }
            for n in nodes {
                node(buf, n, &name, out, seen)?;
            }
        }
    }
    Ok(())
}

fn node(
    buf: &[u8],
    range: Range<usize>,
    function: &str,
    out: &mut GraphScan,
    seen: &mut Seen,
) -> Result<(), WireError> {
    let (mut name, mut op, mut value) = (String::new(), String::new(), None);
    // The first two inputs, made strings only for a DenseHashTable op.
    let mut inputs: [Option<Range<usize>>; 2] = [None, None];
    let mut all_inputs = Vec::new();
    let mut calls_save = false;
    for f in Fields::within(buf, range) {
        let f = f?;
        match (f.number, f.range()) {
            (1, _) => name = text(buf, &f),
            (2, _) => op = text(buf, &f),
            (3, Some(r)) => {
                if let Some(slot) = inputs.iter_mut().find(|i| i.is_none()) {
                    *slot = Some(r.clone());
                }
                all_inputs.push(r);
            }
            (5, Some(r)) => {
                let (mut key, mut val) = (String::new(), None);
                for e in Fields::within(buf, r) {
                    let e = e?;
                    match (e.number, e.range()) {
                        (1, _) => key = text(buf, &e),
                        (2, Some(v)) => val = Some(v),
                        _ => {}
                    }
                }
                // attr f: AttrValue {func 10: NameAttrList {name 1}}.
                if let (true, Some(v)) = (key == "f" && function.is_empty(), val.clone()) {
                    for a in Fields::within(buf, v) {
                        let a = a?;
                        let (10, Some(func)) = (a.number, a.range()) else {
                            continue;
                        };
                        for n in Fields::within(buf, func) {
                            let n = n?;
                            calls_save |= n.number == 1 && text(buf, &n).starts_with(TRACED_SAVE);
                        }
                    }
                }
                if let (true, Some(v)) = (key == "value", val) {
                    for a in Fields::within(buf, v) {
                        let a = a?;
                        if let (8, Value::Bytes { start, end }) = (a.number, a.value) {
                            value = Some(start..end);
                        }
                    }
                }
            }
            _ => {}
        }
    }
    out.nodes += 1;
    *out.ops.entry(op.clone()).or_default() += 1;
    if calls_save {
        // `Const:0`, `^dep`: the node's name.
        out.save_inputs.extend(all_inputs.into_iter().map(|r| {
            let input = String::from_utf8_lossy(&buf[r]).into_owned();
            let input = input.trim_start_matches('^');
            input.split(':').next().unwrap_or(input).to_string()
        }));
    }
    if dense::OPS.contains(&op.as_str()) {
        let inputs: Vec<String> = inputs
            .iter()
            .flatten()
            .map(|r| String::from_utf8_lossy(&buf[r.clone()]).into_owned())
            .collect();
        out.dense_ops.extend(DenseOp::new(&name, function, &inputs));
    }
    let (true, Some(v)) = (op == "Const", value) else {
        return Ok(());
    };
    let name = match function {
        "" => name,
        f => format!("{f}/{name}"),
    };
    let value = match tensor_proto::scan(buf, v, 0) {
        Ok(info) => info,
        Err(e) => {
            log::warn!("constant {name}: {e}");
            return Ok(());
        }
    };
    let empty = value.problem.is_none() && value.shape.contains(&0);
    if !empty && seen.insert(name.clone()) {
        out.consts.push(Const { name, op, value });
    }
    Ok(())
}

/// A `signature_def` map entry.
fn signature_entry(buf: &[u8], range: Range<usize>) -> Result<Signature, WireError> {
    let mut s = Signature::default();
    for f in Fields::within(buf, range) {
        let f = f?;
        match (f.number, f.range()) {
            (1, _) => s.key = text(buf, &f),
            (2, Some(r)) => {
                for g in Fields::within(buf, r) {
                    let g = g?;
                    match (g.number, g.range()) {
                        (1, Some(e)) => s.inputs.push(arg_entry(buf, e)?),
                        (2, Some(e)) => s.outputs.push(arg_entry(buf, e)?),
                        (3, _) => s.method = text(buf, &g),
                        _ => {}
                    }
                }
            }
            _ => {}
        }
    }
    s.inputs.sort_by(|a, b| a.key.cmp(&b.key));
    s.outputs.sort_by(|a, b| a.key.cmp(&b.key));
    Ok(s)
}

/// Composite tensors nested deeper than this are cut (their components left out).
const MAX_COMPOSITE_DEPTH: usize = 8;

/// A `map<string, TensorInfo>` entry.
fn arg_entry(buf: &[u8], range: Range<usize>) -> Result<Arg, WireError> {
    let mut a = Arg::default();
    for f in Fields::within(buf, range) {
        let f = f?;
        match (f.number, f.range()) {
            (1, _) => a.key = text(buf, &f),
            (2, Some(r)) => a.info = tensor_info(buf, r, 0)?,
            _ => {}
        }
    }
    Ok(a)
}

fn tensor_info(buf: &[u8], range: Range<usize>, depth: usize) -> Result<TensorInfo, WireError> {
    // An absent `tensor_shape` is proto3's default message: known rank 0.
    let mut t = TensorInfo {
        shape: Some(Vec::new()),
        ..Default::default()
    };
    for f in Fields::within(buf, range) {
        let f = f?;
        match (f.number, f.value) {
            (1, _) => t.name = text(buf, &f),
            (2, Value::Varint(v)) => t.dtype = v as i32,
            (3, Value::Bytes { start, end }) => t.shape = shape(buf, start..end)?,
            (4, Value::Bytes { start, end }) => {
                let mut names: [String; 3] = Default::default();
                for g in Fields::within(buf, start..end) {
                    let g = g?;
                    if let Some(n) = names.get_mut((g.number as usize).wrapping_sub(1)) {
                        *n = text(buf, &g);
                    }
                }
                let [values, indices, dense_shape] = names;
                t.encoding = Encoding::CooSparse {
                    values,
                    indices,
                    dense_shape,
                };
            }
            (5, Value::Bytes { start, end }) => {
                t.encoding = composite(buf, start..end, depth)?;
            }
            _ => {}
        }
    }
    Ok(t)
}

/// A `TensorInfo.CompositeTensor`: `type_spec` (a `TypeSpecProto`) and `components`.
fn composite(buf: &[u8], range: Range<usize>, depth: usize) -> Result<Encoding, WireError> {
    let (mut class, mut class_name) = (0u64, String::new());
    let mut components = Vec::new();
    for f in Fields::within(buf, range) {
        let f = f?;
        match (f.number, f.value) {
            (1, Value::Bytes { start, end }) => {
                for g in Fields::within(buf, start..end) {
                    let g = g?;
                    match (g.number, g.value) {
                        (1, Value::Varint(v)) => class = v,
                        (3, _) => class_name = text(buf, &g),
                        _ => {}
                    }
                }
            }
            (2, Value::Bytes { start, end }) if depth < MAX_COMPOSITE_DEPTH => {
                components.push(tensor_info(buf, start..end, depth + 1)?);
            }
            _ => {}
        }
    }
    let type_spec = if class_name.is_empty() {
        type_spec_class(class)
    } else {
        class_name
    };
    Ok(Encoding::Composite {
        type_spec,
        components,
    })
}

/// `TypeSpecProto.TypeSpecClass` by name (struct.proto).
fn type_spec_class(v: u64) -> String {
    const NAMES: [&str; 14] = [
        "UNKNOWN",
        "SPARSE_TENSOR_SPEC",
        "INDEXED_SLICES_SPEC",
        "RAGGED_TENSOR_SPEC",
        "TENSOR_ARRAY_SPEC",
        "DATA_DATASET_SPEC",
        "DATA_ITERATOR_SPEC",
        "OPTIONAL_SPEC",
        "PER_REPLICA_SPEC",
        "VARIABLE_SPEC",
        "ROW_PARTITION_SPEC",
        "",
        "REGISTERED_TYPE_SPEC",
        "EXTENSION_TYPE_SPEC",
    ];
    match NAMES.get(v as usize) {
        Some(n) if !n.is_empty() => n.to_string(),
        _ => v.to_string(),
    }
}

/// A `TensorShapeProto`: `None` for unknown rank.
fn shape(buf: &[u8], range: Range<usize>) -> Result<Option<Vec<i64>>, WireError> {
    let mut dims = Vec::new();
    for f in Fields::within(buf, range) {
        let f = f?;
        match (f.number, f.value) {
            (2, Value::Bytes { start, end }) => {
                let mut size = 0i64;
                for d in Fields::within(buf, start..end) {
                    let d = d?;
                    if let (1, Value::Varint(v)) = (d.number, d.value) {
                        size = v as i64;
                    }
                }
                dims.push(size);
            }
            (3, Value::Varint(v)) if v != 0 => return Ok(None),
            _ => {}
        }
    }
    Ok(Some(dims))
}
