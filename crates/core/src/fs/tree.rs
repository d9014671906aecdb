//! The mount's file tree, independent of FUSE: inodes, attributes, directory listings, file
//! contents and extended attributes. `fs::fuse` and the CLI (`ls`, `cat`) both drive this.
//! This file holds the nodes, lookups and listings, and swaps the model; its parts: `contents`
//! (a file's content object, size and attributes), `handles` (open files), `nodes` (which
//! nodes live), `paths`, `xattr`, `rows` (rows by id) and `hidden` (files shown on lookup only).
//!
//! Invariants:
//! - Inode numbers are assigned lazily on first lookup/readdir of a (parent, name) and never
//!   reused; a file node the kernel has forgotten may be freed (`nodes`: which, and when), and
//!   its name gets a new number on its next lookup. Inode 1 is the root.
//! - A directory's listing is computed once (metadata only) and cached in its node.
//! - A file's content object is opened once and cached in its node while it is costly to make
//!   again; a file sized cheaply keeps only its size and mtime (`Settled`) and gets a fresh
//!   content object, with that size, per open. Failures are not cached.
//! - A file's size, once known, never changes. A text file whose size is not known yet (and is
//!   not cheap to learn) reports 0 with `Attr::exact == false`; the kernel must not cache that
//!   size and must read the file like a procfs file (`OpenMode::Direct`) until it is known. The
//!   size is learnt by readers that reach its end, or by the background `SizePass`.
//! - No lock is held while the model or a layout is called: the inode table lock only guards
//!   the table itself.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock, RwLock};
use std::time::SystemTime;

pub use crate::options::TextSize;
use modelfs_layout::{FileContent, Layout, LayoutCtx};
use modelfs_model::{Model, Tensor};
use modelfs_views::ViewEntry;

use super::error::FsError;
use super::listing::{self, Listing, ModelPath, NodeKind};
use super::names;

mod contents;
mod handles;
mod hidden;
mod nodes;
mod paths;
mod recent;
mod rows;
mod view_slots;
mod xattr;

pub use handles::Opening;
#[cfg(test)]
pub(crate) use xattr::{shape_text, XATTR_DTYPE, XATTR_SHAPE};
pub(crate) use xattr::{xattr_list_bytes, xattr_reply, XattrReply};

pub type Ino = u64;
pub const ROOT_INO: Ino = 1;

/// What a file shows: a layout of a tensor (or of one partition).
pub(crate) type FileSource = (Layout, Arc<dyn Tensor>);

/// Mount-wide attribute settings.
#[derive(Clone, Debug)]
pub struct TreeConfig {
    pub uid: u32,
    pub gid: u32,
    /// mtime of directories and symlinks (the source's mtime).
    pub mtime: SystemTime,
    /// Whether text sizes are learnt before first use (`Exact`) or reported when known.
    pub text_size: TextSize,
}

const UNKNOWN: u64 = u64::MAX;

impl TreeConfig {
    /// The mounting user, overridden by `uid=`/`gid=`.
    pub fn for_user(uid: Option<u32>, gid: Option<u32>, mtime: SystemTime) -> TreeConfig {
        // SAFETY: getuid/getgid cannot fail and touch no memory.
        let (ruid, rgid) = unsafe { (libc::getuid(), libc::getgid()) };
        TreeConfig {
            uid: uid.unwrap_or(ruid),
            gid: gid.unwrap_or(rgid),
            mtime,
            text_size: TextSize::Auto,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FileKind {
    Dir,
    File,
    Symlink,
}

/// What `stat` shows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Attr {
    pub(crate) ino: Ino,
    pub(crate) kind: FileKind,
    pub size: u64,
    pub(crate) perm: u16,
    pub(crate) nlink: u32,
    pub(crate) uid: u32,
    pub(crate) gid: u32,
    pub(crate) mtime: SystemTime,
    /// False when `size` is a placeholder 0 for a size not known yet (not to be cached).
    pub(crate) exact: bool,
}

/// How the kernel should read an opened file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum OpenMode {
    /// Through the page cache, kept across opens (the size is exact).
    Cached,
    /// Every read reaches us and ends at end of file, whatever size was reported.
    Direct,
    /// The kernel reads the local file it is (`Opening::backing`) itself.
    Passed,
}

impl Attr {
    pub(crate) fn blocks(&self) -> u64 {
        self.size.div_ceil(512)
    }
}

/// One entry handed out by `readdir`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DirItem<'a> {
    pub(crate) ino: Ino,
    pub(crate) kind: FileKind,
    pub(crate) name: &'a str,
}

