//! The node table: inode numbers, the nodes behind them, and how long they live.
//!
//! Invariants:
//! - An inode number is handed out once and never reused (numbers are 64-bit and counted up),
//!   so a stale number can only miss, never reach another node. Inode 1 is the root.
//! - A listed child is found through its directory's slots (`Listed::inos`, one number per
//!   listing entry, 0 for none yet), and its node shares its name and kind with the listing
//!   (`Entry::Listed`): a walk of 10^5 files costs a node and a slot each, no name copied or
//!   hashed. The root's children and the names no listing shows (rows, hidden files, views)
//!   are found by name (`Table::by_name`): the root's so that a changed source can keep them.
//! - `lookups` of a node is the kernel's lookup count of it (FUSE: every LOOKUP reply adds
//!   one, FORGET subtracts what the kernel let go). A node stays in the table, with its
//!   number and content, while that count is above zero.
//! - A node whose count returns to zero is removed when it is *forgettable*: a file or a
//!   symlink whose content is cheap to open again (rows, documents, binary layouts, sized
//!   text). Directories (which hold listings and children) and text files whose size took
//!   a render to learn stay for the mount's life: they are bounded by the model, not by
//!   the number of lookups. Rows are bounded by time, so they are what this is for.
//! - The count is changed, a slot filled and a node removed under the table's write lock
//!   (a read lock + atomic to add a lookup), so a lookup racing a forget either keeps the
//!   node alive or finds it gone and makes a new one.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};

use super::{FsError, Ino, Node, ROOT_INO};
use crate::fs::listing::{Child, Listing, NodeKind};

/// Row files the kernel may hold at once before the oldest are invalidated (so that it
/// forgets them): a serving host looks up ids for weeks, and the kernel only forgets under
/// memory pressure. Each is a few hundred bytes here; their bytes live in the chunk cache.
pub(super) const HELD_ROWS: usize = 4096;

/// A directory's listing with the inode number of each entry (0: none yet).
pub(crate) struct Listed {
    pub(crate) listing: Arc<Listing>,
    inos: Box<[AtomicU64]>,
}

impl Listed {
    pub(crate) fn new(listing: Arc<Listing>) -> Listed {
        let inos = listing.children.iter().map(|_| AtomicU64::new(0)).collect();
        Listed { listing, inos }
    }
}

impl std::ops::Deref for Listed {
    type Target = Listing;
    fn deref(&self) -> &Listing {
        &self.listing
    }
}

/// Where a node's name and kind live.
pub(crate) enum Entry {
    /// Entry `index` of its parent's listing.
    Listed { listing: Arc<Listing>, index: u32 },
    /// Its own: a name found by lookup only, or the root.
    Own(Box<Child>),
}

impl Entry {
    pub(super) fn child(&self) -> &Child {
        match self {
            Entry::Listed { listing, index } => &listing.children[*index as usize],
            Entry::Own(c) => c,
        }
    }
}

pub(super) struct Nodes {
    table: RwLock<Table>,
    /// Row nodes in the order the kernel first took them (some may be gone already).
    held_rows: Mutex<VecDeque<Ino>>,
}

struct Table {
    nodes: HashMap<Ino, Arc<Node>>,
    /// Children found by name: the root's, and names no listing shows.
    by_name: HashMap<(Ino, String), Ino>,
    /// The next number to hand out.
    next: Ino,
}

impl Table {
    fn add(&mut self, parent: Ino, entry: Entry) -> Ino {
        let ino = self.next;
        self.next += 1;
        self.nodes
            .insert(ino, Arc::new(Node::new(ino, parent, entry)));
        ino
    }
}

fn poisoned<T>(_: T) -> FsError {
    FsError::Io("inode table poisoned".into())
}

impl Nodes {
    pub(super) fn new(root: Node) -> Nodes {
        debug_assert_eq!(root.ino, ROOT_INO);
        Nodes {
            table: RwLock::new(Table {
                nodes: HashMap::from([(ROOT_INO, Arc::new(root))]),
                by_name: HashMap::new(),
                next: ROOT_INO + 1,
            }),
            held_rows: Mutex::new(VecDeque::new()),
        }
    }

    /// Nodes in the table now.
    pub(super) fn len(&self) -> u64 {
        self.table.read().map_or(0, |t| t.nodes.len() as u64)
    }

