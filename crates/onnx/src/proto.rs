//! The parts of an ONNX `ModelProto` (onnx/onnx.proto3) modelfs reads, walked in place with
//! `codec::wire`: the graph's initializers, its `Constant` nodes' tensors, its inputs and
//! outputs, and the model's producer and opsets. A tensor's data stays a byte range of the
//! file (`raw_data`, a packed typed field) or a place in another file (external data).
//!
//! Invariant: every range handed out lies inside the buffer walked (`wire`'s own invariant).

use std::ops::Range;

use crate::codec::wire::{packed_varints, text, Field, Fields, Value, WireError};

// ModelProto
const MODEL_IR_VERSION: u32 = 1;
const MODEL_PRODUCER_NAME: u32 = 2;
const MODEL_PRODUCER_VERSION: u32 = 3;
const MODEL_GRAPH: u32 = 7;
const MODEL_OPSET_IMPORT: u32 = 8;
// OperatorSetIdProto
const OPSET_DOMAIN: u32 = 1;
const OPSET_VERSION: u32 = 2;
// GraphProto
const GRAPH_NODE: u32 = 1;
const GRAPH_NAME: u32 = 2;
const GRAPH_INITIALIZER: u32 = 5;
const GRAPH_INPUT: u32 = 11;
const GRAPH_OUTPUT: u32 = 12;
const GRAPH_SPARSE_INITIALIZER: u32 = 15;
// NodeProto
const NODE_OUTPUT: u32 = 2;
const NODE_NAME: u32 = 3;
const NODE_OP_TYPE: u32 = 4;
const NODE_ATTRIBUTE: u32 = 5;
const NODE_DOMAIN: u32 = 7;
// AttributeProto
const ATTR_NAME: u32 = 1;
const ATTR_T: u32 = 5;
const ATTR_G: u32 = 6;
const ATTR_GRAPHS: u32 = 11;
/// Subgraphs (an `If`'s branches, a `Loop`'s body) nested deeper than this are a note.
const MAX_NESTING: usize = 16;
/// The longest name prefix of a subgraph's tensors (node and attribute names, nested).
const MAX_PREFIX: usize = 4096;
// ValueInfoProto
const VALUE_NAME: u32 = 1;
// TensorProto
const T_DIMS: u32 = 1;
const T_DATA_TYPE: u32 = 2;
const T_SEGMENT: u32 = 3;
const T_FLOAT_DATA: u32 = 4;
const T_INT32_DATA: u32 = 5;
const T_STRING_DATA: u32 = 6;
const T_INT64_DATA: u32 = 7;
const T_NAME: u32 = 8;
const T_RAW_DATA: u32 = 9;
const T_DOUBLE_DATA: u32 = 10;
const T_UINT64_DATA: u32 = 11;
const T_EXTERNAL_DATA: u32 = 13;
const T_DATA_LOCATION: u32 = 14;
// StringStringEntryProto
const KV_KEY: u32 = 1;
const KV_VALUE: u32 = 2;

/// Where a tensor's elements are.
#[derive(Clone, Debug)]
pub(crate) enum Data {
    /// `raw_data`: little-endian elements, packed as the type packs them.
    Raw(Range<usize>),
    /// A typed field (`float_data` …): its wire number and its occurrences (packed runs, or
    /// one value each).
    Typed { field: u32, values: Vec<Field> },
    /// External data: `location` beside the model, `offset` and `length` in it.
    External {
        location: String,
        offset: u64,
        length: Option<u64>,
    },
    /// No data at all (an empty tensor, or strings: `string_data`).
    None,
}

/// One tensor of the graph.
#[derive(Clone, Debug)]
pub(crate) struct TensorProto {
    pub(crate) name: String,
    pub(crate) dims: Vec<i64>,
    pub(crate) data_type: i32,
    pub(crate) data: Data,
    /// Why the tensor cannot be read as stored, if it cannot (a segment, strings).
    pub(crate) problem: Option<String>,
}

/// What the model says of itself.
#[derive(Debug, Default)]
pub(crate) struct ModelInfo {
    pub(crate) ir_version: u64,
    pub(crate) producer: String,
    pub(crate) producer_version: String,
    pub(crate) graph: String,
    pub(crate) opsets: Vec<(String, u64)>,
    pub(crate) inputs: Vec<String>,
    pub(crate) outputs: Vec<String>,
    pub(crate) tensors: Vec<TensorProto>,
    /// Things shown as notes: sparse initializers, nodes' tensors of other ops.
    pub(crate) notes: Vec<String>,
}

