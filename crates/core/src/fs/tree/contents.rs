//! Opening a file's content and its attributes: the content object made once per node,
//! the size learnt when cheap, when asked for, or in the background, and never changed.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use super::{
    node_suffix, Attr, FsError, Ino, Node, NodeKind, Opened, TextSize, Tree, ViewEntry, UNKNOWN,
};
use modelfs_layout::{Layout, Patient, Requester};

/// A text file whose tensor has at most this many elements (and, sparse, at most this many
/// stored bytes) has its size learnt on first sight: a few tens of milliseconds at most.
const CHEAP_ELEMENTS: u64 = 1 << 20;
const CHEAP_SPARSE_BYTES: u64 = 8 << 20;
/// Stored entries (plus rows) of a sparse matrix read by range whose text is sized on first
/// sight: each is decoded from text as well as rendered (a few ms for this many).
const CHEAP_SPARSE_UNITS: u64 = 1 << 16;

impl Tree {
    /// The content of the file at mount path `path` (any file a mount answers by name: a
    /// layout, a view, a document), for the API's reads.
    pub(crate) fn content_at(
        &self,
        path: &[u8],
    ) -> Result<Arc<dyn modelfs_layout::FileContent>, FsError> {
        let node = self.node(self.resolve(path)?)?;
        if node.kind().is_dir() {
            return Err(FsError::IsDir);
        }
        Ok(self.opened(&node, &Patient)?.content.clone())
    }

    /// The node's content object with its size if known, opening it on first use. A text
    /// file's size is learnt here only when cheap or in `TextSize::Exact` (for `req`).
    pub(super) fn opened(&self, node: &Node, req: &dyn Requester) -> Result<Arc<Opened>, FsError> {
        let (o, kept) = match node.opened.get() {
            Some(o) => (o.clone(), true),
            None => (Arc::new(self.open_node(node)?), false),
        };
        if let (false, Some((size, _))) = (kept, node.settled.get()) {
            o.size.store(size, Ordering::Release);
            return Ok(o);
        }
        if o.size().is_none() && !o.content.volatile() {
            let suffix = node_suffix(node);
            let learn_now = o.cheap || self.cfg.text_size == TextSize::Exact;
            let size = match o.content.known_size() {
                Some(s) => Some(s),
                // A file whose size cannot be learnt (its tensor is damaged, or a read failed)
                // still stats and lists, its size a placeholder as for one not learnt yet: a
                // listing never fails for a tensor's problem; its reads do (EIO). Nothing is
                // remembered, so a transient fault is tried again.
                None if learn_now => match o.content.size_for(req) {
                    Ok(s) => Some(s),
                    Err(e) => {
                        let e = FsError::from(e);
                        if matches!(e, FsError::Interrupted) {
                            return Err(e);
                        }
                        let what = format!("{} ({suffix}): {e}", self.path_of(node.ino));
                        if self.first_failure(node.ino, &o, what.clone(), &e) {
                            log::error!("{what}");
                        }
                        None
                    }
                },
                None => None,
            };
            if let Some(s) = size {
                self.set_size(node.ino, &o, s);
            }
        }
        if kept {
            return Ok(o);
        }
        if o.content.volatile() {
            // A `.json`: one content per node, its document fixed when first shown, so what
            // a `stat` said is what every later read returns (only a tensor's new read error
            // changes it, and the kernel is told: `json_changed`).
            return Ok(node.opened.get_or_init(|| o).clone());
        }
        match o.size() {
            Some(size)
                if o.cheap
                    && !o.logged.load(Ordering::Acquire)
                    && node.settled.set(size, o.mtime) =>
            {
                Ok(o)
            }
            // Another thread may have kept its own first: that one is the node's.
            _ => Ok(node.opened.get_or_init(|| o).clone()),
        }
    }

    /// Notes a failure of `o` (shown in its tensor's `.json`); true when it is to be logged:
    /// the first of its cause for the tensor (one line however many of its files and
    /// requests meet it), or the file's first when it shows no tensor.
    pub(super) fn first_failure(&self, ino: Ino, o: &Opened, what: String, e: &FsError) -> bool {
        match &o.tensor {
            Some(t) => {
                let first = self.ctx.faults.note(&t.meta().name, what, &e.to_string());
                self.json_changed(ino);
                first
            }
            None => o.first_failure(),
        }
    }

