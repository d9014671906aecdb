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
mod endpoints;
#[cfg(test)]
mod faults_tests;
mod file;
#[cfg(test)]
pub(crate) use file::test_file;
mod hadoop_conf;
mod metadata;
mod pool;
mod stream;
mod webhdfs;

use std::collections::{HashMap, HashSet};
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use object_store::path::Path as ObjectPath;
use object_store::{
    Attribute, Attributes, ClientOptions, GetOptions, ObjectMeta, ObjectStore, RetryConfig,
};
use tokio::runtime::Handle;

use super::{EntryKind, ReadAt, SourceError, Storage};
use blocks::{Blocks, ObjectRef};

/// Size of the aligned blocks objects are fetched in.
const BLOCK_SIZE: u64 = 8 << 20;
/// Bound on every request (a hung server never hangs a FUSE thread for longer).
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);
/// Bound on all the retries of one request.
const RETRY_BUDGET: Duration = Duration::from_secs(60);
/// Bound on the retries of a source's first requests, until one succeeds: a store that answers
/// 5xx to a first look (fake-gcs-server's 500 for a missing bucket) is wrong, not busy, and a
/// user waits for the answer; later reads keep `RETRY_BUDGET` for the faults that pass.
const FIRST_RETRY_BUDGET: Duration = Duration::from_secs(3);

pub use endpoints::check as check_endpoint;
pub use hadoop_conf::hadoop_user;

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
    let quick = RetryConfig {
        max_retries: 3,
        retry_timeout: FIRST_RETRY_BUDGET,
        ..Default::default()
    };
    let client = ClientOptions::new()
        .with_timeout(REQUEST_TIMEOUT)
        .with_connect_timeout(Duration::from_secs(5));
    let (named, base, key) = clouds::parse(url).map_err(bad)?;
    let clients = clouds::client(&named, base, settings, [retry, quick], client).map_err(bad)?;
    let store = clients.store;
    let can_list = named != clouds::Named::Http;
    let list_404 = match &named {
        // fake-gcs-server answers the XML API (object_store's) for its `-public-host` only, and
        // 404 to anything else.
        clouds::Named::Gcs { bucket }
            if settings.endpoint.is_some()
                || std::env::var_os("STORAGE_EMULATOR_HOST").is_some() =>
        {
            Some(format!(
                "404 listing bucket {bucket} (emulator: is -public-host set?)"
            ))
        }
        _ => None,
    };
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
        first: clients.first,
        reached: AtomicBool::new(false),
        first_failure: Mutex::new(None),
        base: base.to_string(),
        credentials,
        can_list,
        markers_in_metadata: matches!(named, clouds::Named::Azure { .. }),
        bare_etags: matches!(named, clouds::Named::Hdfs | clouds::Named::WebHdfs),
        list_404,
        folders: Mutex::new(HashSet::new()),
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
    /// The same store with `FIRST_RETRY_BUDGET`: HEADs and LISTs use it until one succeeds
    /// (`reached`).
    first: Arc<dyn ObjectStore>,
    reached: AtomicBool,
    /// Why the first look failed, when the store itself did (5xx, no answer): said again for
    /// every other path of that look instead of asking again (detection asks about a dozen).
    first_failure: Mutex<Option<String>>,
    /// `s3://bucket` or `http://host:port`: what paths are shown under.
    base: String,
    /// Where its credentials come from (`clouds::credential_source`), for refusals.
    credentials: String,
    can_list: bool,
    /// The store's entity tags are not HTTP's (HDFS: `MTIME-SIZE`, compared as given).
    bare_etags: bool,
    /// Whether a zero-byte object may be a folder marker told by its metadata (Azure's
    /// `hdi_isfolder=true`, as WASB and ADLS Gen2 show directories): such an object is HEADed.
    markers_in_metadata: bool,
    /// What a 404 answered to a LIST says (an emulator's known cause).
    list_404: Option<String>,
    /// Folder markers seen: directories, never files.
    folders: Mutex<HashSet<PathBuf>>,
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
    // The key as it is: `ObjectPath::from` percent-encodes it (`模型 é` → `%E6%A8…`) and the
    // client encodes it again for the URL, so the key asked for would not be the one stored.
    let key: Vec<&str> = s
        .split('/')
        .filter(|p| !p.is_empty() && *p != ".")
        .collect();
    ObjectPath::parse(key.join("/")).map_err(|e| SourceError::Remote {
        url: s.to_string(),
        cause: e.to_string(),
    })
}

/// Whether `attributes` (of a zero-byte object) mark a folder: `hdi_isfolder=true`.
fn is_folder_marker(attributes: &Attributes) -> bool {
    let key = Attribute::Metadata("hdi_isfolder".into());
    attributes
        .get(&key)
        .is_some_and(|v| v.as_ref().eq_ignore_ascii_case("true"))
}

impl RemoteStorage {
    /// The store for a HEAD or a LIST: `first` until one succeeded.
    fn meta_store(&self) -> Arc<dyn ObjectStore> {
        match self.reached.load(Ordering::Relaxed) {
            true => Arc::clone(&self.store),
            false => Arc::clone(&self.first),
        }
    }

