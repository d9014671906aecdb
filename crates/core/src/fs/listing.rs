//! What a directory of the mount contains: the names and kinds of its children, computed
//! once per directory from the model (metadata only, never tensor data).
//!
//! A model directory shows, sorted by name:
//! - each sub-directory and symlink under its escaped name (`fs::names`);
//! - for each tensor `NAME`, one file `NAME.<suffix>` per layout of the mount that can
//!   represent it, and `NAME.parts/` when it has partitions.
//!
//! A `NAME.parts/` directory shows `<label>.<suffix>` per partition and data layout (no
//! `.json`: the tensor's own `.json` lists its partitions), where `label` is the partition's
//! `part_id` (Angel's `partId`) when the reader gives one, else its index.
//!
//! Invariant: names in a listing are unique and sorted; a plain entry whose name collides with
//! a tensor-derived file gets `names::dodge_collision`'s name.

use std::collections::HashSet;
use std::sync::Arc;

use modelfs_layout::{Layout, LayoutCtx};
use modelfs_model::{own_component, DirEntry, Model, Tensor};

use super::error::FsError;
use super::names;

/// Raw model path components from the root.
pub(crate) type ModelPath = Arc<[Vec<u8>]>;

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NodeKind {
    /// A model directory (the root is the empty path).
    Dir { path: ModelPath },
    /// `NAME.parts/` of the tensor at `tensor`.
    Parts { tensor: ModelPath },
    /// One layout of a tensor, or of partition `partition` of it.
    File {
        tensor: ModelPath,
        layout: Layout,
        partition: Option<usize>,
    },
    /// A symlink; `target` is already escaped for the file system.
    Symlink { target: Vec<u8> },
    /// A file the reader renders itself (`Model::document`).
    Doc { path: ModelPath },
    /// An entry of hidden view `modelfs_layout::views::NAMES[view]` of the model at `root` (a
    /// model root: `Model::model_roots`): the entry reached from the view's directory by
    /// taking entry `at[0]`, then `at[1]` of that directory, … (`[]`: the view's directory).
    View {
        view: usize,
        root: ModelPath,
        at: Arc<[usize]>,
        dir: bool,
    },
    /// A file of the tensor at `tensor` there by name, never listed (`NAME.safetensors`, …).
    Hidden { tensor: ModelPath, file: Hidden },
    /// `NAME.rows/` of the keyed tensor at `tensor`: there by name, never listed.
    Rows { tensor: ModelPath },
    /// The `README` of a `NAME.rows/`.
    RowsReadme { tensor: ModelPath },
    /// File `file` of the row with id `id` of the tensor at `tensor` (found when looked up).
    Row {
        tensor: ModelPath,
        id: i64,
        file: modelfs_layout::rows::RowFile,
    },
}

impl NodeKind {
    pub fn is_dir(&self) -> bool {
        matches!(
            self,
            NodeKind::Dir { .. }
                | NodeKind::Parts { .. }
                | NodeKind::Rows { .. }
                | NodeKind::View { dir: true, .. }
        )
    }
}

#[derive(Clone, Debug)]
pub(crate) struct Child {
    pub(crate) name: String,
    pub(crate) kind: NodeKind,
}

/// The children of one directory, sorted by name bytes.
#[derive(Debug, Default)]
pub(crate) struct Listing {
    pub(crate) children: Vec<Child>,
}

impl Listing {
    /// The index of `name` among the children.
    pub(crate) fn position(&self, name: &[u8]) -> Option<usize> {
        self.children
            .binary_search_by(|c| c.name.as_bytes().cmp(name))
            .ok()
    }

    /// Number of sub-directories (for the directory's link count).
    pub(crate) fn subdirs(&self) -> usize {
        self.children.iter().filter(|c| c.kind.is_dir()).count()
    }

    fn from_unsorted(mut children: Vec<Child>, context: &str) -> Listing {
        children.sort_by(|a, b| a.name.as_bytes().cmp(b.name.as_bytes()));
        let before = children.len();
        children.dedup_by(|later, first| later.name == first.name);
        if children.len() != before {
            log::warn!(
                "{context}: {} duplicate names hidden",
                before - children.len()
            );
        }
        Listing { children }
    }
}

fn key_of(dir: &[Vec<u8>], name: &[u8]) -> ModelPath {
    let mut key = dir.to_vec();
    key.push(name.to_vec());
    key.into()
}

fn display(path: &[Vec<u8>]) -> String {
    let parts: Vec<String> = path
        .iter()
        .map(|c| String::from_utf8_lossy(c).into_owned())
        .collect();
    format!("/{}", parts.join("/"))
}

