//! Remote faults through a fault-injecting proxy (`proxy.rs`) in front of nginx: transient
//! faults (5xx bursts, responses cut mid-body, slow bodies) are retried and the bytes read are
//! exactly the local ones; a persistent fault gives EIO within a bounded time and leaves the
//! mount usable; an object that changes while mounted gives ESTALE or EIO, never other bytes.

use std::path::Path;
use std::time::{Duration, Instant};

use modelfs_tf::writer::BundleBuilder;

use crate::clouds::Emulated;
use crate::proxy::{Plan, Proxy};
use crate::remote::{nginx, required};
use crate::support::*;

const OPTS: &str = "layouts=bin,cache_dir=none";

/// A checkpoint whose big tensor spans three 8 MiB blocks, written into `dir`.
fn write_model(dir: &Path) {
    let mut b = BundleBuilder::new("model");
    let big: Vec<f32> = (0..5_000_000).map(|i| (i as f32 * 0.37).sin()).collect();
    b.add_f32(b"big", &[5_000, 1_000], &big);
    b.add_f32(b"small", &[4], &[1.0, 2.0, 3.0, 4.0]);
    b.write_to_dir(dir).unwrap();
}

/// Where the model is served from, behind the proxy.
enum Backend {
    /// nginx serving the model's directory.
    Http(crate::remote::Server),
    /// A store (fake-gcs-server, Azurite) holding it in bucket `faults`.
    Store(Box<dyn Emulated>),
}

struct Setup {
    fuse: Fuse,
    src: tempfile::TempDir,
    backend: Backend,
    proxy: Proxy,
    want: Vec<u8>,
}

/// The model written locally, its `big` tensor read from a local mount, and served by the
/// backend `serve` starts (behind a proxy).
fn setup_with(serve: impl FnOnce(&Path) -> Option<Backend>) -> Option<Setup> {
    let fuse = Fuse::check()?;
    let src = tempfile::tempdir().unwrap();
    write_model(src.path());
    let backend = serve(src.path())?;
    let local = fuse.mount(&src.path().join("model"), OPTS);
    let want = std::fs::read(local.path().join("big.bin")).unwrap();
    local.unmount_and_check();
    let port = match &backend {
        Backend::Http(web) => web.port,
        Backend::Store(s) => s.port(),
    };
    let proxy = Proxy::start(port);
    Some(Setup {
        fuse,
        src,
        backend,
        proxy,
        want,
    })
}

fn setup() -> Option<Setup> {
    setup_with(|dir| required("nginx").then(|| Backend::Http(nginx(dir))))
}

/// The model put in bucket `faults` of `store`.
fn setup_store(store: Option<impl Emulated + 'static>) -> Option<Setup> {
    let store = store?;
    setup_with(|dir| {
        crate::clouds::upload(&store, "faults", dir);
        Some(Backend::Store(Box::new(store)))
    })
}

impl Setup {
    /// A mount of the model through the proxy, with `opts` besides the endpoint.
    fn mount_with(&self, opts: &str) -> MountGuard {
        let (url, opts) = match &self.backend {
            Backend::Http(_) => (
                format!("http://127.0.0.1:{}/model", self.proxy.port),
                opts.to_string(),
            ),
            Backend::Store(s) => (
                s.url("faults", "model"),
                format!("{opts},{}", s.opts_via(self.proxy.port)),
            ),
        };
        self.fuse.mount(Path::new(&url), &opts)
    }

    fn mount(&self) -> MountGuard {
        self.mount_with(OPTS)
    }

    /// The data file rewritten with other values (same size, a new ETag).
    fn replace_data(&self) {
        let name = "model.data-00000-of-00001";
        let data = self.src.path().join(name);
        let mut bytes = std::fs::read(&data).unwrap();
        for b in bytes.iter_mut() {
            *b = b.wrapping_add(1);
        }
        match &self.backend {
            Backend::Http(_) => {
                std::fs::write(&data, &bytes).unwrap();
                let later = std::time::SystemTime::now() + Duration::from_secs(10);
                let f = std::fs::File::options().write(true).open(&data).unwrap();
                f.set_modified(later).unwrap();
            }
            Backend::Store(s) => s.put_and_delete("faults", &[(name.into(), bytes)], &[]),
        }
    }
    fn count(&self, what: &str) -> usize {
        self.proxy
            .log()
            .iter()
            .filter(|l| l.ends_with(what))
            .count()
    }
}

