//! The mount's file tree, independent of FUSE: inodes, attributes, directory listings, file
//! contents and extended attributes. `fs::fuse` and the CLI (`ls`, `cat`) both drive this.
//!
//! Invariants:
//! - Inode numbers are assigned lazily on first lookup/readdir of a (parent, name), are never
//!   reused and never freed for the life of the tree (the source is immutable, so a name
//!   always denotes the same node). Inode 1 is the root.
//! - A directory's listing is computed once (metadata only) and cached in its node.
//! - A file's content object is opened once and cached in its node; failures are not cached.
//! - No lock is held while the model or a layout is called: the inode table lock only guards
//!   the table itself.

use std::collections::HashMap;
use std::sync::{Arc, OnceLock, RwLock};
use std::time::SystemTime;

use crate::layout::{self, FileContent, Layout, LayoutCtx};
use crate::model::{Model, Tensor};

use super::error::FsError;
use super::listing::{self, Listing, NodeKind};

pub(crate) type Ino = u64;
pub(crate) const ROOT_INO: Ino = 1;

/// What a file shows: a layout of a tensor (or of one partition).
pub(crate) type FileSource = (Layout, Arc<dyn Tensor>);

/// Xattr names on every tensor file.
pub(crate) const XATTR_DTYPE: &str = "user.modelfs.dtype";
pub(crate) const XATTR_SHAPE: &str = "user.modelfs.shape";

/// Mount-wide attribute settings.
#[derive(Clone, Debug)]
pub(crate) struct TreeConfig {
    pub(crate) uid: u32,
    pub(crate) gid: u32,
    /// mtime of directories and symlinks (the source's mtime).
    pub(crate) mtime: SystemTime,
}

impl TreeConfig {
    /// The mounting user, overridden by `uid=`/`gid=`.
    pub(crate) fn for_user(uid: Option<u32>, gid: Option<u32>, mtime: SystemTime) -> TreeConfig {
        // SAFETY: getuid/getgid cannot fail and touch no memory.
        let (ruid, rgid) = unsafe { (libc::getuid(), libc::getgid()) };
        TreeConfig {
            uid: uid.unwrap_or(ruid),
            gid: gid.unwrap_or(rgid),
            mtime,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum FileKind {
    Dir,
    File,
    Symlink,
}

/// What `stat` shows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Attr {
    pub(crate) ino: Ino,
    pub(crate) kind: FileKind,
    pub(crate) size: u64,
    pub(crate) perm: u16,
    pub(crate) nlink: u32,
    pub(crate) uid: u32,
    pub(crate) gid: u32,
    pub(crate) mtime: SystemTime,
}

impl Attr {
    pub(crate) fn blocks(&self) -> u64 {
        self.size.div_ceil(512)
    }
}

/// One entry handed out by `readdir`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct DirItem {
    pub(crate) ino: Ino,
    pub(crate) kind: FileKind,
    pub(crate) name: String,
}

struct Opened {
    tensor: Arc<dyn Tensor>,
    content: Arc<dyn FileContent>,
    size: u64,
}

pub(crate) struct Node {
    pub(crate) ino: Ino,
    pub(crate) parent: Ino,
    pub(crate) name: String,
    pub(crate) kind: NodeKind,
    listing: OnceLock<Arc<Listing>>,
    opened: OnceLock<Arc<Opened>>,
}

impl Node {
    fn new(ino: Ino, parent: Ino, name: String, kind: NodeKind) -> Node {
        Node {
            ino,
            parent,
            name,
            kind,
            listing: OnceLock::new(),
            opened: OnceLock::new(),
        }
    }

    pub(crate) fn file_kind(&self) -> FileKind {
        match self.kind {
            NodeKind::Dir { .. } | NodeKind::Parts { .. } => FileKind::Dir,
            NodeKind::File { .. } => FileKind::File,
            NodeKind::Symlink { .. } => FileKind::Symlink,
        }
    }
}

#[derive(Default)]
struct Inodes {
    /// `nodes[i]` has inode `i + 1`.
    nodes: Vec<Arc<Node>>,
    by_name: HashMap<(Ino, String), Ino>,
}

pub(crate) struct Tree {
    model: Arc<dyn Model>,
    ctx: Arc<LayoutCtx>,
    cfg: TreeConfig,
    inodes: RwLock<Inodes>,
}

impl Tree {
    pub(crate) fn new(model: Arc<dyn Model>, ctx: Arc<LayoutCtx>, cfg: TreeConfig) -> Tree {
        let root = Node::new(
            ROOT_INO,
            ROOT_INO,
            String::new(),
            NodeKind::Dir {
                path: Arc::from(Vec::new()),
            },
        );
        let inodes = Inodes {
            nodes: vec![Arc::new(root)],
            by_name: HashMap::new(),
        };
        Tree {
            model,
            ctx,
            cfg,
            inodes: RwLock::new(inodes),
        }
    }

