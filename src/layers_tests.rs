//! The layers of `lib.rs` hold: every `crate::X` a module names is below it (or itself), and
//! the two readers never name each other. Reads the source text, tests included.

use std::collections::BTreeMap;
use std::path::Path;

/// Rank of each top-level module: a module may use only modules of a lower rank.
const RANKS: &[(&str, u32)] = &[
    ("source", 0),
    // The LevelDB table reader reads through `source`.
    ("codec", 1),
    ("store", 2),
    ("model", 3),
    ("testing", 4),
    ("tf", 5),
    ("angel", 5),
    ("monolith", 5),
    ("safetensors", 5),
    ("numpy", 5),
    ("torch", 5),
    ("gguf", 5),
    ("detect", 6),
    ("layout", 7),
    ("views", 8),
    ("stats", 8),
    ("options", 8),
    ("fs", 9),
    ("cli", 10),
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

/// The module path of a source file (`tf/bundle/mod.rs` → `tf::bundle`).
fn module_of(rel: &str) -> Vec<String> {
    let mut parts: Vec<String> = rel
        .trim_end_matches(".rs")
        .split('/')
        .map(String::from)
        .collect();
    if parts.last().is_some_and(|p| p == "mod") {
        parts.pop();
    }
    parts
}

/// The paths a file's text names (`crate::a::b`, `super::x`, `self::y`, and the items of a
/// `super::{a, b::c}` group), resolved against `module` (the file's own module).
fn named_paths(text: &str, module: &[String]) -> Vec<Vec<String>> {
    let ident = |s: &str| -> String {
        s.chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect()
    };
    let mut out = Vec::new();
    for (root, base) in [
        ("crate::", Vec::new()),
        ("super::", module[..module.len().saturating_sub(1)].to_vec()),
        ("self::", module.to_vec()),
    ] {
        for (i, _) in text.match_indices(root) {
            // `super::super::x`, and not the tail of another path (`a::self::`).
            if i > 0 && text[..i].ends_with("::") {
                continue;
            }
            let mut base = base.clone();
            let mut rest = &text[i + root.len()..];
            while let Some(r) = rest.strip_prefix("super::") {
                base.pop();
                rest = r;
            }
            let mut heads: Vec<&str> = Vec::new();
            match rest.strip_prefix('{') {
                Some(group) => {
                    let end = group.find('}').unwrap_or(group.len());
                    heads.extend(group[..end].split(',').map(str::trim));
                }
                None => heads.push(rest),
            }
            for h in heads {
                let mut p = base.clone();
                let mut seg = h;
                loop {
                    let name = ident(seg);
                    if name.is_empty() {
                        break;
                    }
                    p.push(name.clone());
                    match seg[name.len()..].strip_prefix("::") {
                        Some(next) => seg = next,
                        None => break,
                    }
                }
                out.push(p);
            }
        }
    }
    out
}

/// No two files name each other, directly or round a longer loop (a file and the module it
/// belongs to, or its own sub-modules, excepted): each such cycle is tied by one name that
/// belongs in a file of its own (issue 39).
#[test]
fn no_file_cycles() {
    use std::collections::{BTreeSet, HashMap};
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let mut modules: HashMap<Vec<String>, String> = HashMap::new();
    let mut texts = Vec::new();
    for f in &files {
        let rel = f.strip_prefix(&src).unwrap().to_string_lossy().into_owned();
        if rel.contains("test") || matches!(rel.as_str(), "lib.rs" | "main.rs") {
            continue;
        }
        let mut text = std::fs::read_to_string(f).unwrap();
        // A file's own test module names the file as `super`.
        if let Some(i) = text.find("\n#[cfg(test)]\nmod ") {
            text.truncate(i);
        }
        modules.insert(module_of(&rel), rel.clone());
        texts.push((rel, text));
    }
    let related = |a: &[String], b: &[String]| a.starts_with(b) || b.starts_with(a);
    let mut edges: HashMap<String, BTreeSet<String>> = HashMap::new();
    for (rel, text) in &texts {
        let me = module_of(rel);
        for p in named_paths(text, &me) {
            let Some(target) = (1..=p.len())
                .rev()
                .find_map(|n| modules.get_key_value(&p[..n]))
            else {
                continue;
            };
            if !related(&me, target.0) {
                edges
                    .entry(rel.clone())
                    .or_default()
                    .insert(target.1.clone());
            }
        }
    }
    assert!(
        edges.len() > 50,
        "too few file edges found: {}",
        edges.len()
    );
    // Depth-first search for a back edge.
    fn visit(
        f: &str,
        edges: &HashMap<String, BTreeSet<String>>,
        state: &mut HashMap<String, u8>,
        stack: &mut Vec<String>,
        found: &mut Vec<String>,
    ) {
        state.insert(f.to_string(), 1);
        stack.push(f.to_string());
        for g in edges.get(f).into_iter().flatten() {
            match state.get(g) {
                Some(1) => {
                    let at = stack.iter().position(|s| s == g).unwrap_or(0);
                    found.push(format!("{} -> {g}", stack[at..].join(" -> ")));
                }
                Some(_) => {}
                None => visit(g, edges, state, stack, found),
            }
        }
        stack.pop();
        state.insert(f.to_string(), 2);
    }
    let mut state = HashMap::new();
    let mut found = Vec::new();
    let mut roots: Vec<&String> = edges.keys().collect();
    roots.sort();
    for f in roots {
        if !state.contains_key(f) {
            visit(f, &edges, &mut state, &mut Vec::new(), &mut found);
        }
    }
    assert!(found.is_empty(), "file cycles:\n{}", found.join("\n"));
}

/// README's map of the code names only paths that exist, and every top-level module.
#[test]
fn the_readme_code_map_names_the_tree_as_it_is() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let readme = std::fs::read_to_string(root.join("README.md")).unwrap();
    let map = readme
        .split("## Layout of the code")
        .nth(1)
        .expect("README has a code map");
    let mut named = Vec::new();
    for (i, _) in map.match_indices("`src/") {
        let path: String = map[i + 1..].chars().take_while(|&c| c != '`').collect();
        assert!(
            root.join(&path).exists(),
            "README names {path}, which is gone"
        );
        named.push(path);
    }
    for (module, _) in RANKS {
        let listed = named
            .iter()
            .any(|p| p == &format!("src/{module}/") || p == &format!("src/{module}.rs"));
        assert!(listed, "README's code map does not list src/{module}");
    }
}
