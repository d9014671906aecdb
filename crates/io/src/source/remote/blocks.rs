//! Aligned blocks of remote objects: fetched by ranged GET pinned to the object's ETag, kept
//! in one memory-bounded LRU per mount, and fetched once however many readers want a block at
//! the same time: the first claims it (a slot in `inflight`) and later arrivals wait on the
//! slot instead of sending their own request. A slot's producer is either a single-block GET
//! or a sequential stream (`stream.rs`); a producer that goes away without an answer (a
//! cancelled stream) leaves its waiters to claim the block again.
//!
//! Invariants: a cached block holds exactly `min(block_size, size - start)` bytes of the
//! version of the object that was opened (the GET carries `If-Match: <etag>`, and a response
//! of another length is an error); the cache's byte total never exceeds its cap by more than
//! one block; no lock is held while a request is in flight.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use futures::StreamExt;
use object_store::path::Path as ObjectPath;
use object_store::{GetOptions, GetRange, ObjectStore};
use tokio::sync::watch;

use super::disk::DiskBlocks;
use super::pool::BufPool;
use crate::source::byte_lru::ByteLru;
use crate::source::SourceError;

/// One object as opened: what every block request of it is pinned to.
#[derive(Debug)]
pub(crate) struct ObjectRef {
    /// Distinguishes objects in the shared cache.
    pub(crate) id: u64,
    pub(crate) url: String,
    pub(crate) path: ObjectPath,
    pub(crate) size: u64,
    pub(crate) etag: Option<String>,
    pub(crate) last_modified: Option<chrono::DateTime<chrono::Utc>>,
}

type Key = (u64, u64);

/// What a block's producer publishes: the bytes, or why they could not be had.
type Answer = Option<Result<Bytes, Arc<SourceError>>>;

/// The right to produce a block, or a slot to wait on for another producer's answer.
pub(crate) enum Claim {
    Produce(watch::Sender<Answer>),
    Wait(watch::Receiver<Answer>),
    Cached(Bytes),
}

/// Blocks of every object of one storage.
pub(crate) struct Blocks {
    store: Arc<dyn ObjectStore>,
    pub(crate) block_size: u64,
    cap: u64,
    cached: Mutex<ByteLru<Key, Bytes>>,
    inflight: Mutex<HashMap<Key, watch::Receiver<Answer>>>,
    /// Blocks kept across mounts (`cache_dir`), for objects with an ETag.
    disk: Option<Arc<DiskBlocks>>,
    /// Buffers of evicted blocks, filled again by the next fetch.
    pub(crate) pool: Arc<BufPool>,
}

/// Most free block buffers kept for reuse: a stream's window turns over a few at a time.
const POOL_KEEP: u64 = 4;

/// How a share of memory is spent on `block_size` blocks: (bytes of cached blocks, free
/// buffers kept). Together they stay within `share`, except that a share under three blocks
/// still gets two cached blocks and one buffer (a reader needs its block and the next).
fn split(share: u64, block_size: u64) -> (u64, usize) {
    let blocks = share / block_size.max(1);
    let keep = (blocks / 4).clamp(1, POOL_KEEP);
    let cached = blocks.saturating_sub(keep).max(2);
    debug_assert!(blocks < 3 || (cached + keep) * block_size <= share);
    (cached.saturating_mul(block_size), keep as usize)
}

impl Blocks {
    /// Blocks of `block_size` whose cache and recycled buffers share `share` bytes.
    pub(crate) fn new(
        store: Arc<dyn ObjectStore>,
        block_size: u64,
        share: u64,
        disk: Option<DiskBlocks>,
    ) -> Blocks {
        let (cap, keep) = split(share, block_size);
        Blocks {
            disk: disk.map(Arc::new),
            store,
            block_size,
            cap,
            cached: Mutex::new(ByteLru::new(cap)),
            inflight: Mutex::new(HashMap::new()),
            pool: BufPool::new(usize::try_from(block_size).unwrap_or(usize::MAX), keep),
        }
    }

    /// Most bytes the memory cache holds.
    pub(crate) fn cap(&self) -> u64 {
        self.cap
    }