/// A `DirItem` kept past the `readdir` call.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DirEntry {
    pub ino: Ino,
    pub kind: FileKind,
    pub(crate) name: String,
}

impl DirItem<'_> {
    pub fn owned(&self) -> DirEntry {
        DirEntry {
            ino: self.ino,
            kind: self.kind,
            name: self.name.to_string(),
        }
    }
}

struct Opened {
    /// The tensor shown (`None` for a document).
    tensor: Option<Arc<dyn Tensor>>,
    content: Arc<dyn FileContent>,
    mtime: SystemTime,
    /// Cheap enough to size on first sight.
    cheap: bool,
    /// `UNKNOWN` until known; then never changes.
    size: AtomicU64,
    /// A placeholder size was reported for this file.
    placeholder: AtomicBool,
    /// GETATTRs of an open file under way (`attr_of_open_file`): their replies carry the size,
    /// and an invalidation sent meanwhile would make the kernel drop those replies.
    seeking: AtomicU32,
    /// A failure of this file was logged: one line per file, however often the kernel asks
    /// again (a listing stats it, a reader retries).
    logged: AtomicBool,
}

/// What `stat` shows of a file whose content object was not kept: its size and mtime, in two
/// words (`UNKNOWN` size: not settled). Set once (racing setters write the same values).
struct Settled {
    size: AtomicU64,
    /// Nanoseconds since the epoch.
    mtime_ns: AtomicU64,
}

impl Settled {
    fn new() -> Settled {
        Settled {
            size: AtomicU64::new(UNKNOWN),
            mtime_ns: AtomicU64::new(0),
        }
    }

    fn get(&self) -> Option<(u64, SystemTime)> {
        let size = self.size.load(Ordering::Acquire);
        let ns = self.mtime_ns.load(Ordering::Acquire);
        (size != UNKNOWN).then(|| {
            (
                size,
                SystemTime::UNIX_EPOCH + std::time::Duration::from_nanos(ns),
            )
        })
    }

    /// False when `mtime` cannot be kept in a word (before 1970 or after 2554).
    fn set(&self, size: u64, mtime: SystemTime) -> bool {
        let Some(ns) = mtime
            .duration_since(SystemTime::UNIX_EPOCH)
            .ok()
            .and_then(|d| u64::try_from(d.as_nanos()).ok())
        else {
            return false;
        };
        debug_assert_ne!(size, UNKNOWN);
        self.mtime_ns.store(ns, Ordering::Release);
        self.size.store(size, Ordering::Release);
        true
    }
}

impl Opened {
    /// A file's content object, its size not known yet (learnt by `cheap` sizing or a read).
    fn new(
        tensor: Option<Arc<dyn Tensor>>,
        content: Arc<dyn FileContent>,
        mtime: SystemTime,
        cheap: bool,
    ) -> Opened {
        Opened {
            tensor,
            content,
            mtime,
            cheap,
            size: AtomicU64::new(UNKNOWN),
            placeholder: AtomicBool::new(false),
            seeking: AtomicU32::new(0),
            logged: AtomicBool::new(false),
        }
    }

    fn size(&self) -> Option<u64> {
        Some(self.size.load(Ordering::Acquire)).filter(|&s| s != UNKNOWN)
    }

    /// Whether this is the file's first failure to log.
    fn first_failure(&self) -> bool {
        !self.logged.swap(true, Ordering::AcqRel)
    }
}

pub struct Node {
    pub(crate) ino: Ino,
    pub(crate) parent: Ino,
    /// Its name and kind (shared with its parent's listing when listed).
    entry: nodes::Entry,
    listing: OnceLock<Arc<nodes::Listed>>,
    /// The content object, kept while it holds something that costs to make again: a size not
    /// known yet or learnt by a long render, a failure logged, a row's or hidden file's bytes;
    /// and always for a `.json`, whose document is fixed when first shown.
    opened: OnceLock<Arc<Opened>>,
    /// The attributes of a file sized cheaply, kept instead of its content object: a walk of
    /// a big tree leaves a few bytes per file, not a tensor and a renderer (`contents`).
    settled: Settled,
    /// The kernel's lookup count (`nodes`).
    lookups: AtomicU64,
    /// Its model part left the source (`replace_model`): it serves only what it opened.
    gone: AtomicBool,
}

