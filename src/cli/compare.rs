//! `stats` and `diff`: the questions asked of a model's values — are there NaNs, what is the
//! spread, what changed between two checkpoints — answered by reading the tensors lazily, on
//! all cores, without a copy or TensorFlow.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::sync::Arc;

use super::inspect::{shape_compact, source_failure, walk, write_out, Found};
use super::keymap::{KeyMap, Transposed};
use super::{open_model, store_name, Failure, EXIT_SOURCE};
use modelfs_core::options::Options;
use modelfs_io::store::Store;
use modelfs_layout::Patient;
use modelfs_model::Tensor;
use modelfs_stats::{delta, Outcome};
use modelfs_views::tf::known_crc;

/// Exit status of `stats --check-finite` when a value is NaN or infinite, and of `diff` when
/// the models differ (as `diff(1)` and `cmp(1)` do).
const EXIT_FOUND: i32 = 2;
const EXIT_DIFFER: i32 = super::EXIT_NO;

/// A number for a table: 6 significant digits, exponent form outside [1e-4, 1e6).
fn short(x: Option<f64>) -> String {
    match x {
        None => "-".into(),
        Some(v) if v == 0.0 || !v.is_finite() => format!("{v}"),
        Some(v) if (1e-4..1e6).contains(&v.abs()) => {
            let digits = (5 - v.abs().log10().floor() as i32).max(0) as usize;
            let s = format!("{v:.digits$}");
            match s.contains('.') {
                true => s.trim_end_matches('0').trim_end_matches('.').to_string(),
                false => s,
            }
        }
        Some(v) => format!("{v:.5e}"),
    }
}

