//! `list`, `info` and `verify`: what a model holds, from metadata (`list`, `info`) or by
//! reading every byte and checking every checksum (`verify`).

use std::io::{self, IsTerminal, Write};
use std::path::Path;
use std::time::Instant;

use serde_json::json;

use modelfs_core::options::{Options, Verify};
use modelfs_model::{Model, ModelError, ModelSummary, Tensor, TensorMeta};

use super::{open_model, Failure, EXIT_OK, EXIT_SOURCE};
use modelfs_io::source::ReadCtx;

/// Bytes per read while verifying (bounded memory whatever the tensor size).
const VERIFY_CHUNK: usize = 8 << 20;

pub use modelfs_core::walk::{mount_path, walk, Found};

/// Bytes of the tensor's data as stored: dense bytes, or the stored bytes of its partitions
/// (sparse, strings); `None` when unknown.
fn stored_bytes(meta: &TensorMeta) -> Option<u64> {
    let parts: Option<u64> = (!meta.partitions.is_empty())
        .then(|| {
            meta.partitions
                .iter()
                .try_fold(0u64, |a, p| a.checked_add(p.length))
        })
        .flatten();
    if meta.sparse {
        return parts;
    }
    match (&meta.stored, meta.dtype.elem_size()) {
        (None, None) => parts,
        _ => meta.stored_bytes(),
    }
}

pub(super) fn shape_compact(shape: &[u64]) -> String {
    let dims: Vec<String> = shape.iter().map(u64::to_string).collect();
    format!("[{}]", dims.join(","))
}

pub(super) fn write_out(text: &[u8]) -> Result<(), Failure> {
    let mut out = io::stdout().lock();
    match out.write_all(text).and_then(|()| out.flush()) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::BrokenPipe => Err(Failure::silent(EXIT_OK)),
        Err(e) => Err(Failure::new(EXIT_SOURCE, format!("writing output: {e}"))),
    }
}

pub(super) fn source_failure(source: &Path, e: impl std::fmt::Display) -> Failure {
    Failure::new(EXIT_SOURCE, format!("{}: {e}", source.display()))
}

/// `modelfs list`: one line per tensor (path, dtype, shape, bytes, partitions), like
/// TensorFlow's `list_variables`; `--json` gives an array of objects.
pub(crate) fn list(source: &Path, opts: &Options, as_json: bool) -> Result<(), Failure> {
    let model = open_model(source, opts)?;
    let found = walk(&*model).map_err(|e| source_failure(source, e))?;
    let text = if as_json {
        let items: Vec<serde_json::Value> = found
            .iter()
            .map(|f| {
                let m = f.tensor.meta();
                // `name` is the mount path, as in every JSON answer (`stats`, `diff`,
                // `check`, Python's keys); `key` the reader's own when it differs.
                let mut o = json!({
                    "path": f.path,
                    "name": f.path,
                    "dtype": m.dtype.name(),
                    // The encoding the bytes are stored in (`Q4_K`), when not the dtype's.
                    "stored": m.stored.as_ref().map(|f| &f.encoding),
                    "shape": m.shape,
                    "bytes": stored_bytes(m),
                    "partitions": m.partitions.len(),
                    "sparse": m.sparse,
                    "problem": m.problem,
                    "note": m.note,
                });
                let key = String::from_utf8_lossy(&m.name);
                if key != f.path {
                    o["key"] = key.into();
                }
                o
            })
            .collect();
        // One object per line: greppable, and still one JSON document.
        let lines: Vec<String> = items.iter().map(|v| format!("  {v}")).collect();
        format!("[\n{}\n]\n", lines.join(",\n"))
    } else {
        list_text(&found)
    };
    write_out(text.as_bytes())
}

