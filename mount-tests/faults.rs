//! Remote faults through a fault-injecting proxy (`proxy.rs`) in front of nginx: transient
//! faults (5xx bursts, responses cut mid-body, slow bodies) are retried and the bytes read are
//! exactly the local ones; a persistent fault gives EIO within a bounded time and leaves the
//! mount usable; an object that changes while mounted gives ESTALE or EIO, never other bytes.

use std::path::Path;
use std::time::{Duration, Instant};

use modelfs::tf::writer::BundleBuilder;

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

struct Setup {
    fuse: Fuse,
    src: tempfile::TempDir,
    _web: crate::remote::Server,
    proxy: Proxy,
    want: Vec<u8>,
}

fn setup() -> Option<Setup> {
    let fuse = Fuse::check()?;
    if !required("nginx") {
        return None;
    }
    let src = tempfile::tempdir().unwrap();
    write_model(src.path());
    let local = fuse.mount(&src.path().join("model"), OPTS);
    let want = std::fs::read(local.path().join("big.bin")).unwrap();
    local.unmount_and_check();
    let web = nginx(src.path());
    let proxy = Proxy::start(web.port);
    Some(Setup {
        fuse,
        src,
        _web: web,
        proxy,
        want,
    })
}

impl Setup {
    fn mount(&self) -> MountGuard {
        let url = format!("http://127.0.0.1:{}/model", self.proxy.port);
        self.fuse.mount(Path::new(&url), OPTS)
    }

    fn count(&self, what: &str) -> usize {
        self.proxy
            .log()
            .iter()
            .filter(|l| l.ends_with(what))
            .count()
    }
}

#[test]
fn transient_remote_faults_are_retried_and_read_exactly() {
    let Some(s) = setup() else { return };
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

#[test]
fn a_persistent_remote_fault_is_eio_in_bounded_time() {
    let Some(s) = setup() else { return };
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

#[test]
fn a_remote_object_changed_while_mounted_is_never_mixed() {
    let Some(s) = setup() else { return };
    // Without checksums, so that only the pinning to the opened version can refuse the bytes.
    let url = format!("http://127.0.0.1:{}/model", s.proxy.port);
    let mount = s
        .fuse
        .mount(Path::new(&url), "layouts=bin,cache_dir=none,verify=none");
    // The data file is opened (its ETag taken) by a first read, of its last block only.
    let small = std::fs::read(mount.path().join("small.bin")).unwrap();
    assert_eq!(small.len(), 16);
    // The data file is rewritten with other values (same size, a new ETag at nginx).
    let data = s.src.path().join("model.data-00000-of-00001");
    let mut bytes = std::fs::read(&data).unwrap();
    for b in bytes.iter_mut() {
        *b = b.wrapping_add(1);
    }
    std::fs::write(&data, &bytes).unwrap();
    let later = std::time::SystemTime::now() + Duration::from_secs(10);
    std::fs::File::options()
        .write(true)
        .open(&data)
        .unwrap()
        .set_modified(later)
        .unwrap();
    let err = std::fs::read(mount.path().join("big.bin")).expect_err("a changed object was read");
    assert_eq!(err.raw_os_error(), Some(libc::ESTALE), "{err}");
    assert!(s.proxy.log().iter().any(|l| l.starts_with("GET ")));
    mount.unmount_and_check();
}

/// A sequential reader is served by one streaming request, not one request per block.
#[test]
fn a_sequential_read_streams_in_few_requests() {
    let Some(s) = setup() else { return };
    // Without checksums: a first read would check the whole tensor in one large read.
    let url = format!("http://127.0.0.1:{}/model", s.proxy.port);
    let mount = s
        .fuse
        .mount(Path::new(&url), "layouts=bin,cache_dir=none,verify=none");
    let gets = || {
        s.proxy
            .log()
            .iter()
            .filter(|l| l.starts_with("GET "))
            .count()
    };
    let before = gets();
    let got = std::fs::read(mount.path().join("big.bin")).unwrap();
    assert!(got == s.want);
    mount.unmount_and_check();
    // Three 8 MiB blocks: the first read's block, then one request for the rest.
    let sent = gets() - before;
    assert!((1..=2).contains(&sent), "{sent} GETs: {:#?}", s.proxy.log());
}