/// Prints rows as columns, each as wide as its widest cell: the first `left` left-aligned,
/// the others (numbers) right-aligned.
fn table(rows: &[Vec<String>], left: usize) -> String {
    let cols = rows.iter().map(Vec::len).max().unwrap_or(0);
    let width: Vec<usize> = (0..cols)
        .map(|c| {
            rows.iter()
                .filter_map(|r| r.get(c))
                .map(|s| s.chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut out = String::new();
    for r in rows {
        for (c, cell) in r.iter().enumerate() {
            let pad = width[c] - cell.chars().count();
            if c > 0 {
                out.push_str("  ");
            }
            let last = c + 1 == r.len();
            match (c < left, last) {
                (true, true) => out.push_str(cell),
                (true, false) => {
                    out.push_str(cell);
                    out.push_str(&" ".repeat(pad));
                }
                (false, _) => {
                    out.push_str(&" ".repeat(pad));
                    out.push_str(cell);
                }
            }
        }
        out.push('\n');
    }
    out
}

/// PATH arguments as mount paths (no leading or trailing `/`).
pub(super) fn mount_paths(paths: &[OsString]) -> Vec<String> {
    paths
        .iter()
        .map(|p| {
            String::from_utf8_lossy(p.as_bytes())
                .trim_matches('/')
                .to_string()
        })
        .collect()
}

/// Whether mount path `path` is `dir` or below it (`""`: the root).
pub(super) fn at_or_below(path: &str, dir: &str) -> bool {
    dir.is_empty() || path == dir || path.strip_prefix(dir).is_some_and(|r| r.starts_with('/'))
}

/// The tensors of `found` at or below the mount paths `paths` (all when none); a path that
/// names nothing is a usage error.
fn select(found: Vec<Found>, paths: &[OsString]) -> Result<Vec<Found>, Failure> {
    if paths.is_empty() {
        return Ok(found);
    }
    let wanted = mount_paths(paths);
    let under = |f: &Found, w: &str| at_or_below(&f.path, w);
    for w in &wanted {
        if !found.iter().any(|f| under(f, w)) {
            return Err(Failure::new(
                super::EXIT_UNKNOWN_NAME,
                format!("{w}: no such tensor or directory (see `modelfs list`)"),
            ));
        }
    }
    Ok(found
        .into_iter()
        .filter(|f| wanted.iter().any(|w| under(f, w)))
        .collect())
}

fn key(t: &dyn Tensor) -> String {
    String::from_utf8_lossy(&t.meta().name).into_owned()
}

/// `modelfs stats SOURCE [PATH…]`.
pub(crate) fn stats(
    source: &Path,
    paths: &[OsString],
    as_json: bool,
    check_finite: bool,
    opts: &Options,
) -> Result<(), Failure> {
    let model = open_model(source, opts)?;
    let ctx = modelfs_core::fs::layout_ctx(opts, &store_name(source));
    let found = select(walk(&*model).map_err(|e| source_failure(source, e))?, paths)?;
    let tensors: Vec<Arc<dyn Tensor>> = found.iter().map(|f| f.tensor.clone()).collect();
    let store = ctx.cache.offset_store().map(|s| &**s as &dyn Store);
    let outcomes =
        modelfs_stats::compute(&tensors, store, &Patient).map_err(|e| source_failure(source, e))?;
    let text = if as_json {
        stats_json(&found, &outcomes)
    } else {
        stats_table(&found, &outcomes)
    };
    write_out(text.as_bytes())?;
    // A tensor that has stats but could not be read (a checksum that fails, …), or whose
    // metadata is broken, is trouble; one of a type without stats (strings) is not.
    let failed: Vec<String> = found
        .iter()
        .zip(&outcomes)
        .filter(|(f, o)| {
            let meta = f.tensor.meta();
            o.is_err() && (meta.problem.is_some() || modelfs_stats::check(meta).is_ok())
        })
        .map(|(f, o)| {
            format!(
                "{}: {}",
                f.path,
                o.as_ref().err().map_or("", |e| e.as_str())
            )
        })
        .collect();
    if !failed.is_empty() {
        return Err(Failure::new(EXIT_SOURCE, failed.join("; ")));
    }
    let not_finite: Vec<&str> = found
        .iter()
        .zip(&outcomes)
        .filter(|(_, o)| o.as_ref().is_ok_and(|p| p.nan + p.posinf + p.neginf > 0))
        .map(|(f, _)| f.path.as_str())
        .collect();
    if check_finite && !not_finite.is_empty() {
        return Err(Failure::new(
            EXIT_FOUND,
            format!("NaN or Inf in {}", not_finite.join(", ")),
        ));
    }
    Ok(())
}

fn stats_json(found: &[Found], outcomes: &[Outcome]) -> String {
    let items: Vec<String> = found
        .iter()
        .zip(outcomes)
        .map(|(f, o)| {
            let meta = f.tensor.meta();
            match o {
                Ok(p) => modelfs_stats::json(&f.path, &meta.name, &meta.dtype.name(), p),
                Err(why) => serde_json::json!({
                    "name": f.path,
                    "key": key(&*f.tensor),
                    "dtype": meta.dtype.name(),
                    "count": meta.num_elements(),
                    "error": why,
                })
                .to_string(),
            }
        })
        .collect();
    format!("[\n{}\n]\n", items.join(",\n"))
}

fn stats_table(found: &[Found], outcomes: &[Outcome]) -> String {
    let mut rows = vec![[
        "tensor", "dtype", "count", "min", "max", "mean", "std", "nan", "+inf", "-inf", "zeros",
        "l2",
    ]
    .map(String::from)
    .to_vec()];
    let mut errors = String::new();
    for (f, o) in found.iter().zip(outcomes) {
        let meta = f.tensor.meta();
        let mut row = vec![f.path.clone(), meta.dtype.name().into_owned()];
        match o {
            Ok(p) => {
                let finite = p.finite > 0;
                row.extend([
                    p.count.to_string(),
                    short(finite.then_some(p.min)),
                    short(finite.then_some(p.max)),
                    short(finite.then_some(p.mean)),
                    short(p.std()),
                    p.nan.to_string(),
                    p.posinf.to_string(),
                    p.neginf.to_string(),
                    p.zeros.to_string(),
                    short(Some(p.sumsq.sqrt())),
                ]);
            }
            Err(why) => {
                // No stats: a dash a column; why, on a line of its own below the table (in
                // the count column, one message widened every row).
                row.extend(std::iter::repeat_n("-".to_string(), 10));
                errors.push_str(&format!("{}: {why}\n", f.path));
            }
        }
        rows.push(row);
    }
    let mut out = table(&rows, 2);
    if !errors.is_empty() {
        out.push_str("no stats:\n");
        for line in errors.lines() {
            out.push_str(&format!("  {line}\n"));
        }
    }
    out
}

/// One tensor's line of a diff.
struct Line {
    name: String,
    status: &'static str,
    what: serde_json::Value,
    delta: Option<delta::Delta>,
    error: Option<String>,
    /// B's 2-D tensor compared as its transpose (`--transpose`).
    transposed: bool,
}

/// `modelfs diff A B`.
/// How `diff` pairs the tensors of two models (`--map`, `--transpose`).
pub(crate) struct Matching {
    pub(crate) map: Vec<String>,
    pub(crate) transpose: bool,
}

pub(crate) fn diff(
    a: &Path,
    b: &Path,
    as_json: bool,
    how: &Matching,
    opts: &Options,
) -> Result<(), Failure> {
    // Trouble is 2 for `diff`, as for diff(1): 1 means "they differ".
    let keys = KeyMap::parse(&how.map).map_err(|e| Failure::new(EXIT_SOURCE, e))?;
    let open = |s: &Path| -> Result<_, Failure> {
        let model = open_model(s, opts)?;
        let ctx = modelfs_core::fs::layout_ctx(opts, &store_name(s));
        let mut found = walk(&*model).map_err(|e| source_failure(s, e))?;
        // A model's variables, as the views take them: a graph's constants (a `.meta` beside
        // the checkpoint) only when there is nothing else.
        let graph = |f: &Found| f.tensor.meta().role == modelfs_model::Role::Constant;
        if !found.iter().all(graph) {
            found.retain(|f| !graph(f));
        }
        let mut by_name: BTreeMap<String, Arc<dyn Tensor>> = BTreeMap::new();
        // Matched by the mount's path (the name every command uses), the raw key a field.
        for f in found {
            let k = keys.apply(&f.path);
            if let Some(other) = by_name.insert(k.clone(), f.tensor.clone()) {
                return Err(Failure::new(
                    EXIT_SOURCE,
                    format!(
                        "{}: --map gives {} and {} the same name {k}",
                        s.display(),
                        key(&*other),
                        f.path
                    ),
                ));
            }
        }
        let parts = super::rowdiff::table_parts(&*model);
        Ok((by_name, ctx, parts))
    };
    let (ta, ctx_a, parts_a) = open(a)?;
    let (tb, ctx_b, parts_b) = open(b)?;
    let store_a = ctx_a.cache.offset_store().map(|s| &**s as &dyn Store);
    let store_b = ctx_b.cache.offset_store().map(|s| &**s as &dyn Store);
    let mut names: Vec<&String> = ta.keys().chain(tb.keys()).collect();
    names.sort();
    names.dedup();
    let mut lines = Vec::new();
    let mut pairs = Vec::new();
    let mut compared = Vec::new();
    for name in names {
        let describe = |t: &Arc<dyn Tensor>| serde_json::json!({"dtype": t.meta().dtype.name(), "shape": t.meta().shape});
        let line = |status, what| Line {
            name: name.clone(),
            status,
            what,
            delta: None,
            error: None,
            transposed: false,
        };
        match (ta.get(name), tb.get(name)) {
            (Some(x), None) => lines.push(line("only_a", describe(x))),
            (None, Some(y)) => lines.push(line("only_b", describe(y))),
            (Some(x), Some(y)) => {
                let flipped: Vec<u64> = x.meta().shape.iter().rev().copied().collect();
                // Square ones too (a port's square Linear is stored transposed): the line
                // says so, so a "changed" is never read as a change of values alone.
                let transposed =
                    how.transpose && y.meta().shape.len() == 2 && y.meta().shape == flipped;
                let y = match transposed {
                    true => match Transposed::new(y.clone()) {
                        Some(t) => Arc::new(t) as Arc<dyn Tensor>,
                        None => y.clone(),
                    },
                    false => y.clone(),
                };
                let line = |status, what| Line {
                    transposed,
                    ..line(status, what)
                };
                let y = &y;
                let (mx, my) = (x.meta(), y.meta());
                if mx.dtype != my.dtype || mx.shape != my.shape {
                    // Floats of one shape (a bfloat16 copy) are compared by value all the same.
                    if mx.shape == my.shape && delta::comparable(mx.dtype, my.dtype) {
                        compared.push(lines.len());
                        pairs.push((x.clone(), y.clone()));
                    }
                    lines.push(line(
                        "retyped",
                        serde_json::json!({"a": describe(x), "b": describe(y)}),
                    ));
                    continue;
                }
                // Equal checksums of the same bytes: identical without reading a byte.
                let crcs = (known_crc(x, store_a), known_crc(y, store_b));
                if let (Some(p), Some(q)) = crcs {
                    if p == q {
                        lines.push(line("identical", describe(x)));
                        continue;
                    }
                }
                compared.push(lines.len());
                pairs.push((x.clone(), y.clone()));
                lines.push(line("identical", describe(x)));
            }
            (None, None) => {}
        }
    }
    let deltas = delta::compare(&pairs, ctx_a.max_dense.min(ctx_b.max_dense), &Patient)
        .map_err(|e| Failure::new(EXIT_SOURCE, e.to_string()))?;
    for (i, d) in compared.into_iter().zip(deltas) {
        let l = &mut lines[i];
        match d {
            Ok(d) => {
                if l.status != "retyped" {
                    l.status = if d.changed > 0 {
                        "changed"
                    } else {
                        "identical"
                    };
                }
                l.delta = Some(d);
            }
            Err(e) => {
                l.status = "error";
                l.error = Some(e);
            }
        }
    }
    let text = if as_json {
        diff_json(&lines)
    } else {
        diff_table(&lines)
    };
    write_out(text.as_bytes())?;
    // A hash table's keys and values compared by position say little: point at --rows.
    let mut hinted = std::collections::BTreeSet::new();
    for l in lines.iter().filter(|l| l.status != "identical") {
        let raw = |m: &BTreeMap<String, Arc<dyn Tensor>>| m.get(&l.name).map(|t| key(&**t));
        let table = [(raw(&ta), &parts_a), (raw(&tb), &parts_b)]
            .into_iter()
            .find_map(|(k, parts)| parts.get(&k?).cloned());
        if let Some(table) = table {
            if hinted.insert(table.clone()) {
                eprintln!(
                    "modelfs: {table} is a hash table, compared here slot by slot; \
                     `modelfs diff --rows A B {table}` compares it id by id"
                );
            }
        }
    }
    if let Some(l) = lines.iter().find(|l| l.status == "error") {
        return Err(Failure::new(
            EXIT_SOURCE,
            format!("{}: {}", l.name, l.error.as_deref().unwrap_or("")),
        ));
    }
    match lines.iter().all(|l| l.status == "identical") {
        true => Ok(()),
        false => Err(Failure::silent(EXIT_DIFFER)),
    }
}

fn diff_json(lines: &[Line]) -> String {
    let items: Vec<String> = lines
        .iter()
        .map(|l| {
            let mut o = serde_json::Map::new();
            o.insert("name".into(), l.name.clone().into());
            o.insert("status".into(), l.status.into());
            if l.transposed {
                o.insert("transposed".into(), true.into());
            }
            if let serde_json::Value::Object(w) = &l.what {
                o.extend(w.clone());
            }
            if let Some(d) = &l.delta {
                o.insert("count".into(), d.count.into());
                o.insert("changed_count".into(), d.changed.into());
                let num = |x: Option<f64>| {
                    x.filter(|v| v.is_finite())
                        .map_or(serde_json::Value::Null, Into::into)
                };
                o.insert("max_abs_diff".into(), num(d.numeric.then_some(d.max_abs)));
                o.insert("rel_l2".into(), num(d.rel_l2()));
            }
            if let Some(e) = &l.error {
                o.insert("error".into(), e.clone().into());
            }
            serde_json::Value::Object(o).to_string()
        })
        .collect();
    format!("[\n{}\n]\n", items.join(",\n"))
}

fn diff_table(lines: &[Line]) -> String {
    let mut rows = Vec::new();
    let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
    for l in lines {
        *counts.entry(l.status).or_default() += 1;
        let shape = |w: &serde_json::Value| {
            let dims: Vec<u64> = w["shape"]
                .as_array()
                .map(|a| a.iter().filter_map(|d| d.as_u64()).collect())
                .unwrap_or_default();
            format!(
                "{} {}",
                w["dtype"].as_str().unwrap_or("?"),
                shape_compact(&dims)
            )
        };
        let row = match (l.status, &l.delta) {
            ("changed", Some(d)) => vec![
                l.name.clone(),
                match l.transposed {
                    true => "changed (B transposed)".into(),
                    false => "changed".into(),
                },
                format!("{}/{}", d.changed, d.count),
                format!("max|Δ| {}", short(d.numeric.then_some(d.max_abs))),
                format!("rel-L2 {}", short(d.rel_l2())),
            ],
            ("retyped", Some(d)) => vec![
                l.name.clone(),
                format!(
                    "retyped ({} → {})",
                    l.what["a"]["dtype"].as_str().unwrap_or("?"),
                    l.what["b"]["dtype"].as_str().unwrap_or("?")
                ),
                format!("{}/{}", d.changed, d.count),
                format!("max|Δ| {}", short(d.numeric.then_some(d.max_abs))),
                format!("rel-L2 {}", short(d.rel_l2())),
            ],
            ("retyped", _) => vec![
                l.name.clone(),
                "retyped".into(),
                format!("{} → {}", shape(&l.what["a"]), shape(&l.what["b"])),
            ],
            ("only_a", _) => vec![l.name.clone(), "only in A".into(), shape(&l.what)],
            ("only_b", _) => vec![l.name.clone(), "only in B".into(), shape(&l.what)],
            ("error", _) => vec![
                l.name.clone(),
                "error".into(),
                l.error.clone().unwrap_or_default(),
            ],
            _ => continue,
        };
        rows.push(row);
    }
    let mut out = table(&rows, usize::MAX);
    let mut summary: Vec<String> = counts.iter().map(|(s, n)| format!("{n} {s}")).collect();
    let transposed = lines.iter().filter(|l| l.transposed).count();
    if transposed > 0 {
        summary.push(format!("{transposed} of B's compared transposed"));
    }
    out.push_str(&format!(
        "{} tensors: {}\n",
        lines.len(),
        summary.join(", ")
    ));
    out
}
