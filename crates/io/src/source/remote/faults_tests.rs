//! The remote source against a failure-injecting client, as mountpoint-s3 tests its own: an
//! `ObjectStore` that answers GETs from memory but, as a seeded plan draws, fails them, cuts
//! or pads their bodies, breaks them mid-stream, says another ETag, or loses the object; and
//! a reference (the object's bytes) every read is held to. What must hold whatever the plan:
//! a read gives exactly the reference's bytes or an error, never other bytes; a fault is not
//! remembered (once the store is healthy again every byte reads); an object replaced after the
//! open is never mixed with the one opened (reads give the old bytes or `Changed`).
//!
//! object_store's own HTTP retries sit below this seam (a fault here is what is left when they
//! are spent); the retries, resets and slow answers of a real server are the fault proxy's
//! (`mount-tests/faults.rs`).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use bytes::Bytes;
use futures::stream::{self, BoxStream, StreamExt};
use object_store::memory::InMemory;
use object_store::path::Path as ObjectPath;
use object_store::{
    CopyOptions, GetOptions, GetResult, GetResultPayload, ListResult, MultipartUpload, ObjectMeta,
    ObjectStore, ObjectStoreExt, PutMultipartOptions, PutOptions, PutPayload, PutResult,
};

use super::file::{test_file, RemoteFile};
use super::runtime;
use crate::source::{ReadCtx, ReadExt, SourceError};

/// What one GET does.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Fault {
    None,
    /// The request fails (a 5xx once object_store's retries are spent).
    Fail,
    /// The body ends early.
    Short,
    /// The body has a byte more than the range asked.
    Long,
    /// The body fails after its first chunk (a reset mid-transfer).
    Broken,
    /// The answer names another version (ETag) of the object.
    OtherEtag,
    /// The object is gone.
    Gone,
}

const FAULTS: [Fault; 6] = [
    Fault::Fail,
    Fault::Short,
    Fault::Long,
    Fault::Broken,
    Fault::OtherEtag,
    Fault::Gone,
];

/// An in-memory store whose GETs fail as a seeded plan draws: each GET is faulty with
/// probability `rate_percent`%, the fault drawn evenly from `FAULTS`.
#[derive(Debug)]
struct FaultyStore {
    inner: InMemory,
    rng: Mutex<u64>,
    rate_percent: AtomicU64,
    /// When set, every GET has this fault.
    forced: Mutex<Option<Fault>>,
    gets: AtomicU64,
    faults: AtomicU64,
}

impl std::fmt::Display for FaultyStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "FaultyStore")
    }
}

impl FaultyStore {
    fn new(seed: u64) -> FaultyStore {
        FaultyStore {
            inner: InMemory::new(),
            rng: Mutex::new(seed),
            rate_percent: AtomicU64::new(0),
            forced: Mutex::new(None),
            gets: AtomicU64::new(0),
            faults: AtomicU64::new(0),
        }
    }

    /// The next draw of the plan (an LCG: the same seed, the same faults).
    fn next(&self) -> u64 {
        let mut s = self.rng.lock().unwrap();
        *s = s
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        *s >> 33
    }

    fn draw(&self) -> Fault {
        self.gets.fetch_add(1, Ordering::Relaxed);
        if let Some(f) = *self.forced.lock().unwrap() {
            return f;
        }
        let rate = self.rate_percent.load(Ordering::Relaxed);
        if rate == 0 || self.next() % 100 >= rate {
            return Fault::None;
        }
        self.faults.fetch_add(1, Ordering::Relaxed);
        FAULTS[(self.next() % FAULTS.len() as u64) as usize]
    }
}

fn failed(what: &str) -> object_store::Error {
    object_store::Error::Generic {
        store: "FaultyStore",
        source: what.into(),
    }
}

#[async_trait]
impl ObjectStore for FaultyStore {
    async fn put_opts(
        &self,
        location: &ObjectPath,
        payload: PutPayload,
        opts: PutOptions,
    ) -> object_store::Result<PutResult> {
        self.inner.put_opts(location, payload, opts).await
    }

