//! Remote sources against real servers on loopback, started and stopped here: `moto_server`
//! (S3) and `nginx` (HTTP with Range). Every committed fixture and every shared real-world model
//! is uploaded, mounted by URL and compared, file by file and byte by byte, with the mount of
//! its local copy; `modelfs cat` by URL is checked too, and the GETs a mount costs are counted.
//!
//! Without the servers the tests fail under CI (`.ci/run` installs them) and are skipped with
//! a message elsewhere.

use std::collections::BTreeMap;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;

use object_store::aws::AmazonS3Builder;
use object_store::ObjectStore;

use crate::clouds::Emulated;
use crate::support::*;

pub(crate) fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A cold `moto_server` imports for seconds on a busy machine: up to a minute.
fn wait_for_port(port: u16) -> bool {
    let start = std::time::Instant::now();
    while start.elapsed() < std::time::Duration::from_secs(60) {
        if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
            return true;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    false
}

/// A server process killed on drop.
pub(crate) struct Server {
    child: Child,
    pub(crate) port: u16,
    dir: tempfile::TempDir,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn have(cmd: &str) -> bool {
    Command::new("sh")
        .args(["-c", &format!("command -v {cmd}")])
        .stdout(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// `None` (skipped with a message) when the server is not installed, except under CI.
pub(crate) fn required(cmd: &str) -> bool {
    if have(cmd) {
        return true;
    }
    assert!(
        !modelfs_model::testing::must_be_complete(),
        "{cmd} is not installed (CI installs it: .ci/run)"
    );
    eprintln!("skipping: {cmd} is not installed");
    false
}

impl Server {
    /// Runs `cmd` (its output into `dir/server.log`) and waits until `port` accepts.
    pub(crate) fn start(mut cmd: Command, port: u16, dir: tempfile::TempDir) -> Server {
        let log = std::fs::File::create(dir.path().join("server.log")).unwrap();
        let child = cmd
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .unwrap();
        let s = Server { child, port, dir };
        assert!(wait_for_port(port), "{cmd:?} did not start");
        s
    }
}

pub(crate) fn moto() -> Option<Server> {
    if !required("moto_server") {
        return None;
    }
    // The mounts find moto's credentials as AWS's tools do: in the environment.
    set_s3_env();
    let port = free_port();
    let mut cmd = Command::new("moto_server");
    cmd.args(["-H", "127.0.0.1", "-p", &port.to_string()]);
    Some(Server::start(cmd, port, tempfile::tempdir().unwrap()))
}

/// nginx serving `root` (read-only, Range and ETag as for any static file).
pub(crate) fn nginx(root: &Path) -> Server {
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let d = dir.path().display();
    let conf = format!(
        "daemon off; master_process off; pid {d}/nginx.pid; error_log {d}/error.log;\n\
         events {{}}\n\
         http {{ access_log {d}/access.log; client_body_temp_path {d}; proxy_temp_path {d};\n\
         fastcgi_temp_path {d}; uwsgi_temp_path {d}; scgi_temp_path {d};\n\
         server {{ listen 127.0.0.1:{port}; root {}; }} }}\n",
        root.display()
    );
    std::fs::write(dir.path().join("nginx.conf"), conf).unwrap();
    let mut cmd = Command::new("nginx");
    cmd.args(["-p", &d.to_string(), "-c"])
        .arg(dir.path().join("nginx.conf"));
    Server::start(cmd, port, dir)
}

/// Credentials for every moto of these tests (each test passes its own `endpoint=`).
fn set_s3_env() {
    std::env::set_var("AWS_ACCESS_KEY_ID", "modelfs-test");
    std::env::set_var("AWS_SECRET_ACCESS_KEY", "modelfs-test-secret");
    std::env::set_var("AWS_REGION", "us-east-1");
    std::env::remove_var("AWS_ENDPOINT_URL");
}

/// `modelfs ls -o OPTS SOURCE`.
pub(crate) fn ls_with(source: &Path, opts: &str) -> std::process::Output {
    Command::new(modelfs())
        .args(["ls", "-o", opts])
        .arg(source)
        .output()
        .unwrap()
}

/// moto as a store of the cross-cloud checks (`clouds.rs`).
pub(crate) struct Moto(pub(crate) u16);

impl Emulated for Moto {
    fn name(&self) -> &'static str {
        "s3"
    }

    fn url(&self, bucket: &str, key: &str) -> String {
        format!("s3://{bucket}/{key}")
    }

    fn opts_via(&self, port: u16) -> String {
        format!("endpoint=http://127.0.0.1:{port}")
    }

    fn port(&self) -> u16 {
        self.0
    }

    fn create(&self, bucket: &str) {
        // moto creates buckets on PUT /bucket.
        let status = Command::new("curl")
            .args(["-s", "-o", "/dev/null", "-X", "PUT"])
            .arg(format!("http://127.0.0.1:{}/{bucket}", self.0))
            .status()
            .unwrap();
        assert!(status.success());
    }

    fn store(&self, bucket: &str) -> Arc<dyn ObjectStore> {
        let store = AmazonS3Builder::new()
            .with_endpoint(format!("http://127.0.0.1:{}", self.0))
            .with_allow_http(true)
            .with_bucket_name(bucket)
            .with_region("us-east-1")
            .with_access_key_id("modelfs-test")
            .with_secret_access_key("modelfs-test-secret")
            .build()
            .unwrap();
        Arc::new(store)
    }
}

fn upload(port: u16, bucket: &str, root: &Path) {
    crate::clouds::upload(&Moto(port), bucket, root);
}

/// Every source to try remotely: the committed TF fixtures, the Angel fixtures' models, the
/// shared real-world models; with the root each lives under.
pub(crate) fn sources() -> Vec<(PathBuf, PathBuf)> {
    let fixtures = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("fixtures");
    let shared = shared_dir().map(|s| s.join("realworld"));
    let mut out = Vec::new();
    for c in cases() {
        let root = if c.source.starts_with(&fixtures) {
            fixtures.clone()
        } else {
            shared
                .clone()
                .expect("real-world cases come from the shared directory")
        };
        out.push((root, c.source));
    }
    for e in std::fs::read_dir(fixtures.join("angel")).unwrap().flatten() {
        let model = e.path().join("model");
        if model.is_dir() {
            out.push((fixtures.clone(), model));
        }
    }
    // Hash tables: TF's (saved by TensorFlow) and a Monolith PS export (found by listing).
    out.push((fixtures.clone(), fixtures.join("tf/hashtable/tf2/ckpt")));
    out.push((fixtures.clone(), fixtures.join("monolith/ps_export")));
    // The files people have (issue 54): legacy and whole-module torch, TorchScript, float8,
    // K-quants, and files of other projects.
    for f in [
        "torch/more/legacy.pt",
        "torch/more/module_legacy.pt",
        "torch/more/module_ckpt.pt",
        "torch/more/scripted.pt",
        "torch/more/float8.pt",
        "gguf/kquants.gguf",
        "real/torch/facenet-pytorch-2.6.0_rnet.pt",
        "real/torch/silero-vad-6.2.3_silero_vad.jit",
        "real/numpy/scipy-1.17.1_linalg_carex_20_data.npz",
        "real/safetensors/safetensors-pr84-bd71d43_overall.safetensors",
    ] {
        out.push((fixtures.clone(), fixtures.join(f)));
    }
    out
}

/// Every path under `root` with what `lstat` says of it (bad inputs make some files EIO).
fn walk_all(root: &Path) -> Vec<(String, Result<bool, Option<i32>>)> {
    fn rec(dir: &Path, prefix: &str, out: &mut Vec<(String, Result<bool, Option<i32>>)>) {
        let mut names: Vec<_> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        names.sort();
        for n in names {
            let p = dir.join(&n);
            let name = format!("{prefix}{}", n.to_string_lossy());
            match std::fs::symlink_metadata(&p) {
                Ok(m) if m.is_dir() => {
                    out.push((format!("{name}/"), Ok(false)));
                    rec(&p, &format!("{name}/"), out);
                }
                Ok(m) => out.push((name, Ok(m.is_file()))),
                Err(e) => out.push((name, Err(e.raw_os_error()))),
            }
        }
    }
    let mut out = Vec::new();
    rec(root, "", &mut out);
    out
}

/// A `.json` without its `last_error` line, and that line.
fn without_last_error(json: &str) -> (String, Option<&str>) {
    let mut rest = String::new();
    let mut error = None;
    for line in json.split_inclusive('\n') {
        if line.trim_start().starts_with("\"last_error\"") {
            error = Some(line);
        } else {
            rest.push_str(line);
        }
    }
    // The line before `last_error` lost its trailing comma with it, or not: compare without.
    (rest.replace(",\n}", "\n}"), error)
}

/// A `.json` document without its layouts' sizes, and those sizes by layout.
fn sizes_apart(json: &str) -> (serde_json::Value, BTreeMap<String, serde_json::Value>) {
    let mut v: serde_json::Value = serde_json::from_str(json).unwrap();
    let mut sizes = BTreeMap::new();
    for l in v["layouts"].as_array_mut().into_iter().flatten() {
        if let Some(size) = l.as_object_mut().and_then(|o| o.remove("size")) {
            sizes.insert(l["layout"].as_str().unwrap_or_default().to_string(), size);
        }
    }
    (v, sizes)
}

/// The two mounts show the same tree with the same bytes in every file.
/// `.json` files may name source files (in problems): `local_root` reads as `url_root` there.
pub(crate) fn assert_same_mounts(
    local: &Path,
    remote: &Path,
    what: &str,
    (local_root, url_root): (&Path, &str),
) -> usize {
    let (a, b) = (walk_all(local), walk_all(remote));
    if a != b {
        let only_a: Vec<_> = a.iter().filter(|x| !b.contains(x)).take(10).collect();
        let only_b: Vec<_> = b.iter().filter(|x| !a.contains(x)).take(10).collect();
        panic!("{what}: the trees differ: local only {only_a:?}, remote only {only_b:?}");
    }
    let mut files = 0;
    for (rel, kind) in &a {
        let (pa, pb) = (local.join(rel), remote.join(rel));
        if *kind != Ok(true) {
            continue;
        }
        let (da, db) = (std::fs::read(&pa), std::fs::read(&pb));
        match (da, db) {
            (Ok(x), Ok(y)) if rel.ends_with(".json") => {
                let x = String::from_utf8(x).unwrap();
                let x = x.replace(&local_root.display().to_string(), url_root);
                // `last_error` is the tensor's last failed read, and which of its files the
                // background sizing read last differs between two mounts: both must have one
                // (or neither), and it must name the source as the remote one does.
                let (x, y) = (x.as_str(), std::str::from_utf8(&y).unwrap());
                let (xs, xe) = without_last_error(x);
                let (ys, ye) = without_last_error(y);
                // A `.json` is fixed when first shown: a text size one mount had learnt by
                // then the other may not have (`null`); sizes both know must agree.
                let (xv, yv) = (sizes_apart(&xs), sizes_apart(&ys));
                assert_eq!(xv.0, yv.0, "{what}: {rel} differs");
                for (l, size) in &xv.1 {
                    if let Some(other) = yv.1.get(l).filter(|o| !o.is_null() && !size.is_null()) {
                        assert_eq!(size, other, "{what}: {rel}: size of {l}");
                    }
                }
                assert_eq!(xe.is_some(), ye.is_some(), "{what}: {rel}: last_error");
                if let (Some(xe), Some(ye)) = (xe, ye) {
                    assert_eq!(
                        xe.contains(url_root),
                        ye.contains(url_root),
                        "{what}: {rel}: {xe} / {ye}"
                    );
                }
            }
            (Ok(x), Ok(y)) => assert!(x == y, "{what}: {rel} differs"),
            (Err(x), Err(y)) => assert_eq!(x.raw_os_error(), y.raw_os_error(), "{what}: {rel}"),
            (x, y) => panic!(
                "{what}: {rel}: local {:?}, remote {:?}",
                x.is_ok(),
                y.is_ok()
            ),
        }
        files += 1;
    }
    files
}

pub(crate) const OPTS: &str = "layouts=all,cache_dir=none";

#[test]
fn s3_sources_read_like_local() {
    let Some(s3) = moto() else { return };
    crate::clouds::sources_read_like_local(&Moto(s3.port));
}

#[test]
fn s3_refusals_say_why() {
    let Some(s3) = moto() else { return };
    let endpoint = format!("endpoint=http://127.0.0.1:{}", s3.port);
    let run = |url: &str| ls_with(Path::new(url), &endpoint);
    let missing = run("s3://no-such-bucket/model");
    assert_eq!(missing.status.code(), Some(2));
    let err = String::from_utf8_lossy(&missing.stderr);
    assert!(err.contains("s3://no-such-bucket/model"), "{err}");
    assert!(
        !err.contains("modelfs-test-secret"),
        "a secret in a message: {err}"
    );
}

#[test]
fn http_sources_read_like_local() {
    let Some(fuse) = Fuse::check() else { return };
    let fixtures = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("fixtures");
    if !required("nginx") {
        return;
    }
    let web = nginx(&fixtures);
    let mut checked = 0;
    for c in cases().iter().filter(|c| c.source.starts_with(&fixtures)) {
        let key = c.source.strip_prefix(&fixtures).unwrap().display();
        let url = PathBuf::from(format!("http://127.0.0.1:{}/{key}", web.port));
        let local = fuse.mount(&c.source, OPTS);
        let remote = fuse.mount(&url, OPTS);
        let base = format!("http://127.0.0.1:{}", web.port);
        let what = url.display().to_string();
        checked += assert_same_mounts(local.path(), remote.path(), &what, (&fixtures, &base));
        remote.unmount_and_check();
        local.unmount_and_check();
    }
    assert!(checked > 500, "only {checked} files compared");
    // A SavedModel directory: its file names are known, no listing needed.
    let sm = fixtures.join("tf/savedmodel/saved_model");
    let url = format!("http://127.0.0.1:{}/tf/savedmodel/saved_model", web.port);
    assert_eq!(cli_ls(Path::new(&url)).unwrap(), cli_ls(&sm).unwrap());
}

impl Server {
    /// Request lines the server logged so far that contain `needle`.
    fn requests(&self, needle: &str) -> Vec<String> {
        let log = std::fs::read_to_string(self.dir.path().join("server.log")).unwrap_or_default();
        log.lines()
            .filter(|l| l.contains(needle) && (l.contains("\"GET ") || l.contains("\"HEAD ")))
            .map(str::to_string)
            .collect()
    }
}

/// A small read of a tensor costs one block GET; reading it again costs none (the block cache
/// and the kernel's page cache serve it).
#[test]
fn s3_reads_cost_one_block_and_repeat_for_free() {
    let Some(fuse) = Fuse::check() else { return };
    let Some(s3) = moto() else { return };
    let fixtures = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("fixtures");
    upload(s3.port, "cost", &fixtures.join("tf/dtypes"));
    let opts = format!(
        "layouts=bin,verify=none,cache_dir=none,endpoint=http://127.0.0.1:{}",
        s3.port
    );
    let mount = fuse.mount(Path::new("s3://cost/ckpt"), &opts);
    // Mounting costs at most 3 GETs and 1 HEAD per file opened; no data is read.
    let count = |file: &str, method: &str| {
        s3.requests(file)
            .iter()
            .filter(|l| l.contains(&format!("\"{method} ")))
            .count()
    };
    assert!(
        count("ckpt.index", "GET") <= 3,
        "{:#?}",
        s3.requests("ckpt")
    );
    // The size may come from the listing the mount's fingerprint made (no HEAD at all).
    assert!(
        count("ckpt.index", "HEAD") <= 1,
        "{:#?}",
        s3.requests("ckpt")
    );
    assert!(
        count("ckpt.data", "HEAD") <= 1,
        "{:#?}",
        s3.requests("ckpt")
    );
    assert_eq!(count("ckpt.data", "GET"), 0, "{:#?}", s3.requests("ckpt"));
    let data = "ckpt.data-00000-of-00001";
    let before = s3.requests(data);
    let bin = mount.path().join("float32.bin");
    let bytes = std::fs::read(&bin).unwrap();
    assert!(!bytes.is_empty());
    let after_first = s3.requests(data);
    let gets = |v: &[String]| v.iter().filter(|l| l.contains("\"GET ")).count();
    assert_eq!(gets(&after_first) - gets(&before), 1, "{after_first:#?}");
    assert_eq!(std::fs::read(&bin).unwrap(), bytes);
    assert_eq!(
        gets(&s3.requests(data)),
        gets(&after_first),
        "a second read sent a GET"
    );
    mount.unmount_and_check();
}

/// With `verify=crc` the first small read of a tensor that spans several blocks waits for its
/// checksum, computed in one streamed pass (the first block, then one request for the rest);
/// the reads that follow are served from the blocks that pass fetched.
#[test]
fn s3_checksum_pass_is_one_stream() {
    use std::io::Read;
    let Some(fuse) = Fuse::check() else { return };
    let Some(s3) = moto() else { return };
    let tmp = tempfile::tempdir().unwrap();
    // 32 MiB of float32: four 8 MiB blocks. The tensor is the data file, from offset 0.
    let prefix = crate::firstlook::checkpoint(tmp.path(), 2048, 4096);
    let local = std::fs::read(prefix.with_extension("data-00000-of-00001")).unwrap();
    assert_eq!(local.len(), 32 << 20);
    upload(s3.port, "crc", tmp.path());
    let opts = format!(
        "layouts=bin,verify=crc,cache_dir=none,endpoint=http://127.0.0.1:{}",
        s3.port
    );
    let mount = fuse.mount(Path::new("s3://crc/model"), &opts);
    let data = "model.data-00000-of-00001";
    let gets = || {
        // moto logs a request once its body is sent.
        std::thread::sleep(std::time::Duration::from_millis(500));
        s3.requests(data)
            .iter()
            .filter(|l| l.contains("\"GET "))
            .count()
    };
    let bin = mount.path().join("W.bin");
    let mut head = [0u8; 100];
    let mut f = std::fs::File::open(&bin).unwrap();
    // One read, no kernel read-ahead racing it: a read-ahead request arriving while the
    // checksum pass streams may add a GET of its own (a block it asks for before the pass
    // has fetched it), which is not what this counts.
    use std::os::fd::AsRawFd;
    // SAFETY: a valid open descriptor; advice only.
    unsafe { libc::posix_fadvise(f.as_raw_fd(), 0, 0, libc::POSIX_FADV_RANDOM) };
    f.read_exact(&mut head).unwrap();
    drop(f);
    assert_eq!(head[..], local[..100]);
    let after_head = gets();
    // Two: the first block, then one request for the rest. One run in a few shows three (a
    // block asked for while the stream has not yet brought it is fetched on its own; a race in
    // the remote source, open); one GET per block (the old pass) is four or more.
    assert!(after_head <= 3, "{:#?}", s3.requests(data));
    assert!(std::fs::read(&bin).unwrap() == local);
    assert_eq!(gets(), after_head, "{:#?}", s3.requests(data));
    mount.unmount_and_check();
}

/// Fetched blocks persist under `cache_dir`: a second mount reads them without a GET, and a
/// changed object (new ETag) is fetched again, never served from the old blocks.
#[test]
fn s3_blocks_persist_on_disk_across_mounts() {
    let Some(fuse) = Fuse::check() else { return };
    let Some(s3) = moto() else { return };
    let fixtures = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("fixtures");
    upload(s3.port, "persist", &fixtures.join("tf/dtypes"));
    let cache = tempfile::tempdir().unwrap();
    let opts = format!(
        "layouts=bin,cache_dir={},endpoint=http://127.0.0.1:{}",
        cache.path().display(),
        s3.port
    );
    let data = "ckpt.data-00000-of-00001";
    let gets = || {
        s3.requests(data)
            .iter()
            .filter(|l| l.contains("\"GET "))
            .count()
    };
    let read = || {
        let mount = fuse.mount(Path::new("s3://persist/ckpt"), &opts);
        let bytes = std::fs::read(mount.path().join("float64.bin")).unwrap();
        mount.unmount_and_check();
        bytes
    };
    let before = gets();
    let first = read();
    assert_eq!(gets() - before, 1, "the first mount's read");
    assert_eq!(read(), first);
    assert_eq!(gets() - before, 1, "the second mount sent a GET");
    // The object changes: its new bytes are fetched, not the old ones served.
    let mut changed = std::fs::read(fixtures.join("tf/dtypes").join(data)).unwrap();
    changed.reverse();
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join(data), &changed).unwrap();
    upload(s3.port, "persist", dir.path());
    let mount = fuse.mount(Path::new("s3://persist/ckpt"), &opts);
    let err = std::fs::read(mount.path().join("float64.bin")).expect_err("old blocks served");
    assert_eq!(err.raw_os_error(), Some(libc::EIO), "{err}");
    assert_eq!(gets() - before, 2, "the changed object was not fetched");
    mount.unmount_and_check();
}

/// Issue 38: a bucket prefix a CheckpointManager saves to, mounted with `refresh=1`: each
/// new checkpoint (data, then index, then the state file) is seen within 2 × the TTL, and a
/// deleted one is gone (ENOENT).
#[test]
fn s3_directory_followed_with_refresh() {
    let Some(s3) = moto() else { return };
    crate::clouds::directory_followed_with_refresh(&Moto(s3.port));
}
