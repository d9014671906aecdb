//! `check SOURCE`: is this checkpoint sane? Two questions `verify` (checksums, structure)
//! and `stats --check-finite` (NaN, Inf) do not answer (DeepRec-AI/DeepRec#1023):
//! - does every optimizer slot of a keyed table hold the table's ids, no more, no fewer
//!   (an async-PS save can write a table and its slots at different moments);
//! - is every floating-point value finite and within `--max-abs` (a slot near 1e38 is finite
//!   and still poison).
//!
//! A table's slots are the keyed tables under its path (`emb/Adagrad` of `emb`, TF's
//! `emb/Adam` and `emb/.OPTIMIZER_SLOT/…`) whose rows are as wide as its own.

use std::ffi::OsString;
use std::path::Path;
use std::sync::Arc;

use serde_json::json;

use super::compare::at_or_below;
use super::inspect::{source_failure, walk, write_out, Verdict};
use super::rowdiff::tables;
use super::{open_model, store_name, Failure, EXIT_SOURCE};
use modelfs_core::options::Options;
use modelfs_io::store::Store;
use modelfs_layout::Patient;
use modelfs_model::scan::TableScan;
use modelfs_model::{DType, KeyKind, Tensor};
use modelfs_stats::rowdelta::key_sets;

/// What `check` found wrong, one item per problem.
struct Problem {
    what: &'static str,
    name: String,
    detail: serde_json::Value,
    text: String,
}

fn is_float(d: DType) -> bool {
    matches!(
        d,
        DType::F32 | DType::F64 | DType::F16 | DType::BF16 | DType::Float8(_)
    )
}

/// The slots of each table: `(table, slot)` paths. `names` are sorted, so the paths under
/// a table are one run of them, found by a search (a model has thousands of 2-D tensors).
fn slot_pairs(names: &[&String], width: impl Fn(&str) -> u64) -> Vec<(String, String)> {
    debug_assert!(names.windows(2).all(|w| w[0] < w[1]));
    let mut out = Vec::new();
    for t in names {
        let under = format!("{t}/");
        let first = names.partition_point(|s| s.as_str() < under.as_str());
        for s in names[first..].iter().take_while(|s| s.starts_with(&under)) {
            if width(s) == width(t) {
                out.push(((*t).clone(), (*s).clone()));
            }
        }
    }
    out
}

