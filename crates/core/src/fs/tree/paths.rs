//! Paths: a node's path from the root, a path resolved to a node (symlinks followed), and
//! a subtree walked in listing order (the CLI's `ls -R` and `cat`).

use super::{FileKind, FsError, Ino, NodeKind, Tree, ROOT_INO};

impl Tree {
    /// The path of `ino` from the root (`a/b.txt`; empty for the root).
    pub(crate) fn path_of(&self, mut ino: Ino) -> String {
        let mut parts = Vec::new();
        while ino != ROOT_INO {
            match self.node(ino) {
                Ok(n) => {
                    parts.push(n.name().to_string());
                    ino = n.parent;
                }
                Err(_) => break,
            }
        }
        parts.reverse();
        parts.join("/")
    }

    /// Resolves a `/`-separated path from the root, following symlinks (at most 40).
    pub fn resolve(&self, path: &[u8]) -> Result<Ino, FsError> {
        let mut budget = 40u32;
        self.resolve_from(ROOT_INO, path, true, &mut budget)
    }

    pub(super) fn resolve_from(
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
            if let NodeKind::Symlink { target } = self.node(ino)?.kind() {
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
    pub fn walk(
        &self,
        ino: Ino,
        prefix: &str,
        emit: &mut dyn FnMut(&str, FileKind),
    ) -> Result<(), FsError> {
        let mut items = Vec::new();
        self.readdir(ino, 0, |item| {
            items.push(item.owned());
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
