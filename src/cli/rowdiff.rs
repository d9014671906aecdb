//! `diff --rows A B [TABLE…]`: what changed between two saves of the same embedding tables,
//! id by id — a stream of `id<TAB>added|removed|changed<TAB>max|Δ|` lines to `awk`, and a
//! summary per table (`stats::rowdelta` does the matching in bounded memory).

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::io::Write;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::sync::Arc;

use serde_json::json;

use super::inspect::{mount_path, source_failure, walk};
use super::{open_model, Failure, EXIT_SOURCE};
use modelfs_core::options::Options;
use modelfs_layout::Patient;
use modelfs_model::scan::TableScan;
use modelfs_model::{Model, Tensor};
use modelfs_stats::rowdelta::{diff_rows, Change, RowSummary};

const EXIT_DIFFER: i32 = super::EXIT_NO;

/// The keyed tables of `model` by mount path: listed tensors with ids (dense 2-D ones by row
/// index, Angel matrices, Monolith tables) and tables found by name only (TF hash tables,
/// DeepRec EVs), without the saved tensors such a table is made of.
pub(super) fn tables(model: &dyn Model) -> Result<BTreeMap<String, Arc<dyn Tensor>>, String> {
    let mut out = BTreeMap::new();
    let mut made_of = std::collections::HashSet::new();
    for path in model.unlisted_tables().map_err(|e| e.to_string())? {
        let t = model.tensor(&path).map_err(|e| e.to_string())?;
        if let Some(names) = t.meta().extra.get("hash_table") {
            for k in ["keys", "values"] {
                for n in names[k].as_array().into_iter().flatten() {
                    made_of.insert(n.as_str().unwrap_or_default().to_string());
                }
            }
        }
        out.insert(mount_path(&path), t);
    }
    for f in walk(model).map_err(|e| e.to_string())? {
        let name = String::from_utf8_lossy(&f.tensor.meta().name).into_owned();
        // A graph's constants are never tables (a `.meta` beside the variables).
        let constant = f.tensor.meta().role == modelfs_model::Role::Constant;
        if f.tensor.key_kind().is_some() && !made_of.contains(&name) && !constant {
            out.insert(f.path, f.tensor);
        }
    }
    Ok(out)
}

/// The hash tables whose keys and values are saved as listed tensors: each part's raw key →
/// the table's path in the mount (for `diff`'s hint at `--rows`). Metadata only.
pub(super) fn table_parts(model: &dyn Model) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for path in model.unlisted_tables().unwrap_or_default() {
        let Ok(t) = model.tensor(&path) else { continue };
        if let Some(names) = t.meta().extra.get("hash_table") {
            for k in ["keys", "values"] {
                for n in names[k].as_array().into_iter().flatten() {
                    out.insert(
                        n.as_str().unwrap_or_default().to_string(),
                        mount_path(&path),
                    );
                }
            }
        }
    }
    out
}

/// Raises the soft limit on open files to the hard one: the row matching keeps up to 512
/// spill files open beside the models' own (a sharded table has hundreds), and the soft
/// limit is often 1024.
pub(super) fn raise_open_files() {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit/setrlimit with a valid pointer to a local struct.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) == 0 && lim.rlim_cur < lim.rlim_max {
            lim.rlim_cur = lim.rlim_max;
            let _ = libc::setrlimit(libc::RLIMIT_NOFILE, &lim);
        }
    }
}

