//! The layers of `lib.rs` hold: every `crate::X` a module names is below it (or itself), and
//! the two readers never name each other. Reads the source text, tests included.

use std::collections::BTreeMap;
use std::path::Path;

/// Rank of each top-level module: a module may use only modules of a lower rank.
const RANKS: &[(&str, u32)] = &[
    ("source", 0),
    ("store", 1),
    ("model", 2),
    ("testing", 3),
    ("tf", 4),
    ("angel", 4),
    ("monolith", 4),
    ("detect", 5),
    ("layout", 6),
    ("options", 7),
    ("fs", 8),
    ("cli", 9),
];

fn rank(module: &str) -> Option<u32> {
    RANKS.iter().find(|(m, _)| *m == module).map(|&(_, r)| r)
}

fn rust_files(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

#[test]
fn no_module_names_a_higher_one() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let mut edges: BTreeMap<(String, String), String> = BTreeMap::new();
    for f in &files {
        let rel = f.strip_prefix(&src).unwrap().to_string_lossy().into_owned();
        let top = rel.split(['/', '.']).next().unwrap().to_string();
        if matches!(top.as_str(), "lib" | "main" | "layers_tests") {
            continue;
        }
        let text = std::fs::read_to_string(f).unwrap();
        for (i, _) in text.match_indices("crate::") {
            let used: String = text[i + 7..]
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            if used != top && rank(&used).is_some() {
                edges
                    .entry((top.clone(), used))
                    .or_insert_with(|| rel.clone());
            }
        }
    }
    assert!(edges.len() > 10, "too few edges found: {edges:?}");
    let mut bad = Vec::new();
    for ((from, to), file) in &edges {
        let (Some(a), Some(b)) = (rank(from), rank(to)) else {
            bad.push(format!("{file}: unknown module {from} or {to}"));
            continue;
        };
        if b >= a {
            bad.push(format!("{file}: {from} uses {to}"));
        }
    }
    assert!(
        bad.is_empty(),
        "upward or sideways edges:\n{}",
        bad.join("\n")
    );
}