impl Node {
    fn new(ino: Ino, parent: Ino, entry: nodes::Entry) -> Node {
        Node {
            ino,
            parent,
            entry,
            listing: OnceLock::new(),
            opened: OnceLock::new(),
            settled: Settled::new(),
            lookups: AtomicU64::new(0),
            gone: AtomicBool::new(false),
        }
    }

    /// A root node (inode 1, the model's top directory), its listing not made yet.
    pub(super) fn root() -> Node {
        let child = listing::Child {
            name: String::new(),
            kind: NodeKind::Dir {
                path: Arc::from(Vec::new()),
            },
        };
        Node::new(ROOT_INO, ROOT_INO, nodes::Entry::Own(Box::new(child)))
    }

    pub(crate) fn name(&self) -> &str {
        &self.entry.child().name
    }

    pub fn kind(&self) -> &NodeKind {
        &self.entry.child().kind
    }

    /// Its listing with its entries' numbers, if listed yet.
    fn listed(&self) -> Option<&Arc<nodes::Listed>> {
        self.listing.get()
    }

    pub fn file_kind(&self) -> FileKind {
        kind_of(self.kind())
    }
}

/// Told about files whose size became known after a placeholder was reported.
pub(crate) type SizeListener = Box<dyn Fn(Ino) + Send + Sync>;

/// Told about entries (parent, name) the kernel should let go of (rows held too long).
pub(crate) type EvictListener = Box<dyn Fn(Ino, String) + Send + Sync>;

pub struct Tree {
    /// Replaced when the source changes (`replace_model`); the lock is held only to clone
    /// or swap the `Arc`.
    model: RwLock<Arc<dyn Model>>,
    ctx: Arc<LayoutCtx>,
    cfg: TreeConfig,
    nodes: nodes::Nodes,
    handles: handles::Handles,
    /// The hidden views by model root and view, each built on its first lookup.
    views: view_slots::Views,
    /// Files reported with a placeholder size go here (the background size pass).
    on_unknown: OnceLock<SizeListener>,
    /// Files whose size became known after a placeholder was reported (kernel invalidation).
    on_learnt: OnceLock<SizeListener>,
    /// Entries the kernel should let go of (kernel invalidation).
    on_evict: OnceLock<EvictListener>,
    /// Entries and inodes the kernel should drop after the source changed.
    on_changed: OnceLock<ChangeListener>,
    /// Fills the kernel's page cache ahead of readers (a mount only).
    push: OnceLock<super::push::Pusher>,
    /// The kernel can read files that are a local source file whole from that file itself
    /// (FUSE passthrough), and this mount may ask it to.
    passthrough: AtomicBool,
    /// The keyed tensors row lookups asked for lately: a table's objects and key index are
    /// built once per mount, not per row (`recent`).
    row_tables: recent::Recent,
    /// The tensors of the files opened lately, shared by a tensor's files.
    file_tensors: recent::Recent,
}

/// Told what the kernel should drop after the source changed: entries (parent, name) and
/// inodes whose attributes or listing changed.
pub(crate) type ChangeListener = Box<dyn Fn(Vec<(Ino, String)>, Vec<Ino>) + Send + Sync>;

impl Tree {
    pub fn new(model: Arc<dyn Model>, ctx: Arc<LayoutCtx>, cfg: TreeConfig) -> Tree {
        let root = Node::root();
        Tree {
            model: RwLock::new(model),
            ctx,
            cfg,
            nodes: nodes::Nodes::new(root),
            handles: Default::default(),
            views: Default::default(),
            on_unknown: OnceLock::new(),
            on_learnt: OnceLock::new(),
            on_evict: OnceLock::new(),
            on_changed: OnceLock::new(),
            push: OnceLock::new(),
            passthrough: AtomicBool::new(false),
            row_tables: recent::Recent::new(recent::ROW_TABLES),
            file_tensors: recent::Recent::new(recent::FILE_TENSORS),
        }
    }

