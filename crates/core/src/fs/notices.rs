//! What the kernel is told without being asked, from threads of their own (never from inside
//! a request: the kernel may wait on that request): entries and inodes to drop (a size learnt
//! after a placeholder, a row held too long, a source that changed) and bytes pushed into the
//! page cache ahead of readers (`push`).

use std::ffi::OsStr;
use std::io;
use std::sync::Arc;

use fuser::INodeNo;

use super::sizing::SizePass;
use super::tree::Tree;
use crate::options::Options;

/// What the kernel is told without being asked.
enum Notice {
    /// A size was learnt after a placeholder was reported, or a directory's listing changed:
    /// drop the cached attributes (and pages).
    Inode(u64),
    /// A row held too long, or a name that left the source or now names another file: drop
    /// the entry (the kernel then forgets the node, or looks the name up again).
    Entry(u64, String),
}

/// Starts the notices of a mount — its background size pass, and the rows the kernel is
/// asked to let go of — sent from a thread of their own, never from inside a request (the
/// kernel may wait on that request).
/// A remote source's mount pushes nothing: its own stream reads ahead of a sequential reader
/// (one request for the rest of the object, `source::remote`), and pushing ahead would cost
/// downloads a reader may never want.
pub fn start_notices(
    tree: &Arc<Tree>,
    notifier: fuser::Notifier,
    opts: &Options,
    remote: bool,
) -> Arc<SizePass> {
    if !remote {
        tree.start_pushing(
            Arc::new(StoreSink(notifier.clone())),
            (opts.ahead, opts.ahead),
            opts.threads,
        );
    }
    let (tx, rx) = std::sync::mpsc::channel::<Notice>();
    let spawned = std::thread::Builder::new()
        .name("modelfs-notify".into())
        .spawn(move || {
            for notice in rx {
                // ENOENT: the kernel holds nothing for it; nothing to drop.
                let sent = match &notice {
                    Notice::Inode(ino) => notifier.inval_inode(INodeNo(*ino), 0, 0),
                    Notice::Entry(parent, name) => {
                        notifier.inval_entry(INodeNo(*parent), OsStr::new(name))
                    }
                };
                if let Err(e) = sent {
                    log::debug!("invalidating {:?}: {e}", Notice::describe(&notice));
                }
            }
        });
    if let Err(e) = spawned {
        log::warn!("no invalidation thread ({e})");
    }
    let evict = std::sync::Mutex::new(tx.clone());
    tree.listen_evictions(Box::new(move |parent, name| {
        let _ = evict.lock().map(|t| t.send(Notice::Entry(parent, name)));
    }));
    let changed = std::sync::Mutex::new(tx.clone());
    tree.listen_changes(Box::new(move |entries, inodes| {
        if let Ok(t) = changed.lock() {
            for (parent, name) in entries {
                let _ = t.send(Notice::Entry(parent, name));
            }
            for ino in inodes {
                let _ = t.send(Notice::Inode(ino));
            }
        }
    }));
    let tx = std::sync::Mutex::new(tx);
    SizePass::start(
        tree,
        Box::new(move |ino| {
            let _ = tx.lock().map(|t| t.send(Notice::Inode(ino)));
        }),
    )
}

/// Pushed bytes go into the kernel's page cache of the file.
struct StoreSink(fuser::Notifier);

impl super::push::Sink for StoreSink {
    fn store(&self, ino: u64, offset: u64, data: &[u8]) -> io::Result<()> {
        self.0.store(INodeNo(ino), offset, data)
    }
}

impl Notice {
    fn describe(&self) -> String {
        match self {
            Notice::Inode(ino) => format!("inode {ino}"),
            Notice::Entry(parent, name) => format!("entry {name} of inode {parent}"),
        }
    }
}