    pub(super) fn get(&self, ino: Ino) -> Result<Arc<Node>, FsError> {
        let t = self.table.read().map_err(poisoned)?;
        t.nodes.get(&ino).cloned().ok_or(FsError::NotFound)
    }

    /// The inode of `name` in `parent` if it has one now (`listed`: the parent's listing).
    pub(super) fn known_child(
        &self,
        parent: Ino,
        listed: Option<&Listed>,
        name: &str,
    ) -> Result<Option<Ino>, FsError> {
        let t = self.table.read().map_err(poisoned)?;
        if let Some(&ino) = t.by_name.get(&(parent, name.to_string())) {
            return Ok(Some(ino));
        }
        let slot = listed
            .filter(|_| parent != ROOT_INO)
            .and_then(|l| Some(&l.inos[l.listing.position(name.as_bytes())?]));
        Ok(slot.map(|s| s.load(Ordering::Acquire)).filter(|&i| i != 0))
    }

    /// The inode of entry `index` of `listed`, the listing of `parent`, made on first sight
    /// (count zero: a listing or a path walk holds nothing; `hold` counts the kernel's
    /// lookups).
    pub(super) fn listed(
        &self,
        parent: Ino,
        listed: &Listed,
        index: usize,
    ) -> Result<Ino, FsError> {
        let child = listed.listing.children.get(index);
        let (Some(child), Ok(index)) = (child, u32::try_from(index)) else {
            return Err(FsError::Io(format!(
                "listing entry {index} of inode {parent}"
            )));
        };
        let entry = || Entry::Listed {
            listing: listed.listing.clone(),
            index,
        };
        if parent == ROOT_INO {
            let name = &child.name;
            return self.named(parent, name, entry);
        }
        // `Listed::new` made one slot per entry.
        debug_assert_eq!(listed.inos.len(), listed.listing.children.len());
        let slot = &listed.inos[index as usize];
        match slot.load(Ordering::Acquire) {
            0 => {}
            ino => return Ok(ino),
        }
        let mut t = self.table.write().map_err(poisoned)?;
        match slot.load(Ordering::Acquire) {
            0 => {}
            ino => return Ok(ino),
        }
        let ino = t.add(parent, entry());
        slot.store(ino, Ordering::Release);
        Ok(ino)
    }

    /// The inode of `name` in `parent`, found by name, made (from `entry`) on first sight.
    pub(super) fn named(
        &self,
        parent: Ino,
        name: &str,
        entry: impl FnOnce() -> Entry,
    ) -> Result<Ino, FsError> {
        let key = (parent, name.to_string());
        if let Some(&ino) = self.table.read().map_err(poisoned)?.by_name.get(&key) {
            return Ok(ino);
        }
        let mut t = self.table.write().map_err(poisoned)?;
        if let Some(&ino) = t.by_name.get(&key) {
            return Ok(ino);
        }
        let ino = t.add(parent, entry());
        t.by_name.insert(key, ino);
        Ok(ino)
    }

    /// Adds one to the kernel's count of `ino`. `None`: the node is gone (forgotten since it
    /// was found); else whether it is a row file taken for the first time.
    pub(super) fn hold(&self, ino: Ino) -> Result<Option<bool>, FsError> {
        let t = self.table.read().map_err(poisoned)?;
        let Some(node) = t.nodes.get(&ino) else {
            return Ok(None);
        };
        let first = node.lookups.fetch_add(1, Ordering::AcqRel) == 0;
        Ok(Some(first && matches!(node.kind(), NodeKind::Row { .. })))
    }

    /// Notes that the kernel took row file `ino`; returns the rows it should let go of
    /// (parent and name), oldest first, so that at most `HELD_ROWS` stay held.
    pub(super) fn took_row(&self, ino: Ino) -> Vec<(Ino, String)> {
        let mut out = Vec::new();
        let Ok(mut q) = self.held_rows.lock() else {
            return out;
        };
        q.push_back(ino);
        while q.len() > HELD_ROWS {
            let Some(old) = q.pop_front() else { break };
            if let Ok(n) = self.get(old) {
                if n.lookups.load(Ordering::Acquire) > 0 {
                    out.push((n.parent, n.name().to_string()));
                }
            }
        }
        out
    }