    /// Starts filling the kernel's page cache ahead of readers (`fs::push`), at most `ahead`
    /// bytes ahead (whole files up to `whole_max`), from `threads` threads storing into
    /// `sink`. Once per tree.
    pub(crate) fn start_pushing(
        &self,
        sink: Arc<dyn super::push::Sink>,
        (ahead, whole_max): (u64, u64),
        threads: usize,
    ) {
        let pusher = super::push::Pusher::new(ahead, whole_max);
        pusher.start(sink, threads);
        let _ = self.push.set(pusher);
    }

    /// Keeps every text size learnt in the persistent store, however small (`modelfs index`).
    pub fn store_every_size(&self) {
        self.ctx.cache.store_every_index();
    }

    /// Lets opens name the local file a file is, whole (`Opening::backing`), for the kernel
    /// to read itself.
    pub(crate) fn allow_passthrough(&self) {
        self.passthrough.store(true, Ordering::Release);
    }

    /// The model shown now.
    pub(crate) fn model(&self) -> Arc<dyn Model> {
        Arc::clone(&self.model.read().unwrap_or_else(|e| e.into_inner()))
    }

    /// Sets who hears of what the kernel should drop after a change. Once per tree.
    pub(crate) fn listen_changes(&self, on_changed: ChangeListener) {
        let _ = self.on_changed.set(on_changed);
    }

    /// Shows `new` in place of the model shown now (the source changed). Each member of the
    /// old model that `new` shows with the same id (`Model::members`) keeps its subtree:
    /// inode numbers, opened files, sizes learnt. Every other child of the root, and all
    /// below it, is gone: out of the names, freed once the kernel forgets it; a file open
    /// across the change reads the bytes it opened, a new open of it is stale. Returns the
    /// number of root entries let go.
    pub(crate) fn replace_model(&self, new: Arc<dyn Model>) -> usize {
        let old = std::mem::replace(
            &mut *self.model.write().unwrap_or_else(|e| e.into_inner()),
            Arc::clone(&new),
        );
        let kept: HashSet<Vec<u8>> = match (old.members(), new.members()) {
            (Some(before), Some(now)) => {
                let before: HashMap<Vec<u8>, u64> = before.into_iter().collect();
                now.into_iter()
                    .filter(|(name, id)| before.get(name) == Some(id))
                    .map(|(name, _)| name)
                    .collect()
            }
            _ => HashSet::new(),
        };
        let in_kept = |path: &[Vec<u8>]| path.first().is_some_and(|m| kept.contains(m));
        let keep = |node: &Node| matches!(node.kind(), NodeKind::Dir { path } if path.len() == 1 && in_kept(path));
        let fresh_root = Node::root();
        let let_go = self.nodes.replace_root(fresh_root, &keep);
        self.row_tables.clear();
        self.file_tensors.clear();
        self.views.retain(|root| in_kept(root));
        self.ctx.faults.clear();
        log::info!(
            "the source changed: {} of its entries changed or left, {} kept",
            let_go.len(),
            kept.len()
        );
        let n = let_go.len();
        if let Some(f) = self.on_changed.get() {
            f(let_go, vec![ROOT_INO]);
        }
        n
    }

    /// Sets who hears of placeholder sizes reported (`on_unknown`) and of sizes learnt after
    /// one was (`on_learnt`). Once per tree; later calls are ignored.
    pub(crate) fn listen_sizes(&self, on_unknown: SizeListener, on_learnt: SizeListener) {
        let _ = self.on_unknown.set(on_unknown);
        let _ = self.on_learnt.set(on_learnt);
    }

    /// Sets who hears of entries the kernel should let go of. Once per tree.
    pub(crate) fn listen_evictions(&self, on_evict: EvictListener) {
        let _ = self.on_evict.set(on_evict);
    }

    /// Number of nodes in the table now.
    pub(crate) fn inode_count(&self) -> u64 {
        self.nodes.len()
    }

    pub fn node(&self, ino: Ino) -> Result<Arc<Node>, FsError> {
        self.nodes.get(ino)
    }