    /// Byte range of block `index` of `obj`.
    pub(crate) fn range(&self, obj: &ObjectRef, index: u64) -> std::ops::Range<u64> {
        let start = index.saturating_mul(self.block_size).min(obj.size);
        start..start.saturating_add(self.block_size).min(obj.size)
    }

    pub(crate) fn cached(&self, obj: &ObjectRef, index: u64) -> Option<Bytes> {
        let mut c = self.cached.lock().unwrap_or_else(|e| e.into_inner());
        c.get(&(obj.id, index)).cloned()
    }

    /// Block `index` of `obj`, from the cache or fetched (once for all concurrent callers).
    pub(crate) async fn get(&self, obj: &ObjectRef, index: u64) -> Result<Bytes, SourceError> {
        loop {
            match self.claim(obj, index) {
                Claim::Cached(b) => return Ok(b),
                Claim::Produce(tx) => {
                    let got = self.load_or_fetch(obj, index).await;
                    return self.publish(obj, index, &tx, got);
                }
                Claim::Wait(mut rx) => {
                    if let Ok(answer) = rx.wait_for(Option::is_some).await {
                        if let Some(a) = answer.as_ref() {
                            return a.clone().map_err(|e| copy_error(&e));
                        }
                    }
                    // The producer went away without an answer: claim the block again.
                }
            }
        }
    }

    /// The block if cached, else the right to produce it or the slot of its producer.
    pub(crate) fn claim(&self, obj: &ObjectRef, index: u64) -> Claim {
        if let Some(b) = self.cached(obj, index) {
            return Claim::Cached(b);
        }
        let key = (obj.id, index);
        let mut inflight = self.inflight.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(rx) = inflight.get(&key) {
            // A producer that went away leaves a closed slot, which is taken over.
            if rx.has_changed().is_ok() || rx.borrow().is_some() {
                return Claim::Wait(rx.clone());
            }
        }
        let (tx, rx) = watch::channel(None);
        inflight.insert(key, rx);
        Claim::Produce(tx)
    }

    /// Answers the slot of a claimed block: cached on success, the slot freed either way
    /// (so that a failed block is tried again by the next reader).
    pub(crate) fn publish(
        &self,
        obj: &ObjectRef,
        index: u64,
        tx: &watch::Sender<Answer>,
        got: Result<Bytes, SourceError>,
    ) -> Result<Bytes, SourceError> {
        let key = (obj.id, index);
        if let Ok(bytes) = &got {
            let r = self.range(obj, index);
            debug_assert_eq!(
                bytes.len() as u64,
                r.end - r.start,
                "block {index} of {}",
                obj.url
            );
            self.insert(key, bytes.clone());
        }
        let shared = got.map_err(Arc::new);
        tx.send_replace(Some(shared.clone()));
        let mut inflight = self.inflight.lock().unwrap_or_else(|e| e.into_inner());
        if inflight
            .get(&key)
            .is_some_and(|rx| rx.same_channel(&tx.subscribe()))
        {
            inflight.remove(&key);
        }
        shared.map_err(|e| copy_error(&e))
    }

    /// Whether the disk cache holds block `index` of `obj` (a cheap check, no read).
    pub(crate) fn on_disk(&self, obj: &ObjectRef, index: u64) -> bool {
        match (&self.disk, &obj.etag) {
            (Some(d), Some(etag)) => d.contains(&obj.url, etag, index),
            _ => false,
        }
    }

    /// Stores a block produced by a stream on disk (a no-op without a disk cache or ETag).
    pub(crate) async fn keep_on_disk(&self, obj: &ObjectRef, index: u64, data: Bytes) {
        if let (Some(disk), Some(etag)) = (&self.disk, &obj.etag) {
            let (disk, url, etag) = (Arc::clone(disk), obj.url.clone(), etag.clone());
            let _ =
                tokio::task::spawn_blocking(move || disk.store(&url, &etag, index, &data)).await;
        }
    }

    fn insert(&self, key: Key, bytes: Bytes) {
        let mut c = self.cached.lock().unwrap_or_else(|e| e.into_inner());
        c.insert(key, bytes, drop);
        debug_assert!(c.bytes() <= self.cap.saturating_add(self.block_size));
    }

