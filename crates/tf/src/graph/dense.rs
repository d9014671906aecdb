//! A `DenseHashTable`'s sentinel keys, from the graph saved beside its checkpoint.
//!
//! A DenseHashTable saves its whole bucket array: every empty bucket under its `empty_key`,
//! every erased one under its `deleted_key`. Neither is a row, but the checkpoint does not
//! say which keys they are, and a `deleted_key` erased once is saved once, like any id. The
//! table's op (`MutableDenseHashTableV2`) takes both as inputs, `Const` nodes of its graph:
//! - a TF1 graph (a `.meta`, a TF1 SavedModel) holds the op itself, named as the table's
//!   checkpoint keys are (`<op>-keys`);
//! - a TF2 SavedModel holds it in the function its table object's `_create_resource` child
//!   calls; the object's path in the `SavedObjectGraph` (local names joined by `/`, escaped
//!   as TF escapes them) is the table's name in the checkpoint (`<path>/.ATTRIBUTES/table-keys`).

use std::collections::{BTreeMap, VecDeque};
use std::ops::Range;

use crate::codec::wire::{text, Fields, Value, WireError};

/// The ops that make a DenseHashTable.
pub(crate) const OPS: &[&str] = &["MutableDenseHashTableV2", "MutableDenseHashTable"];
/// The child of a TF2 resource object that creates it.
const CREATE_RESOURCE: &str = "_create_resource";

/// A DenseHashTable op: its name, the function holding it (`""`: the graph), and the
/// `Const` names (qualified as `GraphScan::consts` names them) of its empty and deleted keys.
#[derive(Clone, Debug)]
pub(crate) struct DenseOp {
    pub(crate) name: String,
    pub(crate) function: String,
    pub(crate) keys: [String; 2],
}

impl DenseOp {
    /// The op of node `name` in `function` with inputs `inputs`; `None` without two.
    pub(crate) fn new(name: &str, function: &str, inputs: &[String]) -> Option<DenseOp> {
        let [empty, deleted] = [inputs.first()?, inputs.get(1)?].map(|i| qualify(function, i));
        Some(DenseOp {
            name: name.to_string(),
            function: function.to_string(),
            keys: [empty?, deleted?],
        })
    }
}

/// An input's node (`n`, `n:0`, `n:output:0`), qualified by its function; `None` for a
/// control input.
fn qualify(function: &str, input: &str) -> Option<String> {
    if input.starts_with('^') {
        return None;
    }
    let node = input.split(':').next().unwrap_or(input);
    Some(match function {
        "" => node.to_string(),
        f => format!("{f}/{node}"),
    })
}

/// One node of a `SavedObjectGraph`: its children and the functions it names.
#[derive(Clone, Debug, Default)]
pub(crate) struct SavedObject {
    children: Vec<(u32, String)>,
    functions: Vec<String>,
}

/// The nodes of the `SavedObjectGraph` in `buf[range]`.
pub(crate) fn saved_objects(
    buf: &[u8],
    range: Range<usize>,
) -> Result<Vec<SavedObject>, WireError> {
    let mut out = Vec::new();
    for f in Fields::within(buf, range) {
        let f = f?;
        let (1, Some(r)) = (f.number, f.range()) else {
            continue;
        };
        let mut o = SavedObject::default();
        for g in Fields::within(buf, r) {
            let g = g?;
            match (g.number, g.range()) {
                // children: ObjectReference {node_id 1, local_name 2}
                (1, Some(c)) => {
                    let (mut id, mut name) = (None, String::new());
                    for h in Fields::within(buf, c) {
                        let h = h?;
                        match (h.number, h.value) {
                            (1, Value::Varint(v)) => id = u32::try_from(v).ok(),
                            (2, _) => name = text(buf, &h),
                            _ => {}
                        }
                    }
                    if let Some(id) = id {
                        o.children.push((id, name));
                    }
                }
                // function (SavedFunction: concrete_functions 1) or bare_concrete_function
                // (concrete_function_name 1).
                (6 | 8, Some(c)) => {
                    for h in Fields::within(buf, c) {
                        let h = h?;
                        if h.number == 1 {
                            o.functions.push(text(buf, &h));
                        }
                    }
                }
                _ => {}
            }
        }
        out.push(o);
    }
    Ok(out)
}