    /// The kernel's LOOKUP: `lookup_ino`, counted for the kernel (see `nodes`). Undo with
    /// `forget(ino, 1)` when the reply fails.
    pub(crate) fn lookup(&self, parent: Ino, name: &[u8]) -> Result<Ino, FsError> {
        loop {
            let ino = self.lookup_ino(parent, name)?;
            match self.nodes.hold(ino)? {
                // Forgotten between the two: look again (it gets a new node).
                None => continue,
                Some(false) => return Ok(ino),
                Some(true) => {
                    let evict = self.nodes.took_row(ino);
                    if let Some(f) = self.on_evict.get() {
                        for (parent, name) in evict {
                            f(parent, name);
                        }
                    }
                    return Ok(ino);
                }
            }
        }
    }

    /// The kernel's FORGET: it let go of `n` lookups of `ino`.
    pub(crate) fn forget(&self, ino: Ino, n: u64) {
        self.nodes.forget(ino, n);
    }

    /// The cached listing of a directory node.
    fn listing(&self, node: &Node) -> Result<Arc<nodes::Listed>, FsError> {
        if node.gone.load(Ordering::Acquire) {
            // As a directory removed under a shell standing in it: empty, nothing found.
            return Ok(Arc::new(nodes::Listed::new(Arc::default())));
        }
        if let Some(l) = node.listing.get() {
            return Ok(l.clone());
        }
        let listing = match node.kind() {
            NodeKind::Dir { path } => {
                listing::list_model_dir(self.model().as_ref(), &self.ctx, path)?
            }
            NodeKind::Parts { tensor } => {
                listing::list_parts_dir(self.model().as_ref(), &self.ctx, tensor)?
            }
            NodeKind::Rows { tensor } => rows::listing(tensor),
            NodeKind::View {
                view,
                root,
                at,
                dir: true,
            } => {
                let ViewEntry::Dir(d) = self.view_entry(*view, root, at)? else {
                    return Err(FsError::NotDir);
                };
                let entries = d.entries().map_err(|e| {
                    let e = FsError::from(e);
                    log::error!("{}: {e}", self.path_of(node.ino));
                    e
                })?;
                let mut children: Vec<listing::Child> = entries
                    .iter()
                    .enumerate()
                    .map(|(i, (name, e))| listing::Child {
                        name: names::component_name(std::slice::from_ref(name)),
                        kind: NodeKind::View {
                            view: *view,
                            root: root.clone(),
                            at: at.iter().copied().chain([i]).collect(),
                            dir: matches!(e, ViewEntry::Dir(_)),
                        },
                    })
                    .collect();
                children.sort_by(|a, b| a.name.cmp(&b.name));
                Listing { children }
            }
            _ => return Err(FsError::NotDir),
        };
        // Another thread may have won the race; both listings are equal (immutable source).
        Ok(node
            .listing
            .get_or_init(|| Arc::new(nodes::Listed::new(Arc::new(listing))))
            .clone())
    }

    /// The inode of `name` in `parent` if one was assigned.
    fn known_child(&self, parent: Ino, name: &str) -> Result<Option<Ino>, FsError> {
        let dir = self.node(parent)?;
        self.nodes
            .known_child(parent, dir.listed().map(|l| &**l), name)
    }

    /// The inode of `child` of `parent`, a name no listing shows, assigning one on first
    /// sight.
    fn child_ino(&self, parent: Ino, child: &listing::Child) -> Result<Ino, FsError> {
        self.nodes.named(parent, &child.name, || {
            nodes::Entry::Own(Box::new(child.clone()))
        })
    }

    /// The inode of `name` in directory `parent`, without computing its attributes.
    pub(crate) fn lookup_ino(&self, parent: Ino, name: &[u8]) -> Result<Ino, FsError> {
        let dir = self.node(parent)?;
        if !dir.kind().is_dir() {
            return Err(FsError::NotDir);
        }
        match name {
            b"." => return Ok(parent),
            b".." => return Ok(dir.parent),
            _ if dir.gone.load(Ordering::Acquire) => return Err(FsError::NotFound),
            _ => {}
        }
        // The hidden views of a model root: found by name, never listed.
        if let (Some(i), NodeKind::Dir { path }) = (
            modelfs_views::NAMES
                .iter()
                .position(|v| v.as_bytes() == name),
            dir.kind(),
        ) {
            if self.model().model_roots().iter().any(|r| r[..] == path[..]) {
                let child = listing::Child {
                    name: modelfs_views::NAMES[i].to_string(),
                    kind: NodeKind::View {
                        view: i,
                        root: path.clone(),
                        at: Arc::from([]),
                        dir: modelfs_views::is_dir(i),
                    },
                };
                return self.child_ino(parent, &child);
            }
        }
        if let NodeKind::Rows { tensor } = dir.kind() {
            if name != rows::README {
                return self.lookup_row(parent, tensor, name);
            }
        }
        let listing = self.listing(&dir)?;
        match listing.position(name) {
            Some(i) => self.nodes.listed(parent, &listing, i),
            None => {
                let NodeKind::Dir { path } = dir.kind() else {
                    return Err(FsError::NotFound);
                };
                self.lookup_hidden(parent, path, &listing, name)
            }
        }
    }

