//! The layers hold inside each crate of the workspace: every `crate::X` a module names is below
//! it (or itself). Between crates the compiler keeps them (a crate names only its
//! dependencies), and `crates_depend_only_on_lower_ones` keeps the dependencies themselves in
//! order; inside one crate this test does, reading the source text, tests included. One table
//! of ranks serves both: a crate that is one layer is ranked by its folder's name, and the
//! modules of the core crate (`crates/core`) and of this one by their own names.

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
    // Each reader (`crates/tf`, `crates/angel`, …) ranks `READER`: found by its folder.
    ("detect", 6),
    ("layout", 7),
    ("views", 8),
    ("stats", 8),
    ("options", 8),
    ("fs", 9),
    // SOURCE opened as every face opens it, and its tensors walked (`crates/core`).
    ("open", 10),
    ("walk", 10),
    // The two faces over the core: programs (the Python package) and the commands. Neither
    // names the other (`the_two_faces_stand_apart`); `cli` is this crate, `api` is the core's.
    ("api", 11),
    ("cli", 11),
];

/// The folders of `crates/` holding several layers (named by their modules, as `src` is).
const MANY_LAYERS: &[&str] = &["io", "core"];

/// The rank of every reader: a crate of `crates/` other than bytes, the model and the
/// renderers. A new reader's crate needs no line in this file.
const READER: u32 = 5;

/// The source folder of each crate (from the workspace root) and, for a crate that is one
/// layer, that layer's name (its files are modules of it): every crate of `crates/` but
/// `io` (which holds `source`, `codec` and `store`) is one layer named by its folder.
fn crates() -> Vec<(String, Option<String>)> {
    let mut out = vec![("src".to_string(), None)];
    for e in std::fs::read_dir(workspace().join("crates"))
        .unwrap()
        .flatten()
    {
        let name = e.file_name().to_string_lossy().into_owned();
        let whole = (!MANY_LAYERS.contains(&name.as_str())).then(|| name.clone());
        out.push((format!("crates/{name}/src"), whole));
    }
    out.sort();
    out
}

fn workspace() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The layer a file of a crate belongs to (`tf/bundle/mod.rs` of `src` → `tf`).
fn layer_of(whole: Option<&str>, rel: &str) -> String {
    match whole {
        Some(_) if rel == "testing.rs" => "testing".to_string(),
        Some(name) => name.to_string(),
        None => rel.split(['/', '.']).next().unwrap().to_string(),
    }
}