    /// Puts `root` in place of the root node (a fresh listing), keeping the root's children
    /// for which `keep` holds with all below them. The others and all below them are gone:
    /// out of the names at once, and out of the table once the kernel holds none of them.
    /// Returns the root entries let go (for the kernel to drop).
    pub(super) fn replace_root(
        &self,
        root: Node,
        keep: &dyn Fn(&Node) -> bool,
    ) -> Vec<(Ino, String)> {
        debug_assert_eq!(root.ino, ROOT_INO);
        let Ok(mut t) = self.table.write() else {
            return Vec::new();
        };
        let mut children: HashMap<Ino, Vec<Ino>> = HashMap::new();
        for (&ino, node) in &t.nodes {
            if ino != ROOT_INO {
                children.entry(node.parent).or_default().push(ino);
            }
        }
        let mut let_go = Vec::new();
        let mut todo: Vec<Ino> = Vec::new();
        for ino in children.remove(&ROOT_INO).unwrap_or_default() {
            // A node let go before and still held by the kernel was let go already.
            let already = |n: &Node| n.gone.load(Ordering::Acquire);
            if let Some(n) = t.nodes.get(&ino).filter(|n| !keep(n) && !already(n)) {
                let_go.push((ROOT_INO, n.name().to_string()));
                todo.push(ino);
            }
        }
        while let Some(ino) = todo.pop() {
            if let Some(node) = t.nodes.get(&ino).cloned() {
                t.by_name.remove(&(node.parent, node.name().to_string()));
                node.gone.store(true, Ordering::Release);
                if node.lookups.load(Ordering::Acquire) == 0 {
                    t.nodes.remove(&ino);
                }
            }
            todo.extend(children.remove(&ino).unwrap_or_default());
        }
        t.nodes.insert(ROOT_INO, Arc::new(root));
        let_go
    }

    /// Subtracts `n` from the kernel's count of `ino`; at zero a forgettable node is removed.
    pub(super) fn forget(&self, ino: Ino, n: u64) {
        if ino == ROOT_INO {
            return;
        }
        let Ok(mut t) = self.table.write() else {
            return;
        };
        let Some(node) = t.nodes.get(&ino).cloned() else {
            return;
        };
        let before = node.lookups.load(Ordering::Acquire);
        debug_assert!(before >= n, "ino {ino}: forget {n} of {before} lookups");
        let left = before.saturating_sub(n);
        node.lookups.store(left, Ordering::Release);
        if left > 0 || !forgettable(&node) {
            return;
        }
        t.nodes.remove(&ino);
        let key = (node.parent, node.name().to_string());
        if t.by_name.get(&key) == Some(&ino) {
            t.by_name.remove(&key);
        }
        if let (Entry::Listed { index, .. }, Some(parent)) =
            (&node.entry, t.nodes.get(&node.parent))
        {
            if let Some(slot) = parent.listed().and_then(|l| l.inos.get(*index as usize)) {
                let _ = slot.compare_exchange(ino, 0, Ordering::AcqRel, Ordering::Acquire);
            }
        }
    }
}