/// Aligned columns: PATH DTYPE SHAPE BYTES [PARTITIONS]; one field per column for awk.
fn list_text(found: &[Found]) -> String {
    let rows: Vec<[String; 5]> = found
        .iter()
        .map(|f| {
            let m = f.tensor.meta();
            let mut note = String::new();
            if !m.partitions.is_empty() {
                note = format!("{} partitions", m.partitions.len());
            }
            if m.sparse {
                note = format!("sparse {note}").trim_end().to_string();
            }
            if m.problem.is_some() {
                note = format!("{note} PROBLEM").trim_start().to_string();
            }
            [
                f.path.clone(),
                m.dtype_shown(),
                shape_compact(&m.shape),
                stored_bytes(m).map_or("-".into(), |b| b.to_string()),
                note,
            ]
        })
        .collect();
    let mut widths = [0usize; 5];
    for r in &rows {
        for (w, c) in widths.iter_mut().zip(r) {
            *w = (*w).max(c.chars().count());
        }
    }
    let mut out = String::new();
    for r in &rows {
        let line = format!(
            "{:<w0$}  {:<w1$}  {:<w2$}  {:>w3$}  {}",
            r[0],
            r[1],
            r[2],
            r[3],
            r[4],
            w0 = widths[0],
            w1 = widths[1],
            w2 = widths[2],
            w3 = widths[3]
        );
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

/// `modelfs info`: format, counts, bytes; per checkpoint for a directory of several. Data
/// are not read, so problems found here are those of the metadata only.
pub(crate) fn info(source: &Path, opts: &Options) -> Result<(), Failure> {
    let model = open_model(source, opts)?;
    let s = model.summary().map_err(|e| source_failure(source, e))?;
    let dtypes = |d: &std::collections::BTreeMap<String, u64>| {
        let v: Vec<String> = d.iter().map(|(d, n)| format!("{d} {n}")).collect();
        if v.is_empty() {
            "-".into()
        } else {
            v.join(", ")
        }
    };
    let mut text = format!("source: {}\nformat: {}\n", source.display(), s.format);
    if s.parts.is_empty() {
        text.push_str(&format!(
            "tensors: {}\ndtypes: {}\ntotal bytes: {}\n",
            s.tensors,
            dtypes(&s.dtypes),
            s.total_bytes
        ));
    } else {
        text.push_str(&format!("checkpoints: {}\n", s.parts.len()));
        let mut parts: Vec<_> = s.parts.iter().collect();
        parts.sort_by(|a, b| natural_cmp(a.0.as_ref(), b.0.as_ref()));
        for (name, p) in parts {
            text.push_str(&format!(
                "  {name}: {} tensors, {} bytes ({})\n",
                p.tensors,
                p.total_bytes,
                dtypes(&p.dtypes)
            ));
        }
    }
    for line in &s.details {
        text.push_str(line);
        text.push('\n');
    }
    text.push_str(&tables_line(&*model));
    if s.problems.is_empty() {
        text.push_str("problems: none in the metadata; data not verified (run `modelfs verify`)\n");
    } else {
        text.push_str(&format!(
            "problems: {} in the metadata (data not verified: run `modelfs verify`)\n",
            s.problems.len()
        ));
        for p in &s.problems {
            text.push_str(&format!("  {p}\n"));
        }
    }
    // What modelfs does not run or decode: shown, never a problem (`model::verdict`).
    if !s.notes.is_empty() {
        text.push_str(&format!(
            "notes: {} (not run or not decoded here; not problems)\n",
            s.notes.len()
        ));
        for n in &s.notes {
            text.push_str(&format!("  {n}\n"));
        }
    }
    write_out(text.as_bytes())
}

/// `tables: N (a, b, …)`: the hash tables found by name (a TF table is listed as its keys and
/// values tensors, so a first look would not see it); nothing when there are none.
fn tables_line(model: &dyn Model) -> String {
    const SHOWN: usize = 10;
    let tables = match model.unlisted_tables() {
        Ok(t) if !t.is_empty() => t,
        Ok(_) => return String::new(),
        Err(e) => return format!("tables: not counted: {e}\n"),
    };
    let names: Vec<String> = tables
        .iter()
        .take(SHOWN)
        .map(|p| String::from_utf8_lossy(&p.join(&b'/')).into_owned())
        .collect();
    let more = match tables.len() > SHOWN {
        true => format!(", … {} more", tables.len() - SHOWN),
        false => String::new(),
    };
    format!("tables: {} ({}{more})\n", tables.len(), names.join(", "))
}

/// What a verdict found, by the one rule of `model::verdict`: problems (damage, dangerous)
/// fail it, notes (not run, not decoded) do not. Each names its tensor's mount path, or none
/// when it is the source's.
#[derive(Default)]
pub(crate) struct Verdict {
    pub(crate) problems: Vec<(Option<String>, String)>,
    pub(crate) notes: Vec<(Option<String>, String)>,
}

impl Verdict {
    /// The findings of `summary` that no tensor of `found` already stands for (an unrun
    /// call, a dangerous import, a storage layout, no model yet).
    pub(crate) fn add_summary(&mut self, summary: &ModelSummary, found: &[Found]) {
        let told = |p: &str, of: fn(&TensorMeta) -> Option<&str>| {
            found
                .iter()
                .filter_map(|f| of(f.tensor.meta()))
                .any(|t| p.ends_with(t))
        };
        for p in &summary.problems {
            if !told(p, |m| m.problem.as_deref()) {
                self.problems.push((None, p.clone()));
            }
        }
        for n in &summary.notes {
            if !told(n, |m| m.note.as_deref()) {
                self.notes.push((None, n.clone()));
            }
        }
    }

    /// `[{"name": path or null, "detail": text}]` of `items`, each with `kind` when given.
    pub(crate) fn json_items(items: &[(Option<String>, String)]) -> Vec<serde_json::Value> {
        items
            .iter()
            .map(|(name, text)| json!({"name": name, "detail": text}))
            .collect()
    }

    /// One line each, indented, named by its tensor when it has one.
    fn lines(items: &[(Option<String>, String)], out: &mut String) {
        for (name, text) in items {
            match name {
                Some(n) => out.push_str(&format!("  {n}: {text}\n")),
                None => out.push_str(&format!("  {text}\n")),
            }
        }
    }
}

/// `modelfs verify [--json]`: reads every byte of every tensor with checksums on (verdicts
/// remembered by earlier mounts are not trusted), with a progress line on a terminal; exit 2
/// listing every problem found; notes are listed and pass.
pub(crate) fn verify(source: &Path, as_json: bool, opts: &Options) -> Result<(), Failure> {
    let mut opts = opts.clone();
    opts.verify = Verify::Crc;
    opts.cache_dir = None;
    let model = open_model(source, &opts)?;
    let found = walk(&*model).map_err(|e| source_failure(source, e))?;
    let total: u64 = found
        .iter()
        .map(|f| stored_bytes(f.tensor.meta()).unwrap_or(0))
        .sum();
    let show = io::stderr().is_terminal();
    let started = Instant::now();
    let mut done = 0u64;
    let mut v = Verdict::default();
    let mut buf = Vec::new();
    for (i, f) in found.iter().enumerate() {
        if show {
            let pct = (done.saturating_mul(100)).checked_div(total).unwrap_or(100);
            eprint!(
                "\r\x1b[2Kverifying {}/{} ({pct}%) {}",
                i + 1,
                found.len(),
                f.path
            );
        }
        if let Err(e) = read_everything(&*f.tensor, &mut buf) {
            v.problems.push((Some(f.path.clone()), e));
        } else if let Some(n) = &f.tensor.meta().note {
            v.notes.push((Some(f.path.clone()), n.clone()));
        }
        done = done.saturating_add(stored_bytes(f.tensor.meta()).unwrap_or(0));
    }
    if show {
        eprint!("\r\x1b[2K");
    }
    // The strict gate: what `info` lists that no tensor's read said is a finding too.
    let summary = model.summary().map_err(|e| source_failure(source, e))?;
    v.add_summary(&summary, &found);
    let secs = started.elapsed().as_secs_f64();
    let text = match as_json {
        true => {
            let o = json!({
                "tensors_checked": found.len(),
                "bytes_checked": done,
                "problems": Verdict::json_items(&v.problems),
                "notes": Verdict::json_items(&v.notes),
            });
            format!("{}\n", serde_json::to_string_pretty(&o).unwrap_or_default())
        }
        false => {
            let mut text = match v.problems.is_empty() {
                true => format!(
                    "verified {} tensors, {done} bytes in {secs:.1} s: no problems\n",
                    found.len()
                ),
                false => format!(
                    "{} in {} ({done} bytes checked in {secs:.1} s):\n",
                    count(v.problems.len(), "problem"),
                    count(found.len(), "tensor"),
                ),
            };
            Verdict::lines(&v.problems, &mut text);
            if !v.notes.is_empty() {
                text.push_str(&format!(
                    "{} (not run or not decoded here; not problems):\n",
                    count(v.notes.len(), "note")
                ));
                Verdict::lines(&v.notes, &mut text);
            }
            text
        }
    };
    write_out(text.as_bytes())?;
    match v.problems.is_empty() {
        true => Ok(()),
        false => Err(Failure::new(
            EXIT_SOURCE,
            format!(
                "{}: {} found",
                source.display(),
                count(v.problems.len(), "problem")
            ),
        )),
    }
}

/// Natural order: runs of digits compare as numbers (`ckpt-999` before `ckpt-1000`).
fn natural_cmp(a: &str, b: &str) -> std::cmp::Ordering {
    fn runs(s: &str) -> Vec<(bool, &str)> {
        let mut out = Vec::new();
        let mut start = 0;
        let b = s.as_bytes();
        for i in 1..=b.len() {
            if i == b.len() || b[i].is_ascii_digit() != b[start].is_ascii_digit() {
                out.push((b[start].is_ascii_digit(), &s[start..i]));
                start = i;
            }
        }
        out
    }
    let (ra, rb) = (runs(a), runs(b));
    for (x, y) in ra.iter().zip(&rb) {
        let o = match (x, y) {
            ((true, x), (true, y)) => {
                let (x, y) = (x.trim_start_matches('0'), y.trim_start_matches('0'));
                x.len().cmp(&y.len()).then_with(|| x.cmp(y))
            }
            ((_, x), (_, y)) => x.cmp(y),
        };
        if o != std::cmp::Ordering::Equal {
            return o;
        }
    }
    ra.len().cmp(&rb.len()).then_with(|| a.cmp(b))
}

/// `1 problem`, `2 problems`.
fn count(n: usize, noun: &str) -> String {
    format!("{n} {noun}{}", if n == 1 { "" } else { "s" })
}

/// Reads all of `t` (every element, string or stored entry), so that every check runs.
fn read_everything(t: &dyn Tensor, buf: &mut Vec<u8>) -> Result<(), String> {
    let meta = t.meta();
    if let Some(p) = &meta.problem {
        return Err(p.clone());
    }
    let err = |e: ModelError| e.to_string();
    if meta.note.is_some() && meta.stored.is_none() {
        return Ok(()); // nothing of it is served: a note, not a read
    }
    if meta.sparse && t.sparse_shape_is_cheap() {
        // By range, a bounded run at a time: every record decoded and checked, the lines of
        // every text partition counted to its end, nothing kept.
        let nnz = t.sparse_shape().map_err(err)?.nnz();
        let mut got = modelfs_model::Entries::default();
        let mut first = 0u64;
        while first < nnz {
            let count = (1u64 << 20).min(nnz - first);
            got.clear();
            t.entries()
                .and_then(|s| s.read_entries(ReadCtx::none(), first, count, &mut got))
                .map_err(err)?;
            first += count;
        }
        return Ok(());
    }
    if meta.sparse {
        return t.sparse().map(|_| ()).map_err(err);
    }
    if let (Some(form), None) = (&meta.stored, meta.dtype.elem_size()) {
        // Blocks no layout decodes: every stored byte is read (its extent checked).
        let mut at = 0u64;
        while at < form.bytes {
            let len = (VERIFY_CHUNK as u64).min(form.bytes - at);
            t.read_stored(ReadCtx::none(), at, len as usize)
                .map_err(err)?;
            at += len;
        }
        return Ok(());
    }
    let n = meta
        .num_elements()
        .ok_or("the shape's element count overflows")?;
    match meta.dtype.elem_size() {
        Some(size) if size > 0 => {
            let per = (VERIFY_CHUNK / size).max(1) as u64;
            let mut first = 0u64;
            while first < n {
                let count = per.min(n - first);
                buf.resize(count as usize * size, 0);
                t.read_elements(ReadCtx::none(), first, buf).map_err(err)?;
                first += count;
            }
            Ok(())
        }
        _ => {
            let per = 1u64 << 16;
            let mut first = 0u64;
            while first < n {
                let count = per.min(n - first);
                t.for_each_string(ReadCtx::none(), first, count, &mut |_| {})
                    .map_err(err)?;
                first += count;
            }
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn checkpoints_in_natural_order_and_counts_in_english() {
        let mut v = vec![
            "ckpt-1000",
            "ckpt-999",
            "ckpt-0",
            "model.ckpt-10",
            "ckpt-01",
        ];
        v.sort_by(|a, b| natural_cmp(a, b));
        assert_eq!(
            v,
            [
                "ckpt-0",
                "ckpt-01",
                "ckpt-999",
                "ckpt-1000",
                "model.ckpt-10"
            ]
        );
        assert_eq!(count(1, "problem"), "1 problem");
        assert_eq!(count(2, "tensor"), "2 tensors");
    }
}