    async fn put_multipart_opts(
        &self,
        location: &ObjectPath,
        opts: PutMultipartOptions,
    ) -> object_store::Result<Box<dyn MultipartUpload>> {
        self.inner.put_multipart_opts(location, opts).await
    }

    async fn get_opts(
        &self,
        location: &ObjectPath,
        options: GetOptions,
    ) -> object_store::Result<GetResult> {
        let fault = self.draw();
        match fault {
            Fault::Fail => return Err(failed("503 Slow Down")),
            Fault::Gone => {
                return Err(object_store::Error::NotFound {
                    path: location.to_string(),
                    source: "gone".into(),
                })
            }
            _ => {}
        }
        let mut r = self.inner.get_opts(location, options).await?;
        let body = match std::mem::replace(
            &mut r.payload,
            GetResultPayload::Stream(stream::empty().boxed()),
        ) {
            GetResultPayload::Stream(s) => s,
            #[allow(unreachable_patterns)]
            _ => unreachable!("InMemory answers with a stream"),
        };
        let chunks: Vec<Bytes> = body
            .collect::<Vec<_>>()
            .await
            .into_iter()
            .collect::<object_store::Result<_>>()?;
        let whole: Vec<u8> = chunks.concat();
        let out: BoxStream<'static, object_store::Result<Bytes>> = match fault {
            Fault::Short => {
                let keep = whole.len().saturating_sub(1 + whole.len() / 3);
                stream::iter([Ok(Bytes::copy_from_slice(&whole[..keep]))]).boxed()
            }
            Fault::Long => {
                let mut more = whole;
                more.push(0xAB);
                stream::iter([Ok(Bytes::from(more))]).boxed()
            }
            Fault::Broken => {
                let half = whole.len() / 2;
                stream::iter([
                    Ok(Bytes::copy_from_slice(&whole[..half])),
                    Err(failed("connection reset")),
                ])
                .boxed()
            }
            _ => stream::iter([Ok(Bytes::from(whole))]).boxed(),
        };
        if fault == Fault::OtherEtag {
            r.meta.e_tag = Some("\"another-version\"".into());
        }
        r.payload = GetResultPayload::Stream(out);
        Ok(r)
    }

    fn delete_stream(
        &self,
        locations: BoxStream<'static, object_store::Result<ObjectPath>>,
    ) -> BoxStream<'static, object_store::Result<ObjectPath>> {
        self.inner.delete_stream(locations)
    }

    fn list(
        &self,
        prefix: Option<&ObjectPath>,
    ) -> BoxStream<'static, object_store::Result<ObjectMeta>> {
        self.inner.list(prefix)
    }

    async fn list_with_delimiter(
        &self,
        prefix: Option<&ObjectPath>,
    ) -> object_store::Result<ListResult> {
        self.inner.list_with_delimiter(prefix).await
    }

    async fn copy_opts(
        &self,
        from: &ObjectPath,
        to: &ObjectPath,
        options: CopyOptions,
    ) -> object_store::Result<()> {
        self.inner.copy_opts(from, to, options).await
    }
}

/// The object `m/data` holding `data`, opened through `store` with 64 KiB blocks and a cache
/// of four blocks (so that reads fetch again what they read before).
fn open(store: &Arc<FaultyStore>, data: &[u8]) -> RemoteFile {
    test_file(store.clone(), data, 256 << 10)
}

fn reference(n: usize, seed: u32) -> Vec<u8> {
    (0..n as u32)
        .map(|i| (i.wrapping_mul(2654435761).wrapping_add(seed) >> 13) as u8)
        .collect()
}

/// One read of `f` at `(off, len)` by `how` (0 `read`, 1 `read_into`, 2 `for_each_piece`):
/// its bytes, or its error.
fn read(f: &RemoteFile, how: u64, off: u64, len: usize) -> Result<Vec<u8>, SourceError> {
    match how {
        0 => f.read(ReadCtx::none(), off, len).map(|b| b.to_vec()),
        1 => {
            let mut out = vec![0u8; len];
            f.read_into(ReadCtx::none(), off, &mut out).map(|()| out)
        }
        _ => {
            let mut out = Vec::with_capacity(len);
            f.for_each_piece(ReadCtx::none(), off, len as u64, &mut |p| {
                out.extend_from_slice(p)
            })
            .map(|()| out)
        }
    }
}

