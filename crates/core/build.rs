//! The commit a build is made from, so a user can tell which fixes a binary has:
//! `modelfs --version` says `0.1.0 (1a2b3c4d5e6f 2026-12-07)` (the commit and its date, not
//! the build's: two builds of one commit say the same), `modelfs.__version__` says
//! `0.1.0+g1a2b3c4d5e6f` (PEP 440's local version). `MODELFS_COMMIT` names the commit where
//! there is no git (a source archive); with neither, the version alone.

use std::path::Path;
use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    let text = String::from_utf8(out.stdout).ok()?;
    let text = text.trim();
    (out.status.success() && !text.is_empty()).then(|| text.to_string())
}

fn main() {
    println!("cargo:rerun-if-env-changed=MODELFS_COMMIT");
    let version = std::env::var("CARGO_PKG_VERSION").unwrap_or_default();
    let given = std::env::var("MODELFS_COMMIT")
        .ok()
        .filter(|c| !c.is_empty());
    let (commit, date) = match given {
        Some(c) => (Some(c), None),
        None => (
            git(&["rev-parse", "--short=12", "HEAD"]),
            git(&["log", "-1", "--format=%cs"]),
        ),
    };
    // Built again when HEAD moves. Only files that exist are named: cargo reruns a build
    // script on every build while a named file is missing.
    let mut watched = Vec::new();
    if let Some(dir) = git(&["rev-parse", "--git-dir"]) {
        watched.push(Path::new(&dir).join("HEAD"));
    }
    if let Some(common) = git(&["rev-parse", "--git-common-dir"]) {
        let common = Path::new(&common);
        watched.push(common.join("packed-refs"));
        if let Some(head) = git(&["symbolic-ref", "-q", "HEAD"]) {
            watched.push(common.join(head));
        }
    }
    for p in watched.iter().filter(|p| p.exists()) {
        println!("cargo:rerun-if-changed={}", p.display());
    }
    let (long, pep440) = match (&commit, &date) {
        (Some(c), Some(d)) => (format!("{version} ({c} {d})"), format!("{version}+g{c}")),
        (Some(c), None) => (format!("{version} ({c})"), format!("{version}+g{c}")),
        _ => (format!("{version} (commit unknown)"), version.clone()),
    };
    println!("cargo:rustc-env=MODELFS_VERSION={long}");
    println!("cargo:rustc-env=MODELFS_PEP440_VERSION={pep440}");
}
