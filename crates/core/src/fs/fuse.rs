//! The fuser `Filesystem` on top of `tree::Tree`: a thin translation of requests into tree
//! calls and of `FsError`s into errnos. Read-only: every modifying request gets EROFS.
//!
//! Caching: a file's bytes never change (a source that changes shows new files: `replace_model`,
//! whose entries the notice thread invalidates), so entries and attributes get long TTLs and
//! files are opened with FOPEN_KEEP_CACHE (page cache survives close/open), so mmap works. The one
//! exception is a text file whose size is not known yet: its placeholder size 0 gets no
//! attribute TTL and it is opened with FOPEN_DIRECT_IO (every read reaches us and ends at the
//! real end of file); once its size is learnt the kernel's copy of the inode is invalidated.
//! Directories are read with their entries' attributes (`readdirplus`, adaptive) and kept by
//! the kernel (FOPEN_CACHE_DIR): a walk of a tree costs a few requests per directory.

use std::ffi::OsStr;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use fuser::{
    AccessFlags, Config, Errno, FileAttr, FileHandle, FileType, Filesystem, FopenFlags, Generation,
    INodeNo, InitFlags, KernelConfig, LockOwner, MountOption, OpenAccMode, OpenFlags, ReplyAttr,
    ReplyData, ReplyDirectory, ReplyDirectoryPlus, ReplyEmpty, ReplyEntry, ReplyOpen, ReplyStatfs,
    ReplyXattr, Request, SessionACL, TimeOrNow,
};

use super::backing::BackingIds;
use super::caller::Caller;
use super::error::FsError;
use super::tree::{self, Attr, FileKind, OpenMode, Tree, XattrReply};
use crate::options::Options;
use modelfs_io::source::ReadExt;

/// How long the kernel may cache entries and attributes (changes are told: `Notice`).
const TTL: Duration = Duration::from_secs(24 * 3600);
/// Largest read we accept (the kernel asks for at most max_pages * page size).
const MAX_READ: u32 = 16 << 20;
/// Readahead we ask the kernel for (clamped to what it allows).
const READAHEAD: u32 = 4 << 20;
/// Entries of a READDIRPLUS reply whose sizes are learnt before any is sent (more than a
/// 32 KiB reply holds).
const SIZED_FIRST: usize = 256;
/// A directory's `st_blksize`: glibc's `opendir` then reads with its default 32 KiB buffer.
const DIR_BLKSIZE: u32 = 4096;

pub struct ModelFs {
    tree: Arc<Tree>,
    backing: BackingIds,
}

impl ModelFs {
    pub fn new(tree: Arc<Tree>) -> ModelFs {
        ModelFs {
            tree,
            backing: BackingIds::default(),
        }
    }
}

fn errno(e: &FsError) -> Errno {
    Errno::from_i32(e.errno())
}

/// The attribute TTL: none for a placeholder size, which must be asked for again.
fn attr_ttl(a: &Attr) -> Duration {
    if a.exact {
        TTL
    } else {
        Duration::ZERO
    }
}

fn file_type(kind: FileKind) -> FileType {
    match kind {
        FileKind::Dir => FileType::Directory,
        FileKind::File => FileType::RegularFile,
        FileKind::Symlink => FileType::Symlink,
    }
}

fn to_fuse(a: &Attr) -> FileAttr {
    FileAttr {
        ino: INodeNo(a.ino),
        size: a.size,
        blocks: a.blocks(),
        atime: a.mtime,
        mtime: a.mtime,
        ctime: a.mtime,
        crtime: a.mtime,
        kind: file_type(a.kind),
        perm: a.perm,
        nlink: a.nlink,
        uid: a.uid,
        gid: a.gid,
        rdev: 0,
        // Hint for readers' buffer sizes (cp, cat, python use st_blksize): 1 MiB reads make a
        // page-cache hit about 1.6x faster than 128 KiB ones on FUSE (fewer syscalls). Not for
        // a directory: glibc sizes its getdents buffer by it, and the kernel allocates (and
        // maps) a buffer of that size for every READDIR it sends, which made the kernel's
        // page allocator half the time of an `ls -lR`.
        blksize: match a.kind {
            FileKind::Dir => DIR_BLKSIZE,
            _ => 1 << 20,
        },
        flags: 0,
    }
}

