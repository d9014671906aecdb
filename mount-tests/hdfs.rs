//! HDFS sources against a real HDFS on loopback: a MiniDFSCluster (NameNode and two DataNodes,
//! replication 2) run by `scripts/hdfs` (Hadoop's own jars from Maven Central, built by
//! `scripts/hdfs/build.sh`), started and stopped here. Files are put there by Hadoop's own
//! client; each is mounted by `hdfs://` and compared, file by file and byte for byte, with the
//! mount of its local copy. Two more clusters: an HA pair (`--ha`, a failover mid-read) and a
//! Kerberized one (`--kerberos`, a KDC of its own; `kinit` from Debian's krb5-user).
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
    /// `webhdfs://127.0.0.1:PORT`.
    webhdfs: String,
    /// The launcher's ready line (`conf_dir`, `nameservice`, `krb5_conf`, …).
    ready: serde_json::Value,
    _dir: tempfile::TempDir,
}

impl MiniHdfs {
    fn start() -> Option<MiniHdfs> {
        MiniHdfs::start_with(&[])
    }

    /// A cluster started with the launcher's `options` (`--ha`, `--kerberos`).
    fn start_with(options: &[&str]) -> Option<MiniHdfs> {
        if !jar().exists() {
            assert!(
                !modelfs_model::testing::must_be_complete(),
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
            .args(options)
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
        let webhdfs = v["webhdfs"]
            .as_str()
            .unwrap()
            .replace("http://", "webhdfs://");
        Some(MiniHdfs {
            child,
            input,
            output,
            namenode,
            webhdfs,
            ready: v,
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

    /// A string of the ready line.
    fn get(&self, key: &str) -> String {
        self.ready[key]
            .as_str()
            .unwrap_or_else(|| panic!("no {key} in the ready line: {}", self.ready))
            .to_string()
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
/// whole) and mounted by `hdfs://NAMENODE/PATH` and by `webhdfs://NAMENODE/PATH` with every layout, equals its local mount file
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
        let refused = ls_with(source, OPTS).status.code();
        let local = (refused == Some(0)).then(|| fuse.mount(source, OPTS));
        for cluster in [&hdfs.namenode, &hdfs.webhdfs] {
            let base = format!("{cluster}/models{i}");
            let url = PathBuf::from(format!("{base}/{key}"));
            let what = url.display().to_string();
            let Some(local) = &local else {
                assert_eq!(ls_with(&url, OPTS).status.code(), refused, "{what}");
                continue;
            };
            let remote = fuse.mount(&url, OPTS);
            checked += assert_same_mounts(local.path(), remote.path(), &what, (root, &base));
            remote.unmount_and_check();
            if models < 2 {
                assert_eq!(
                    ls_with(&url, OPTS).stdout,
                    ls_with(source, OPTS).stdout,
                    "{what}"
                );
            }
            models += 1;
        }
        if let Some(local) = local {
            local.unmount_and_check();
        }
    }
    assert!(
        models > 20 && checked > 1000,
        "{models} models, {checked} files compared"
    );
}

/// A path that is not there, said in one line naming the URL.
#[test]
fn a_missing_hdfs_path_says_so() {
    let Some(hdfs) = MiniHdfs::start() else {
        return;
    };
    for cluster in both(&hdfs) {
        let url = format!("{cluster}/no/such/model");
        let o = Command::new(modelfs())
            .args(["info", &url])
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(2));
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(err.contains(&url) && err.lines().count() == 1, "{err}");
    }
}

/// A checkpoint whose `big` tensor spans three of our 8 MiB blocks and twenty of the cluster's
/// 1 MiB ones, written into `dir`; `big.bin` as a local mount reads it.
fn fault_model(fuse: &Fuse, dir: &Path) -> Vec<u8> {
    let mut b = modelfs_tf::writer::BundleBuilder::new("model");
    let big: Vec<f32> = (0..5_000_000).map(|i| (i as f32 * 0.37).sin()).collect();
    b.add_f32(b"big", &[5_000, 1_000], &big);
    b.add_f32(b"small", &[4], &[1.0, 2.0, 3.0, 4.0]);
    b.write_to_dir(dir).unwrap();
    let local = fuse.mount(&dir.join("model"), FAULT_OPTS);
    let want = std::fs::read(local.path().join("big.bin")).unwrap();
    local.unmount_and_check();
    want
}

/// Without checksums, so that only the pinning to the opened version can refuse bytes; no disk
/// cache, so that every read not in memory goes to the cluster.
const FAULT_OPTS: &str = "layouts=bin,cache_dir=none,verify=none";

/// Both ways to a cluster: HDFS's RPC and WebHDFS.
fn both(hdfs: &MiniHdfs) -> [String; 2] {
    [hdfs.namenode.clone(), hdfs.webhdfs.clone()]
}

/// A data file appended to, or replaced by another of the same size, while mounted is ESTALE by
/// `hdfs://` and by `webhdfs://`, never a mix of the two versions.
#[test]
fn an_hdfs_file_changed_while_mounted_is_estale() {
    let Some(fuse) = Fuse::check() else { return };
    let Some(mut hdfs) = MiniHdfs::start() else {
        return;
    };
    let src = tempfile::tempdir().unwrap();
    fault_model(&fuse, src.path());
    let data = src.path().join("model.data-00000-of-00001");
    let mut other = std::fs::read(&data).unwrap();
    other.iter_mut().for_each(|b| *b = b.wrapping_add(1));
    let other_file = src.path().join("other");
    std::fs::write(&other_file, &other).unwrap();
    let tail = src.path().join("tail");
    std::fs::write(&tail, b"appended").unwrap();
    let mut cases = 0;
    for cluster in both(&hdfs) {
        for how in ["append", "replace"] {
            let dir = format!("/c{cases}");
            hdfs.put(src.path(), &dir);
            let url = PathBuf::from(format!("{cluster}{dir}/model"));
            let mount = fuse.mount(&url, FAULT_OPTS);
            // The data file is opened (its version taken) by a first read of its last block.
            assert_eq!(
                std::fs::read(mount.path().join("small.bin")).unwrap().len(),
                16
            );
            let remote = format!("{dir}/model.data-00000-of-00001");
            match how {
                "append" => hdfs.command(&format!("append {} {remote}", tail.display())),
                _ => hdfs.put(&other_file, &remote),
            }
            let err =
                std::fs::read(mount.path().join("big.bin")).expect_err("a changed file was read");
            assert_eq!(
                err.raw_os_error(),
                Some(libc::ESTALE),
                "{cluster} {how}: {err}"
            );
            mount.unmount_and_check();
            cases += 1;
        }
    }
    assert_eq!(cases, 4);
}

/// The cluster misbehaving under a mount: a DataNode stopped between two reads of a file (the
/// rest is read, exact, from the other replica), the NameNode restarted (reads go on), safe mode
/// (reads go on), by `hdfs://` and by `webhdfs://`.
#[test]
fn hdfs_reads_survive_a_datanode_and_the_namenode() {
    let Some(fuse) = Fuse::check() else { return };
    let Some(mut hdfs) = MiniHdfs::start() else {
        return;
    };
    let src = tempfile::tempdir().unwrap();
    let want = fault_model(&fuse, src.path());
    hdfs.put(src.path(), "/f");
    for (i, cluster) in both(&hdfs).into_iter().enumerate() {
        let url = PathBuf::from(format!("{cluster}/f/model"));
        let mount = fuse.mount(&url, FAULT_OPTS);
        let big = mount.path().join("big.bin");
        let mut f = std::fs::File::open(&big).unwrap();
        let mut first = vec![0u8; 1 << 20];
        std::io::Read::read_exact(&mut f, &mut first).unwrap();
        // Each cluster loses a different DataNode, so that both keep one replica of every block.
        hdfs.command(&format!("stop-datanode {i}"));
        let mut rest = Vec::new();
        std::io::Read::read_to_end(&mut f, &mut rest).unwrap();
        first.extend(rest);
        assert!(
            first == want,
            "{cluster}: other bytes after a DataNode stopped"
        );
        hdfs.command(&format!("restart-datanode {i}"));
        drop(f);
        mount.unmount_and_check();

        let mount = fuse.mount(&url, FAULT_OPTS);
        let mut f = std::fs::File::open(mount.path().join("big.bin")).unwrap();
        let mut first = vec![0u8; 1 << 20];
        std::io::Read::read_exact(&mut f, &mut first).unwrap();
        hdfs.command("restart-namenode");
        let mut rest = Vec::new();
        std::io::Read::read_to_end(&mut f, &mut rest).unwrap();
        first.extend(rest);
        assert!(
            first == want,
            "{cluster}: other bytes after the NameNode restarted"
        );
        drop(f);
        mount.unmount_and_check();

        hdfs.command("safemode enter");
        let mount = fuse.mount(&url, FAULT_OPTS);
        let got = std::fs::read(mount.path().join("big.bin"));
        hdfs.command("safemode leave");
        assert!(got.unwrap() == want, "{cluster}: other bytes in safe mode");
        mount.unmount_and_check();
    }
}

/// A path the user may not read is refused in one line naming the URL and the user; a cluster
/// that does not answer is refused in bounded time.
#[test]
fn hdfs_refusals_say_why_in_one_line() {
    let Some(mut hdfs) = MiniHdfs::start() else {
        return;
    };
    let src = tempfile::tempdir().unwrap();
    std::fs::write(src.path().join("a.npy"), npy_f32(&[1.0, 2.0])).unwrap();
    hdfs.put(src.path(), "/private");
    hdfs.command("chmod 700 /private");
    for cluster in both(&hdfs) {
        let url = format!("{cluster}/private/a.npy");
        let o = Command::new(modelfs())
            .args(["info", &url])
            .env("HADOOP_USER_NAME", "someone")
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_ne!(o.status.code(), Some(0), "{url}");
        assert!(
            err.contains("ermission denied") && err.contains("someone") && err.lines().count() == 1,
            "{url}: {err}"
        );
        // The owner reads it.
        let o = Command::new(modelfs()).args(["ls", &url]).output().unwrap();
        assert_eq!(
            o.status.code(),
            Some(0),
            "{url}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
    }
    // A port nobody listens on (bound, then let go).
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    for scheme in ["hdfs", "webhdfs"] {
        let url = format!("{scheme}://127.0.0.1:{port}/m");
        let started = std::time::Instant::now();
        let o = Command::new(modelfs())
            .args(["info", &url])
            .output()
            .unwrap();
        let took = started.elapsed();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_ne!(o.status.code(), Some(0), "{url}");
        assert!(
            err.contains(&url) && err.lines().count() == 1,
            "{url}: {err}"
        );
        assert!(took < std::time::Duration::from_secs(30), "{url}: {took:?}");
    }
}

/// A little-endian float32 `.npy` of `values`.
fn npy_f32(values: &[f32]) -> Vec<u8> {
    let dict = format!(
        "{{'descr': '<f4', 'fortran_order': False, 'shape': ({},), }}",
        values.len()
    );
    let mut header = dict.into_bytes();
    while (10 + header.len() + 1) % 64 != 0 {
        header.push(b' ');
    }
    header.push(b'\n');
    let mut out = b"\x93NUMPY\x01\x00".to_vec();
    out.extend((header.len() as u16).to_le_bytes());
    out.extend(header);
    values.iter().for_each(|v| out.extend(v.to_le_bytes()));
    out
}

/// `hdfs:///PATH`, `webhdfs:///PATH` and `-o hdfs PATH` (absolute, and relative to the user's
/// home) name the default cluster, `fs.defaultFS` of `HADOOP_CONF_DIR`, for a command and for
/// a mount; without `-o hdfs` a path stays local. `viewfs://` through a mount table, and `ls`,
/// `cat`, `diff` by both URLs, give what the local model gives.
#[test]
fn the_default_cluster_by_path() {
    let Some(fuse) = Fuse::check() else { return };
    let Some(mut hdfs) = MiniHdfs::start() else {
        return;
    };
    let src = tempfile::tempdir().unwrap();
    std::fs::write(src.path().join("a.npy"), npy_f32(&[1.5, 2.5])).unwrap();
    hdfs.put(src.path(), "/user/alice/m");
    let conf = tempfile::tempdir().unwrap();
    let http = hdfs.webhdfs.trim_start_matches("webhdfs://").to_string();
    std::fs::write(
        conf.path().join("core-site.xml"),
        format!(
            "<configuration><property><name>fs.defaultFS</name><value>{}</value></property>\
             </configuration>",
            hdfs.namenode
        ),
    )
    .unwrap();
    std::fs::write(
        conf.path().join("hdfs-site.xml"),
        format!(
            "<configuration><property><name>dfs.namenode.http-address</name><value>{http}</value>\
             </property></configuration>"
        ),
    )
    .unwrap();
    let env = [
        ("HADOOP_CONF_DIR", conf.path().to_str().unwrap()),
        ("HADOOP_USER_NAME", "alice"),
    ];
    let want = ls_with(&src.path().join("a.npy"), OPTS).stdout;
    let ls = |args: &[&str]| {
        let o = Command::new(modelfs())
            .arg("ls")
            .args(args)
            .envs(env)
            .output()
            .unwrap();
        assert_eq!(
            o.status.code(),
            Some(0),
            "{args:?}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        o.stdout
    };
    assert_eq!(ls(&["-o", OPTS, "hdfs:///user/alice/m/a.npy"]), want);
    assert_eq!(ls(&["-o", OPTS, "webhdfs:///user/alice/m/a.npy"]), want);
    assert_eq!(
        ls(&["-o", &format!("{OPTS},hdfs"), "/user/alice/m/a.npy"]),
        want
    );
    assert_eq!(ls(&["-o", &format!("{OPTS},hdfs"), "m/a.npy"]), want);
    // Not a local path: without `-o hdfs` there is nothing there.
    let o = Command::new(modelfs())
        .args(["ls", "/user/alice/m/a.npy"])
        .envs(env)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    // viewfs://: a mount table linking /data to the cluster's /user/alice (hdfs-native wants
    // a fallback link too).
    let view = tempfile::tempdir().unwrap();
    let nn = &hdfs.namenode;
    std::fs::write(
        view.path().join("core-site.xml"),
        format!(
            "<configuration><property><name>fs.viewfs.mounttable.c.link./data</name>\
             <value>{nn}/user/alice</value></property><property>\
             <name>fs.viewfs.mounttable.c.linkFallback</name><value>{nn}/</value></property>\
             </configuration>"
        ),
    )
    .unwrap();
    let o = Command::new(modelfs())
        .args(["ls", "-o", OPTS, "viewfs://c/data/m/a.npy"])
        .env("HADOOP_CONF_DIR", view.path())
        .output()
        .unwrap();
    assert_eq!(
        o.status.code(),
        Some(0),
        "viewfs: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert_eq!(o.stdout, want, "viewfs");

    // `cat` and `diff` by URL, both ways to the cluster, give what the local model gives.
    let ckpt = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("fixtures/tf/multi_shard");
    hdfs.put(&ckpt, "/tf");
    for cluster in both(&hdfs) {
        let url = format!("{cluster}/tf/ckpt");
        let names = ls_with(Path::new(&url), OPTS);
        assert_eq!(
            names.stdout,
            ls_with(&ckpt.join("ckpt"), OPTS).stdout,
            "{url}"
        );
        let names = String::from_utf8(names.stdout).unwrap();
        for name in names.lines().filter(|n| !n.ends_with('/')).take(8) {
            let cat = |src: &Path| {
                let mut c = Command::new(modelfs());
                c.args(["cat", "-o", OPTS]).arg(src).arg(name);
                c.output().unwrap()
            };
            let (a, b) = (cat(&ckpt.join("ckpt")), cat(Path::new(&url)));
            assert!(a.status.success() && b.status.success(), "cat {url} {name}");
            assert!(a.stdout == b.stdout, "cat {url} {name} differs");
        }
        let diff = Command::new(modelfs())
            .args(["diff", "--json", "-o", OPTS])
            .arg(ckpt.join("ckpt"))
            .arg(&url)
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&diff.stdout).into_owned();
        assert_eq!(diff.status.code(), Some(0), "{url}: {text}");
        assert!(text.contains("\"identical\""), "{text}");
    }

    let mount = fuse.mount_env(
        Path::new("/user/alice/m/a.npy"),
        &format!("{OPTS},hdfs"),
        &env,
    );
    let local = fuse.mount(&src.path().join("a.npy"), OPTS);
    assert_same_mounts(
        local.path(),
        mount.path(),
        "-o hdfs",
        (src.path(), "hdfs:///user/alice/m"),
    );
    mount.unmount_and_check();
    local.unmount_and_check();
}

/// An HA pair (nameservice `ns1`, `HADOOP_CONF_DIR` from the launcher): a model mounted by
/// `hdfs://ns1/…`, by `webhdfs://ns1/…` and by `hdfs:///…` (`fs.defaultFS`) reads on across a
/// failover between two reads of a file, exact, and a mount made after it reads from the newly
/// active NameNode; each failover makes the other NameNode active.
#[test]
fn hdfs_reads_survive_a_failover() {
    let Some(fuse) = Fuse::check() else { return };
    let Some(mut hdfs) = MiniHdfs::start_with(&["--ha"]) else {
        return;
    };
    assert_eq!(hdfs.get("nameservice"), "ns1");
    let conf_dir = hdfs.get("conf_dir");
    let env = [("HADOOP_CONF_DIR", conf_dir.as_str())];
    let src = tempfile::tempdir().unwrap();
    let want = fault_model(&fuse, src.path());
    hdfs.put(src.path(), "/f");
    for url in [
        "hdfs://ns1/f/model",
        "webhdfs://ns1/f/model",
        "hdfs:///f/model",
    ] {
        let mount = fuse.mount_env(Path::new(url), FAULT_OPTS, &env);
        let mut f = std::fs::File::open(mount.path().join("big.bin")).unwrap();
        let mut first = vec![0u8; 1 << 20];
        std::io::Read::read_exact(&mut f, &mut first).unwrap();
        hdfs.command("failover");
        let mut rest = Vec::new();
        std::io::Read::read_to_end(&mut f, &mut rest).unwrap();
        first.extend(rest);
        assert!(first == want, "{url}: other bytes after a failover");
        drop(f);
        mount.unmount_and_check();
        // The rest may have been streamed from a DataNode already: a new mount must find the
        // newly active NameNode (its client asks nn0, now the standby, first).
        let mount = fuse.mount_env(Path::new(url), FAULT_OPTS, &env);
        let got = std::fs::read(mount.path().join("big.bin")).unwrap();
        assert!(
            got == want,
            "{url}: other bytes from the new active NameNode"
        );
        mount.unmount_and_check();
    }
}

/// A Kerberized cluster (the launcher's MiniKdc; SASL on RPC and on data transfer, SPNEGO on
/// HTTP). Without a ticket, `hdfs://` is refused in one line saying Kerberos and kinit; with one
/// from `kinit -kt` (Debian's krb5-user, which CI installs) a model mounted by `hdfs://` equals
/// its local mount; `webhdfs://` is refused in one line saying SPNEGO is not supported there;
/// with the ticket destroyed, a container's delegation tokens (`HADOOP_TOKEN_FILE_LOCATION`,
/// written by Hadoop's client) read again, and nothing else does.
#[test]
fn hdfs_with_kerberos_reads_with_a_ticket_or_tokens() {
    let Some(fuse) = Fuse::check() else { return };
    if Command::new("kinit").arg("-V").output().is_err() {
        assert!(
            !modelfs_model::testing::must_be_complete(),
            "kinit is missing (CI installs krb5-user)"
        );
        eprintln!("skipping: no kinit (krb5-user)");
        return;
    }
    let Some(mut hdfs) = MiniHdfs::start_with(&["--kerberos"]) else {
        return;
    };
    let src = tempfile::tempdir().unwrap();
    fault_model(&fuse, src.path());
    hdfs.put(src.path(), "/k");
    let cache = tempfile::tempdir().unwrap();
    let ccache = format!("FILE:{}", cache.path().join("cc").display());
    let (krb5, conf) = (hdfs.get("krb5_conf"), hdfs.get("conf_dir"));
    let env = [
        ("KRB5_CONFIG", krb5.as_str()),
        ("KRB5CCNAME", ccache.as_str()),
        ("HADOOP_CONF_DIR", conf.as_str()),
    ];
    let info = |url: &str| {
        let o = Command::new(modelfs())
            .args(["info", url])
            .envs(env)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&o.stderr).to_string();
        assert_ne!(o.status.code(), Some(0), "{url}");
        assert!(
            err.contains(url) && err.lines().count() == 1,
            "{url}: {err}"
        );
        err
    };
    let url = format!("{}/k/model", hdfs.namenode);
    // No ticket yet (an absent cache).
    let err = info(&url);
    assert!(
        err.contains("Kerberos") && err.contains("kinit") && !err.contains("GssMajorCodes"),
        "{err}"
    );

    let kinit = Command::new("kinit")
        .args(["-kt", &hdfs.get("keytab"), &hdfs.get("principal")])
        .envs(env)
        .output()
        .unwrap();
    assert!(
        kinit.status.success(),
        "kinit: {}",
        String::from_utf8_lossy(&kinit.stderr)
    );
    let local = fuse.mount(&src.path().join("model"), OPTS);
    let remote = fuse.mount_env(Path::new(&url), OPTS, &env);
    let files = assert_same_mounts(
        local.path(),
        remote.path(),
        &url,
        (&src.path().join("model"), &url),
    );
    assert!(files > 3, "{files} files compared");
    remote.unmount_and_check();
    local.unmount_and_check();

    let err = info(&format!("{}/k/model", hdfs.webhdfs));
    assert!(
        err.contains("SPNEGO") && err.contains("not supported") && err.contains("hdfs://"),
        "{err}"
    );

    // A container's delegation tokens, without a ticket (the cache emptied).
    let tokens = cache.path().join("tokens");
    hdfs.command(&format!("token {}", tokens.display()));
    let _ = Command::new("kdestroy").envs(env).output();
    // The ticket is gone: without the tokens, refused.
    info(&url);
    let tokens = tokens.to_str().unwrap();
    let env = [
        ("KRB5_CONFIG", krb5.as_str()),
        ("KRB5CCNAME", ccache.as_str()),
        ("HADOOP_CONF_DIR", conf.as_str()),
        ("HADOOP_TOKEN_FILE_LOCATION", tokens),
    ];
    let o = Command::new(modelfs())
        .args(["ls", "-o", OPTS, &url])
        .envs(env)
        .output()
        .unwrap();
    assert_eq!(
        o.status.code(),
        Some(0),
        "with delegation tokens: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    let local = Command::new(modelfs())
        .args(["ls", "-o", OPTS])
        .arg(src.path().join("model"))
        .output()
        .unwrap();
    assert_eq!(o.stdout, local.stdout);
}

/// An Angel job saving its model to HDFS, as its PS servers do: partitions written under
/// `_temporary/`, then a matrix's partitions in its folder, its meta last. A mount following
/// the directory (`refresh=1`) never shows a matrix before its meta, never shows
/// `_temporary`, and ends equal to a local mount of the saved model.
#[test]
fn an_angel_model_saved_to_hdfs_is_followed() {
    use crate::live::{copy_tree, names, within};
    use std::time::Duration;
    let Some(fuse) = Fuse::check() else { return };
    let Some(mut hdfs) = MiniHdfs::start() else {
        return;
    };
    let saved = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("fixtures/angel/nolf/model");
    let stage = tempfile::tempdir().unwrap();
    let first = stage.path().join("first");
    copy_tree(&saved, &first);
    std::fs::remove_dir_all(first.join("lr")).unwrap();
    copy_tree(&saved.join("lr"), &first.join("_temporary/0/task_0/lr"));
    hdfs.put(&first, "/angel");
    let local_first = fuse.mount(&first, OPTS);
    let shown_first = names(local_first.path());
    local_first.unmount_and_check();
    assert!(!shown_first
        .iter()
        .any(|n| n.starts_with("lr.") || n.starts_with('_')));

    for cluster in both(&hdfs) {
        let mount = fuse.mount(
            &PathBuf::from(format!("{cluster}/angel")),
            &format!("{OPTS},refresh=1"),
        );
        let m = mount.path().to_path_buf();
        assert_eq!(names(&m), shown_first, "{cluster}");
        mount.unmount_and_check();
    }
    let mount = fuse.mount(
        &PathBuf::from(format!("{}/angel", hdfs.namenode)),
        &format!("{OPTS},refresh=1"),
    );
    let m = mount.path().to_path_buf();
    // The partition, without its meta: still not a matrix.
    hdfs.put(&saved.join("lr/0"), "/angel/lr/0");
    std::thread::sleep(Duration::from_secs(3));
    assert_eq!(names(&m), shown_first);
    hdfs.put(&saved.join("lr/_meta"), "/angel/lr/_meta");
    hdfs.command("rm /angel/_temporary");
    within(Duration::from_secs(10), "the saved matrix", || {
        names(&m).contains("lr.json")
    });
    let local = fuse.mount(&saved, OPTS);
    assert_same_mounts(
        local.path(),
        &m,
        "an Angel model saved to HDFS",
        (&saved, &format!("{}/angel", hdfs.namenode)),
    );
    local.unmount_and_check();
    mount.unmount_and_check();
}

/// A Monolith PS export copied to HDFS shard by shard: while a table's shards are missing its
/// files refuse to read (never half the table's rows); once all are there a mount following the
/// directory shows the export as a local mount of it does.
#[test]
fn a_monolith_export_copied_to_hdfs_is_followed() {
    use crate::live::{copy_tree, within};
    use std::time::Duration;
    let Some(fuse) = Fuse::check() else { return };
    let Some(mut hdfs) = MiniHdfs::start() else {
        return;
    };
    let export = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("fixtures/monolith/ps_export");
    let stage = tempfile::tempdir().unwrap();
    let first = stage.path().join("export");
    copy_tree(&export, &first);
    let late = "MonolithHashTable_0a1b_0-00002-of-00004";
    std::fs::remove_file(first.join("assets").join(late)).unwrap();
    hdfs.put(&first, "/export");
    let mount = fuse.mount(
        &PathBuf::from(format!("{}/export", hdfs.namenode)),
        &format!("{OPTS},refresh=1"),
    );
    let m = mount.path().to_path_buf();
    let table = m.join("hash_tables/MonolithHashTable_0a1b_0.bin");
    let err = std::fs::read(&table).expect_err("half a table was read");
    assert_eq!(err.raw_os_error(), Some(libc::EIO), "{err}");
    hdfs.put(
        &export.join("assets").join(late),
        &format!("/export/assets/{late}"),
    );
    within(Duration::from_secs(10), "the whole table", || {
        std::fs::read(&table).is_ok()
    });
    let local = fuse.mount(&export, OPTS);
    assert_same_mounts(
        local.path(),
        &m,
        "a Monolith export copied to HDFS",
        (&export, &format!("{}/export", hdfs.namenode)),
    );
    local.unmount_and_check();
    mount.unmount_and_check();
}
