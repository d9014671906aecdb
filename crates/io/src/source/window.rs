//! A run of another source, read as a source of its own: a member stored whole inside a
//! container (a `torch.save` archive at an offset of a PyTorch DCP `.distcp` file, an HDF5
//! file stored in a `.keras` zip) is read in place by the reader of its own format, which
//! sees offsets from the member's first byte.
//!
//! Invariant: `offset + about.size <= parent.size()`, checked once at `Window::new`, so every
//! read inside the window is a read inside the parent; the parent's own checks (a file
//! changed, a remote object replaced) stay in force.

use std::sync::Arc;

use super::{About, ReadAt, ReadCtx, ReadExt, SourceError, To};

#[derive(Debug)]
pub struct Window {
    parent: Arc<dyn ReadAt>,
    offset: u64,
    about: About,
}

impl Window {
    /// Bytes `offset..offset + len` of `parent`, named `parent[offset..end]` in errors; an
    /// error if they are not all inside it.
    pub fn new(parent: Arc<dyn ReadAt>, offset: u64, len: u64) -> Result<Window, SourceError> {
        let end = super::checked_end(parent.name(), offset, len, parent.size())?;
        let p = parent.about();
        let about = About {
            name: format!("{}[{offset}..{end}]", p.name),
            size: len,
            mtime: p.mtime,
            identity: p.identity,
            version: p.version.clone(),
        };
        Ok(Window {
            parent,
            offset,
            about,
        })
    }
}

impl ReadAt for Window {
    fn about(&self) -> &About {
        &self.about
    }

    fn read_with(&self, ctx: &ReadCtx, offset: u64, to: To<'_>) -> Result<(), SourceError> {
        if let To::Runs(starts, out) = to {
            // Each run checked against the window on its own (its start may lie anywhere).
            return super::read::each_run(&self.about.name, offset, starts, out, |at, run| {
                self.read_with(ctx, at, To::Fill(run))
            });
        }
        super::checked_end(&self.about.name, offset, to.len(), self.about.size)?;
        // Inside the window, hence inside the parent (`new`): no overflow.
        let at = self.offset + offset;
        match to {
            To::Parts(len, visit) => {
                let base = self.offset;
                self.parent.read_with(
                    ctx,
                    at,
                    // An empty piece may come with any offset.
                    To::Parts(len, &|off: u64, b: &[u8]| {
                        visit(off.saturating_sub(base), b)
                    }),
                )
            }
            to => self.parent.read_with(ctx, at, to),
        }
    }

    fn done_with(&self, offset: u64, len: u64) {
        let len = len.min(self.about.size.saturating_sub(offset));
        self.parent
            .done_with(self.offset.saturating_add(offset), len);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::source::MemSource;
    use std::sync::Mutex;

    fn parent() -> (Vec<u8>, Arc<dyn ReadAt>) {
        let data: Vec<u8> = (0..10_000u32).map(|i| (i % 251) as u8).collect();
        let src: Arc<dyn ReadAt> = Arc::new(MemSource::new("p", data.clone()));
        (data, src)
    }

    #[test]
    fn reads_are_the_parents_bytes_from_the_windows_start() {
        let (data, p) = parent();
        let w = Window::new(p, 1000, 3000).unwrap();
        assert_eq!(w.size(), 3000);
        assert_eq!(w.name(), "p[1000..4000]");
        assert_eq!(w.read_vec(0, 10).unwrap(), &data[1000..1010]);
        assert_eq!(w.read_vec(2990, 10).unwrap(), &data[3990..4000]);
        let mut runs = vec![0u8; 4];
        w.read_with(ReadCtx::none(), 10, To::Runs(&[0, 100], &mut runs))
            .unwrap();
        assert_eq!(runs, [&data[1010..1012], &data[1110..1112]].concat());
        let seen = Mutex::new(Vec::new());
        w.read_with(
            ReadCtx::none(),
            500,
            To::Parts(100, &|at, b| seen.lock().unwrap().push((at, b.to_vec()))),
        )
        .unwrap();
        assert_eq!(*seen.lock().unwrap(), [(500, data[1500..1600].to_vec())]);
    }

    #[test]
    fn nothing_outside_the_window_is_read() {
        let (_, p) = parent();
        let w = Window::new(Arc::clone(&p), 1000, 3000).unwrap();
        assert!(
            w.read_vec(2995, 10).is_err(),
            "past its end, inside the parent"
        );
        assert!(w.read_vec(u64::MAX - 2, 5).is_err());
        assert!(Window::new(Arc::clone(&p), 9000, 1001).is_err());
        assert!(Window::new(Arc::clone(&p), u64::MAX, 2).is_err());
        assert!(Window::new(p, 10_000, 0)
            .unwrap()
            .read_vec(0, 0)
            .unwrap()
            .is_empty());
    }
}

#[cfg(test)]
mod outside_tests {
    use crate::source::{is_transient, Outside, SourceError};

    /// A remote fault opening a named file stays a link of the chain: a reader asking
    /// `is_transient` sees it and keeps no verdict.
    #[test]
    fn a_remote_fault_behind_open_inside_is_transient() {
        let e = Outside::from(SourceError::Remote {
            url: "s3://b/k".into(),
            cause: "503".into(),
        });
        assert!(is_transient(&e));
        assert!(!is_transient(&Outside::Leaves));
    }
}
