//! The signatures of a graph source as files (SPEC §6): `signatures/<key>.json` per
//! `SignatureDef`, and `signatures.txt` in the form `saved_model_cli show --all` prints.

use std::fmt::Write as _;

use serde_json::{json, Map, Value};

use super::scan::{Arg, Encoding, MetaGraph, Signature, TensorInfo};
use crate::dtype;

/// The file name stem of each signature of `metas` (with its meta graph and signature index):
/// the key, or `key@tag,tag` where several meta graphs have a signature of that key.
pub(crate) fn names(metas: &[MetaGraph]) -> Vec<(String, usize, usize)> {
    let mut count = std::collections::HashMap::<&str, usize>::new();
    for m in metas {
        for s in &m.signatures {
            *count.entry(&s.key).or_default() += 1;
        }
    }
    let mut out = Vec::new();
    for (mi, m) in metas.iter().enumerate() {
        for (si, s) in m.signatures.iter().enumerate() {
            let name = match count.get(s.key.as_str()) {
                Some(1) => s.key.clone(),
                _ => format!("{}@{}", s.key, m.tags.join(",")),
            };
            out.push((name, mi, si));
        }
    }
    out.sort();
    out.dedup_by(|a, b| a.0 == b.0);
    out
}

/// `signatures/<key>.json`: the tags of its meta graph, the method, and each input and output
/// with its tensor name, dtype and shape (-1: unknown dimension; `null`: unknown rank).
pub(crate) fn json(meta: &MetaGraph, sig: &Signature) -> Vec<u8> {
    let args = |list: &[Arg]| -> Value {
        let mut m = Map::new();
        for a in list {
            m.insert(a.key.clone(), info_json(&a.info));
        }
        Value::Object(m)
    };
    let doc = json!({
        "key": sig.key,
        "tags": meta.tags,
        "method_name": sig.method,
        "inputs": args(&sig.inputs),
        "outputs": args(&sig.outputs),
    });
    let mut out = serde_json::to_vec_pretty(&doc).unwrap_or_default();
    out.push(b'\n');
    out
}

/// A tensor as `{"name", "dtype", "shape"}`; a sparse one with `"coo_sparse": {"values",
/// "indices", "dense_shape"}` and a composite one with `"composite": {"type_spec",
/// "components": [tensor, …]}` in place of its name (which TF leaves empty).
fn info_json(t: &TensorInfo) -> Value {
    let mut v = Map::new();
    match &t.encoding {
        Encoding::Dense => {
            v.insert("name".into(), json!(t.name));
        }
        Encoding::CooSparse {
            values,
            indices,
            dense_shape,
        } => {
            let coo = json!({"values": values, "indices": indices, "dense_shape": dense_shape});
            v.insert("coo_sparse".into(), coo);
        }
        Encoding::Composite {
            type_spec,
            components,
        } => {
            let parts: Vec<Value> = components.iter().map(info_json).collect();
            let c = json!({"type_spec": type_spec, "components": parts});
            v.insert("composite".into(), c);
        }
    }
    v.insert("dtype".into(), json!(crate::dtype::name(t.dtype)));
    v.insert("shape".into(), json!(t.shape));
    Value::Object(v)
}

/// `signatures.txt`: every meta graph's signatures as `saved_model_cli show --all` shows them.
pub(crate) fn text(metas: &[MetaGraph]) -> Vec<u8> {
    let mut out = String::new();
    for m in metas {
        let _ = writeln!(
            out,
            "MetaGraphDef with tag-set: '{}' contains the following SignatureDefs:",
            m.tags.join(", ")
        );
        for s in &m.signatures {
            let _ = writeln!(out, "\nsignature_def['{}']:", s.key);
            let _ = writeln!(
                out,
                "  The given SavedModel SignatureDef contains the following input(s):"
            );
            args_text(&mut out, "inputs", &s.inputs);
            let _ = writeln!(
                out,
                "  The given SavedModel SignatureDef contains the following output(s):"
            );
            args_text(&mut out, "outputs", &s.outputs);
            let _ = writeln!(out, "  Method name is: {}", s.method);
        }
        out.push('\n');
    }
    out.into_bytes()
}

/// As `saved_model_cli` prints them: dtype, shape and name (empty for sparse and composite
/// tensors, whose parts `signatures/<key>.json` gives).
fn args_text(out: &mut String, what: &str, args: &[Arg]) {
    for Arg { key, info: a } in args {
        let dt = dtype::enum_name(i64::from(a.dtype))
            .map_or_else(|| a.dtype.to_string(), |n| n.into_owned());
        let shape = match &a.shape {
            None => "unknown_rank".to_string(),
            Some(d) => {
                let dims: Vec<String> = d.iter().map(i64::to_string).collect();
                format!("({})", dims.join(", "))
            }
        };
        let _ = writeln!(out, "    {what}['{key}'] tensor_info:");
        let _ = writeln!(out, "        dtype: {dt}");
        let _ = writeln!(out, "        shape: {shape}");
        let _ = writeln!(out, "        name: {}", a.name);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta(tags: &[&str], keys: &[&str]) -> MetaGraph {
        MetaGraph {
            tags: tags.iter().map(|t| t.to_string()).collect(),
            graph: None,
            signatures: keys
                .iter()
                .map(|k| Signature {
                    key: k.to_string(),
                    method: "tensorflow/serving/predict".into(),
                    inputs: vec![Arg {
                        key: "x".into(),
                        info: TensorInfo {
                            name: "x:0".into(),
                            dtype: 1,
                            shape: Some(vec![-1, 3]),
                            encoding: Encoding::Dense,
                        },
                    }],
                    outputs: vec![Arg {
                        key: "y".into(),
                        info: TensorInfo {
                            name: "y:0".into(),
                            dtype: 7,
                            shape: None,
                            encoding: Encoding::Dense,
                        },
                    }],
                })
                .collect(),
        }
    }

    #[test]
    fn a_key_in_several_meta_graphs_is_qualified_by_tags() {
        let metas = [
            meta(&["serve"], &["a", "b"]),
            meta(&["serve", "gpu"], &["a"]),
        ];
        let n: Vec<String> = names(&metas).into_iter().map(|(n, _, _)| n).collect();
        assert_eq!(n, ["a@serve", "a@serve,gpu", "b"]);
    }

    #[test]
    fn text_reads_like_saved_model_cli() {
        let t = String::from_utf8(text(&[meta(&["serve"], &["s"])])).unwrap();
        assert!(t.starts_with("MetaGraphDef with tag-set: 'serve' contains"));
        assert!(t.contains("    inputs['x'] tensor_info:\n        dtype: DT_FLOAT\n        shape: (-1, 3)\n        name: x:0\n"));
        assert!(t.contains("        dtype: DT_STRING\n        shape: unknown_rank\n"));
        assert!(t.contains("  Method name is: tensorflow/serving/predict\n"));
    }

    #[test]
    fn json_gives_shapes_with_minus_one_and_null() {
        let m = meta(&["serve"], &["s"]);
        let v: Value = serde_json::from_slice(&json(&m, &m.signatures[0])).unwrap();
        assert_eq!(v["inputs"]["x"]["shape"], json!([-1, 3]));
        assert_eq!(v["inputs"]["x"]["dtype"], "float32");
        assert_eq!(v["outputs"]["y"]["shape"], Value::Null);
        assert_eq!(v["tags"], json!(["serve"]));
    }
}
