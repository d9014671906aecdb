//! TF2 names from the object graph (`_CHECKPOINTABLE_OBJECT_GRAPH`, formats/tf-checkpoint.md
//! §9.2, SPEC §6): each variable's TF1-style `full_name`, optimizer slots as
//! `<full name of the variable>/<slot name>`, and the `by-name/` tree of links they make.
//!
//! Invariant: a link name is given to one variable only; a full name several variables share
//! (Keras 3 names many `Variable`) gets none, so a link never points at the wrong tensor.

use std::collections::{BTreeMap, HashMap};

use crate::codec::wire::{Fields, Value, WireError};

/// What the object graph says of one checkpoint key.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct Named {
    pub(crate) full_name: String,
    /// For an optimizer slot: (full name of its variable, slot name).
    pub(crate) slot: Option<(String, String)>,
}

/// Names of every variable in one object graph.
#[derive(Debug, Default)]
pub(crate) struct ObjectNames {
    /// Checkpoint key → names.
    pub(crate) by_key: HashMap<Vec<u8>, Named>,
    /// `by-name/` link paths (components) → checkpoint key, sorted.
    pub(crate) links: BTreeMap<Vec<Vec<u8>>, Vec<u8>>,
}

#[derive(Default)]
struct Node {
    /// (name, full_name, checkpoint_key) per attribute.
    attributes: Vec<(String, String, Vec<u8>)>,
    /// (original variable node, slot name, slot variable node).
    slots: Vec<(i64, String, i64)>,
}

/// Parses a serialized `TrackableObjectGraph`.
pub(crate) fn parse(buf: &[u8]) -> Result<ObjectNames, WireError> {
    let mut nodes = Vec::new();
    for f in Fields::new(buf) {
        let f = f?;
        if let (1, Some(r)) = (f.number, f.range()) {
            nodes.push(node(buf, r)?);
        }
    }
    let mut out = ObjectNames::default();
    for n in &nodes {
        for (_, full, key) in &n.attributes {
            out.by_key.entry(key.clone()).or_insert_with(|| Named {
                full_name: full.clone(),
                slot: None,
            });
        }
    }
    let node_at = |id: i64| usize::try_from(id).ok().and_then(|i| nodes.get(i));
    for n in &nodes {
        for (orig, slot, var) in &n.slots {
            let (Some(orig), Some(var)) = (node_at(*orig), node_at(*var)) else {
                log::warn!("object graph: slot {slot} names a node that does not exist");
                continue;
            };
            let Some((_, orig_name, _)) = orig.attributes.first() else {
                continue;
            };
            for (_, _, key) in &var.attributes {
                if let Some(named) = out.by_key.get_mut(key) {
                    named.slot = Some((orig_name.clone(), slot.clone()));
                }
            }
        }
    }
    let mut count: HashMap<String, usize> = HashMap::new();
    let link_name = |n: &Named| match &n.slot {
        Some((var, slot)) if !var.is_empty() => format!("{var}/{slot}"),
        _ => n.full_name.clone(),
    };
    for n in out.by_key.values() {
        *count.entry(link_name(n)).or_default() += 1;
    }
    for (key, n) in &out.by_key {
        let name = link_name(n);
        if name.is_empty() || count.get(&name) != Some(&1) {
            continue;
        }
        let path = crate::model::key_path(&name);
        out.links.insert(path, key.clone());
    }
    // A name that is a link and, with more components, a directory too is fine (`W` and
    // `W/m`); one that would put a link *inside* another link's name is not possible.
    Ok(out)
}

fn node(buf: &[u8], range: std::ops::Range<usize>) -> Result<Node, WireError> {
    let mut n = Node::default();
    for f in Fields::within(buf, range) {
        let f = f?;
        match (f.number, f.range()) {
            (2, Some(r)) => {
                let (mut name, mut full, mut key) = (String::new(), String::new(), Vec::new());
                for g in Fields::within(buf, r) {
                    let g = g?;
                    match (g.number, g.range()) {
                        (1, Some(s)) => name = String::from_utf8_lossy(&buf[s]).into_owned(),
                        (2, Some(s)) => full = String::from_utf8_lossy(&buf[s]).into_owned(),
                        (3, Some(s)) => key = buf[s].to_vec(),
                        _ => {}
                    }
                }
                n.attributes.push((name, full, key));
            }
            (3, Some(r)) => {
                let (mut orig, mut slot, mut var) = (-1i64, String::new(), -1i64);
                for g in Fields::within(buf, r) {
                    let g = g?;
                    match (g.number, g.value) {
                        (1, Value::Varint(v)) => orig = i64::from(v as i32),
                        (2, Value::Bytes { start, end }) => {
                            slot = String::from_utf8_lossy(&buf[start..end]).into_owned()
                        }
                        (3, Value::Varint(v)) => var = i64::from(v as i32),
                        _ => {}
                    }
                }
                n.slots.push((orig, slot, var));
            }
            _ => {}
        }
    }
    Ok(n)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bytes(field: u8, payload: &[u8]) -> Vec<u8> {
        let mut v = vec![(field << 3) | 2, payload.len() as u8];
        v.extend_from_slice(payload);
        v
    }

    fn attr(full: &str, key: &str) -> Vec<u8> {
        let mut st = bytes(1, b"VARIABLE_VALUE");
        st.extend(bytes(2, full.as_bytes()));
        st.extend(bytes(3, key.as_bytes()));
        bytes(2, &st)
    }

    #[test]
    fn names_slots_and_shared_names() {
        let mut g = Vec::new();
        g.extend(bytes(1, &[])); // root
        g.extend(bytes(1, &attr("dense_1/kernel", "k")));
        g.extend(bytes(1, &attr("dense_1/kernel/Adam", "k_m")));
        g.extend(bytes(1, &attr("Variable", "a")));
        g.extend(bytes(1, &attr("Variable", "b")));
        // optimizer node: slot m of node 1 is node 2; and one naming node 99
        let mut slot = vec![0x08, 1];
        slot.extend(bytes(2, b"m"));
        slot.extend([0x18, 2]);
        let mut bad = vec![0x08, 99];
        bad.extend(bytes(2, b"v"));
        bad.extend([0x18, 2]);
        let mut opt = bytes(3, &slot);
        opt.extend(bytes(3, &bad));
        g.extend(bytes(1, &opt));
        let n = parse(&g).unwrap();
        assert_eq!(n.by_key[&b"k".to_vec()].full_name, "dense_1/kernel");
        assert_eq!(
            n.by_key[&b"k_m".to_vec()].slot,
            Some(("dense_1/kernel".into(), "m".into()))
        );
        let links: Vec<(String, String)> = n
            .links
            .iter()
            .map(|(p, k)| {
                (
                    p.iter()
                        .map(|c| String::from_utf8_lossy(c).into_owned())
                        .collect::<Vec<_>>()
                        .join("/"),
                    String::from_utf8_lossy(k).into_owned(),
                )
            })
            .collect();
        assert_eq!(
            links,
            [
                ("dense_1/kernel".to_string(), "k".to_string()),
                ("dense_1/kernel/m".to_string(), "k_m".to_string())
            ]
        );
    }

    #[test]
    fn garbage_fails_cleanly() {
        assert!(parse(&[0x0a, 5, 0x12]).is_err());
        assert!(parse(&[]).unwrap().links.is_empty());
    }
}