fn transient_faults_are_retried_and_read_exactly(s: &Setup) {
    let cases = [
        (
            "a burst of 503s",
            Plan {
                fail: 3,
                status: 503,
                ..Plan::default()
            },
            " 503",
        ),
        (
            "a burst of 500s",
            Plan {
                fail: 2,
                status: 500,
                ..Plan::default()
            },
            " 500",
        ),
        (
            "throttling (429)",
            Plan {
                fail: 2,
                status: 429,
                ..Plan::default()
            },
            " 429",
        ),
        (
            "bodies cut halfway",
            Plan {
                cut: 3,
                ..Plan::default()
            },
            " cut",
        ),
        (
            "slow bodies",
            Plan {
                slow: Some(Duration::from_millis(100)),
                ..Plan::default()
            },
            " ok",
        ),
    ];
    for (what, plan, mark) in cases {
        let mount = s.mount();
        let before = s.count(mark);
        s.proxy.set(plan);
        let got = std::fs::read(mount.path().join("big.bin"))
            .unwrap_or_else(|e| panic!("{what}: the read failed: {e}"));
        s.proxy.set(Plan::default());
        assert!(got == s.want, "{what}: other bytes were served");
        assert!(s.count(mark) > before, "{what}: the fault never happened");
        mount.unmount_and_check();
    }
}

fn a_persistent_fault_is_eio_in_bounded_time(s: &Setup) {
    let mount = s.mount();
    s.proxy.set(Plan {
        fail_always: true,
        status: 503,
        ..Plan::default()
    });
    let start = Instant::now();
    let err = std::fs::read(mount.path().join("big.bin")).expect_err("a read succeeded");
    let took = start.elapsed();
    assert_eq!(err.raw_os_error(), Some(libc::EIO), "{err}");
    assert!(took < Duration::from_secs(90), "EIO after {took:?}");
    assert!(s.count(" 503") > 1, "no retry: {:?}", s.proxy.log());
    // The failure is not remembered: once the server is back, the file reads.
    s.proxy.set(Plan::default());
    let got = std::fs::read(mount.path().join("big.bin")).unwrap();
    assert!(got == s.want);
    mount.unmount_and_check();
}

fn an_object_changed_while_mounted_is_never_mixed(s: &Setup) {
    // Without checksums, so that only the pinning to the opened version can refuse the bytes.
    let mount = s.mount_with("layouts=bin,cache_dir=none,verify=none");
    // The data file is opened (its ETag taken) by a first read, of its last block only.
    let small = std::fs::read(mount.path().join("small.bin")).unwrap();
    assert_eq!(small.len(), 16);
    s.replace_data();
    let err = std::fs::read(mount.path().join("big.bin")).expect_err("a changed object was read");
    assert_eq!(err.raw_os_error(), Some(libc::ESTALE), "{err}");
    assert!(s.proxy.log().iter().any(|l| l.starts_with("GET ")));
    mount.unmount_and_check();
}

/// A sequential reader is served by one streaming request, not one request per block.
fn a_sequential_read_streams_in_few_requests(s: &Setup) {
    // Without checksums: a first read would check the whole tensor in one large read.
    let mount = s.mount_with("layouts=bin,cache_dir=none,verify=none");
    // GETs of bytes (a store's listings are GETs with a query: the mount may list meanwhile).
    let gets = || {
        let log = s.proxy.log();
        let bytes = |l: &&String| l.starts_with("GET ") && !l.contains('?');
        log.iter().filter(bytes).count()
    };
    let before = gets();
    let got = std::fs::read(mount.path().join("big.bin")).unwrap();
    assert!(got == s.want);
    mount.unmount_and_check();
    // Three 8 MiB blocks: the first read's block, then one request for the rest.
    let sent = gets() - before;
    assert!((1..=2).contains(&sent), "{sent} GETs: {:#?}", s.proxy.log());
}

/// Each check on each backend: HTTP (nginx), GCS (fake-gcs-server), Azure (Azurite).
macro_rules! on_every_backend {
    ($($check:ident),+) => {
        mod http {
            $(#[test]
            fn $check() {
                let Some(s) = super::setup() else { return };
                super::$check(&s);
            })+
        }
        mod gcs {
            $(#[test]
            fn $check() {
                let Some(s) = super::setup_store(crate::clouds::Gcs::start()) else { return };
                super::$check(&s);
            })+
        }
        mod azure {
            $(#[test]
            fn $check() {
                let Some(s) = super::setup_store(crate::clouds::Azure::start()) else { return };
                super::$check(&s);
            })+
        }
    };
}

on_every_backend!(
    transient_faults_are_retried_and_read_exactly,
    a_persistent_fault_is_eio_in_bounded_time,
    an_object_changed_while_mounted_is_never_mixed,
    a_sequential_read_streams_in_few_requests
);