/// fuser configuration for a mount with `opts`.
pub fn mount_config(opts: &Options, fsname: &str) -> Config {
    let mut cfg = Config::default();
    cfg.mount_options = vec![
        MountOption::RO,
        MountOption::NoDev,
        MountOption::NoSuid,
        MountOption::DefaultPermissions,
        MountOption::FSName(opts.fsname.clone().unwrap_or_else(|| fsname.to_string())),
    ];
    // The type `fuse.modelfs` (`findmnt -t fuse.modelfs`, fstab): fusermount3 makes it from
    // `subtype=`, but as root fuser mounts directly with type `fuse`, so the kernel is given
    // the subtype itself.
    // SAFETY: geteuid cannot fail.
    if unsafe { libc::geteuid() } == 0 {
        cfg.mount_options
            .push(MountOption::CUSTOM("subtype=modelfs".into()));
    } else {
        cfg.mount_options
            .push(MountOption::Subtype("modelfs".into()));
    }
    cfg.acl = if opts.allow_other {
        SessionACL::All
    } else if opts.allow_root {
        SessionACL::RootAndOwner
    } else {
        SessionACL::Owner
    };
    if opts.auto_unmount {
        // Only fusermount3 can watch the daemon; like libfuse, auto_unmount implies that root
        // may read too when nothing wider was asked.
        if has_fusermount() {
            cfg.mount_options.push(MountOption::AutoUnmount);
            if cfg.acl == SessionACL::Owner {
                cfg.acl = SessionACL::RootAndOwner;
            }
        } else {
            log::warn!("auto_unmount needs fusermount3 (package fuse3), which is missing: ignored");
        }
    }
    cfg.n_threads = Some(opts.threads.max(1));
    cfg.clone_fd = opts.threads > 1;
    cfg
}

fn has_fusermount() -> bool {
    std::env::var_os("PATH").is_some_and(|p| {
        std::env::split_paths(&p)
            .any(|d| d.join("fusermount3").is_file() || d.join("fusermount").is_file())
    })
}

/// A name for the mount table: the source path when it is made of safe characters (mount
/// options are comma-separated), else `modelfs`.
pub fn fsname_for(source: &Path) -> String {
    let s = source.to_string_lossy();
    let safe = !s.is_empty()
        && s.len() < 200
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"/._+-@:".contains(&b));
    if safe {
        format!("modelfs:{s}")
    } else {
        "modelfs".into()
    }
}

