//! Remote storages (SPEC §1): S3 and S3-compatible stores (`s3://bucket/key…`), Google Cloud
//! Storage (`gs://`), Azure Blob / ADLS Gen2 (`az://`, `abfss://`, `https://ACCOUNT.blob…`) and
//! HTTP(S) servers that honour `Range`, through `object_store` (`clouds` makes each client).
//! Paths are keys relative to the bucket or container (or to the server's root):
//! `s3://b/models/m.ckpt` is path `models/m.ckpt` of bucket `b`.
//!
//! The async runtime lives here and nowhere else: callers are synchronous FUSE or CLI threads
//! that block on a runtime `Handle`; no lock is held across a request. `mount` forks before
//! any remote request (the runtime's threads would not survive a fork); a child that finds a
//! runtime of its parent starts its own.
//!
//! Metadata requests (HEAD, LIST) are remembered for the life of the storage: detection asks
//! about the same few paths several times, and `open` after `kind` must not cost a second HEAD.

mod blocks;
mod clouds;
mod credentials;
mod disk;
#[cfg(test)]
mod faults_tests;
mod file;
mod pool;
mod stream;

use std::collections::HashMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use object_store::path::Path as ObjectPath;
use object_store::{ClientOptions, ObjectMeta, ObjectStore, ObjectStoreExt, RetryConfig};
use tokio::runtime::Handle;

use super::{EntryKind, ReadAt, SourceError, Storage};
use blocks::{Blocks, ObjectRef};

/// Size of the aligned blocks objects are fetched in.
const BLOCK_SIZE: u64 = 8 << 20;
/// Bound on every request (a hung server never hangs a FUSE thread for longer).
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);
/// Bound on all the retries of one request.
const RETRY_BUDGET: Duration = Duration::from_secs(60);

/// Settings of remote sources (`-o endpoint=,region=,profile=,anonymous`; the rest from the
/// environment).
#[derive(Clone, Debug, Default)]
pub struct RemoteSettings {
    pub endpoint: Option<String>,
    /// Unsigned requests, no credentials looked for (public buckets and containers).
    pub anonymous: bool,
    pub region: Option<String>,
    pub profile: Option<String>,
    /// Memory for fetched blocks.
    pub cache_bytes: u64,
    /// Where fetched blocks persist (`cache_dir/blocks`), and the most bytes kept there.
    pub disk: Option<(PathBuf, u64)>,
}

/// Whether `source` names a remote object (`s3://`, `gs://`, `az://`, `abfs[s]://`,
/// `http(s)://`).
pub fn is_remote(source: &str) -> bool {
    clouds::is_url(source)
}

/// The storage and the path within it that `url` names.
pub fn open(
    url: &str,
    settings: &RemoteSettings,
) -> Result<(Arc<dyn Storage>, PathBuf), SourceError> {
    let bad = |cause: String| SourceError::Remote {
        url: clouds::shown(url).to_string(),
        cause,
    };
    let retry = RetryConfig {
        max_retries: 6,
        retry_timeout: RETRY_BUDGET,
        ..Default::default()
    };
    let client = ClientOptions::new()
        .with_timeout(REQUEST_TIMEOUT)
        .with_connect_timeout(Duration::from_secs(5));
    let (named, base, key) = clouds::parse(url).map_err(bad)?;
    let store = clouds::client(&named, base, settings, retry, client).map_err(bad)?;
    let can_list = named != clouds::Named::Http;
    let credentials = clouds::credential_source(&named, settings);
    let storage = RemoteStorage {
        blocks: Arc::new(Blocks::new(
            Arc::clone(&store),
            BLOCK_SIZE,
            settings.cache_bytes,
            settings
                .disk
                .as_ref()
                .map(|(dir, max)| disk::DiskBlocks::new(dir.join("blocks"), *max)),
        )),
        store,
        base: base.to_string(),
        credentials,
        can_list,
        heads: Mutex::new(HashMap::new()),
        lists: Mutex::new(HashMap::new()),
        next_id: AtomicU64::new(1),
    };
    Ok((Arc::new(storage), PathBuf::from(key)))
}

static RUNTIME: Mutex<Option<(u32, tokio::runtime::Runtime)>> = Mutex::new(None);

/// A handle on the runtime of this process, started on first use (and again in a child after
/// `fork`: a runtime's threads do not survive it).
fn runtime() -> Handle {
    let mut rt = RUNTIME.lock().unwrap_or_else(|e| e.into_inner());
    let pid = std::process::id();
    if let Some((owner, r)) = rt.as_ref() {
        if *owner == pid {
            return r.handle().clone();
        }
    }
    if let Some((_, stale)) = rt.take() {
        // Its threads exist only in the parent; dropping it here would wait for them.
        std::mem::forget(stale);
    }
    let r = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name("modelfs-remote")
        .enable_all()
        .build()
        .expect("a tokio runtime starts (threads and an epoll instance)");
    let handle = r.handle().clone();
    *rt = Some((pid, r));
    handle
}

struct RemoteStorage {
    store: Arc<dyn ObjectStore>,
    /// `s3://bucket` or `http://host:port`: what paths are shown under.
    base: String,
    /// Where its credentials come from (`clouds::credential_source`), for refusals.
    credentials: String,
    can_list: bool,
    blocks: Arc<Blocks>,
    heads: Mutex<HashMap<PathBuf, Option<ObjectMeta>>>,
    lists: Mutex<HashMap<PathBuf, Vec<(OsString, EntryKind)>>>,
    next_id: AtomicU64,
}

impl std::fmt::Debug for RemoteStorage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RemoteStorage")
            .field("base", &self.base)
            .finish()
    }
}