    /// The `.json` beside file `ino` (its tensor's) shows a new `last_error`: the kernel is
    /// told to drop the size it keeps (`settled`). A `.json` elsewhere (a partition's file
    /// failed) keeps its cached size until asked again; its reads are always current.
    fn json_changed(&self, ino: Ino) {
        let Ok(node) = self.node(ino) else { return };
        let Some((stem, _)) = node.name().rsplit_once('.') else {
            return;
        };
        let json = format!("{stem}.json");
        if let (Ok(Some(j)), Some(tell)) =
            (self.known_child(node.parent, &json), self.on_learnt.get())
        {
            tell(j);
        }
    }

    /// Records the size of `o` (file `ino`); tells `on_learnt` if a placeholder was reported.
    pub(super) fn set_size(&self, ino: Ino, o: &Opened, size: u64) {
        if o.size.swap(size, Ordering::AcqRel) == UNKNOWN
            && o.placeholder.load(Ordering::Acquire)
            && o.seeking.load(Ordering::Acquire) == 0
        {
            if let Some(f) = self.on_learnt.get() {
                f(ino);
            }
        }
    }

    /// A new content object for file `node` (`opened` decides whether the node keeps it).
    pub(super) fn open_node(&self, node: &Node) -> Result<Opened, FsError> {
        if node.gone.load(Ordering::Acquire) {
            return Err(FsError::Stale(format!(
                "{}: gone from the source",
                self.path_of(node.ino)
            )));
        }
        let result = match node.kind() {
            NodeKind::File {
                tensor,
                layout,
                partition,
            } => (|| {
                let mut t = self.file_tensors.get(&self.model(), tensor)?;
                if let Some(i) = partition {
                    t = t.partition(*i)?;
                }
                let content = modelfs_layout::content(*layout, t.clone(), &self.ctx)
                    .map_err(|e| FsError::Io(e.to_string()))?;
                let cheap = !layout.is_text() || is_cheap(&*t, *layout);
                Ok(Opened::new(Some(t.clone()), content, t.meta().mtime, cheap))
            })(),
            NodeKind::View {
                view,
                root,
                at,
                dir: false,
            } => (|| {
                let ViewEntry::File(content) = self.view_entry(*view, root, at)? else {
                    return Err(FsError::IsDir);
                };
                // A size that needs rendering (an `.angel/` text partition) is learnt like a
                // text file's.
                let cheap = content.known_size().is_some();
                Ok(Opened::new(None, content.clone(), self.cfg.mtime, cheap))
            })(),
            NodeKind::Doc { path } => (|| {
                let doc = self.model().document(path)?;
                let (mtime, cheap) = (doc.mtime(), doc.small());
                Ok(Opened::new(
                    None,
                    modelfs_layout::document(doc, &self.ctx),
                    mtime,
                    cheap,
                ))
            })(),
            NodeKind::Row { tensor, id, file } => self.open_row(tensor, *id, *file),
            NodeKind::RowsReadme { tensor } => self.open_rows_readme(tensor),
            NodeKind::Hidden { tensor, file } => self.open_hidden(tensor, *file),
            k if k.is_dir() => return Err(FsError::IsDir),
            _ => return Err(FsError::Invalid),
        };
        match result {
            Ok(o) => Ok(o),
            Err(e) => {
                log::error!("{} ({}): {e}", self.path_of(node.ino), node_suffix(node));
                Err(e)
            }
        }
    }

    /// Learns the size of file `ino` if it is not known yet (the background size pass, or a
    /// reader seeking to the end). Returns whether it was unknown before.
    pub(crate) fn learn_size(&self, ino: Ino, req: &dyn Requester) -> Result<bool, FsError> {
        let node = self.node(ino)?;
        if node.kind().is_dir() || matches!(node.kind(), NodeKind::Symlink { .. }) {
            return Ok(false);
        }
        let o = self.opened(&node, req)?;
        if o.size().is_some() || o.content.volatile() {
            return Ok(false);
        }
        let s = o.content.size_for(req)?;
        self.set_size(ino, &o, s);
        Ok(true)
    }

    /// Attributes of file `ino` asked for on behalf of a reader that has it open (the
    /// kernel's `lseek(SEEK_END)`): a size not known yet is learnt first, on every core.
    pub(crate) fn attr_of_open_file(&self, ino: Ino, req: &dyn Requester) -> Result<Attr, FsError> {
        let node = self.node(ino)?;
        let Some(o) = node.opened.get().cloned() else {
            return self.getattr_for(ino, req);
        };
        o.seeking.fetch_add(1, Ordering::AcqRel);
        let learnt = self.learn_size(ino, req);
        o.seeking.fetch_sub(1, Ordering::AcqRel);
        learnt?;
        self.getattr_for(ino, req)
    }