impl Filesystem for ModelFs {
    fn init(&mut self, _req: &Request, config: &mut KernelConfig) -> io::Result<()> {
        if let Err(max) = config.set_max_readahead(READAHEAD) {
            let _ = config.set_max_readahead(max);
        }
        let _ = config.set_max_background(64);
        for flag in [
            InitFlags::FUSE_PARALLEL_DIROPS,
            InitFlags::FUSE_CACHE_SYMLINKS,
            InitFlags::FUSE_MAX_PAGES,
            // Entries with their attributes (`readdirplus`): `ls -l`, `du`, `find -size` of a
            // directory cost a few requests, not a LOOKUP per file. Adaptive: the kernel asks
            // for them only where its callers go on to stat the entries.
            InitFlags::FUSE_DO_READDIRPLUS,
            InitFlags::FUSE_READDIRPLUS_AUTO,
        ] {
            let _ = config.add_capabilities(flag);
        }
        // Registering a backing file takes CAP_SYS_ADMIN; a depth of 1 keeps this mount
        // usable under overlayfs (a source on a stacked file system is then not passed).
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } == 0
            && config.add_capabilities(InitFlags::FUSE_PASSTHROUGH).is_ok()
            && config.set_max_stack_depth(1).is_ok()
        {
            self.tree.allow_passthrough();
        }
        Ok(())
    }

    fn lookup(&self, req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        let ino = match self.tree.lookup(parent.0, name.as_bytes()) {
            Ok(ino) => ino,
            Err(e) => return reply.error(errno(&e)),
        };
        match self
            .tree
            .getattr_for(ino, &Caller::new(&self.tree, ino, req.pid()))
        {
            Ok(a) => reply.entry_with_ttls(&attr_ttl(&a), &TTL, &to_fuse(&a), Generation(0)),
            Err(e) => {
                // The kernel takes nothing from an error reply.
                self.tree.forget(ino, 1);
                reply.error(errno(&e))
            }
        }
    }

    /// (BATCH_FORGET comes here too: fuser's default splits it.)
    fn forget(&self, _req: &Request, ino: INodeNo, nlookup: u64) {
        self.tree.forget(ino.0, nlookup);
    }

    /// No file here is a terminal or takes an ioctl: ENOTTY, what `isatty` and the probes of
    /// shells and editors expect, without fuser's "not implemented" log line for each.
    fn ioctl(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        _flags: fuser::IoctlFlags,
        _cmd: u32,
        _in_data: &[u8],
        _out_size: u32,
        reply: fuser::ReplyIoctl,
    ) {
        reply.error(Errno::ENOTTY);
    }

    fn getattr(&self, req: &Request, ino: INodeNo, fh: Option<FileHandle>, reply: ReplyAttr) {
        let caller = Caller::new(&self.tree, ino.0, req.pid());
        // With a file handle, the kernel asks for the size of an open file on the caller's
        // behalf: `lseek(SEEK_END)` (python's `seek(0, 2)`, `tail` of a file whose size is
        // known). A placeholder would send that reader to offset 0, so the size is learnt now,
        // on every core (the caller can Ctrl-C it). `stat`, `fstat` and `ls` never carry one.
        let attr = match fh {
            Some(_) => self.tree.attr_of_open_file(ino.0, &caller),
            None => self.tree.getattr_for(ino.0, &caller),
        };
        match attr {
            Ok(a) => reply.attr(&attr_ttl(&a), &to_fuse(&a)),
            Err(e) => reply.error(errno(&e)),
        }
    }

    fn setattr(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _mode: Option<u32>,
        _uid: Option<u32>,
        _gid: Option<u32>,
        _size: Option<u64>,
        _atime: Option<TimeOrNow>,
        _mtime: Option<TimeOrNow>,
        _ctime: Option<std::time::SystemTime>,
        _fh: Option<FileHandle>,
        _crtime: Option<std::time::SystemTime>,
        _chgtime: Option<std::time::SystemTime>,
        _bkuptime: Option<std::time::SystemTime>,
        _flags: Option<fuser::BsdFileFlags>,
        reply: ReplyAttr,
    ) {
        reply.error(Errno::EROFS);
    }

    fn readlink(&self, _req: &Request, ino: INodeNo, reply: ReplyData) {
        match self.tree.readlink(ino.0) {
            Ok(t) => reply.data(&t),
            Err(e) => reply.error(errno(&e)),
        }
    }

    fn mknod(
        &self,
        _req: &Request,
        _parent: INodeNo,
        _name: &OsStr,
        _mode: u32,
        _umask: u32,
        _rdev: u32,
        reply: ReplyEntry,
    ) {
        reply.error(Errno::EROFS);
    }

    fn mkdir(
        &self,
        _req: &Request,
        _parent: INodeNo,
        _name: &OsStr,
        _mode: u32,
        _umask: u32,
        reply: ReplyEntry,
    ) {
        reply.error(Errno::EROFS);
    }

    fn unlink(&self, _req: &Request, _parent: INodeNo, _name: &OsStr, reply: ReplyEmpty) {
        reply.error(Errno::EROFS);
    }

    fn rmdir(&self, _req: &Request, _parent: INodeNo, _name: &OsStr, reply: ReplyEmpty) {
        reply.error(Errno::EROFS);
    }

    fn symlink(
        &self,
        _req: &Request,
        _parent: INodeNo,
        _link_name: &OsStr,
        _target: &Path,
        reply: ReplyEntry,
    ) {
        reply.error(Errno::EROFS);
    }

    fn rename(
        &self,
        _req: &Request,
        _parent: INodeNo,
        _name: &OsStr,
        _newparent: INodeNo,
        _newname: &OsStr,
        _flags: fuser::RenameFlags,
        reply: ReplyEmpty,
    ) {
        reply.error(Errno::EROFS);
    }

    fn link(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _newparent: INodeNo,
        _newname: &OsStr,
        reply: ReplyEntry,
    ) {
        reply.error(Errno::EROFS);
    }

    fn open(&self, req: &Request, ino: INodeNo, flags: OpenFlags, reply: ReplyOpen) {
        let write = flags.acc_mode() != OpenAccMode::O_RDONLY || flags.0 & libc::O_TRUNC != 0;
        let caller = Caller::new(&self.tree, ino.0, req.pid());
        let o = match self.tree.open(ino.0, write, &caller) {
            Ok(o) => o,
            Err(e) => return reply.error(errno(&e)),
        };
        let fh = FileHandle(o.fh);
        if let Some(file) = o.backing.as_ref().and_then(|b| b.local_file()) {
            match self.backing.open((ino.0, o.fh), &file, &reply) {
                Ok(id) => return reply.opened_passthrough(fh, FopenFlags::empty(), &id),
                // Served by reads as any other file (a source on a stacked file system).
                Err(e) => log::debug!(
                    "{}: not passed through: {e}",
                    o.backing.as_ref().map_or("", |b| b.name())
                ),
            }
        }
        let flags = match o.mode {
            OpenMode::Cached | OpenMode::Passed => FopenFlags::FOPEN_KEEP_CACHE,
            OpenMode::Direct => FopenFlags::FOPEN_DIRECT_IO,
        };
        reply.opened(fh, flags);
    }

    fn release(
        &self,
        _req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        _flush: bool,
        reply: ReplyEmpty,
    ) {
        self.tree.release(fh.0);
        self.backing.release(ino.0, fh.0);
        reply.ok();
    }

    fn read(
        &self,
        req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        size: u32,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyData,
    ) {
        // One line per READ at trace level: how tests count the requests that reach us.
        log::trace!("read ino {} offset {offset} size {size}", ino.0);
        let len = size.min(MAX_READ) as usize;
        let caller = Caller::new(&self.tree, ino.0, req.pid());
        match self.tree.read(fh.0, offset, len, &caller) {
            Ok(bytes) => reply.data(&bytes),
            Err(e) => reply.error(errno(&e)),
        }
    }

    fn write(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        _offset: u64,
        _data: &[u8],
        _write_flags: fuser::WriteFlags,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: fuser::ReplyWrite,
    ) {
        reply.error(Errno::EROFS);
    }

    fn flush(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        _lock_owner: LockOwner,
        reply: ReplyEmpty,
    ) {
        reply.ok();
    }

    fn fsync(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        _datasync: bool,
        reply: ReplyEmpty,
    ) {
        reply.ok();
    }

    /// ENOSYS: directories need no handle, and the kernel then stops sending OPENDIR and
    /// RELEASEDIR (two round trips per directory a walk opens) and keeps every listing it
    /// read (FOPEN_KEEP_CACHE | FOPEN_CACHE_DIR, its default without OPENDIR): a listing
    /// never changes while its node lives (a changed source replaces the nodes, and the
    /// kernel is told), so a second walk of a tree reads no directory from us.
    fn opendir(&self, _req: &Request, _ino: INodeNo, _flags: OpenFlags, reply: ReplyOpen) {
        reply.error(Errno::ENOSYS);
    }

    fn readdir(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        mut reply: ReplyDirectory,
    ) {
        // Offsets: 1 after `.`, 2 after `..`, i + 3 after child i.
        let node = match self.tree.node(ino.0) {
            Ok(n) => n,
            Err(e) => return reply.error(errno(&e)),
        };
        if offset == 0 && reply.add(ino, 1, FileType::Directory, ".") {
            return reply.ok();
        }
        if offset <= 1 && reply.add(INodeNo(node.parent), 2, FileType::Directory, "..") {
            return reply.ok();
        }
        let first = usize::try_from(offset.saturating_sub(2)).unwrap_or(usize::MAX);
        let mut next = first as u64 + 3;
        let result = self.tree.readdir(ino.0, first, |item| {
            let full = reply.add(INodeNo(item.ino), next, file_type(item.kind), item.name);
            next += 1;
            !full
        });
        match result {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(errno(&e)),
        }
    }

    /// `readdir` with each entry's attributes, from what the listing knows (a text file's
    /// placeholder size stays one, with no TTL). Each entry but `.` and `..` counts as a
    /// lookup of it, as the kernel counts it.
    fn readdirplus(
        &self,
        req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        mut reply: ReplyDirectoryPlus,
    ) {
        let node = match self.tree.node(ino.0) {
            Ok(n) => n,
            Err(e) => return reply.error(errno(&e)),
        };
        let attr_of = |i: u64| {
            self.tree
                .getattr_for(i, &Caller::new(&self.tree, i, req.pid()))
                .ok()
        };
        let dots = [(ino.0, "."), (node.parent, "..")];
        for (k, (i, name)) in dots.into_iter().enumerate() {
            if offset > k as u64 {
                continue;
            }
            // The kernel takes no lookup of these two; a missing parent's attributes are
            // the directory's own (the root is its own parent).
            let Some(a) = attr_of(i).or_else(|| attr_of(ino.0)) else {
                return reply.error(Errno::EIO);
            };
            if reply.add(
                INodeNo(i),
                k as u64 + 1,
                name,
                &TTL,
                &to_fuse(&a),
                Generation(0),
            ) {
                return reply.ok();
            }
        }
        let first = usize::try_from(offset.saturating_sub(2)).unwrap_or(usize::MAX);
        // A tensor's `.json` shows the sizes of its other files, and only once it shows all
        // of them may the kernel keep its attributes: those files are sized first (the
        // listing order puts `.json` before `.npy` and `.txt`), so that `ls -l` needs no
        // LOOKUP of each `.json` afterwards.
        let mut seen = 0;
        let _ = self.tree.readdir(ino.0, first, |item| {
            seen += 1;
            if item.kind == FileKind::File && !item.name.ends_with(".json") {
                let _ = attr_of(item.ino);
            }
            seen < SIZED_FIRST
        });
        let mut next = first as u64 + 3;
        let mut failed = None;
        let result = self.tree.readdir(ino.0, first, |item| {
            // Held as a LOOKUP holds it: the kernel will FORGET it.
            let child = match self.tree.hold_listed(ino.0, item.ino, item.name) {
                Ok(c) => c,
                Err(e) => {
                    failed = Some(e);
                    return false;
                }
            };
            let (a, ttl) = match attr_of(child) {
                Some(a) => {
                    let ttl = attr_ttl(&a);
                    (to_fuse(&a), ttl)
                }
                // Listings never fail for a file's problem: a size unknown yet, asked again.
                None => (
                    to_fuse(&self.tree.placeholder_attr(child, item.kind)),
                    Duration::ZERO,
                ),
            };
            let full = reply.add(INodeNo(child), next, item.name, &ttl, &a, Generation(0));
            if full {
                // Not sent: the kernel never saw this lookup.
                self.tree.forget(child, 1);
            }
            next += 1;
            !full
        });
        match (result, failed) {
            (Ok(()), None) => reply.ok(),
            (Err(e), _) | (Ok(()), Some(e)) => reply.error(errno(&e)),
        }
    }

    fn fsyncdir(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        _datasync: bool,
        reply: ReplyEmpty,
    ) {
        reply.ok();
    }

    fn statfs(&self, _req: &Request, _ino: INodeNo, reply: ReplyStatfs) {
        reply.statfs(0, 0, 0, self.tree.inode_count(), 0, 4096, 255, 4096);
    }

    fn setxattr(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _name: &OsStr,
        _value: &[u8],
        _flags: i32,
        _position: u32,
        reply: ReplyEmpty,
    ) {
        reply.error(Errno::EROFS);
    }

    fn getxattr(&self, _req: &Request, ino: INodeNo, name: &OsStr, size: u32, reply: ReplyXattr) {
        let answer = self
            .tree
            .getxattr(ino.0, name.as_bytes())
            .and_then(|v| tree::xattr_reply(v, size));
        send_xattr(answer, reply);
    }

    fn listxattr(&self, _req: &Request, ino: INodeNo, size: u32, reply: ReplyXattr) {
        let answer = self
            .tree
            .listxattr(ino.0)
            .map(|names| tree::xattr_list_bytes(&names))
            .and_then(|v| tree::xattr_reply(v, size));
        send_xattr(answer, reply);
    }

    fn removexattr(&self, _req: &Request, _ino: INodeNo, _name: &OsStr, reply: ReplyEmpty) {
        reply.error(Errno::EROFS);
    }

    fn access(&self, _req: &Request, ino: INodeNo, mask: AccessFlags, reply: ReplyEmpty) {
        if mask.contains(AccessFlags::W_OK) {
            return reply.error(Errno::EROFS);
        }
        match self.tree.node(ino.0) {
            Ok(_) => reply.ok(),
            Err(e) => reply.error(errno(&e)),
        }
    }

    fn create(
        &self,
        _req: &Request,
        _parent: INodeNo,
        _name: &OsStr,
        _mode: u32,
        _umask: u32,
        _flags: i32,
        reply: fuser::ReplyCreate,
    ) {
        reply.error(Errno::EROFS);
    }

    fn fallocate(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        _offset: u64,
        _length: u64,
        _mode: i32,
        reply: ReplyEmpty,
    ) {
        reply.error(Errno::EROFS);
    }

    fn copy_file_range(
        &self,
        _req: &Request,
        _ino_in: INodeNo,
        _fh_in: FileHandle,
        _offset_in: u64,
        _ino_out: INodeNo,
        _fh_out: FileHandle,
        _offset_out: u64,
        _len: u64,
        _flags: fuser::CopyFileRangeFlags,
        reply: fuser::ReplyWrite,
    ) {
        reply.error(Errno::EROFS);
    }
}