    /// The block from the disk cache, or fetched and then stored there.
    async fn load_or_fetch(&self, obj: &ObjectRef, index: u64) -> Result<Bytes, SourceError> {
        let disk = self.disk.as_ref().zip(obj.etag.as_ref());
        if let Some((disk, etag)) = disk {
            let (disk, url, etag) = (Arc::clone(disk), obj.url.clone(), etag.clone());
            let range = self.range(obj, index);
            let len = range.end - range.start;
            let found =
                tokio::task::spawn_blocking(move || disk.load(&url, &etag, index, len)).await;
            if let Ok(Some(bytes)) = found {
                return Ok(bytes);
            }
        }
        let bytes = self.fetch(obj, index).await?;
        // Awaited, so that a block read before an unmount is on disk for the next mount.
        self.keep_on_disk(obj, index, bytes.clone()).await;
        Ok(bytes)
    }

    async fn fetch(&self, obj: &ObjectRef, index: u64) -> Result<Bytes, SourceError> {
        let range = self.range(obj, index);
        let want = range.end - range.start;
        if want == 0 {
            return Ok(Bytes::new());
        }
        let mut body = self.request(obj, range.clone()).await?.into_stream();
        let mut got = self.pool.take(want as usize);
        while let Some(chunk) = body.next().await {
            let chunk = chunk.map_err(|e| remote_error(obj, e))?;
            // More than asked for is an error below; never grow the buffer for it.
            let room = (want as usize).saturating_sub(got.len());
            got.extend_from_slice(&chunk[..chunk.len().min(room)]);
            if chunk.len() > room {
                return Err(SourceError::Remote {
                    url: obj.url.clone(),
                    cause: format!("asked for bytes {}..{}, got more", range.start, range.end),
                });
            }
        }
        if got.len() as u64 != want {
            return Err(SourceError::Remote {
                url: obj.url.clone(),
                cause: format!(
                    "asked for bytes {}..{}, got {} bytes",
                    range.start,
                    range.end,
                    got.len()
                ),
            });
        }
        Ok(self.pool.freeze(got))
    }
}

impl Blocks {
    /// A GET of `range` of the opened version of `obj` (its body still to be read).
    pub(crate) async fn request(
        &self,
        obj: &ObjectRef,
        range: std::ops::Range<u64>,
    ) -> Result<object_store::GetResult, SourceError> {
        let options = GetOptions {
            if_match: obj.etag.clone(),
            if_unmodified_since: obj.etag.is_none().then_some(obj.last_modified).flatten(),
            range: Some(GetRange::Bounded(range)),
            ..Default::default()
        };
        let r = self
            .store
            .get_opts(&obj.path, options)
            .await
            .map_err(|e| remote_error(obj, e))?;
        // Compared quoted whatever the store's form (`obj`'s is HDFS's bare one there).
        let got = r.meta.e_tag.as_deref().map(quoted_etag);
        let opened = obj.etag.as_deref().map(quoted_etag);
        if got.is_some() && opened.is_some() && got != opened {
            return Err(changed(obj));
        }
        Ok(r)
    }
}

/// An entity tag as HTTP writes it, quoted (`"abc"`): a listing may give it bare (GCS's
/// emulator does, where a GET's header has it quoted), and `If-Match` wants it quoted. A
/// weak tag keeps its `W/`.
pub(crate) fn quoted_etag(tag: &str) -> String {
    let (weak, bare) = match tag.strip_prefix("W/") {
        Some(rest) => ("W/", rest),
        None => ("", tag),
    };
    format!("{weak}\"{}\"", bare.trim_matches('"'))
}

/// The same error for another waiter (`SourceError` holds an `io::Error`, which is not `Clone`).
fn copy_error(e: &SourceError) -> SourceError {
    match e {
        SourceError::Changed { path } => SourceError::Changed { path: path.clone() },
        SourceError::Remote { url, cause } => SourceError::Remote {
            url: url.clone(),
            cause: cause.clone(),
        },
        other => SourceError::Remote {
            url: String::new(),
            cause: other.to_string(),
        },
    }
}

fn changed(obj: &ObjectRef) -> SourceError {
    SourceError::Changed {
        path: obj.url.clone(),
    }
}