/// `modelfs check [--max-abs X] [--json] SOURCE [PATH…]`.
pub(crate) fn check(
    source: &Path,
    paths: &[OsString],
    max_abs: f64,
    as_json: bool,
    opts: &Options,
) -> Result<(), Failure> {
    super::rowdiff::raise_open_files();
    let model = open_model(source, opts)?;
    let ctx = modelfs_core::fs::layout_ctx(opts, &store_name(source));
    let wanted = super::compare::mount_paths(paths);
    let within = |p: &str| wanted.is_empty() || wanted.iter().any(|w| at_or_below(p, w));
    let mut problems = Vec::new();
    let mut trouble = Vec::new();

    // Key sets of tables and their slots.
    let all = tables(&*model).map_err(|e| source_failure(source, e))?;
    let names: Vec<&String> = all.keys().filter(|n| within(n)).collect();
    let width = |n: &str| {
        let m = all[n].meta();
        m.shape.get(1..).unwrap_or(&[]).iter().product::<u64>()
    };
    let pairs = slot_pairs(&names, width);
    let mut slots_checked = 0;
    for (t, s) in &pairs {
        let (tt, ts) = (&all[t], &all[s]);
        slots_checked += 1;
        // Dense tables: ids are row numbers, the same when the row counts are.
        if tt.key_kind() == Some(KeyKind::RowIndex) && ts.key_kind() == Some(KeyKind::RowIndex) {
            let (a, b) = (tt.meta().shape[0], ts.meta().shape[0]);
            if a != b {
                problems.push(key_problem(
                    t,
                    s,
                    a,
                    b,
                    a.saturating_sub(b),
                    b.saturating_sub(a),
                    &[],
                    &[],
                ));
            }
            continue;
        }
        let scans = TableScan::new(tt.clone()).and_then(|x| Ok((x, TableScan::new(ts.clone())?)));
        let (Some(x), Some(y)) = (match scans {
            Ok(p) => p,
            Err(e) => {
                trouble.push((s.clone(), format!("{s}: {e}")));
                continue;
            }
        }) else {
            continue;
        };
        // Read once: `key_sets` confirms the checksums from what it reads.
        match key_sets(&x.deferring(), &y.deferring(), &Patient) {
            Ok(k) if k.only_table + k.only_slot > 0 => problems.push(key_problem(
                t,
                s,
                k.table,
                k.slot,
                k.only_table,
                k.only_slot,
                &k.sample_table,
                &k.sample_slot,
            )),
            Ok(_) => {}
            Err(e) => trouble.push((s.clone(), format!("{t} and {s}: {e}"))),
        }
    }

    // Values: finite and within the bound, from the stats (on all cores, remembered).
    let walked: Vec<_> = walk(&*model)
        .map_err(|e| source_failure(source, e))?
        .into_iter()
        .filter(|f| within(&f.path))
        .collect();
    // A path of nothing is a typo, not a sane model.
    for w in &wanted {
        let named =
            walked.iter().any(|f| at_or_below(&f.path, w)) || all.keys().any(|n| at_or_below(n, w));
        if !named {
            return Err(Failure::new(
                super::EXIT_UNKNOWN_NAME,
                format!("{w}: no such tensor or directory (see `modelfs list`)"),
            ));
        }
    }
    // A tensor that cannot be read is not sane: a problem, named like the others. One whose
    // dtype is not decoded here is a note (`model::verdict`).
    let mut verdict = Verdict::default();
    for f in &walked {
        if let Some(why) = &f.tensor.meta().problem {
            trouble.push((f.path.clone(), format!("{}: {why}", f.path)));
        } else if let Some(n) = &f.tensor.meta().note {
            verdict.notes.push((Some(f.path.clone()), n.clone()));
        }
    }
    // The source's own findings (a dangerous import, an unrun class) when all of it is
    // checked: the same rule as `verify`'s.
    if wanted.is_empty() {
        let summary = model.summary().map_err(|e| source_failure(source, e))?;
        verdict.add_summary(&summary, &walked);
    }
    for (_, why) in std::mem::take(&mut verdict.problems) {
        problems.push(Problem {
            what: "source",
            name: String::new(),
            detail: json!(why),
            text: why,
        });
    }
    let found: Vec<_> = walked
        .into_iter()
        .filter(|f| {
            let m = f.tensor.meta();
            is_float(m.dtype) && m.problem.is_none() && m.note.is_none()
        })
        .collect();
    let tensors: Vec<Arc<dyn Tensor>> = found.iter().map(|f| f.tensor.clone()).collect();
    let store = ctx.cache.offset_store().map(|s| &**s as &dyn Store);
    let outcomes =
        modelfs_stats::compute(&tensors, store, &Patient).map_err(|e| source_failure(source, e))?;
    for (f, o) in found.iter().zip(&outcomes) {
        let p = match o {
            Ok(p) => p,
            Err(e) => {
                trouble.push((f.path.clone(), format!("{}: {e}", f.path)));
                continue;
            }
        };
        let nonfinite = p.nan + p.posinf + p.neginf;
        if nonfinite > 0 {
            problems.push(Problem {
                what: "not_finite",
                name: f.path.clone(),
                detail: json!({"nan": p.nan, "posinf": p.posinf, "neginf": p.neginf}),
                text: format!(
                    "{}: {} NaN, {} +Inf, {} -Inf",
                    f.path, p.nan, p.posinf, p.neginf
                ),
            });
        }
        let largest = match p.finite {
            0 => 0.0,
            _ => p.min.abs().max(p.max.abs()),
        };
        if largest > max_abs {
            problems.push(Problem {
                what: "too_large",
                name: f.path.clone(),
                detail: json!({"max_abs": largest, "bound": max_abs, "min": p.min, "max": p.max}),
                text: format!(
                    "{}: |x| up to {} (min {}, max {}), over --max-abs {}",
                    f.path,
                    ryu::Buffer::new().format(largest),
                    ryu::Buffer::new().format(p.min),
                    ryu::Buffer::new().format(p.max),
                    ryu::Buffer::new().format(max_abs)
                ),
            });
        }
    }

    // What could not be read is a problem too, so the count, the lines and the exit status
    // agree.
    for (name, t) in &trouble {
        problems.push(Problem {
            what: "unreadable",
            name: name.clone(),
            detail: json!(t),
            text: format!("{t} (not read)"),
        });
    }
    let text = match as_json {
        true => {
            let items: Vec<_> = problems
                .iter()
                .map(|p| {
                    let name = (!p.name.is_empty()).then_some(&p.name);
                    json!({"problem": p.what, "name": name, "detail": p.detail})
                })
                .collect();
            let o = json!({
                "tensors_checked": found.len(),
                "tables": names.len(),
                "slots_checked": slots_checked,
                "max_abs": max_abs,
                "problems": items,
                "notes": Verdict::json_items(&verdict.notes),
                "errors": trouble.iter().map(|(_, t)| t).collect::<Vec<_>>(),
            });
            format!("{}\n", serde_json::to_string_pretty(&o).unwrap_or_default())
        }
        false => {
            let mut s = String::new();
            for p in &problems {
                s.push_str(&p.text);
                s.push('\n');
            }
            for (name, n) in &verdict.notes {
                match name {
                    Some(name) => s.push_str(&format!("{name}: {n} (a note, not a problem)\n")),
                    None => s.push_str(&format!("{n} (a note, not a problem)\n")),
                }
            }
            s.push_str(&format!(
                "checked {} floating-point tensors (finite, |x| <= {}), {} tables, {} slots: {} problem{}\n",
                found.len(),
                ryu::Buffer::new().format(max_abs),
                names.len(),
                slots_checked,
                problems.len(),
                if problems.len() == 1 { "" } else { "s" }
            ));
            s
        }
    };
    write_out(text.as_bytes())?;
    match problems.is_empty() {
        true => Ok(()),
        false => Err(Failure::new(EXIT_SOURCE, summary_line(&problems))),
    }
}

