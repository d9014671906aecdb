//! Command line: mount, umount, ls, cat, info, index.

/// Runs the CLI, returning the process exit status (SPEC §4).
pub fn main() -> i32 {
    eprintln!("modelfs: not yet implemented");
    1
}