    /// Number of inodes assigned so far.
    pub(crate) fn inode_count(&self) -> u64 {
        self.inodes
            .read()
            .map(|t| t.nodes.len() as u64)
            .unwrap_or(0)
    }

    pub(crate) fn node(&self, ino: Ino) -> Result<Arc<Node>, FsError> {
        let index = ino.checked_sub(1).ok_or(FsError::NotFound)?;
        let table = self
            .inodes
            .read()
            .map_err(|_| FsError::Io("inode table poisoned".into()))?;
        usize::try_from(index)
            .ok()
            .and_then(|i| table.nodes.get(i))
            .cloned()
            .ok_or(FsError::NotFound)
    }

    /// The cached listing of a directory node.
    fn listing(&self, node: &Node) -> Result<Arc<Listing>, FsError> {
        if let Some(l) = node.listing.get() {
            return Ok(l.clone());
        }
        let listing = match &node.kind {
            NodeKind::Dir { path } => {
                listing::list_model_dir(self.model.as_ref(), &self.ctx, path)?
            }
            NodeKind::Parts { tensor } => {
                listing::list_parts_dir(self.model.as_ref(), &self.ctx, tensor)?
            }
            _ => return Err(FsError::NotDir),
        };
        // Another thread may have won the race; both listings are equal (immutable source).
        let _ = node.listing.set(Arc::new(listing));
        node.listing.get().cloned().ok_or(FsError::Invalid)
    }

    /// The inode of `child` of `parent`, assigning one on first sight.
    fn child_ino(&self, parent: Ino, child: &listing::Child) -> Result<Ino, FsError> {
        let key = (parent, child.name.clone());
        {
            let table = self
                .inodes
                .read()
                .map_err(|_| FsError::Io("inode table poisoned".into()))?;
            if let Some(&ino) = table.by_name.get(&key) {
                return Ok(ino);
            }
        }
        let mut table = self
            .inodes
            .write()
            .map_err(|_| FsError::Io("inode table poisoned".into()))?;
        if let Some(&ino) = table.by_name.get(&key) {
            return Ok(ino);
        }
        let ino = table.nodes.len() as Ino + 1;
        let node = Node::new(ino, parent, child.name.clone(), child.kind.clone());
        table.nodes.push(Arc::new(node));
        table.by_name.insert(key, ino);
        Ok(ino)
    }

    /// The inode of `name` in directory `parent`, without computing its attributes.
    pub(crate) fn lookup_ino(&self, parent: Ino, name: &[u8]) -> Result<Ino, FsError> {
        let dir = self.node(parent)?;
        if !dir.kind.is_dir() {
            return Err(FsError::NotDir);
        }
        match name {
            b"." => return Ok(parent),
            b".." => return Ok(dir.parent),
            _ => {}
        }
        let listing = self.listing(&dir)?;
        let child = listing.find(name).ok_or(FsError::NotFound)?;
        self.child_ino(parent, child)
    }

    pub(crate) fn lookup(&self, parent: Ino, name: &[u8]) -> Result<Attr, FsError> {
        let ino = self.lookup_ino(parent, name)?;
        self.getattr(ino)
    }

    fn opened(&self, node: &Node) -> Result<Arc<Opened>, FsError> {
        if let Some(o) = node.opened.get() {
            return Ok(o.clone());
        }
        let NodeKind::File {
            tensor,
            layout,
            partition,
        } = &node.kind
        else {
            return Err(if node.kind.is_dir() {
                FsError::IsDir
            } else {
                FsError::Invalid
            });
        };
        let where_ = || format!("{} ({})", self.path_of(node.ino), layout.suffix());
        let result = (|| {
            let mut t = self.model.tensor(tensor)?;
            if let Some(i) = partition {
                t = t.partition(*i)?;
            }
            let content = layout::content(*layout, t.clone(), &self.ctx)
                .map_err(|e| FsError::Io(e.to_string()))?;
            let size = content.size()?;
            Ok(Opened {
                tensor: t,
                content,
                size,
            })
        })();
        match result {
            Ok(o) => {
                let _ = node.opened.set(Arc::new(o));
                node.opened.get().cloned().ok_or(FsError::Invalid)
            }
            Err(e) => {
                log::error!("{}: {e}", where_());
                Err(e)
            }
        }
    }