    pub fn getattr(&self, ino: Ino) -> Result<Attr, FsError> {
        self.getattr_for(ino, &Patient)
    }

    /// Attributes of `ino` that say nothing yet (size 0, not exact: asked for again), for a
    /// listing that must not fail where `getattr_for` does.
    pub(crate) fn placeholder_attr(&self, ino: Ino, kind: super::FileKind) -> Attr {
        Attr {
            ino,
            kind,
            size: 0,
            // Write bits as any copied file has them: the mount is read-only (EROFS), and a
            // `cp -r` by a non-root user keeps these modes, so r-x-only directories would
            // make the copy unremovable.
            perm: 0o755,
            nlink: 1,
            uid: self.cfg.uid,
            gid: self.cfg.gid,
            mtime: self.cfg.mtime,
            exact: false,
        }
    }

    /// Attributes of `ino`; a text size is learnt for `req` only if cheap or in `Exact` mode.
    pub(crate) fn getattr_for(&self, ino: Ino, req: &dyn Requester) -> Result<Attr, FsError> {
        let node = self.node(ino)?;
        let mut attr = Attr {
            exact: true,
            ..self.placeholder_attr(ino, node.file_kind())
        };
        match node.kind() {
            NodeKind::Dir { path }
                if node.listing.get().is_none()
                    && path.len() == 1
                    && self.model().member_opened(&path[0]) == Some(false) =>
            {
                // A checkpoint of a directory of many, not opened yet: its subdirectories
                // are not counted (that would open it). 1 is the "not counted" of btrfs
                // and network file systems; find(1) then reads the directory itself.
            }
            k if k.is_dir() => {
                let subdirs = self.listing(&node)?.subdirs();
                attr.nlink = u32::try_from(subdirs.saturating_add(2)).unwrap_or(u32::MAX);
            }
            NodeKind::File { .. }
            | NodeKind::Doc { .. }
            | NodeKind::View { .. }
            | NodeKind::Row { .. }
            | NodeKind::Hidden { .. }
            | NodeKind::RowsReadme { .. } => {
                if let Some((size, mtime)) = node.settled.get() {
                    attr.perm = 0o644;
                    attr.size = size;
                    attr.mtime = mtime;
                    return Ok(attr);
                }
                let opened = self.opened(&node, req)?;
                attr.perm = 0o644;
                attr.mtime = opened.mtime;
                if opened.content.volatile() {
                    // Its size as it stands, cached only while settled (a change is told).
                    attr.size = opened.content.known_size().unwrap_or(0);
                    attr.exact = opened.content.settled();
                    return Ok(attr);
                }
                match opened.size() {
                    Some(s) => attr.size = s,
                    None => {
                        attr.exact = false;
                        opened.placeholder.store(true, Ordering::Release);
                        if let Some(f) = self.on_unknown.get() {
                            f(ino);
                        }
                    }
                }
            }
            NodeKind::Symlink { target } => {
                attr.perm = 0o777;
                attr.size = target.len() as u64;
            }
            NodeKind::Dir { .. } | NodeKind::Parts { .. } | NodeKind::Rows { .. } => {}
        }
        Ok(attr)
    }
}

/// Whether a text layout of tensor `t` is cheap enough to size on first sight: what it
/// renders is known to be small from metadata alone. A matrix's values are decoded (from text,
/// from partitions) as well as rendered, so it goes by the smaller sparse bound.
fn is_cheap(t: &dyn modelfs_model::Tensor, layout: Layout) -> bool {
    let meta = t.meta();
    let limit = match meta.role {
        modelfs_model::Role::Matrix => CHEAP_SPARSE_UNITS,
        _ => CHEAP_ELEMENTS,
    };
    let small = meta.num_elements().is_some_and(|n| n <= limit);
    if !meta.sparse {
        return small;
    }
    match layout {
        // Dense forms of a sparse matrix render every element (an LR's 2^31 columns),
        // whatever is stored.
        Layout::Txt | Layout::Csv => small,
        // The sparse forms (libsvm, Angel's) render the stored entries: counted by the
        // shape when it is metadata (entries read by range), else by the bytes to decode.
        _ if t.sparse_shape_is_cheap() => t
            .sparse_shape()
            .is_ok_and(|s| s.nnz().saturating_add(s.rows.len() as u64) <= CHEAP_SPARSE_UNITS),
        _ => meta
            .partitions
            .iter()
            .try_fold(0u64, |acc, p| acc.checked_add(p.length))
            .is_some_and(|b| b != 0 && b <= CHEAP_SPARSE_BYTES),
    }
}