/// `modelfs diff --rows A B [TABLE…]`.
pub(crate) fn diff_rows_cmd(
    a: &Path,
    b: &Path,
    names: &[OsString],
    as_json: bool,
    opts: &Options,
) -> Result<(), Failure> {
    raise_open_files();
    let open = |s: &Path| -> Result<_, Failure> {
        let model = open_model(s, opts)?;
        let t = tables(&*model).map_err(|e| source_failure(s, e))?;
        Ok((model, t))
    };
    let (_ma, ta) = open(a)?;
    let (_mb, tb) = open(b)?;
    let wanted: Vec<String> = match names.is_empty() {
        true => {
            let mut all: Vec<String> = ta.keys().chain(tb.keys()).cloned().collect();
            all.sort();
            all.dedup();
            all
        }
        false => names
            .iter()
            .map(|n| {
                String::from_utf8_lossy(n.as_bytes())
                    .trim_matches('/')
                    .to_string()
            })
            .collect(),
    };
    for w in &wanted {
        if !ta.contains_key(w) && !tb.contains_key(w) {
            return Err(Failure::new(
                super::EXIT_UNKNOWN_NAME,
                format!("{w}: no keyed table of that name in either model"),
            ));
        }
    }
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::with_capacity(1 << 16, stdout.lock());
    let mut differ = false;
    let mut trouble = Vec::new();
    for name in &wanted {
        let (x, y) = match (ta.get(name), tb.get(name)) {
            (Some(x), Some(y)) => (x, y),
            (x, _) => {
                differ = true;
                let side = if x.is_some() { "only_a" } else { "only_b" };
                summary_line(&mut out, name, as_json, Err(side)).map_err(output)?;
                continue;
            }
        };
        let scans = TableScan::new(x.clone()).and_then(|p| Ok((p, TableScan::new(y.clone())?)));
        let (sa, sb) = match scans {
            // Read once: `diff_rows` confirms the checksums from what it reads.
            Ok((Some(sa), Some(sb))) => (sa.deferring(), sb.deferring()),
            Ok(_) => continue,
            Err(e) => {
                trouble.push(format!("{name}: {e}"));
                continue;
            }
        };
        let mut emit = |id: i64, c: Change| row_line(&mut out, name, as_json, id, c);
        match diff_rows(&sa, &sb, &Patient, &mut emit) {
            Ok(s) => {
                differ |= s.added + s.removed + s.changed > 0;
                summary_line(&mut out, name, as_json, Ok(&s)).map_err(output)?;
            }
            Err(modelfs_stats::rowdelta::RowDiffError::Emit(e)) => return Err(output(e)),
            Err(
                e @ (modelfs_stats::rowdelta::RowDiffError::Widths { .. }
                | modelfs_stats::rowdelta::RowDiffError::Dtypes { .. }),
            ) => {
                differ = true;
                summary_line(&mut out, name, as_json, Err("retyped")).map_err(output)?;
                log::debug!("{name}: {e}");
            }
            Err(e) => trouble.push(format!("{name}: {e}")),
        }
    }
    out.flush().map_err(output)?;
    if !trouble.is_empty() {
        return Err(Failure::new(EXIT_SOURCE, trouble.join("; ")));
    }
    match differ {
        true => Err(Failure::silent(EXIT_DIFFER)),
        false => Ok(()),
    }
}

/// A write to stdout failed: a closed pipe (`| head`) ends quietly, anything else is trouble.
fn output(e: std::io::Error) -> Failure {
    match e.kind() {
        std::io::ErrorKind::BrokenPipe => Failure::silent(super::EXIT_OK),
        _ => Failure::new(EXIT_SOURCE, format!("stdout: {e}")),
    }
}

fn number(x: f64) -> serde_json::Value {
    match x.is_finite() {
        true => x.into(),
        false => serde_json::Value::Null,
    }
}

/// `id<TAB>status<TAB>max|Δ|` (`-` for an added or removed row), or its JSON object.
fn row_line(
    out: &mut impl Write,
    table: &str,
    as_json: bool,
    id: i64,
    c: Change,
) -> std::io::Result<()> {
    let (status, max) = match c {
        Change::Added => ("added", None),
        Change::Removed => ("removed", None),
        Change::Changed(m) => ("changed", Some(m)),
    };
    if as_json {
        let o = json!({"table": table, "id": id, "status": status,
            "max_abs_diff": max.map(number)});
        return writeln!(out, "{o}");
    }
    match max {
        Some(m) => {
            let mut b = ryu::Buffer::new();
            writeln!(out, "{id}\t{status}\t{}", b.format(m))
        }
        None => writeln!(out, "{id}\t{status}\t-"),
    }
}

/// The line after a table's rows: `# TABLE<TAB>rows a/b<TAB>added N<TAB>…` (or why its rows
/// were not compared: `only_a`, `only_b`, `retyped`), or its JSON object.
fn summary_line(
    out: &mut impl Write,
    table: &str,
    as_json: bool,
    s: Result<&RowSummary, &str>,
) -> std::io::Result<()> {
    let s = match s {
        Ok(s) => s,
        Err(status) => {
            return match as_json {
                true => writeln!(out, "{}", json!({"table": table, "status": status})),
                false => writeln!(out, "# {table}\t{status}"),
            }
        }
    };
    let status = match s.added + s.removed + s.changed {
        0 => "identical",
        _ => "changed",
    };
    let rel = s.rel_l2();
    if as_json {
        let o = json!({"table": table, "status": status, "rows_a": s.rows_a, "rows_b": s.rows_b,
            "added": s.added, "removed": s.removed, "changed": s.changed,
            "unchanged": s.unchanged, "sentinel_buckets": s.repeated,
            "max_abs_diff": number(s.delta.max_abs), "rel_l2": rel.map(number)});
        return writeln!(out, "{o}");
    }
    let rel = rel.map_or("-".to_string(), |r| {
        ryu::Buffer::new().format(r).to_string()
    });
    writeln!(
        out,
        "# {table}\t{status}\trows {}/{}\tadded {}\tremoved {}\tchanged {}\tunchanged {}\tmax|Δ| {}\trel-L2 {rel}",
        s.rows_a,
        s.rows_b,
        s.added,
        s.removed,
        s.changed,
        s.unchanged,
        ryu::Buffer::new().format(s.delta.max_abs),
    )
}