    pub(crate) fn getattr(&self, ino: Ino) -> Result<Attr, FsError> {
        let node = self.node(ino)?;
        let mut attr = Attr {
            ino,
            kind: node.file_kind(),
            size: 0,
            perm: 0o555,
            nlink: 1,
            uid: self.cfg.uid,
            gid: self.cfg.gid,
            mtime: self.cfg.mtime,
        };
        match &node.kind {
            NodeKind::Dir { .. } | NodeKind::Parts { .. } => {
                let subdirs = self.listing(&node)?.subdirs();
                attr.nlink = u32::try_from(subdirs.saturating_add(2)).unwrap_or(u32::MAX);
            }
            NodeKind::File { .. } => {
                let opened = self.opened(&node)?;
                attr.perm = 0o444;
                attr.size = opened.size;
                attr.mtime = opened.tensor.meta().mtime;
            }
            NodeKind::Symlink { target } => {
                attr.perm = 0o777;
                attr.size = target.len() as u64;
            }
        }
        Ok(attr)
    }

    /// Calls `emit` for each child of directory `ino` from position `offset` (0-based, `.` and
    /// `..` not included) until it returns false.
    pub(crate) fn readdir(
        &self,
        ino: Ino,
        offset: usize,
        mut emit: impl FnMut(DirItem) -> bool,
    ) -> Result<(), FsError> {
        let dir = self.node(ino)?;
        let listing = self.listing(&dir)?;
        for child in listing.children.iter().skip(offset) {
            let item = DirItem {
                ino: self.child_ino(ino, child)?,
                kind: match child.kind {
                    NodeKind::Dir { .. } | NodeKind::Parts { .. } => FileKind::Dir,
                    NodeKind::File { .. } => FileKind::File,
                    NodeKind::Symlink { .. } => FileKind::Symlink,
                },
                name: child.name.clone(),
            };
            if !emit(item) {
                break;
            }
        }
        Ok(())
    }

    /// Checks that `ino` can be opened for reading (content available, size known).
    pub(crate) fn check_open(&self, ino: Ino, write: bool) -> Result<(), FsError> {
        let node = self.node(ino)?;
        if write {
            return Err(FsError::ReadOnly);
        }
        self.opened(&node).map(|_| ())
    }

    /// Content object of a file (for streaming in `modelfs cat`).
    pub(crate) fn content(&self, ino: Ino) -> Result<(Arc<dyn FileContent>, u64), FsError> {
        let node = self.node(ino)?;
        let o = self.opened(&node)?;
        Ok((o.content.clone(), o.size))
    }

    /// Reads up to `buf.len()` bytes at `offset`; short only at end of file.
    pub(crate) fn read(&self, ino: Ino, offset: u64, buf: &mut [u8]) -> Result<usize, FsError> {
        let node = self.node(ino)?;
        let o = self.opened(&node)?;
        if offset >= o.size {
            return Ok(0);
        }
        let want = usize::try_from(o.size - offset).map_or(buf.len(), |left| left.min(buf.len()));
        let n = o.content.read_at(offset, &mut buf[..want]).map_err(|e| {
            let e = FsError::from(e);
            log::error!("{}: read at {offset}: {e}", self.path_of(ino));
            e
        })?;
        Ok(n.min(want))
    }

    pub(crate) fn readlink(&self, ino: Ino) -> Result<Vec<u8>, FsError> {
        match &self.node(ino)?.kind {
            NodeKind::Symlink { target } => Ok(target.clone()),
            _ => Err(FsError::Invalid),
        }
    }

    /// The layout and tensor (or partition) behind file `ino`, `None` for directories and
    /// symlinks. Metadata only: nothing is read or rendered.
    pub(crate) fn file_source(&self, ino: Ino) -> Result<Option<FileSource>, FsError> {
        let node = self.node(ino)?;
        let NodeKind::File { layout, .. } = &node.kind else {
            return Ok(None);
        };
        Ok(self.tensor_of(&node)?.map(|t| (*layout, t)))
    }

    fn tensor_of(&self, node: &Node) -> Result<Option<Arc<dyn Tensor>>, FsError> {
        let NodeKind::File {
            tensor, partition, ..
        } = &node.kind
        else {
            return Ok(None);
        };
        if let Some(o) = node.opened.get() {
            return Ok(Some(o.tensor.clone()));
        }
        // Metadata only: do not require the content (size) to be computable.
        let mut t = self.model.tensor(tensor)?;
        if let Some(i) = partition {
            t = t.partition(*i)?;
        }
        Ok(Some(t))
    }

    /// Names of the extended attributes of `ino` (empty for directories and symlinks).
    pub(crate) fn listxattr(&self, ino: Ino) -> Result<Vec<&'static str>, FsError> {
        let node = self.node(ino)?;
        Ok(match node.kind {
            NodeKind::File { .. } => vec![XATTR_DTYPE, XATTR_SHAPE],
            _ => Vec::new(),
        })
    }