/// A failed request: a changed or vanished object is `Changed` (ESTALE above), anything else
/// names the URL and the cause (object_store's messages carry no credentials).
pub(crate) fn remote_error(obj: &ObjectRef, e: object_store::Error) -> SourceError {
    match e {
        object_store::Error::Precondition { .. } | object_store::Error::NotFound { .. } => {
            changed(obj)
        }
        other => SourceError::Remote {
            url: obj.url.clone(),
            cause: cause(&other),
        },
    }
}

/// A request's failure as one line a user can act on: the kind (permission denied, not
/// authenticated, not found) and, where the server answered with an S3 error document, its
/// `Code` and `Message` rather than the raw XML.
pub(crate) fn cause(e: &object_store::Error) -> String {
    let text = e.to_string();
    // Azure's messages go on with a request id and a time, a line each: the first line says it.
    let tag = |name: &str| {
        let open = format!("<{name}>");
        let from = text.find(&open)? + open.len();
        let len = text[from..].find(&format!("</{name}>"))?;
        let first = text[from..from + len].trim().lines().next().unwrap_or("");
        Some(first.trim().to_string())
    };
    if let Some(k) = kerberos_refusal(e) {
        return k;
    }
    if let object_store::Error::Generic { store, .. } = e {
        // A token from a credential service, or the instance metadata service's.
        if text.contains("token request") || text.contains("169.254.169.254") {
            return no_credentials(store, &text);
        }
    }
    let kind = match e {
        object_store::Error::PermissionDenied { .. } => Some("permission denied"),
        object_store::Error::Unauthenticated { .. } => {
            Some("not authenticated (credentials missing or rejected)")
        }
        object_store::Error::NotFound { .. } => Some("not found"),
        _ => None,
    };
    let server = match (tag("Code"), tag("Message")) {
        (Some(c), Some(m)) => Some(format!("{c}: {m}")),
        (Some(c), None) => Some(c),
        _ => None,
    };
    match (kind, server) {
        (Some(k), Some(s)) => format!("{k} ({s})"),
        (None, Some(s)) => s,
        // No error document (a HEAD has no body): the kind and the status.
        (Some(k), None) if status_of(&text).is_some() => {
            format!("{k} ({})", status_of(&text).unwrap_or_default())
        }
        // No error document: object_store's own line, without a body it may quote.
        (k, None) => {
            let first = plain(e);
            let first = first
                .split(['<', '\n'])
                .next()
                .unwrap_or("")
                .trim_end()
                .to_string();
            match k {
                Some(k) => format!("{k}: {first}"),
                None => first,
            }
        }
    }
}

/// The status a server answered (`403 Forbidden`), as object_store's errors quote it.
pub(super) fn status_of(text: &str) -> Option<String> {
    let (_, s) = text.split_once("status code: ")?;
    Some(s.split(':').next().unwrap_or(s).trim().to_string())
}

/// hdfs-native's Kerberos failure (no ticket, an expired one, no KDC answering) in words: its
/// own text leads with the GSS status codes' `Debug` form and a numeric minor code, across what
/// the GSSAPI library says (which names the ticket cache it looked in).
pub(super) fn kerberos_refusal(e: &object_store::Error) -> Option<String> {
    let object_store::Error::Generic { source, .. } = e else {
        return None;
    };
    match source.downcast_ref::<hdfs_native::HdfsError>()? {
        hdfs_native::HdfsError::GSSAPIError(_, minor, said) => {
            // "MAJOR'S TEXT: MINOR'S TEXT" when there is a minor code: the mechanism's text says
            // what was missing (a ticket, and which cache was looked in) or refused.
            let said = said.lines().next().unwrap_or_default();
            let said = match *minor {
                0 => said,
                _ => said.split_once(": ").map_or(said, |(_, m)| m),
            };
            Some(format!(
                "Kerberos refused (kinit first, or set KRB5CCNAME): {}",
                said.trim()
            ))
        }
        _ => None,
    }
}

