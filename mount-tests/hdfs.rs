//! HDFS sources against a real HDFS on loopback: a MiniDFSCluster (NameNode and two DataNodes,
//! replication 2) run by `scripts/hdfs` (Hadoop's own jars from Maven Central, built by
//! `scripts/hdfs/build.sh`), started and stopped here. Files are put there by Hadoop's own
//! client; each is mounted by `hdfs://` and compared, file by file and byte for byte, with the
//! mount of its local copy.
//!
//! Without java and the built launcher the tests fail under CI (`.ci/run` builds it) and are
//! skipped with a message elsewhere.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};

use crate::remote::{assert_same_mounts, ls_with, sources, OPTS};
use crate::support::*;

/// The launcher's jar, built by `scripts/hdfs/build.sh`.
fn jar() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("scripts/hdfs/target/minihdfs.jar")
}

/// A running MiniDFSCluster, driven by the launcher's line protocol; shut down on drop (and by
/// the launcher itself when its stdin closes, should this process die first).
struct MiniHdfs {
    child: Child,
    input: ChildStdin,
    output: BufReader<ChildStdout>,
    namenode: String,
    _dir: tempfile::TempDir,
}

impl MiniHdfs {
    fn start() -> Option<MiniHdfs> {
        if !jar().exists() {
            assert!(
                !modelfs::testing::must_be_complete(),
                "{} is not built (CI builds it: scripts/hdfs/build.sh)",
                jar().display()
            );
            eprintln!("skipping: scripts/hdfs is not built (scripts/hdfs/build.sh)");
            return None;
        }
        let dir = tempfile::tempdir().unwrap();
        let mut child = Command::new("java")
            .args(["-Xmx512m", "-jar"])
            .arg(jar())
            .arg(dir.path())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("java runs");
        let input = child.stdin.take().unwrap();
        let mut output = BufReader::new(child.stdout.take().unwrap());
        let mut ready = String::new();
        output.read_line(&mut ready).unwrap();
        let v: serde_json::Value = serde_json::from_str(&ready).unwrap_or_else(|e| {
            let log = std::fs::read_to_string(dir.path().join("minihdfs.log")).unwrap_or_default();
            panic!(
                "the cluster did not start ({e}): {ready}\n{}",
                &log[log.len().saturating_sub(4000)..]
            )
        });
        let namenode = v["namenode"].as_str().unwrap().to_string();
        Some(MiniHdfs {
            child,
            input,
            output,
            namenode,
            _dir: dir,
        })
    }

    /// Sends one command; its answer must be `ok`.
    fn command(&mut self, line: &str) {
        writeln!(self.input, "{line}").unwrap();
        self.input.flush().unwrap();
        let mut answer = String::new();
        self.output.read_line(&mut answer).unwrap();
        assert_eq!(answer.trim(), "ok", "{line}");
    }

    /// Puts local `from` (a file or a directory) at HDFS path `to` with Hadoop's client.
    fn put(&mut self, from: &Path, to: &str) {
        self.command(&format!("put {} {to}", from.display()));
    }
}

impl Drop for MiniHdfs {
    fn drop(&mut self) {
        let _ = writeln!(self.input, "quit");
        let _ = self.input.flush();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        while std::time::Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Committed fixtures and shared real models (every other one), put on HDFS by Hadoop's client (each root
/// whole) and mounted by `hdfs://NAMENODE/PATH` with every layout, equals its local mount file
/// for file and byte for byte (a source refused locally is refused the same way by URL);
/// `modelfs ls` by URL lists what the local one does.
#[test]
fn hdfs_sources_read_like_local() {
    let Some(fuse) = Fuse::check() else { return };
    let Some(mut hdfs) = MiniHdfs::start() else {
        return;
    };
    // Every other source (kinds alternate in the list: TF checkpoints of every form, Angel,
    // hash tables, torch, GGUF, numpy, safetensors): the S3 and HTTP tests take them all, and
    // CI's time is bounded.
    let sources: Vec<_> = sources().into_iter().step_by(2).collect();
    let mut roots: Vec<&PathBuf> = sources.iter().map(|(r, _)| r).collect();
    roots.sort();
    roots.dedup();
    for (i, root) in roots.iter().enumerate() {
        hdfs.put(root, &format!("/models{i}"));
    }
    let (mut checked, mut models) = (0, 0);
    for (root, source) in &sources {
        let i = roots.iter().position(|r| r == &root).unwrap();
        let key = source.strip_prefix(root).unwrap().display().to_string();
        let base = format!("{}/models{i}", hdfs.namenode);
        let url = PathBuf::from(format!("{base}/{key}"));
        let refused = ls_with(source, OPTS).status.code();
        if refused != Some(0) {
            assert_eq!(
                ls_with(&url, OPTS).status.code(),
                refused,
                "{}",
                url.display()
            );
            continue;
        }
        let local = fuse.mount(source, OPTS);
        let remote = fuse.mount(&url, OPTS);
        let what = url.display().to_string();
        checked += assert_same_mounts(local.path(), remote.path(), &what, (root, &base));
        remote.unmount_and_check();
        local.unmount_and_check();
        if models == 0 {
            assert_eq!(
                ls_with(&url, OPTS).stdout,
                ls_with(source, OPTS).stdout,
                "{what}"
            );
        }
        models += 1;
    }
    assert!(
        models > 10 && checked > 500,
        "{models} models, {checked} files compared"
    );
}

/// A path that is not there, said in one line naming the URL.
#[test]
fn a_missing_hdfs_path_says_so() {
    let Some(hdfs) = MiniHdfs::start() else {
        return;
    };
    let url = format!("{}/no/such/model", hdfs.namenode);
    let o = Command::new(modelfs())
        .args(["info", &url])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains(&url) && err.lines().count() == 1, "{err}");
}