    /// View `i` of the model at `root`, built (metadata only) on first use.
    fn view(&self, i: usize, root: &ModelPath) -> Result<Arc<modelfs_views::View>, FsError> {
        self.views.get(i, root, self.model().as_ref(), &self.ctx)
    }

    /// The entry at `at` of view `i` of the model at `root`.
    fn view_entry(&self, i: usize, root: &ModelPath, at: &[usize]) -> Result<ViewEntry, FsError> {
        let mut e = self.view(i, root)?.root.clone();
        for &k in at {
            let ViewEntry::Dir(d) = &e else {
                return Err(FsError::NotDir);
            };
            let entries = d.entries()?;
            e = entries.get(k).ok_or(FsError::NotFound)?.1.clone();
        }
        Ok(e)
    }

    /// Calls `emit` for each child of directory `ino` from position `offset` (0-based, `.` and
    /// `..` not included) until it returns false.
    pub fn readdir(
        &self,
        ino: Ino,
        offset: usize,
        mut emit: impl FnMut(DirItem<'_>) -> bool,
    ) -> Result<(), FsError> {
        let dir = self.node(ino)?;
        let listing = self.listing(&dir)?;
        for (i, child) in listing.children.iter().enumerate().skip(offset) {
            let item = DirItem {
                ino: self.nodes.listed(ino, &listing, i)?,
                kind: kind_of(&child.kind),
                name: &child.name,
            };
            if !emit(item) {
                break;
            }
        }
        Ok(())
    }

    /// The kernel's LOOKUP of a child `readdir` just handed out as `ino` (READDIRPLUS):
    /// counted as `lookup` counts it, without finding the name again.
    pub(crate) fn hold_listed(&self, parent: Ino, ino: Ino, name: &str) -> Result<Ino, FsError> {
        match self.nodes.hold(ino)? {
            Some(false) => Ok(ino),
            // A row file taken for the first time (no listing shows one but `README`'s
            // directory): held through `lookup`, which bounds the rows held.
            Some(true) => {
                self.forget(ino, 1);
                self.lookup(parent, name.as_bytes())
            }
            // Forgotten since it was listed: found again by name.
            None => self.lookup(parent, name.as_bytes()),
        }
    }

    #[cfg(test)]
    /// Checks that `ino` can be opened for reading; says how the kernel should read it.
    pub(crate) fn check_open(&self, ino: Ino, write: bool) -> Result<OpenMode, FsError> {
        let o = self.open(ino, write, &modelfs_layout::Patient)?;
        self.release(o.fh);
        Ok(o.mode)
    }

    pub(crate) fn readlink(&self, ino: Ino) -> Result<Vec<u8>, FsError> {
        match self.node(ino)?.kind() {
            NodeKind::Symlink { target } => Ok(target.clone()),
            _ => Err(FsError::Invalid),
        }
    }
}

fn kind_of(kind: &NodeKind) -> FileKind {
    match kind {
        k if k.is_dir() => FileKind::Dir,
        NodeKind::Symlink { .. } => FileKind::Symlink,
        _ => FileKind::File,
    }
}

/// What a file's log lines name besides its path: its layout, or `document`.
fn node_suffix(node: &Node) -> &'static str {
    match node.kind() {
        NodeKind::File { layout, .. } => layout.suffix(),
        NodeKind::Row { file, .. } => file.suffix(),
        NodeKind::Hidden { file, .. } => file.suffix(),
        _ => "document",
    }
}