    /// Value of extended attribute `name`: dtype name (`float32`), or shape as `[3, 4]`
    /// (`[]` for a scalar).
    ///
    /// Only the `user.` namespace exists here. Other namespaces (`security.selinux`,
    /// `system.posix_acl_access`, which `ls -l` asks for on every file) answer EOPNOTSUPP
    /// rather than ENODATA: tools such as coreutils then remember the file system as
    /// unsupported and stop asking, which saves two FUSE round trips per file in `ls -l`.
    pub(crate) fn getxattr(&self, ino: Ino, name: &[u8]) -> Result<Vec<u8>, FsError> {
        if !name.starts_with(b"user.") {
            return Err(FsError::NotSupported);
        }
        let node = self.node(ino)?;
        let tensor = self.tensor_of(&node)?.ok_or(FsError::NoData)?;
        let meta = tensor.meta();
        if name == XATTR_DTYPE.as_bytes() {
            Ok(meta.dtype.name().as_bytes().to_vec())
        } else if name == XATTR_SHAPE.as_bytes() {
            Ok(shape_text(&meta.shape).into_bytes())
        } else {
            Err(FsError::NoData)
        }
    }

    /// The path of `ino` from the root (`a/b.txt`; empty for the root).
    pub(crate) fn path_of(&self, mut ino: Ino) -> String {
        let mut parts = Vec::new();
        while ino != ROOT_INO {
            match self.node(ino) {
                Ok(n) => {
                    parts.push(n.name.clone());
                    ino = n.parent;
                }
                Err(_) => break,
            }
        }
        parts.reverse();
        parts.join("/")
    }

    /// Resolves a `/`-separated path from the root, following symlinks (at most 40).
    pub(crate) fn resolve(&self, path: &[u8]) -> Result<Ino, FsError> {
        let mut budget = 40u32;
        self.resolve_from(ROOT_INO, path, true, &mut budget)
    }

    fn resolve_from(
        &self,
        start: Ino,
        path: &[u8],
        follow_last: bool,
        budget: &mut u32,
    ) -> Result<Ino, FsError> {
        let mut ino = if path.first() == Some(&b'/') {
            ROOT_INO
        } else {
            start
        };
        let comps: Vec<&[u8]> = path
            .split(|&b| b == b'/')
            .filter(|c| !c.is_empty())
            .collect();
        for (i, comp) in comps.iter().enumerate() {
            let parent = ino;
            ino = self.lookup_ino(parent, comp)?;
            let last = i + 1 == comps.len();
            if let NodeKind::Symlink { target } = &self.node(ino)?.kind {
                if last && !follow_last {
                    break;
                }
                *budget = budget.checked_sub(1).ok_or(FsError::Loop)?;
                ino = self.resolve_from(parent, target, true, budget)?;
            }
        }
        Ok(ino)
    }

    /// Walks the subtree under directory `ino` depth-first in listing order, calling `emit`
    /// with each path relative to `ino` (directories end in `/`; symlinks are not followed).
    pub(crate) fn walk(
        &self,
        ino: Ino,
        prefix: &str,
        emit: &mut dyn FnMut(&str, FileKind),
    ) -> Result<(), FsError> {
        let mut items = Vec::new();
        self.readdir(ino, 0, |item| {
            items.push(item);
            true
        })?;
        for item in items {
            let path = format!("{prefix}{}", item.name);
            if item.kind == FileKind::Dir {
                let dir = format!("{path}/");
                emit(&dir, FileKind::Dir);
                self.walk(item.ino, &dir, emit)?;
            } else {
                emit(&path, item.kind);
            }
        }
        Ok(())
    }
}

/// `[3, 4]`, `[]` for a scalar.
pub(crate) fn shape_text(shape: &[u64]) -> String {
    let dims: Vec<String> = shape.iter().map(u64::to_string).collect();
    format!("[{}]", dims.join(", "))
}

/// How to answer a getxattr/listxattr with a caller buffer of `size` bytes.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum XattrReply {
    Size(u32),
    Data(Vec<u8>),
}

pub(crate) fn xattr_reply(value: Vec<u8>, size: u32) -> Result<XattrReply, FsError> {
    let len = u32::try_from(value.len()).map_err(|_| FsError::Range)?;
    if size == 0 {
        Ok(XattrReply::Size(len))
    } else if len > size {
        Err(FsError::Range)
    } else {
        Ok(XattrReply::Data(value))
    }
}

/// NUL-terminated names, as listxattr returns them.
pub(crate) fn xattr_list_bytes(names: &[&str]) -> Vec<u8> {
    let mut out = Vec::new();
    for n in names {
        out.extend_from_slice(n.as_bytes());
        out.push(0);
    }
    out
}
