//! `NAME.json`: a tensor's metadata (SPEC §2), the size of each of its other files where it is
//! known without work when the document is first asked for (`null` for a text layout not
//! rendered or sized by then), the layouts that cannot show the tensor and why, what is wrong
//! when something is, and the last error a read of the tensor met (`last_error`). Rendered
//! once in memory (it is small) and fixed from then on but for that error, which the file
//! system tells the kernel of (`FileContent::volatile`, `settled`). It never fails, decodes
//! or renders: problems become fields.

use bytes::Bytes;
use std::sync::{Arc, Mutex, OnceLock};

use serde_json::{json, Value};

use super::{FileContent, Layout, LayoutCtx, LayoutError, Requester};
use crate::model::{Tensor, TensorMeta};

pub(crate) struct JsonContent {
    name: Vec<u8>,
    ctx: Arc<LayoutCtx>,
    /// The tensor, until the document is rendered: a file system keeps this content for the
    /// file's life, and must not keep the tensor (and what it builds, a table's key index)
    /// alive with it.
    tensor: Mutex<Option<Arc<dyn Tensor>>>,
    /// The document without a `last_error`, rendered when first asked for and fixed from
    /// then on: sizes learnt later do not change it, so the size a `stat` gave is what a read
    /// returns, whatever was listed, read or evicted since.
    base: OnceLock<Arc<[u8]>>,
    /// The document with the tensor's last read error, once it has one.
    shown: Mutex<Option<Rendered>>,
}

/// A rendering of the document and the last error it shows.
type Rendered = (String, Arc<[u8]>);

pub fn json_content(tensor: Arc<dyn Tensor>, ctx: &Arc<LayoutCtx>) -> Arc<dyn FileContent> {
    Arc::new(JsonContent {
        name: tensor.meta().name.clone(),
        ctx: ctx.clone(),
        tensor: Mutex::new(Some(tensor)),
        base: OnceLock::new(),
        shown: Mutex::new(None),
    })
}

impl JsonContent {
    /// The document as it stands: the fixed part, and the tensor's last error if any (which
    /// the file system tells the kernel of when it changes).
    fn bytes(&self) -> Arc<[u8]> {
        let base = self.base.get_or_init(|| {
            let tensor = self.tensor.lock().unwrap_or_else(|e| e.into_inner()).take();
            debug_assert!(tensor.is_some(), "rendered once");
            let mut doc = tensor.map_or_else(Vec::new, |t| render(&t, &self.ctx));
            doc.extend_from_slice(CLOSING);
            doc.into()
        });
        let Some(last) = self.ctx.faults.last(&self.name) else {
            return base.clone();
        };
        let mut g = self.shown.lock().unwrap_or_else(|e| e.into_inner());
        match &*g {
            Some((shown, b)) if *shown == last => b.clone(),
            _ => {
                let b: Arc<[u8]> = with_error(base, &last).into();
                *g = Some((last, b.clone()));
                b
            }
        }
    }
}

impl FileContent for JsonContent {
    fn known_size(&self) -> Option<u64> {
        Some(self.bytes().len() as u64)
    }
    fn read(&self, offset: u64, len: usize, _req: &dyn Requester) -> Result<Bytes, LayoutError> {
        crate::source::scratch::filled(len, |buf: &mut [u8]| {
            let b = self.bytes();
            if offset >= b.len() as u64 {
                return Ok(0);
            }
            let n = (b.len() - offset as usize).min(buf.len());
            buf[..n].copy_from_slice(&b[offset as usize..offset as usize + n]);
            Ok(n)
        })
    }
    fn volatile(&self) -> bool {
        true
    }
    /// Fixed once rendered: only a read error of the tensor changes it now.
    fn settled(&self) -> bool {
        true
    }
}

/// A JSON string literal of raw bytes: valid UTF-8 as usual, each invalid byte as `\u00XX`.
pub(crate) fn json_bytes_literal(s: &[u8], out: &mut String) {
    out.push('"');
    super::num::for_each_utf8_run(s, |text, bad| {
        let quoted = serde_json::to_string(text).unwrap_or_default();
        out.push_str(&quoted[1..quoted.len() - 1]);
        for b in bad {
            out.push_str(&format!("\\u00{b:02x}"));
        }
    });
    out.push('"');
}

