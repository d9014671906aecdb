//! modelfs's core, under both of its faces: the commands (`modelfs`, the root crate's `cli`)
//! and programs (`api`, which the Python package drives). Neither face reaches into the other;
//! both stand on these modules, each using only those before it (`layers_tests` checks it):
//!
//! - `options`: every `-o` option, once (`Options` and its table);
//! - `fs`: the tree of files a mount shows (FUSE-free: inodes, sizes, reads, xattrs) and the
//!   fuser adapter over it, following a source that changes;
//! - `open`: SOURCE opened as every command opens it (options, a path or a URL, the reader
//!   `modelfs_detect` picks, the tree), and `walk`: its tensors with their paths;
//! - `api`: the FUSE-free front door for programs.
//!
//! ```
//! let fixture = concat!(env!("CARGO_MANIFEST_DIR"), "/../../fixtures/tf/multi_shard/ckpt");
//! let opts = modelfs_core::open::parse_options(&[]).unwrap();
//! let model = modelfs_core::open::open_model(fixture.as_ref(), &opts).unwrap();
//! let found = modelfs_core::walk::walk(&*model).unwrap();
//! assert!(found.iter().any(|f| f.path == "a"));
//! ```

#![deny(clippy::undocumented_unsafe_blocks)]

/// The version and the commit this is built from (`0.1.0 (1a2b3c4d5e6f 2026-12-07)`), as
/// `modelfs --version` says it; see `build.rs`.
pub const VERSION: &str = env!("MODELFS_VERSION");

/// The same as a PEP 440 version (`0.1.0+g1a2b3c4d5e6f`): Python's `modelfs.__version__`.
pub const PEP440_VERSION: &str = env!("MODELFS_PEP440_VERSION");

pub mod api;
pub mod fs;
pub mod open;
pub mod options;
pub mod walk;

#[cfg(test)]
mod tests {
    /// The version is the crate's and names the commit checked out (where git can say it).
    #[test]
    fn the_version_names_the_commit_built_from() {
        let version = env!("CARGO_PKG_VERSION");
        assert!(
            super::VERSION.starts_with(&format!("{version} (")),
            "{}",
            super::VERSION
        );
        let head = std::process::Command::new("git")
            .args(["rev-parse", "--short=12", "HEAD"])
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .output();
        let Some(commit) = head.ok().filter(|o| o.status.success()) else {
            return;
        };
        let commit = String::from_utf8_lossy(&commit.stdout).trim().to_string();
        assert!(
            super::VERSION.contains(&format!("({commit} ")),
            "{} is not of {commit}",
            super::VERSION
        );
        assert_eq!(super::PEP440_VERSION, format!("{version}+g{commit}"));
    }
}
