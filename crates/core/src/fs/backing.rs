//! The kernel's handles on the files it reads itself (FUSE passthrough): one backing id per
//! inode, registered on the first open that passes the file through and shared by every
//! open of it (the kernel refuses two for one inode), let go with the last.

use std::collections::{HashMap, HashSet};
use std::io;
use std::sync::{Arc, Mutex};

use fuser::{BackingId, ReplyOpen};

/// A passed-through inode's backing id and the opens (file handles) that use it.
type Shared = (Arc<BackingId>, HashSet<u64>);

/// Every passed-through inode's, by inode.
#[derive(Default)]
pub(crate) struct BackingIds(Mutex<HashMap<u64, Shared>>);

impl BackingIds {
    /// The backing id of file `ino` on `file` for its open `fh`, registered with the kernel
    /// (through `reply`) on the file's first passed open.
    pub(crate) fn open(
        &self,
        (ino, fh): (u64, u64),
        file: &std::fs::File,
        reply: &ReplyOpen,
    ) -> io::Result<Arc<BackingId>> {
        // Held across the registration (one ioctl, no I/O): two first opens of one inode
        // must not register two ids.
        let mut ids = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((id, opens)) = ids.get_mut(&ino) {
            opens.insert(fh);
            return Ok(Arc::clone(id));
        }
        let id = Arc::new(reply.open_backing(file)?);
        ids.insert(ino, (Arc::clone(&id), HashSet::from([fh])));
        Ok(id)
    }

    /// Open `fh` of `ino` closed (passed or not): the file's backing id goes with its last
    /// passed open.
    pub(crate) fn release(&self, ino: u64, fh: u64) {
        let mut ids = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((_, opens)) = ids.get_mut(&ino) {
            opens.remove(&fh);
            if opens.is_empty() {
                ids.remove(&ino);
            }
        }
    }
}