/// Walks the `ModelProto` in `buf`.
pub(crate) fn parse(buf: &[u8]) -> Result<ModelInfo, WireError> {
    let mut m = ModelInfo::default();
    let mut graph = None;
    for f in Fields::new(buf) {
        let f = f?;
        match (f.number, f.value) {
            (MODEL_IR_VERSION, Value::Varint(v)) => m.ir_version = v,
            (MODEL_PRODUCER_NAME, Value::Bytes { .. }) => m.producer = text(buf, &f),
            (MODEL_PRODUCER_VERSION, Value::Bytes { .. }) => m.producer_version = text(buf, &f),
            (MODEL_GRAPH, Value::Bytes { start, end }) => graph = Some(start..end),
            (MODEL_OPSET_IMPORT, Value::Bytes { start, end }) => {
                let (mut domain, mut version) = (String::new(), 0);
                for g in Fields::within(buf, start..end) {
                    let g = g?;
                    match (g.number, g.value) {
                        (OPSET_DOMAIN, Value::Bytes { .. }) => domain = text(buf, &g),
                        (OPSET_VERSION, Value::Varint(v)) => version = v,
                        _ => {}
                    }
                }
                m.opsets.push((domain, version));
            }
            _ => {}
        }
    }
    if let Some(g) = graph {
        parse_graph(buf, g, &mut m, "", 0)?;
    }
    Ok(m)
}

/// The graph at `range`: the model's (`depth` 0), or a node's subgraph, whose tensors are
/// named `prefix` + their name (`If_25/else_branch/1097`, as the node and attribute hold it).
fn parse_graph(
    buf: &[u8],
    range: Range<usize>,
    m: &mut ModelInfo,
    prefix: &str,
    depth: usize,
) -> Result<(), WireError> {
    for f in Fields::within(buf, range) {
        let f = f?;
        let Value::Bytes { start, end } = f.value else {
            continue;
        };
        match f.number {
            GRAPH_NAME if depth == 0 => m.graph = text(buf, &f),
            GRAPH_INITIALIZER => {
                let mut t = parse_tensor(buf, start..end, None)?;
                t.name.insert_str(0, prefix);
                m.tensors.push(t);
            }
            GRAPH_NODE => parse_node(buf, start..end, m, prefix, depth)?,
            GRAPH_INPUT | GRAPH_OUTPUT if depth == 0 => {
                let mut name = String::new();
                for g in Fields::within(buf, start..end) {
                    let g = g?;
                    if g.number == VALUE_NAME {
                        name = text(buf, &g);
                    }
                }
                match f.number {
                    GRAPH_INPUT => m.inputs.push(name),
                    _ => m.outputs.push(name),
                }
            }
            GRAPH_SPARSE_INITIALIZER => m
                .notes
                .push("a sparse initializer is not shown (not read yet)".into()),
            _ => {}
        }
    }
    Ok(())
}