    /// The failure of the first look, if it failed and nothing succeeded since.
    fn failed_first(&self, path: &Path) -> Result<(), SourceError> {
        if self.reached.load(Ordering::Relaxed) {
            return Ok(());
        }
        let failed = self.first_failure.lock().unwrap_or_else(|e| e.into_inner());
        match failed.as_ref() {
            Some(cause) => Err(SourceError::Remote {
                url: self.url(path),
                cause: cause.clone(),
            }),
            None => Ok(()),
        }
    }

    /// `e`, a HEAD's or a LIST's failure, said as `cause`: remembered if it is the store's
    /// own (a 5xx, or no answer; not a 4xx about the path: missing, refused) before anything
    /// succeeded.
    fn note_failure(&self, e: &object_store::Error, cause: &str) {
        let status = blocks::status_of(&e.to_string());
        let the_stores = matches!(e, object_store::Error::Generic { .. })
            && status.is_none_or(|s| s.starts_with('5'));
        if !self.reached.load(Ordering::Relaxed) && the_stores {
            let mut failed = self.first_failure.lock().unwrap_or_else(|e| e.into_inner());
            *failed = Some(cause.to_string());
        }
    }

    /// `blocks::cause`, and for a refusal, whose credentials were refused.
    fn cause(&self, e: &object_store::Error) -> String {
        // A LIST's 401/403 is a generic error in object_store, a HEAD's a typed one.
        let status = blocks::status_of(&e.to_string());
        let refused = matches!(
            e,
            object_store::Error::PermissionDenied { .. }
                | object_store::Error::Unauthenticated { .. }
        ) || status.is_some_and(|s| s.starts_with("401") || s.starts_with("403"))
            || blocks::kerberos_refusal(e).is_some();
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
        self.failed_first(path)?;
        let store = self.meta_store();
        let head = GetOptions::new().with_head(true);
        let got = runtime().block_on(async move { store.get_opts(&location, head).await });
        if got.is_ok() {
            self.reached.store(true, Ordering::Relaxed);
        }
        let meta = match got {
            Ok(r) if r.meta.size == 0 && is_folder_marker(&r.attributes) => {
                let mut folders = self.folders.lock().unwrap_or_else(|e| e.into_inner());
                folders.insert(path.to_path_buf());
                None
            }
            Ok(r) => Some(r.meta),
            Err(object_store::Error::NotFound { .. }) => None,
            Err(e) if beneath_a_file(&e) => None,
            // A directory over HTTP: nginx and most servers refuse it (403) after redirecting.
            Err(object_store::Error::PermissionDenied { .. }) if !self.can_list => None,
            Err(e) => {
                let cause = self.cause(&e);
                self.note_failure(&e, &cause);
                let url = self.url(path);
                return Err(SourceError::Remote { url, cause });
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
        self.failed_first(dir)?;
        let store = self.meta_store();
        let asked = prefix.clone();
        let listed = runtime().block_on(async move {
            let prefix = (!prefix.as_ref().is_empty()).then_some(prefix);
            store.list_with_delimiter(prefix.as_ref()).await
        });
        let listed = match listed {
            Err(e) if beneath_a_file(&e) => Ok(object_store::ListResult {
                common_prefixes: Vec::new(),
                objects: Vec::new(),
                extensions: Default::default(),
            }),
            other => other,
        };
        let listed = listed.map_err(|e| {
            let not_found = blocks::status_of(&e.to_string()).is_some_and(|s| s.starts_with("404"));
            let cause = match (&self.list_404, not_found) {
                (Some(why), true) => why.clone(),
                _ => self.cause(&e),
            };
            self.note_failure(&e, &cause);
            let url = self.url(dir);
            SourceError::Remote { url, cause }
        })?;
        self.reached.store(true, Ordering::Relaxed);
        let dirs: Vec<OsString> = listed
            .common_prefixes
            .iter()
            .filter_map(|p| p.filename().map(OsString::from))
            .collect();
        let mut out = Vec::new();
        let mut maybe_markers = Vec::new();
        {
            let mut heads = self.heads.lock().unwrap_or_else(|e| e.into_inner());
            for o in listed.objects {
                // The listed directory's own marker (S3's and GCS's zero-byte `dir/`).
                if o.location == asked {
                    continue;
                }
                let Some(name) = o.location.filename().map(OsString::from) else {
                    continue;
                };
                if o.size == 0 && dirs.contains(&name) {
                    // A marker of a directory that holds something: the directory is listed.
                    continue;
                }
                if o.size == 0 && self.markers_in_metadata {
                    maybe_markers.push(name);
                    continue;
                }
                heads.insert(dir.join(&name), Some(o));
                out.push((name, EntryKind::File));
            }
        }
        // A listing does not carry metadata: a zero-byte object is HEADed for its marker.
        for name in maybe_markers {
            let kind = match self.head(&dir.join(&name))? {
                Some(_) => EntryKind::File,
                None => EntryKind::Dir,
            };
            out.push((name, kind));
        }
        out.extend(dirs.into_iter().map(|d| (d, EntryKind::Dir)));
        self.lists
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(dir.to_path_buf(), out.clone());
        Ok(out)
    }
}

/// HDFS refuses a path beneath a file (`a.npy/saved_model.pb`, which detection asks about) as
/// a traversal its permission checker denies, "… (is not a directory)", or as
/// `ParentNotDirectoryException`: there is nothing there.
fn beneath_a_file(e: &object_store::Error) -> bool {
    let m = e.to_string();
    m.contains("(is not a directory)") || m.contains("ParentNotDirectoryException")
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
            // HTTP stores want `If-Match` quoted; HDFS's store compares its own bare tag.
            etag: meta.e_tag.as_deref().map(|t| match self.bare_etags {
                true => t.to_string(),
                false => blocks::quoted_etag(t),
            }),
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
        let folders = self.folders.lock().unwrap_or_else(|e| e.into_inner());
        if folders.contains(path) {
            return Ok(Some(EntryKind::Dir));
        }
        drop(folders);
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
        self.folders
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clear();
        *self.first_failure.lock().unwrap_or_else(|e| e.into_inner()) = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use object_store::memory::InMemory;
    use object_store::{PutOptions, PutPayload};

    fn over(store: Arc<dyn ObjectStore>, markers_in_metadata: bool) -> RemoteStorage {
        RemoteStorage {
            blocks: Arc::new(Blocks::new(Arc::clone(&store), BLOCK_SIZE, 64 << 20, None)),
            first: Arc::clone(&store),
            store,
            reached: AtomicBool::new(false),
            first_failure: Mutex::new(None),
            base: "mem://b".into(),
            credentials: "none".into(),
            can_list: true,
            bare_etags: false,
            markers_in_metadata,
            list_404: None,
            folders: Mutex::new(HashSet::new()),
            heads: Mutex::new(HashMap::new()),
            lists: Mutex::new(HashMap::new()),
            next_id: AtomicU64::new(1),
        }
    }

    fn put(store: &InMemory, key: &str, data: &[u8], folder: bool) {
        let mut opts = PutOptions::default();
        if folder {
            let key = Attribute::Metadata("hdi_isfolder".into());
            opts.attributes.insert(key, "true".into());
        }
        let p = ObjectPath::parse(key).unwrap();
        let payload = PutPayload::from(data.to_vec());
        runtime()
            .block_on(store.put_opts(&p, payload, opts))
            .unwrap();
    }

    /// A key is asked for as stored: non-ASCII, a space, `%`, `~`, brackets (object_store's
    /// `Path::from` would percent-encode them, and the client again).
    #[test]
    fn keys_are_asked_for_as_stored() {
        let mem = InMemory::new();
        let key = "模型 é/odd ~%[]{}|^/w.bin";
        put(&mem, key, b"1234", false);
        let s = over(Arc::new(mem), false);
        assert_eq!(s.kind(Path::new(key)).unwrap(), Some(EntryKind::File));
        let dir = Path::new("模型 é/odd ~%[]{}|^");
        assert_eq!(s.kind(dir).unwrap(), Some(EntryKind::Dir));
        let names = s.list(dir).unwrap();
        assert_eq!(names, vec![("w.bin".into(), EntryKind::File)]);
        assert_eq!(s.open(Path::new(key)).unwrap().about().size, 4);
    }

    /// Folder markers are directories at every level, never files: Azure's zero-byte blobs
    /// with `hdi_isfolder=true` (an empty one too), and a zero-byte object named as a prefix.
    #[test]
    fn folder_markers_are_directories() {
        let mem = InMemory::new();
        put(&mem, "runs", b"", true);
        put(&mem, "runs/exp", b"", true);
        put(&mem, "runs/exp/w.bin", b"1234", false);
        put(&mem, "runs/exp/logs", b"", true);
        put(&mem, "runs/exp/_SUCCESS", b"", false);
        let s = over(Arc::new(mem), true);
        assert_eq!(s.kind(Path::new("runs")).unwrap(), Some(EntryKind::Dir));
        assert_eq!(s.kind(Path::new("runs/exp")).unwrap(), Some(EntryKind::Dir));
        let mut names = s.list(Path::new("runs/exp")).unwrap();
        names.sort_by(|a, b| a.0.cmp(&b.0));
        let want: Vec<(OsString, EntryKind)> = vec![
            ("_SUCCESS".into(), EntryKind::File),
            ("logs".into(), EntryKind::Dir),
            ("w.bin".into(), EntryKind::File),
        ];
        assert_eq!(names, want);
        assert_eq!(
            s.list(Path::new("runs")).unwrap(),
            vec![("exp".into(), EntryKind::Dir)]
        );
        assert_eq!(
            s.kind(Path::new("runs/exp/logs")).unwrap(),
            Some(EntryKind::Dir)
        );
    }
}