fn rank(module: &str) -> Option<u32> {
    let reader = !matches!(module, "io" | "model" | "layout" | "core")
        && RANKS.iter().all(|(m, _)| *m != module)
        && workspace()
            .join("crates")
            .join(module)
            .join("Cargo.toml")
            .exists();
    RANKS
        .iter()
        .find(|(m, _)| *m == module)
        .map(|&(_, r)| r)
        .or(reader.then_some(READER))
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

/// Whether a one-layer crate's root defines a function `name` (`crate::open(…)` of a reader).
fn own_fn(src: &Path, name: &str) -> bool {
    let lib = std::fs::read_to_string(src.join("lib.rs")).unwrap_or_default();
    lib.contains(&format!("fn {name}("))
}

#[test]
fn no_module_names_a_higher_one() {
    let mut edges: BTreeMap<(String, String), String> = BTreeMap::new();
    for (dir, whole) in crates() {
        let (dir, whole) = (dir.as_str(), whole.as_deref());
        let src = workspace().join(dir);
        let mut files = Vec::new();
        rust_files(&src, &mut files);
        assert!(!files.is_empty(), "no sources in {dir}");
        for f in &files {
            let rel = f.strip_prefix(&src).unwrap().to_string_lossy().into_owned();
            let top = layer_of(whole, &rel);
            if matches!(top.as_str(), "lib" | "main" | "layers_tests") {
                continue;
            }
            let text = std::fs::read_to_string(f).unwrap();
            for (i, _) in text.match_indices("crate::") {
                let used: String = text[i + 7..]
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                    .collect();
                // In a one-layer crate `crate::x` may be its own module `x` (`tf::detect`).
                let own = whole.is_some()
                    && (src.join(format!("{used}.rs")).exists()
                        || src.join(&used).is_dir()
                        || own_fn(&src, &used));
                if used != top && !own && rank(&used).is_some() {
                    edges
                        .entry((top.clone(), used))
                        .or_insert_with(|| format!("{dir}/{rel}"));
                }
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

/// The module path of a source file (`tf/bundle/mod.rs` → `tf::bundle`; a crate's `lib.rs`
/// is its root).
fn module_of(rel: &str) -> Vec<String> {
    let mut parts: Vec<String> = rel
        .trim_end_matches(".rs")
        .split('/')
        .map(String::from)
        .collect();
    if parts.last().is_some_and(|p| p == "mod") || parts == ["lib"] {
        parts.pop();
    }
    parts
}

/// The paths a file's text names (`crate::a::b`, `super::x`, `self::y`, and the items of a
/// `super::{a, b::c}` group), resolved against `module` (the file's own module) and `root`
/// (the module `crate` is).
fn named_paths(text: &str, module: &[String], root: &[String]) -> Vec<Vec<String>> {
    let ident = |s: &str| -> String {
        s.chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect()
    };
    let mut out = Vec::new();
    for (root, base) in [
        ("crate::", root.to_vec()),
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
    let mut edges = 0;
    for (dir, whole) in crates() {
        edges += no_file_cycles_in(&dir, whole.as_deref());
    }
    assert!(edges > 50, "too few file edges found: {edges}");
}

/// The check of `no_file_cycles` in one crate; the number of edges between files it found.
fn no_file_cycles_in(dir: &str, whole: Option<&str>) -> usize {
    use std::collections::{BTreeSet, HashMap};
    // A one-layer crate's files are modules of that layer: `crate::x` there is `layer::x`.
    let prefix: Vec<String> = whole.map(String::from).into_iter().collect();
    let src = workspace().join(dir);
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let mut modules: HashMap<Vec<String>, String> = HashMap::new();
    let mut texts = Vec::new();
    for f in &files {
        let rel = f.strip_prefix(&src).unwrap().to_string_lossy().into_owned();
        if rel.contains("test") || (whole.is_none() && matches!(rel.as_str(), "lib.rs" | "main.rs"))
        {
            continue;
        }
        let mut text = std::fs::read_to_string(f).unwrap();
        // A file's own test module names the file as `super`.
        if let Some(i) = text.find("\n#[cfg(test)]\nmod ") {
            text.truncate(i);
        }
        let module = [prefix.clone(), module_of(&rel)].concat();
        modules.insert(module, rel.clone());
        texts.push((rel, text));
    }
    let related = |a: &[String], b: &[String]| a.starts_with(b) || b.starts_with(a);
    let mut edges: HashMap<String, BTreeSet<String>> = HashMap::new();
    for (rel, text) in &texts {
        let me = [prefix.clone(), module_of(rel)].concat();
        for p in named_paths(text, &me, &prefix) {
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
    assert!(
        found.is_empty(),
        "file cycles in {dir}:\n{}",
        found.join("\n")
    );
    edges.len()
}

/// CONTRIBUTING's map of the code names only paths that exist, every crate and every layer.
#[test]
fn the_code_map_names_the_tree_as_it_is() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(root.join("CONTRIBUTING.md")).unwrap();
    let map = text
        .split("## Code map")
        .nth(1)
        .expect("CONTRIBUTING.md has a code map");
    let mut named = Vec::new();
    for start in ["`src/", "`crates/"] {
        for (i, _) in map.match_indices(start) {
            let path: String = map[i + 1..].chars().take_while(|&c| c != '`').collect();
            assert!(
                root.join(&path).exists(),
                "CONTRIBUTING.md names {path}, which is gone"
            );
            named.push(path);
        }
    }
    let crates = crates();
    for (dir, _) in &crates {
        let folder = dir.trim_end_matches("src");
        if !folder.is_empty() {
            assert!(
                named.iter().any(|p| p == folder),
                "the code map does not list the crate {folder}"
            );
        }
    }
    for (module, _) in RANKS {
        let listed = crates.iter().any(|(dir, whole)| {
            whole.as_deref() == Some(*module)
                || named
                    .iter()
                    .any(|p| p == &format!("{dir}/{module}/") || p == &format!("{dir}/{module}.rs"))
        });
        assert!(listed, "the code map does not list {module}");
    }
}

/// Every crate opens with a narrative doc and an example of its entry point (which
/// `cargo test --doc` runs).
#[test]
fn every_crate_opens_with_a_narrative_and_an_example() {
    for (dir, _) in crates() {
        let lib = std::fs::read_to_string(workspace().join(&dir).join("lib.rs")).unwrap();
        let doc: Vec<&str> = lib.lines().take_while(|l| l.starts_with("//!")).collect();
        assert!(doc.len() >= 5, "{dir}/lib.rs opens with no narrative");
        assert!(
            // The commands' crate shows its entry point compiled, not run (it is the process).
            doc.iter()
                .any(|l| matches!(l.trim(), "//! ```" | "//! ```no_run")),
            "{dir}/lib.rs has no example"
        );
    }
}

/// The rank of each crate of `crates/` among the crates (`None`: a reader). A crate depends
/// only on crates of a lower rank: bytes (`io`) on none of ours, the model tree on bytes, each
/// reader and the renderers on those two alone; `detect` (which reader a source is for) on the
/// readers; the whole-model views and the statistics on the renderers (the `.tf/` view writes
/// with `tf`'s writer); the core under both faces on all of them. A new reader's crate needs
/// no line here.
fn crate_rank(folder: &str) -> u32 {
    match folder {
        "io" => 0,
        "model" => 1,
        "layout" => 2,
        "detect" => 3,
        "views" | "stats" => 4,
        "core" => 5,
        _ => 2,
    }
}

/// The `modelfs-*` crates a manifest's `[dependencies]` name (dev-dependencies aside: tests
/// may check one side against another), and every other dependency's name.
fn dependencies(toml: &str) -> Vec<String> {
    let mut section = "";
    let mut out = Vec::new();
    for line in toml.lines().map(str::trim) {
        if line.starts_with('[') {
            section = line;
            continue;
        }
        let dep = line.split(['=', '.', ' ']).next().unwrap_or("");
        if section == "[dependencies]" && !dep.is_empty() && !dep.starts_with('#') {
            out.push(dep.to_string());
        }
    }
    out
}

/// The seams the compiler keeps are the crates' dependencies, so they are checked here.
#[test]
fn crates_depend_only_on_lower_ones() {
    let mut seen = 0;
    for e in std::fs::read_dir(workspace().join("crates"))
        .unwrap()
        .flatten()
    {
        let name = e.file_name().to_string_lossy().into_owned();
        let toml = std::fs::read_to_string(e.path().join("Cargo.toml")).unwrap();
        for dep in dependencies(&toml) {
            let Some(folder) = dep.strip_prefix("modelfs-") else {
                continue;
            };
            let (mine, theirs) = (crate_rank(&name), crate_rank(folder));
            // Two readers never depend on each other: both rank 2, as the renderers do.
            assert!(
                theirs < mine,
                "crates/{name} depends on {dep}, which is not below it"
            );
        }
        seen += 1;
    }
    assert!(seen >= 14, "only {seen} crates found");
}

/// `cli` and `api` are two faces over one core (issue 74): no file outside `src/cli/` (and
/// the binary's `main.rs`) names `cli`; the core, where `api` lives, cannot name the commands
/// (the root crate is none of its dependencies); and the Python crate stands on the core, with
/// neither clap nor the commands among everything it depends on.
#[test]
fn the_two_faces_stand_apart() {
    let mut files = Vec::new();
    for (dir, _) in crates() {
        rust_files(&workspace().join(dir), &mut files);
    }
    rust_files(&workspace().join("python/src"), &mut files);
    let mut checked = 0;
    for f in &files {
        let rel = f.strip_prefix(workspace()).unwrap().to_string_lossy();
        if rel.starts_with("src/cli/")
            || matches!(&*rel, "src/main.rs" | "src/lib.rs" | "src/layers_tests.rs")
        {
            continue;
        }
        let text = std::fs::read_to_string(f).unwrap();
        let named = ["cli::", "mod cli", "modelfs::"]
            .iter()
            .find(|p| text.contains(*p));
        assert!(named.is_none(), "{rel} names the commands ({named:?})");
        checked += 1;
    }
    assert!(checked > 100, "only {checked} files checked");
    // Everything the Python crate depends on, through the workspace's manifests.
    let manifest = |dep: &str| match dep.strip_prefix("modelfs-") {
        Some(folder) => workspace().join("crates").join(folder).join("Cargo.toml"),
        None => workspace().join("Cargo.toml"),
    };
    let python = std::fs::read_to_string(workspace().join("python/Cargo.toml")).unwrap();
    let mut todo = dependencies(&python);
    assert!(
        todo.iter().any(|d| d == "modelfs-core"),
        "python/ is not on the core"
    );
    let mut closure = std::collections::BTreeSet::new();
    while let Some(dep) = todo.pop() {
        if !closure.insert(dep.clone()) || !dep.starts_with("modelfs-") {
            continue;
        }
        todo.extend(dependencies(
            &std::fs::read_to_string(manifest(&dep)).unwrap(),
        ));
    }
    for face in [
        "modelfs",
        "clap",
        "clap_mangen",
        "clap_complete",
        "env_logger",
    ] {
        assert!(
            !closure.contains(face),
            "the Python crate depends on {face}"
        );
    }
    assert!(
        closure.contains("fuser") && closure.contains("modelfs-tf"),
        "{closure:?}"
    );
}

/// The read path's shape (issue 57): `ReadAt` is what a source is, one read verb and two
/// hints; whether a read's bytes are trusted is decided inside it (no caller above `source`
/// checks a file's consistency); and what a read needs travels as its `ReadCtx`, not in a
/// thread-local (the buffer stash of `scratch.rs` holds no state of a read).
#[test]
fn the_read_path_takes_what_it_needs_as_arguments() {
    let source = workspace().join("crates/io/src/source");
    let module = std::fs::read_to_string(source.join("mod.rs")).unwrap();
    let start = module.find("pub trait ReadAt").expect("ReadAt");
    let body = &module[start..start + module[start..].find("\n}\n").unwrap()];
    let methods = body.matches("\n    fn ").count();
    assert!(methods <= 5, "ReadAt has {methods} methods");
    let mut files = Vec::new();
    for (dir, _) in crates() {
        rust_files(&workspace().join(dir), &mut files);
    }
    for f in &files {
        let text = std::fs::read_to_string(f).unwrap();
        let rel = f.strip_prefix(workspace()).unwrap().to_string_lossy();
        let in_source = rel.starts_with("crates/io/src/source/");
        if !in_source && !rel.ends_with("layers_tests.rs") {
            let own = text.contains(".check_consistent(");
            assert!(!own, "{rel} checks a file's consistency itself");
        }
        if in_source && !rel.ends_with("scratch.rs") {
            assert!(
                !text.contains("thread_local!"),
                "{rel} keeps a read's state per thread"
            );
        }
    }
}