/// The model path `target` (relative to directory `dir`, `..` going up) names.
fn resolve(dir: &[Vec<u8>], target: &[Vec<u8>]) -> Option<Vec<Vec<u8>>> {
    let mut p = dir.to_vec();
    for c in target {
        if c == b".." {
            p.pop()?;
        } else {
            p.push(c.clone());
        }
    }
    Some(p)
}

/// Escapes a symlink target given as a raw `/`-separated path: each component like a name.
pub(crate) fn escape_target(target: &[u8]) -> Vec<u8> {
    let absolute = target.first() == Some(&b'/');
    let parts: Vec<String> = target
        .split(|&b| b == b'/')
        .filter(|c| !c.is_empty())
        .map(|c| match c {
            // Relative navigation stays navigation in a link target.
            b"." | b".." => String::from_utf8_lossy(c).into_owned(),
            _ => names::escape_component(c),
        })
        .collect();
    let mut out = if absolute { b"/".to_vec() } else { Vec::new() };
    out.extend_from_slice(parts.join("/").as_bytes());
    out
}

/// Lists the model directory at `path`.
pub(crate) fn list_model_dir(
    model: &dyn Model,
    ctx: &LayoutCtx,
    path: &[Vec<u8>],
) -> Result<Listing, FsError> {
    let entries = model.list_dir(path)?;
    // Names the reader itself adds (SPEC §6: they win over a key's, which is shown escaped).
    let own: HashSet<String> = entries
        .iter()
        .filter_map(|e| match e {
            DirEntry::Document(n) | DirEntry::Reserved(n) => {
                Some(names::component_name(&key_of(path, n)))
            }
            _ => None,
        })
        .collect();
    let base_of = |key: &[Vec<u8>], names_of: &dyn Fn(&str) -> Vec<String>| {
        let base = names::component_name(key);
        if names_of(&base).iter().any(|n| own.contains(n)) {
            names::escape_first_byte(&base)
        } else {
            base
        }
    };
    let mut plain = Vec::new();
    let mut derived = Vec::new();
    for entry in entries {
        match entry {
            DirEntry::Dir(name) => {
                let key = key_of(path, &name);
                plain.push(Child {
                    name: base_of(&key, &|b| vec![b.to_string()]),
                    kind: NodeKind::Dir { path: key },
                });
            }
            DirEntry::Reserved(name) => {
                plain.push(Child {
                    name: names::component_name(&key_of(path, &name)),
                    kind: NodeKind::Dir {
                        path: key_of(path, &own_component(&name)),
                    },
                });
            }
            DirEntry::Document(name) => {
                plain.push(Child {
                    name: names::component_name(&key_of(path, &name)),
                    kind: NodeKind::Doc {
                        path: key_of(path, &own_component(&name)),
                    },
                });
            }
            DirEntry::Alias { name, target } => {
                let Some(real) = resolve(path, &target) else {
                    log::warn!("{}: alias target leaves the tree", display(path));
                    continue;
                };
                let tensor = match model.tensor(&real) {
                    Ok(t) => t,
                    Err(e) => {
                        log::warn!("{}: alias target cannot be opened: {e}", display(&real));
                        continue;
                    }
                };
                // Each link points at the file the tensor's own directory shows.
                let mut to: Vec<String> = target
                    .iter()
                    .map(|c| match c.as_slice() {
                        b".." => "..".to_string(),
                        _ => names::escape_component(c),
                    })
                    .collect();
                to.pop(); // the tensor's own name: `target_base` below, cut like a listing's
                let dir = to.iter().map(|c| format!("{c}/")).collect::<String>();
                let base = names::component_name(&key_of(path, &name));
                let target_base = names::component_name(&real);
                let shown = modelfs_layout::shown(tensor.meta(), ctx);
                for layout in shown {
                    plain.push(Child {
                        name: names::file_name(&base, layout),
                        kind: NodeKind::Symlink {
                            target: format!("{dir}{}", names::file_name(&target_base, layout))
                                .into_bytes(),
                        },
                    });
                }
                if !tensor.meta().partitions.is_empty() {
                    plain.push(Child {
                        name: names::parts_dir_name(&base),
                        kind: NodeKind::Symlink {
                            target: format!("{dir}{}", names::parts_dir_name(&target_base))
                                .into_bytes(),
                        },
                    });
                }
            }
            DirEntry::Symlink { name, target } => {
                let key = key_of(path, &name);
                plain.push(Child {
                    name: base_of(&key, &|b| vec![b.to_string()]),
                    kind: NodeKind::Symlink {
                        target: escape_target(&target),
                    },
                });
            }
            DirEntry::Tensor(name) => {
                let key = key_of(path, &name);
                let tensor = match model.tensor(&key) {
                    Ok(t) => t,
                    Err(e) => {
                        log::warn!("{}: listed but cannot be opened: {e}", display(&key));
                        continue;
                    }
                };
                let shown = modelfs_layout::shown(tensor.meta(), ctx);
                let parted = !tensor.meta().partitions.is_empty();
                let base = base_of(&key, &|b| {
                    let mut n: Vec<String> =
                        shown.iter().map(|&l| names::file_name(b, l)).collect();
                    if parted {
                        n.push(names::parts_dir_name(b));
                    }
                    n
                });
                for layout in shown.iter().copied() {
                    derived.push(Child {
                        name: names::file_name(&base, layout),
                        kind: NodeKind::File {
                            tensor: key.clone(),
                            layout,
                            partition: None,
                        },
                    });
                }
                if parted {
                    derived.push(Child {
                        name: names::parts_dir_name(&base),
                        kind: NodeKind::Parts { tensor: key },
                    });
                }
            }
        }
    }
    let taken: HashSet<&str> = derived.iter().map(|c| c.name.as_str()).collect();
    for child in &mut plain {
        if taken.contains(child.name.as_str()) {
            child.name = names::dodge_collision(&child.name);
        }
    }
    plain.extend(derived);
    Ok(Listing::from_unsorted(plain, &display(path)))
}