/// See the module comment.
fn forgettable(node: &Node) -> bool {
    if node.gone.load(Ordering::Acquire) {
        return true;
    }
    match node.kind() {
        k if k.is_dir() => false,
        NodeKind::Symlink { .. } => true,
        _ => node.opened.get().is_none_or(|o| o.cheap),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table() -> Nodes {
        let root = Node::root();
        Nodes::new(root)
    }

    fn child(name: &str, kind: NodeKind) -> Child {
        Child {
            name: name.into(),
            kind,
        }
    }

    impl Nodes {
        fn child(&self, parent: Ino, c: &Child) -> Result<Ino, FsError> {
            self.named(parent, &c.name, || Entry::Own(Box::new(c.clone())))
        }
    }

    /// A forgotten file is freed and its name gets a new number; a directory stays; a node
    /// still held, or held again before the forget, stays with its number.
    #[test]
    fn forgotten_files_go_and_directories_stay() {
        let t = table();
        let link = || {
            child(
                "l",
                NodeKind::Symlink {
                    target: b"x".to_vec(),
                },
            )
        };
        let dir = child(
            "d",
            NodeKind::Dir {
                path: Arc::from(vec![b"d".to_vec()]),
            },
        );
        let l = t.child(ROOT_INO, &link()).unwrap();
        let d = t.child(ROOT_INO, &dir).unwrap();
        assert_eq!(t.child(ROOT_INO, &link()).unwrap(), l);
        for ino in [l, d] {
            assert_eq!(t.hold(ino).unwrap(), Some(false));
            assert_eq!(t.hold(ino).unwrap(), Some(false));
        }
        t.forget(l, 1);
        assert!(t.get(l).is_ok(), "freed while still held once");
        t.forget(l, 1);
        t.forget(d, 2);
        assert!(matches!(t.get(l), Err(FsError::NotFound)));
        assert_eq!(t.known_child(ROOT_INO, None, "l").unwrap(), None);
        assert!(t.get(d).is_ok(), "a directory was freed");
        let again = t.child(ROOT_INO, &link()).unwrap();
        assert!(again > d, "a number was reused");
        assert_eq!(t.hold(l).unwrap(), None, "a freed node was held");
        t.forget(ROOT_INO, 5);
        assert!(t.get(ROOT_INO).is_ok());
        assert_eq!(t.len(), 3);
    }

    /// Past `HELD_ROWS` row files held, the oldest still held are handed back to be let go.
    #[test]
    fn rows_held_past_the_bound_are_let_go_oldest_first() {
        let t = table();
        let row = |id: i64| {
            child(
                &format!("{id}.txt"),
                NodeKind::Row {
                    tensor: Arc::from(vec![b"emb".to_vec()]),
                    id,
                    file: modelfs_layout::rows::RowFile::Txt,
                },
            )
        };
        let mut evicted = Vec::new();
        for id in 0..(HELD_ROWS as i64 + 10) {
            let ino = t.child(ROOT_INO, &row(id)).unwrap();
            assert_eq!(t.hold(ino).unwrap(), Some(true));
            if id == 3 {
                // Forgotten by the kernel on its own: nothing to let go.
                t.forget(ino, 1);
            }
            evicted.extend(t.took_row(ino));
        }
        let names: Vec<&str> = evicted.iter().map(|(_, n)| n.as_str()).collect();
        assert_eq!(
            names,
            ["0.txt", "1.txt", "2.txt", "4.txt", "5.txt", "6.txt", "7.txt", "8.txt", "9.txt"]
        );
    }

    /// What a listed file costs beyond its listing entry stays small: a walk of 10^5 files
    /// (issue 56) keeps a node and a slot each, and the node names no copy of the entry.
    #[test]
    fn a_node_is_a_few_words() {
        let node = std::mem::size_of::<Node>();
        assert!(node <= 112, "a node is {node} bytes");
        assert_eq!(std::mem::size_of::<Entry>(), 16);
    }

    /// A listed child is found through its directory's slot: one number per entry until the
    /// kernel forgets it, then a new one; the slot is all it costs besides its node.
    #[test]
    fn listed_children_live_in_their_directory_slots() {
        let t = table();
        let dir = child(
            "d",
            NodeKind::Dir {
                path: Arc::from(vec![b"d".to_vec()]),
            },
        );
        let d = t.child(ROOT_INO, &dir).unwrap();
        let listing = Arc::new(Listing {
            children: vec![
                child(
                    "a",
                    NodeKind::Symlink {
                        target: b"x".to_vec(),
                    },
                ),
                child(
                    "b",
                    NodeKind::Symlink {
                        target: b"y".to_vec(),
                    },
                ),
            ],
        });
        let listed = Listed::new(listing);
        let b = t.listed(d, &listed, 1).unwrap();
        assert_eq!(t.listed(d, &listed, 1).unwrap(), b);
        assert_eq!(t.get(b).unwrap().name(), "b");
        assert_eq!(t.known_child(d, Some(&listed), "b").unwrap(), Some(b));
        assert_eq!(t.known_child(d, Some(&listed), "a").unwrap(), None);
        // The slot is cleared through the parent's own listing.
        let node = t.get(d).unwrap();
        let _ = node
            .listing
            .set(Arc::new(Listed::new(listed.listing.clone())));
        let b2 = t.listed(d, node.listed().unwrap(), 1).unwrap();
        assert_eq!(t.hold(b2).unwrap(), Some(false));
        t.forget(b2, 1);
        assert!(t.get(b2).is_err(), "a forgotten symlink stayed");
        assert_eq!(
            t.known_child(d, node.listed().map(|l| &**l), "b").unwrap(),
            None
        );
        let b3 = t.listed(d, node.listed().unwrap(), 1).unwrap();
        assert!(b3 > b2, "a number was reused");
    }
}
