//! `NAME.json`: a tensor's metadata (SPEC §2), the exact size of each of its other files, and
//! what is wrong when something is. Rendered whole in memory on first use (it is small) and
//! kept, so its size and bytes never disagree. It never fails: problems become fields.

use std::sync::{Arc, OnceLock};

use serde_json::{json, Value};

use super::{FileContent, Layout, LayoutCtx, LayoutError};
use crate::model::{Tensor, TensorMeta};

pub struct JsonContent {
    tensor: Arc<dyn Tensor>,
    ctx: Arc<LayoutCtx>,
    bytes: OnceLock<Vec<u8>>,
}

pub fn open_json(tensor: Arc<dyn Tensor>, ctx: &Arc<LayoutCtx>) -> Arc<dyn FileContent> {
    Arc::new(JsonContent {
        tensor,
        ctx: ctx.clone(),
        bytes: OnceLock::new(),
    })
}

impl JsonContent {
    fn bytes(&self) -> &[u8] {
        self.bytes.get_or_init(|| render(&self.tensor, &self.ctx))
    }
}

impl FileContent for JsonContent {
    fn size(&self) -> Result<u64, LayoutError> {
        Ok(self.bytes().len() as u64)
    }
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> Result<usize, LayoutError> {
        let b = self.bytes();
        if offset >= b.len() as u64 {
            return Ok(0);
        }
        let n = (b.len() - offset as usize).min(buf.len());
        buf[..n].copy_from_slice(&b[offset as usize..offset as usize + n]);
        Ok(n)
    }
}

/// A JSON string literal of raw bytes: valid UTF-8 as usual, each invalid byte as `\u00XX`.
pub fn json_bytes_literal(s: &[u8], out: &mut String) {
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

fn render(tensor: &Arc<dyn Tensor>, ctx: &Arc<LayoutCtx>) -> Vec<u8> {
    let meta = tensor.meta();
    let mut fields: Vec<(String, Value)> = vec![
        ("dtype".into(), json!(meta.dtype.name())),
        ("shape".into(), json!(meta.shape)),
        ("format".into(), json!(meta.format.name())),
    ];
    if meta.sparse || meta.format == crate::model::SourceFormat::Angel {
        fields.push(("sparse".into(), json!(meta.sparse)));
    }
    fields.push(("partitions".into(), partitions(meta)));
    let mut error: Option<String> = None;
    let mut layouts = Vec::new();
    for &l in &ctx.layouts {
        if l == Layout::Json {
            continue;
        }
        let Some(content) = super::open(l, tensor.clone(), ctx) else {
            continue;
        };
        match content.size() {
            Ok(size) => layouts.push(
                json!({"layout": l.suffix(), "file": format!(".{}", l.suffix()), "size": size}),
            ),
            Err(e) => {
                let msg = e.to_string();
                layouts.push(
                    json!({"layout": l.suffix(), "file": format!(".{}", l.suffix()), "error": msg}),
                );
                error.get_or_insert(msg);
            }
        }
    }
    fields.push(("layouts".into(), Value::Array(layouts)));
    for (k, v) in &meta.extra {
        if k != "name" && !fields.iter().any(|(f, _)| f == k) {
            fields.push((k.clone(), v.clone()));
        }
    }
    if let Some(p) = &meta.problem {
        fields.push(("problem".into(), json!(p)));
    }
    if let Some(e) = error {
        if !fields.iter().any(|(f, _)| f == "error") {
            fields.push(("error".into(), json!(e)));
        }
    }
    let mut out = String::from("{\n  \"name\": ");
    json_bytes_literal(&meta.name, &mut out);
    for (k, v) in fields {
        out.push_str(",\n  ");
        out.push_str(&serde_json::to_string(&k).unwrap_or_default());
        out.push_str(": ");
        out.push_str(&serde_json::to_string(&v).unwrap_or_else(|_| "null".into()));
    }
    out.push_str("\n}\n");
    out.into_bytes()
}