/// A `Constant` node's tensor (its `value` attribute), named by the node's output; the
/// tensors of the node's subgraphs (attributes holding graphs), named below the node.
fn parse_node(
    buf: &[u8],
    range: Range<usize>,
    m: &mut ModelInfo,
    prefix: &str,
    depth: usize,
) -> Result<(), WireError> {
    let (mut op, mut domain, mut output, mut value) = (String::new(), String::new(), None, None);
    let mut node = String::new();
    let mut subgraphs: Vec<(String, Range<usize>)> = Vec::new();
    for f in Fields::within(buf, range) {
        let f = f?;
        match (f.number, f.value) {
            (NODE_NAME, Value::Bytes { .. }) => node = text(buf, &f),
            (NODE_OP_TYPE, Value::Bytes { .. }) => op = text(buf, &f),
            (NODE_DOMAIN, Value::Bytes { .. }) => domain = text(buf, &f),
            (NODE_OUTPUT, Value::Bytes { .. }) if output.is_none() => output = Some(text(buf, &f)),
            (NODE_ATTRIBUTE, Value::Bytes { start, end }) => {
                let (mut name, mut t, mut graphs) = (String::new(), None, Vec::new());
                for g in Fields::within(buf, start..end) {
                    let g = g?;
                    match (g.number, g.value) {
                        (ATTR_NAME, Value::Bytes { .. }) => name = text(buf, &g),
                        (ATTR_T, Value::Bytes { start, end }) => t = Some(start..end),
                        (ATTR_G | ATTR_GRAPHS, Value::Bytes { start, end }) => {
                            graphs.push(start..end)
                        }
                        _ => {}
                    }
                }
                if name == "value" {
                    value = t;
                }
                let many = graphs.len() > 1;
                for (i, g) in graphs.into_iter().enumerate() {
                    let at = match many {
                        true => format!("{name}/{i}"),
                        false => name.clone(),
                    };
                    subgraphs.push((at, g));
                }
            }
            _ => {}
        }
    }
    // Node names are optional: an unnamed node's subgraphs are named by its first output
    // (unique in the graph), else its op.
    if node.is_empty() {
        node = output.clone().unwrap_or_else(|| op.clone());
    }
    if op == "Constant" && (domain.is_empty() || domain == "ai.onnx") {
        if let (Some(out), Some(t)) = (output, value) {
            m.tensors
                .push(parse_tensor(buf, t, Some(format!("{prefix}{out}")))?);
        }
    }
    for (attr, g) in subgraphs {
        if depth >= MAX_NESTING {
            m.notes.push(format!(
                "subgraphs nested more than {MAX_NESTING} deep are not shown ({prefix}{node})"
            ));
            break;
        }
        let below = format!("{prefix}{node}/{attr}/");
        if below.len() > MAX_PREFIX {
            // Every tensor below would carry a copy of it.
            m.notes.push(format!(
                "subgraphs named by more than {MAX_PREFIX} bytes are not shown"
            ));
            break;
        }
        parse_graph(buf, g, m, &below, depth + 1)?;
    }
    Ok(())
}

fn parse_tensor(
    buf: &[u8],
    range: Range<usize>,
    name: Option<String>,
) -> Result<TensorProto, WireError> {
    let mut t = TensorProto {
        name: String::new(),
        dims: Vec::new(),
        data_type: 0,
        data: Data::None,
        problem: None,
    };
    let (mut external, mut location, mut offset, mut length) = (false, None, 0u64, None);
    let mut typed: Vec<Field> = Vec::new();
    for f in Fields::within(buf, range) {
        let f = f?;
        match (f.number, f.value) {
            (T_DIMS, Value::Varint(v)) => t.dims.push(v as i64),
            (T_DIMS, Value::Bytes { start, end }) => {
                for v in packed_varints(&buf[start..end]) {
                    t.dims.push(v? as i64);
                }
            }
            (T_DATA_TYPE, Value::Varint(v)) => t.data_type = v as i32,
            (T_NAME, Value::Bytes { .. }) => t.name = text(buf, &f),
            (T_RAW_DATA, Value::Bytes { start, end }) => t.data = Data::Raw(start..end),
            (T_FLOAT_DATA | T_INT32_DATA | T_INT64_DATA | T_DOUBLE_DATA | T_UINT64_DATA, _) => {
                typed.push(f)
            }
            (T_STRING_DATA, _) => t.problem = Some("string tensors are not read yet".into()),
            (T_SEGMENT, _) => t.problem = Some("a tensor in segments is not read".into()),
            (T_DATA_LOCATION, Value::Varint(v)) => external = v == 1,
            (T_EXTERNAL_DATA, Value::Bytes { start, end }) => {
                let (mut key, mut value) = (String::new(), String::new());
                for g in Fields::within(buf, start..end) {
                    let g = g?;
                    match g.number {
                        KV_KEY => key = text(buf, &g),
                        KV_VALUE => value = text(buf, &g),
                        _ => {}
                    }
                }
                match key.as_str() {
                    "location" => location = Some(value),
                    "offset" => match value.parse() {
                        Ok(v) => offset = v,
                        Err(_) => t.problem = Some(format!("external data offset {value:?}")),
                    },
                    "length" => match value.parse() {
                        Ok(v) => length = Some(v),
                        Err(_) => t.problem = Some(format!("external data length {value:?}")),
                    },
                    _ => {}
                }
            }
            _ => {}
        }
    }
    if let Some(n) = name {
        t.name = n;
    }
    if external {
        t.data = match location {
            Some(location) => Data::External {
                location,
                offset,
                length,
            },
            None => {
                t.problem = Some("external data without a location".into());
                Data::None
            }
        };
    } else if !typed.is_empty() && matches!(t.data, Data::None) {
        t.data = Data::Typed {
            field: typed[0].number,
            values: typed,
        };
    }
    Ok(t)
}