/// `2 problems in a, b`: each tensor named once (two problems of one tensor name it once),
/// the source's own problems as "the source".
fn summary_line(problems: &[Problem]) -> String {
    let mut named: Vec<&str> = Vec::new();
    for p in problems {
        let n = match p.name.as_str() {
            "" => "the source",
            n => n,
        };
        if !named.contains(&n) {
            named.push(n);
        }
    }
    format!(
        "{} problem{} in {}",
        problems.len(),
        if problems.len() == 1 { "" } else { "s" },
        named.join(", ")
    )
}

#[allow(clippy::too_many_arguments)]
fn key_problem(
    table: &str,
    slot: &str,
    n_table: u64,
    n_slot: u64,
    only_table: u64,
    only_slot: u64,
    sample_table: &[i64],
    sample_slot: &[i64],
) -> Problem {
    let ids = |v: &[i64]| v.iter().map(i64::to_string).collect::<Vec<_>>().join(" ");
    Problem {
        what: "slot_keys",
        name: slot.to_string(),
        detail: json!({"table": table, "slot": slot, "table_ids": n_table, "slot_ids": n_slot,
            "only_in_table": only_table, "only_in_slot": only_slot,
            "only_in_table_sample": sample_table, "only_in_slot_sample": sample_slot}),
        text: format!(
            "{slot}: ids differ from its table {table}: {n_slot} vs {n_table}; {only_table} only in the table [{}], {only_slot} only in the slot [{}]",
            ids(sample_table),
            ids(sample_slot)
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn problem(name: &str) -> Problem {
        Problem {
            what: "not_finite",
            name: name.into(),
            detail: json!(null),
            text: String::new(),
        }
    }

    /// Two problems of one tensor name it once (the newcomer's "2 problems in layer.weight,
    /// layer.weight").
    #[test]
    fn each_tensor_is_named_once() {
        let p = [
            problem("layer.weight"),
            problem("layer.weight"),
            problem("b"),
        ];
        assert_eq!(summary_line(&p), "3 problems in layer.weight, b");
        assert_eq!(summary_line(&[problem("")]), "1 problem in the source");
    }
}