/// What was looked for when no credentials of `store` (object_store's name of it) could be had.
fn tried(store: &str) -> &'static str {
    match store {
        "GCS" => {
            "GOOGLE_APPLICATION_CREDENTIALS or GOOGLE_SERVICE_ACCOUNT, gcloud's \
             application-default credentials, the metadata server; -o anonymous for a public bucket"
        }
        "MicrosoftAzure" => {
            "AZURE_STORAGE_ACCOUNT_KEY, AZURE_STORAGE_SAS_TOKEN, AZURE_CLIENT_ID/SECRET/TENANT_ID, \
             workload identity, managed identity, the Azure CLI (AZURE_USE_AZURE_CLI=true); \
             -o anonymous for a public container"
        }
        "S3" => {
            "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, -o profile= (~/.aws/credentials), the \
             instance's role; -o anonymous for a public bucket"
        }
        _ => "the environment and the instance's credentials; -o anonymous for public data",
    }
}

/// A token that could not be had: which credentials were looked for, and the server's status if
/// it answered (never a URL's query or a body: they may carry a secret).
fn no_credentials(store: &str, text: &str) -> String {
    let tried = tried(store);
    match status_of(text) {
        Some(s) => format!("no usable credentials (the token request got {s}; looked for {tried})"),
        // No answer: the token service was not reached (DNS, a proxy, a timeout).
        None => format!("no token: the token service did not answer (looked for {tried})"),
    }
}

/// No credentials of `store` but a metadata service's, and none answered (`metadata::answers`).
pub(super) fn no_metadata_service(store: &str) -> String {
    format!(
        "no token: no credentials set and no metadata service answered (not a cloud VM?; \
         looked for {})",
        tried(store)
    )
}

/// `e` as a user reads it: object_store's own words without its "Generic GCS error:" prefix.
pub(crate) fn plain(e: &object_store::Error) -> String {
    match e {
        object_store::Error::Generic { source, .. } => source.to_string(),
        e => e.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::split;

    const MB8: u64 = 8 << 20;

    /// A listing's bare tag and a GET's quoted one are the same version; a weak one stays weak.
    #[test]
    fn entity_tags_compare_quoted() {
        use super::quoted_etag;
        assert_eq!(quoted_etag("ysz2gB=="), "\"ysz2gB==\"");
        assert_eq!(quoted_etag("\"ysz2gB==\""), "\"ysz2gB==\"");
        assert_eq!(quoted_etag("W/\"1-2\""), "W/\"1-2\"");
    }

    /// S3's error documents become one line: the code and message, never the XML.
    #[test]
    fn a_server_error_document_becomes_one_line() {
        let xml = "Error performing GET: Client error with status 404 Not Found: <?xml \
                   version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>NoSuchBucket</Code>\
                   <Message>The specified bucket does not exist</Message><BucketName>x\
                   </BucketName></Error>";
        let e = object_store::Error::Generic {
            store: "S3",
            source: xml.into(),
        };
        assert_eq!(
            super::cause(&e),
            "NoSuchBucket: The specified bucket does not exist"
        );
        let e = object_store::Error::PermissionDenied {
            path: "k".into(),
            source: "<Error><Code>AccessDenied</Code><Message>Access Denied</Message></Error>"
                .into(),
        };
        assert_eq!(
            super::cause(&e),
            "permission denied (AccessDenied: Access Denied)"
        );
        let e = object_store::Error::Generic {
            store: "HTTP",
            source: "connection refused".into(),
        };
        assert!(!super::cause(&e).is_empty());
    }

    #[test]
    fn cached_blocks_and_kept_buffers_share_the_budget() {
        // cache=256M: a 64 MiB share is 6 cached blocks and 2 buffers.
        assert_eq!(split(64 << 20, MB8), (6 * MB8, 2));
        // cache=1G: 256 MiB, 28 cached and the most buffers kept (4).
        assert_eq!(split(256 << 20, MB8), (28 * MB8, 4));
        for share in [24 << 20, 40 << 20, 100 << 20, 1 << 30] {
            let (cached, keep) = split(share, MB8);
            assert!(cached + keep as u64 * MB8 <= share, "{share}");
        }
        // Under three blocks: two cached and one buffer all the same.
        assert_eq!(split(16 << 20, MB8), (2 * MB8, 1));
        assert_eq!(split(0, MB8), (2 * MB8, 1));
    }
}