/// The label of partition `index`: its `part_id` when the reader gives one, else the index.
pub(crate) fn partition_label(tensor: &dyn Tensor, index: usize) -> String {
    match tensor.meta().partitions.get(index).and_then(|p| p.part_id) {
        Some(id) => id.to_string(),
        None => index.to_string(),
    }
}

/// Lists `NAME.parts/` of the tensor at `key`.
pub(crate) fn list_parts_dir(
    model: &dyn Model,
    ctx: &LayoutCtx,
    key: &ModelPath,
) -> Result<Listing, FsError> {
    let tensor = model.tensor(key)?;
    let mut children = Vec::new();
    for index in 0..tensor.meta().partitions.len() {
        let part = match tensor.partition(index) {
            Ok(p) => p,
            Err(e) => {
                log::warn!("{}: partition {index} cannot be opened: {e}", display(key));
                continue;
            }
        };
        let label = partition_label(tensor.as_ref(), index);
        // No `.json` per partition: the tensor's own `.json` describes every partition, and a
        // second metadata file naming the same tensor would make "find the tensor by the name
        // in its .json" (the conformance checks, users' scripts) ambiguous.
        for layout in modelfs_layout::shown(part.meta(), ctx) {
            if layout != Layout::Json {
                children.push(Child {
                    name: names::file_name(&label, layout),
                    kind: NodeKind::File {
                        tensor: key.clone(),
                        layout,
                        partition: Some(index),
                    },
                });
            }
        }
    }
    Ok(Listing::from_unsorted(children, &display(key)))
}

/// Files of a tensor there by name only, never listed (like the hidden views): a listing
/// stays what the model's own tools list.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Hidden {
    /// `NAME.safetensors`: the tensor alone as a safetensors file.
    Safetensors,
    /// `NAME.stats.json`: its statistics, computed on first read.
    Stats,
    /// `NAME.csr.npz`: a sparse matrix or a hash table as `scipy.sparse.save_npz` writes it.
    Csr,
    /// `NAME.csr.ids.npy`: the id of each row of a hash table's `NAME.csr.npz`.
    CsrIds,
    /// `NAME.json` of a table shown by name only (a listed tensor's is a listed file).
    Json,
}

impl Hidden {
    pub(crate) fn suffix(self) -> &'static str {
        match self {
            Hidden::Safetensors => modelfs_views::safetensors::SUFFIX,
            Hidden::Stats => modelfs_stats::SUFFIX,
            Hidden::Csr => modelfs_views::csr::SUFFIX,
            Hidden::CsrIds => modelfs_views::csr::IDS_SUFFIX,
            Hidden::Json => "json",
        }
    }

    /// `NAME.<suffix>` as `(NAME, file)`.
    /// Whether a table shown by name only (a TF hash table) has this file too.
    pub(crate) fn of_unlisted(self) -> bool {
        matches!(self, Hidden::Csr | Hidden::CsrIds | Hidden::Json)
    }

    pub(crate) fn split(name: &str) -> Option<(&str, Hidden)> {
        [
            Hidden::Safetensors,
            Hidden::Stats,
            Hidden::Csr,
            Hidden::CsrIds,
            // After `stats.json`: the longer suffix names the file.
            Hidden::Json,
        ]
        .into_iter()
        .find_map(|h| {
            let base = name.strip_suffix(h.suffix())?.strip_suffix('.')?;
            (!base.is_empty()).then_some((base, h))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets_are_escaped_per_component() {
        assert_eq!(escape_target(b"model.ckpt-100"), b"model.ckpt-100");
        assert_eq!(escape_target(b"../a%b/c"), b"../a%25b/c");
        assert_eq!(escape_target(b"/abs/x"), b"/abs/x");
    }
}