fn send_xattr(answer: Result<XattrReply, FsError>, reply: ReplyXattr) {
    match answer {
        Ok(XattrReply::Size(n)) => reply.size(n),
        Ok(XattrReply::Data(d)) => reply.data(&d),
        Err(e) => reply.error(errno(&e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fsnames_are_safe_for_mount_options() {
        assert_eq!(
            fsname_for(Path::new("/m/model.ckpt-100")),
            "modelfs:/m/model.ckpt-100"
        );
        assert_eq!(fsname_for(Path::new("/m/a,b")), "modelfs");
        assert_eq!(fsname_for(Path::new("/m/a b")), "modelfs");
    }

    #[test]
    fn config_follows_options() {
        let mut o = Options::default();
        o.apply("threads=3,allow_other").unwrap();
        let c = mount_config(&o, "modelfs");
        assert_eq!(c.n_threads, Some(3));
        assert_eq!(c.acl, SessionACL::All);
        assert!(c.mount_options.contains(&MountOption::RO));
        let c = mount_config(&Options::default(), "modelfs");
        assert_eq!(c.acl, SessionACL::Owner);
        let mut o = Options::default();
        o.apply("allow_root,fsname=weights,debug").unwrap();
        let c = mount_config(&o, "modelfs");
        assert_eq!(c.acl, SessionACL::RootAndOwner);
        assert!(c
            .mount_options
            .contains(&MountOption::FSName("weights".into())));
        assert!(o.debug);
    }
}