/// TF's escape of a local name in a checkpoint key (`.` → `..`, `/` → `./`).
fn escape(name: &str) -> String {
    name.replace('.', "..").replace('/', "./")
}

/// Every DenseHashTable the graph names, by its name in the checkpoint, with the `Const`
/// names of its empty and deleted keys: the graph's own ops, then each SavedModel object
/// whose `_create_resource` function holds one.
pub(crate) fn tables(
    ops: &[DenseOp],
    objects: &[Vec<SavedObject>],
) -> BTreeMap<String, [String; 2]> {
    let mut out = BTreeMap::new();
    for op in ops.iter().filter(|o| o.function.is_empty()) {
        out.insert(op.name.clone(), op.keys.clone());
    }
    for nodes in objects {
        for (path, node) in paths(nodes) {
            let creators = node
                .children
                .iter()
                .filter(|(_, n)| n == CREATE_RESOURCE)
                .filter_map(|&(id, _)| nodes.get(id as usize))
                .flat_map(|c| {
                    // A function object names its concrete functions through its children too.
                    let bare = c
                        .children
                        .iter()
                        .filter_map(|&(i, _)| nodes.get(i as usize));
                    c.functions
                        .iter()
                        .chain(bare.flat_map(|b| b.functions.iter()))
                });
            let mut found = creators.filter_map(|f| ops.iter().find(|o| &o.function == f));
            if let (Some(op), false) = (found.next(), path.is_empty()) {
                out.insert(path, op.keys.clone());
            }
        }
    }
    out
}

/// Each object reachable from the root with its path (breadth first: the shortest, as TF
/// names checkpoint keys), the root's being empty.
fn paths(nodes: &[SavedObject]) -> Vec<(String, &SavedObject)> {
    let mut path: Vec<Option<String>> = vec![None; nodes.len()];
    let mut queue = VecDeque::new();
    if let Some(p) = path.first_mut() {
        *p = Some(String::new());
        queue.push_back(0usize);
    }
    let mut out = Vec::new();
    while let Some(i) = queue.pop_front() {
        let here = path[i].clone().unwrap_or_default();
        for (id, name) in &nodes[i].children {
            let id = *id as usize;
            if let Some(slot @ None) = path.get_mut(id) {
                *slot = Some(match here.as_str() {
                    "" => escape(name),
                    h => format!("{h}/{}", escape(name)),
                });
                queue.push_back(id);
            }
        }
        out.push((here, &nodes[i]));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inputs_are_qualified_by_their_function() {
        assert_eq!(qualify("", "empty_key:0").as_deref(), Some("empty_key"));
        assert_eq!(qualify("f", "k:output:0").as_deref(), Some("f/k"));
        assert_eq!(qualify("f", "^k"), None);
        assert!(DenseOp::new("t", "", &["a".into()]).is_none());
    }

    #[test]
    fn a_resource_object_is_named_by_its_shortest_path() {
        let o = |children: &[(u32, &str)], functions: &[&str]| SavedObject {
            children: children.iter().map(|&(i, n)| (i, n.to_string())).collect(),
            functions: functions.iter().map(|f| f.to_string()).collect(),
        };
        // root -> a.b -> table (also reachable deeper) -> _create_resource -> trace_0
        let nodes = vec![
            o(&[(1, "a.b")], &[]),
            o(&[(2, "t"), (0, "up")], &[]),
            o(&[(3, "_create_resource")], &[]),
            o(&[(4, "trace_0")], &["f1"]),
            o(&[], &["f1"]),
        ];
        let ops = vec![
            DenseOp::new("T", "f1", &["e:output:0".into(), "d:output:0".into()]).unwrap(),
            DenseOp::new("g", "", &["e".into(), "d".into()]).unwrap(),
        ];
        let t = tables(&ops, &[nodes]);
        assert_eq!(t["a..b/t"], ["f1/e".to_string(), "f1/d".to_string()]);
        assert_eq!(t["g"], ["e".to_string(), "d".to_string()]);
        assert_eq!(t.len(), 2);
    }
}
