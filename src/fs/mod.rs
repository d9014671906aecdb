//! The tree of files (FUSE-independent core) and the FUSE adapter.