fn object_path(path: &Path) -> Result<ObjectPath, SourceError> {
    let s = path.to_str().ok_or_else(|| SourceError::Remote {
        url: path.display().to_string(),
        cause: "not a UTF-8 key".into(),
    })?;
    Ok(ObjectPath::from(s.trim_matches('/')))
}

impl RemoteStorage {
    /// `blocks::cause`, and for a refusal, whose credentials were refused.
    fn cause(&self, e: &object_store::Error) -> String {
        let refused = matches!(
            e,
            object_store::Error::PermissionDenied { .. }
                | object_store::Error::Unauthenticated { .. }
        );
        match refused {
            true => format!("{}; credentials: {}", blocks::cause(e), self.credentials),
            false => blocks::cause(e),
        }
    }

    fn url(&self, path: &Path) -> String {
        format!("{}/{}", self.base, path.display())
    }

    /// HEAD of `path`, remembered (a missing object too).
    fn head(&self, path: &Path) -> Result<Option<ObjectMeta>, SourceError> {
        if let Some(m) = self
            .heads
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(path)
        {
            return Ok(m.clone());
        }
        let location = object_path(path)?;
        if location.as_ref().is_empty() {
            return Ok(None);
        }
        let store = Arc::clone(&self.store);
        let got = runtime().block_on(async move { store.head(&location).await });
        let meta = match got {
            Ok(m) => Some(m),
            Err(object_store::Error::NotFound { .. }) => None,
            // A directory over HTTP: nginx and most servers refuse it (403) after redirecting.
            Err(object_store::Error::PermissionDenied { .. }) if !self.can_list => None,
            Err(e) => {
                return Err(SourceError::Remote {
                    url: self.url(path),
                    cause: self.cause(&e),
                })
            }
        };
        self.heads
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(path.to_path_buf(), meta.clone());
        Ok(meta)
    }

    fn list_remote(&self, dir: &Path) -> Result<Vec<(OsString, EntryKind)>, SourceError> {
        if let Some(l) = self
            .lists
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(dir)
        {
            return Ok(l.clone());
        }
        let prefix = object_path(dir)?;
        let store = Arc::clone(&self.store);
        let listed = runtime().block_on(async move {
            let prefix = (!prefix.as_ref().is_empty()).then_some(prefix);
            store.list_with_delimiter(prefix.as_ref()).await
        });
        let listed = listed.map_err(|e| SourceError::Remote {
            url: self.url(dir),
            cause: self.cause(&e),
        })?;
        let mut out = Vec::new();
        let mut heads = self.heads.lock().unwrap_or_else(|e| e.into_inner());
        for o in listed.objects {
            if let Some(name) = o.location.filename() {
                let name = OsString::from(name);
                heads.insert(dir.join(&name), Some(o.clone()));
                out.push((name, EntryKind::File));
            }
        }
        for p in listed.common_prefixes {
            if let Some(name) = p.filename() {
                out.push((OsString::from(name), EntryKind::Dir));
            }
        }
        drop(heads);
        self.lists
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(dir.to_path_buf(), out.clone());
        Ok(out)
    }
}

/// Files a directory served over HTTP may be recognised by (there is no listing).
const KNOWN_NAMES: [&str; 3] = ["saved_model.pb", "checkpoint", "variables/variables.index"];

impl Storage for RemoteStorage {
    fn open(&self, path: &Path) -> Result<Arc<dyn ReadAt>, SourceError> {
        let meta = self.head(path)?.ok_or_else(|| SourceError::Io {
            path: self.url(path),
            // As a local file's: "No such file or directory (os error 2)".
            source: std::io::Error::from_raw_os_error(libc::ENOENT),
        })?;
        let obj = ObjectRef {
            id: self.next_id.fetch_add(1, Ordering::Relaxed),
            url: self.url(path),
            path: meta.location.clone(),
            size: meta.size,
            etag: meta.e_tag.as_deref().map(blocks::quoted_etag),
            last_modified: Some(meta.last_modified),
        };
        Ok(Arc::new(file::RemoteFile::new(
            obj,
            Arc::clone(&self.blocks),
        )))
    }

    fn kind(&self, path: &Path) -> Result<Option<EntryKind>, SourceError> {
        if self.head(path)?.is_some() {
            return Ok(Some(EntryKind::File));
        }
        if self.can_list {
            let entries = self.list_remote(path)?;
            return Ok((!entries.is_empty()).then_some(EntryKind::Dir));
        }
        for n in KNOWN_NAMES {
            if self.head(&path.join(n))?.is_some() {
                return Ok(Some(EntryKind::Dir));
            }
        }
        Ok(None)
    }

    fn list(&self, dir: &Path) -> Result<Vec<(OsString, EntryKind)>, SourceError> {
        if !self.can_list {
            return Err(SourceError::NoListing {
                path: self.url(dir),
                scheme: "HTTP",
            });
        }
        self.list_remote(dir)
    }

    fn display(&self, path: &Path) -> String {
        self.url(path)
    }

    fn stamp(&self, path: &Path) -> Result<Option<String>, SourceError> {
        // One tag for one version, whichever request (HEAD, LIST) told it.
        Ok(self.head(path)?.map(|m| {
            format!(
                "{}:{}:{}",
                m.size,
                m.e_tag
                    .as_deref()
                    .map(blocks::quoted_etag)
                    .unwrap_or_default(),
                m.last_modified.timestamp_nanos_opt().unwrap_or(0)
            )
        }))
    }

    fn look_again(&self) {
        self.heads.lock().unwrap_or_else(|e| e.into_inner()).clear();
        self.lists.lock().unwrap_or_else(|e| e.into_inner()).clear();
    }
}