fn partitions(meta: &TensorMeta) -> Value {
    Value::Array(
        meta.partitions
            .iter()
            .map(|p| {
                let mut o = serde_json::Map::new();
                o.insert(
                    "extent".into(),
                    json!(p.extent.iter().map(|&(s, l)| [s, l]).collect::<Vec<_>>()),
                );
                o.insert("file".into(), json!(p.file));
                o.insert("offset".into(), json!(p.offset));
                o.insert("length".into(), json!(p.length));
                for (k, v) in &p.extra {
                    o.entry(k.clone()).or_insert_with(|| v.clone());
                }
                Value::Object(o)
            })
            .collect(),
    )
}

/// The document without its last error and its closing brace.
fn render(tensor: &Arc<dyn Tensor>, ctx: &Arc<LayoutCtx>) -> Vec<u8> {
    let meta = tensor.meta();
    let mut fields: Vec<(String, Value)> = vec![
        ("dtype".into(), json!(meta.dtype.name())),
        ("shape".into(), json!(meta.shape)),
        ("format".into(), json!(meta.format)),
    ];
    if meta.sparse || meta.role == crate::model::Role::Matrix {
        fields.push(("sparse".into(), json!(meta.sparse)));
    }
    fields.push(("partitions".into(), partitions(meta)));
    if let Some(st) = &meta.stored {
        // `.bin` holds these bytes, not elements of `dtype`.
        fields.push((
            "stored".into(),
            json!({"encoding": st.encoding, "bytes": st.bytes}),
        ));
    }
    if let Some((descr, map)) = super::binary::npy_descr(meta.dtype) {
        if !matches!(
            map,
            super::binary::ElemMap::Same | super::binary::ElemMap::Bool
        ) {
            // numpy has no such type: `.npy` (and the `.npz` view) hold the values widened,
            // `.bin` (and the `.safetensors`, `.tf/` views) the stored bits.
            fields.push(("npy_widened_to".into(), json!(descr)));
        }
    }
    let mut layouts = Vec::new();
    let mut unavailable = Vec::new();
    let shown = super::shown(meta, ctx);
    let asked_all = super::asked(meta, ctx);
    let asked = asked_all.iter().filter(|l| !shown.contains(l));
    for &l in shown.iter().chain(asked) {
        if l == Layout::Json {
            continue;
        }
        let file = format!(".{}", l.suffix());
        match super::content(l, tensor.clone(), ctx) {
            Ok(content) => layouts
                .push(json!({"layout": l.suffix(), "file": file, "size": content.known_size()})),
            Err(why) => unavailable.push(json!({"layout": l.suffix(), "why": why.to_string()})),
        }
    }
    fields.push(("layouts".into(), Value::Array(layouts)));
    if !unavailable.is_empty() {
        fields.push(("unavailable".into(), Value::Array(unavailable)));
    }
    for (k, v) in &meta.extra {
        if k != "name" && !fields.iter().any(|(f, _)| f == k) {
            fields.push((k.clone(), v.clone()));
        }
    }
    if let Some(n) = &meta.note {
        fields.push(("note".into(), json!(n)));
    }
    if let Some(p) = &meta.problem {
        fields.push(("problem".into(), json!(p)));
    }
    let mut out = String::from("{\n  \"name\": ");
    json_bytes_literal(&meta.name, &mut out);
    for (k, v) in fields {
        out.push_str(",\n  ");
        out.push_str(&serde_json::to_string(&k).unwrap_or_default());
        out.push_str(": ");
        out.push_str(&serde_json::to_string(&v).unwrap_or_else(|_| "null".into()));
    }
    out.into_bytes()
}

/// How the document ends.
const CLOSING: &[u8] = b"\n}\n";

/// The document `base` (closed) with `last_error` as its last field.
fn with_error(base: &[u8], last_error: &str) -> Vec<u8> {
    debug_assert!(base.ends_with(CLOSING));
    let open = &base[..base.len() - CLOSING.len()];
    let mut out = Vec::with_capacity(base.len() + last_error.len() + 24);
    out.extend_from_slice(open);
    out.extend_from_slice(b",\n  \"last_error\": ");
    out.extend_from_slice(json!(last_error).to_string().as_bytes());
    out.extend_from_slice(CLOSING);
    out
}