#[test]
fn a_faulty_store_never_yields_wrong_bytes_and_no_fault_is_remembered() {
    for seed in [1u64, 7, 42] {
        let data = reference(1 << 20, seed as u32);
        let store = Arc::new(FaultyStore::new(seed));
        let f = open(&store, &data);
        store.rate_percent.store(30, Ordering::Relaxed);
        let (mut ok, mut failed) = (0, 0);
        for i in 0..400u64 {
            let off = store.next() % data.len() as u64;
            let len = (store.next() % (200 << 10)).min(data.len() as u64 - off) as usize;
            match read(&f, i % 3, off, len) {
                Ok(got) => {
                    assert!(
                        got == data[off as usize..off as usize + len],
                        "seed {seed}: read {i} at {off}+{len} gave other bytes"
                    );
                    ok += 1;
                }
                Err(_) => failed += 1,
            }
        }
        let faults = store.faults.load(Ordering::Relaxed);
        assert!(
            faults > 20 && ok > 50 && failed > 10,
            "seed {seed}: the plan must both fail and pass reads ({faults} faults, {ok} ok, {failed} failed)"
        );
        // Healthy again: every byte reads, block by block and whole.
        store.rate_percent.store(0, Ordering::Relaxed);
        for how in 0..3 {
            let got = read(&f, how, 0, data.len()).unwrap_or_else(|e| {
                panic!("seed {seed}: a fault was remembered: {e}");
            });
            assert!(got == data, "seed {seed}: whole read {how}");
        }
    }
}

#[test]
fn each_fault_alone_is_an_error_naming_the_object_and_is_not_remembered() {
    let data = reference(300_000, 3);
    for fault in FAULTS {
        let store = Arc::new(FaultyStore::new(5));
        let f = open(&store, &data);
        *store.forced.lock().unwrap() = Some(fault);
        let e = f.read(ReadCtx::none(), 70_000, 1000).unwrap_err();
        let stale = matches!(e, SourceError::Changed { .. });
        let expect_stale = matches!(fault, Fault::OtherEtag | Fault::Gone);
        assert_eq!(stale, expect_stale, "{fault:?}: {e}");
        assert!(e.to_string().contains("mem://m/data"), "{fault:?}: {e}");
        *store.forced.lock().unwrap() = None;
        let again = f
            .read(ReadCtx::none(), 70_000, 1000)
            .unwrap_or_else(|e| panic!("{fault:?} remembered: {e}"));
        assert!(again[..] == data[70_000..71_000], "{fault:?}");
    }
}

#[test]
fn an_object_replaced_after_the_open_is_never_mixed_with_it() {
    let old = reference(1 << 20, 11);
    let new = reference(1 << 20, 12);
    let store = Arc::new(FaultyStore::new(9));
    let f = open(&store, &old);
    // Blocks 0..4 read (and cached) before the object is replaced.
    assert!(read(&f, 0, 0, 4 * (64 << 10)).unwrap() == old[..4 * (64 << 10)]);
    runtime()
        .block_on(store.put(&ObjectPath::from("m/data"), PutPayload::from(new)))
        .unwrap();
    let mut changed = 0;
    for i in 0..200u64 {
        let off = store.next() % old.len() as u64;
        let len = (store.next() % (100 << 10)).min(old.len() as u64 - off) as usize;
        match read(&f, i % 3, off, len) {
            Ok(got) => assert!(got == old[off as usize..off as usize + len], "{off}+{len}"),
            Err(SourceError::Changed { .. }) => changed += 1,
            Err(e) => panic!("{off}+{len}: {e}: a replaced object is Changed (ESTALE)"),
        }
    }
    assert!(changed > 0, "no read reached past the cached blocks");
}
