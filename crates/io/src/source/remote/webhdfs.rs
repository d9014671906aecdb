//! WebHDFS (`webhdfs://HOST[:PORT]/PATH`, `swebhdfs://` over TLS): HDFS through the NameNode's
//! REST API, for clusters reached only over HTTP, as an `ObjectStore` so it goes through the
//! same `RemoteStorage` (block cache, read-ahead, single-flight) as every other store.
//!
//! Why our own and not a general client: a read must be pinned to the version opened (a file
//! replaced or appended while mounted is ESTALE, never a mix), a DataNode that fails is left for
//! another replica, and a standby NameNode for the active one — which the REST clients we found
//! do not do. The protocol is small: `GETFILESTATUS`, `LISTSTATUS_BATCH` and `OPEN` with
//! `noredirect=true` (the NameNode names the DataNode, which serves the bytes).
//!
//! A version is `FILEID-MTIME-LENGTH` (hex), the entity tag of every meta: the NameNode's inode
//! id changes when a file is replaced, its length and modification time when it is appended.
//! Each read asks the NameNode for the file's status first and refuses another version
//! (`Precondition`, ESTALE above); what remains is the moment between that answer and the
//! DataNode opening the file, as with Hadoop's own clients.

use std::ops::Range;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use bytes::Bytes;
use futures::stream::{self, BoxStream, StreamExt};
use object_store::client::{HttpClient, HttpConnector, HttpRequest, ReqwestConnector};
use object_store::path::Path;
use object_store::{
    ClientOptions, CopyOptions, GetOptions, GetResult, GetResultPayload, ListResult,
    MultipartUpload, ObjectMeta, ObjectStore, PutMultipartOptions, PutOptions, PutPayload,
    PutResult, RetryConfig,
};
use percent_encoding::{percent_decode_str, utf8_percent_encode, AsciiSet, NON_ALPHANUMERIC};
use serde::Deserialize;

use super::hadoop_conf::{hadoop_user, HadoopConf};

const STORE: &str = "WebHDFS";

/// What a path segment keeps unescaped in a URL (RFC 3986's unreserved characters).
const SEGMENT: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~');

/// Entries per `LISTSTATUS_BATCH` answer are the NameNode's (`dfs.ls.limit`, 1000): a directory
/// of 10^5 files is listed in bounded answers, never one of tens of megabytes.
#[derive(Debug)]
pub(super) struct WebHdfs {
    client: HttpClient,
    /// `http://HOST:PORT/webhdfs/v1`, one per NameNode (HA: the nameservice's, in its order).
    namenodes: Vec<String>,
    /// The NameNode that answered last: asked first.
    active: AtomicUsize,
    /// `user.name=…` (simple authentication), URL-encoded.
    auth: String,
    retry: RetryConfig,
    /// `webhdfs://HOST:PORT`, for `Display`.
    shown: String,
}

impl std::fmt::Display for WebHdfs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "WebHdfs({})", self.shown)
    }
}

impl WebHdfs {
    /// The store of `base` (`webhdfs://HOST[:PORT]` or `swebhdfs://…`). A host without a port
    /// that `HADOOP_CONF_DIR` names as a nameservice is its NameNodes' HTTP addresses; an empty
    /// one is `fs.defaultFS`'s cluster.
    pub(super) fn new(
        base: &str,
        retry: RetryConfig,
        options: ClientOptions,
    ) -> Result<WebHdfs, String> {
        let (scheme, host) = base.split_once("://").ok_or("not a URL")?;
        let tls = scheme == "swebhdfs";
        let conf = HadoopConf::from_env();
        let namenodes = namenodes(host, tls, &conf)?;
        let http = if tls { "https" } else { "http" };
        let namenodes: Vec<String> = namenodes
            .into_iter()
            .map(|a| format!("{http}://{a}/webhdfs/v1"))
            .collect();
        for n in &namenodes {
            super::endpoints::check("the NameNode", n)?;
        }
        let client = ReqwestConnector::default()
            .connect(&options.with_allow_http(!tls))
            .map_err(|e| e.to_string())?;
        let user = hadoop_user()?;
        Ok(WebHdfs {
            client,
            namenodes,
            active: AtomicUsize::new(0),
            auth: format!("user.name={}", utf8_percent_encode(&user, SEGMENT)),
            retry,
            shown: base.to_string(),
        })
    }

    /// The URL of `op` on `path` at NameNode `nn`.
    fn url(&self, nn: usize, path: &Path, op: &str, extra: &str) -> String {
        let mut url = self.namenodes[nn].clone();
        for part in path.parts() {
            url.push('/');
            // A part keeps object_store's escapes (`#` is `%23`): the name itself, escaped once.
            let name = percent_decode_str(part.as_ref()).decode_utf8_lossy();
            url.extend(utf8_percent_encode(&name, SEGMENT));
        }
        if path.as_ref().is_empty() {
            url.push('/');
        }
        url.push_str(&format!("?op={op}&{}{extra}", self.auth));
        url
    }

    /// `op` on `path` at the NameNodes, the active one first: a standby's refusal or one that
    /// does not answer passes to the next; a transient fault is asked again within the retry
    /// budget. The answer's body, parsed.
    async fn call<T: for<'de> Deserialize<'de>>(
        &self,
        path: &Path,
        op: &str,
        extra: &str,
    ) -> object_store::Result<T> {
        let body = self
            .retrying(path, |nn| self.get(self.url(nn, path, op, extra)), true)
            .await?;
        serde_json::from_slice(&body).map_err(|e| generic(path, format!("{op}: {e}")))
    }

    /// Runs `attempt` (given a NameNode's index) until it succeeds, fails for good, or the retry
    /// budget is spent. `fail_over`: a NameNode that is standby or unreachable passes to the
    /// next one.
    async fn retrying<T, F, Fut>(
        &self,
        path: &Path,
        attempt: F,
        fail_over: bool,
    ) -> object_store::Result<T>
    where
        F: Fn(usize) -> Fut,
        Fut: std::future::Future<Output = Result<T, Fault>>,
    {
        let started = Instant::now();
        let mut nn = self.active.load(Ordering::Relaxed) % self.namenodes.len();
        let mut tries = 0usize;
        let mut wait = Duration::from_millis(100);
        loop {
            let fault = match attempt(nn).await {
                Ok(b) => {
                    self.active.store(nn, Ordering::Relaxed);
                    return Ok(b);
                }
                Err(f) => f,
            };
            let (next, transient) = match &fault {
                Fault::Remote(r) if r.exception == "StandbyException" => (true, true),
                Fault::Remote(r) => (false, r.exception == "RetriableException"),
                Fault::Unreachable(_) => (true, true),
                Fault::Status(s, _) => (false, *s >= 500 || *s == 429),
                Fault::Body(_) => (false, true),
                Fault::Negotiate => (false, false),
            };
            if next && fail_over && self.namenodes.len() > 1 {
                nn = (nn + 1) % self.namenodes.len();
                // Every NameNode tried once before waiting.
                if nn != self.active.load(Ordering::Relaxed) % self.namenodes.len() {
                    continue;
                }
            }
            tries += 1;
            if !transient
                || tries > self.retry.max_retries
                || started.elapsed() + wait > self.retry.retry_timeout
            {
                return Err(fault.into_error(path));
            }
            tokio::time::sleep(wait).await;
            wait = (wait * 2).min(Duration::from_secs(2));
        }
    }

    /// One GET of `url`: its body when 200, else what went wrong.
    async fn get(&self, url: String) -> Result<Bytes, Fault> {
        self.answer(url)
            .await?
            .into_body()
            .bytes()
            .await
            .map_err(|e| Fault::Body(plain_http_error(&e)))
    }

    /// One GET of `url` answered 200: the response, its body still to be read; else what went
    /// wrong.
    async fn answer(&self, url: String) -> Result<object_store::client::HttpResponse, Fault> {
        let request: HttpRequest = http::Request::get(&url)
            .body(object_store::client::HttpRequestBody::empty())
            .map_err(|e| Fault::Unreachable(e.to_string()))?;
        let response = self
            .client
            .execute(request)
            .await
            .map_err(|e| Fault::Unreachable(plain_http_error(&e)))?;
        let status = response.status().as_u16();
        if status == 200 {
            return Ok(response);
        }
        let negotiate = response
            .headers()
            .get_all(http::header::WWW_AUTHENTICATE)
            .iter()
            .any(|v| v.as_bytes().starts_with(b"Negotiate"));
        let body = response
            .into_body()
            .bytes()
            .await
            .map_err(|e| Fault::Body(plain_http_error(&e)))?;
        Err(fault_of(status, negotiate, &body))
    }

    async fn status(&self, path: &Path) -> object_store::Result<FileStatus> {
        #[derive(Deserialize)]
        #[serde(rename_all = "PascalCase")]
        struct Wrapper {
            file_status: FileStatus,
        }
        let w: Wrapper = self.call(path, "GETFILESTATUS", "").await?;
        Ok(w.file_status)
    }

    /// Bytes `range` of `path`: the NameNode names a DataNode holding them, which streams them
    /// (a read-ahead asks for many blocks at once: never held whole here). A DataNode that
    /// fails before its answer is asked about again (the NameNode orders a stale one last);
    /// one that fails mid-body ends the stream with an error, which the reader's retry resumes.
    /// A body of another length than asked ends with an error too.
    async fn read(&self, path: &Path, range: Range<u64>) -> object_store::Result<Body> {
        let want = range.end - range.start;
        if want == 0 {
            return Ok(stream::empty().boxed());
        }
        let extra = format!("&offset={}&length={want}&noredirect=true", range.start);
        let response = self
            .retrying(
                path,
                |nn| {
                    let url = self.url(nn, path, "OPEN", &extra);
                    async move {
                        #[derive(Deserialize)]
                        struct Redirect {
                            #[serde(rename = "Location")]
                            location: String,
                        }
                        let at = self.get(url).await?;
                        let to: Redirect = serde_json::from_slice(&at)
                            .map_err(|e| Fault::Body(format!("OPEN's answer: {e}")))?;
                        // Whatever the DataNode answers is transient (another may be chosen)
                        // and none of the NameNode's doing: never a reason to fail over.
                        self.answer(to.location).await.map_err(|f| {
                            Fault::Body(match f {
                                Fault::Remote(r) => format!("{}: {}", r.exception, r.message),
                                Fault::Status(s, m) => format!("{s} {m}"),
                                Fault::Unreachable(m) | Fault::Body(m) => m,
                                Fault::Negotiate => "401 Negotiate (Kerberos)".into(),
                            })
                        })
                    }
                },
                true,
            )
            .await?;
        let (p, start) = (path.clone(), range.start);
        let seen = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
        let counted = std::sync::Arc::clone(&seen);
        let body = response.into_body().bytes_stream().map(move |r| {
            let b = r.map_err(|e| generic(&p, plain_http_error(&e)))?;
            counted.fetch_add(b.len() as u64, Ordering::Relaxed);
            Ok(b)
        });
        let p = path.clone();
        let end = stream::once(async move {
            let got = seen.load(Ordering::Relaxed);
            (got != want).then(|| {
                Err(generic(
                    &p,
                    format!("asked for bytes {start}..{}, got {got} bytes", start + want),
                ))
            })
        })
        .filter_map(|x| async move { x });
        Ok(body.chain(end).boxed())
    }
}

/// A body as object_store streams it.
type Body = BoxStream<'static, object_store::Result<Bytes>>;

/// What an answer other than 200 means: Hadoop's error body, a demand for Kerberos, or its status.
fn fault_of(status: u16, negotiate: bool, body: &[u8]) -> Fault {
    #[derive(Deserialize)]
    #[serde(rename_all = "PascalCase")]
    struct Wrapper {
        remote_exception: RemoteException,
    }
    if let Ok(w) = serde_json::from_slice::<Wrapper>(body) {
        return Fault::Remote(w.remote_exception);
    }
    if status == 401 && negotiate {
        return Fault::Negotiate;
    }
    Fault::Status(
        status,
        String::from_utf8_lossy(body).chars().take(200).collect(),
    )
}

/// The NameNodes' HTTP addresses `host` names.
fn namenodes(host: &str, tls: bool, conf: &HadoopConf) -> Result<Vec<String>, String> {
    let default_port = if tls { 9871 } else { 9870 };
    if host.is_empty() {
        let default = conf
            .get("fs.defaultFS")
            .ok_or("webhdfs:/// names the default cluster, and HADOOP_CONF_DIR's core-site.xml sets no fs.defaultFS")?;
        let (_, h) = default.split_once("://").unwrap_or(("", default));
        let h = h.split('/').next().unwrap_or_default();
        let name = h.split(':').next().unwrap_or_default();
        if let Some(nns) = conf.nameservice_http(name, tls) {
            return Ok(nns);
        }
        let key = if tls {
            "dfs.namenode.https-address"
        } else {
            "dfs.namenode.http-address"
        };
        if let Some(a) = conf.get(key) {
            return Ok(vec![a.to_string()]);
        }
        return Ok(vec![format!("{name}:{default_port}")]);
    }
    if !host.contains(':') {
        if let Some(nns) = conf.nameservice_http(host, tls) {
            return Ok(nns);
        }
        return Ok(vec![format!("{host}:{default_port}")]);
    }
    Ok(vec![host.to_string()])
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct FileStatus {
    #[serde(default)]
    file_id: u64,
    length: u64,
    modification_time: i64,
    #[serde(default)]
    path_suffix: String,
    #[serde(rename = "type")]
    kind: String,
}

impl FileStatus {
    fn meta(&self, location: Path) -> ObjectMeta {
        ObjectMeta {
            location,
            last_modified: chrono::DateTime::from_timestamp_millis(self.modification_time)
                .unwrap_or_default(),
            size: self.length,
            e_tag: Some(format!(
                "{:x}-{:x}-{:x}",
                self.file_id, self.modification_time, self.length
            )),
            version: None,
        }
    }
}

#[derive(Debug, Deserialize)]
struct RemoteException {
    exception: String,
    #[serde(default)]
    message: String,
}

/// What went wrong with one request.
#[derive(Debug)]
enum Fault {
    /// The server's own refusal (`FileNotFoundException`, `AccessControlException`, …).
    Remote(RemoteException),
    /// No answer (refused, reset, timed out).
    Unreachable(String),
    /// An answer other than 200 without Hadoop's error body.
    Status(u16, String),
    /// The answer broke off, or could not be read.
    Body(String),
    /// 401 with `WWW-Authenticate: Negotiate`: the cluster wants Kerberos over SPNEGO, which this
    /// client does not speak (`hdfs://` does, from the ticket cache).
    Negotiate,
}

impl Fault {
    fn into_error(self, path: &Path) -> object_store::Error {
        let path = path.to_string();
        match self {
            Fault::Remote(r) => {
                let source = format!("{}: {}", r.exception, first_line(&r.message)).into();
                match r.exception.as_str() {
                    "FileNotFoundException" => object_store::Error::NotFound { path, source },
                    "AccessControlException" | "SecurityException" => {
                        object_store::Error::PermissionDenied { path, source }
                    }
                    _ => object_store::Error::Generic {
                        store: STORE,
                        source,
                    },
                }
            }
            Fault::Unreachable(m) | Fault::Body(m) => object_store::Error::Generic {
                store: STORE,
                source: m.into(),
            },
            // Not `Unauthenticated`: no credential of ours would be taken, so none is named.
            Fault::Negotiate => object_store::Error::Generic {
                store: STORE,
                source: "the cluster asks for Kerberos (401, WWW-Authenticate: Negotiate), and \
                         Kerberos (SPNEGO) is not supported over WebHDFS: use hdfs://, which \
                         takes the Kerberos ticket from the ticket cache"
                    .into(),
            },
            Fault::Status(404, _) => object_store::Error::NotFound {
                path,
                source: "404 Not Found".into(),
            },
            Fault::Status(s, m) => object_store::Error::Generic {
                store: STORE,
                source: format!("{s} {}", first_line(&m)).into(),
            },
        }
    }
}

fn first_line(m: &str) -> &str {
    m.lines().next().unwrap_or_default()
}

/// An HTTP client's error with its causes, in one line (reqwest's own says only "error sending
/// request").
fn plain_http_error(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        let s = s.to_string();
        if !out.contains(&s) {
            out.push_str(": ");
            out.push_str(&s);
        }
        source = std::error::Error::source(source.unwrap());
    }
    out
}

fn generic(path: &Path, m: String) -> object_store::Error {
    object_store::Error::Generic {
        store: STORE,
        source: format!("{path}: {m}").into(),
    }
}

fn read_only() -> object_store::Error {
    object_store::Error::NotSupported {
        source: "modelfs reads WebHDFS, never writes it".into(),
    }
}

#[async_trait]
impl ObjectStore for WebHdfs {
    async fn put_opts(
        &self,
        _: &Path,
        _: PutPayload,
        _: PutOptions,
    ) -> object_store::Result<PutResult> {
        Err(read_only())
    }

    async fn put_multipart_opts(
        &self,
        _: &Path,
        _: PutMultipartOptions,
    ) -> object_store::Result<Box<dyn MultipartUpload>> {
        Err(read_only())
    }

    async fn get_opts(
        &self,
        location: &Path,
        options: GetOptions,
    ) -> object_store::Result<GetResult> {
        let status = self.status(location).await?;
        if status.kind != "FILE" {
            return Err(object_store::Error::NotFound {
                path: location.to_string(),
                source: "a directory".into(),
            });
        }
        let meta = status.meta(location.clone());
        options.check_preconditions(&meta)?;
        let range = match &options.range {
            Some(r) => r
                .as_range(meta.size)
                .map_err(|e| generic(location, e.to_string()))?,
            None => 0..meta.size,
        };
        let body = match options.head {
            true => stream::empty().boxed(),
            false => self.read(location, range.clone()).await?,
        };
        Ok(GetResult {
            payload: GetResultPayload::Stream(body),
            meta,
            range: if options.head { 0..0 } else { range },
            attributes: Default::default(),
            extensions: Default::default(),
        })
    }

    fn delete_stream(
        &self,
        locations: BoxStream<'static, object_store::Result<Path>>,
    ) -> BoxStream<'static, object_store::Result<Path>> {
        locations.map(|_| Err(read_only())).boxed()
    }

    fn list(&self, _: Option<&Path>) -> BoxStream<'static, object_store::Result<ObjectMeta>> {
        // RemoteStorage walks by `list_with_delimiter`, one directory at a time.
        stream::iter([Err(object_store::Error::NotImplemented {
            operation: "a recursive listing".into(),
            implementer: STORE.into(),
        })])
        .boxed()
    }

    async fn list_with_delimiter(&self, prefix: Option<&Path>) -> object_store::Result<ListResult> {
        #[derive(Deserialize)]
        #[serde(rename_all = "PascalCase")]
        struct Wrapper {
            directory_listing: Listing,
        }
        #[derive(Deserialize)]
        #[serde(rename_all = "camelCase")]
        struct Listing {
            partial_listing: Partial,
            remaining_entries: u64,
        }
        #[derive(Deserialize)]
        #[serde(rename_all = "PascalCase")]
        struct Partial {
            file_statuses: Statuses,
        }
        #[derive(Deserialize)]
        #[serde(rename_all = "PascalCase")]
        struct Statuses {
            file_status: Vec<FileStatus>,
        }
        let dir = prefix.cloned().unwrap_or_default();
        let mut out = ListResult {
            common_prefixes: Vec::new(),
            objects: Vec::new(),
            extensions: Default::default(),
        };
        let mut after = String::new();
        loop {
            let extra = match after.is_empty() {
                true => String::new(),
                false => format!("&startAfter={}", utf8_percent_encode(&after, SEGMENT)),
            };
            let w: Wrapper = match self.call(&dir, "LISTSTATUS_BATCH", &extra).await {
                Ok(w) => w,
                // A file, or nothing: an empty listing, as object stores answer.
                Err(object_store::Error::NotFound { .. }) => return Ok(out),
                Err(e) => return Err(e),
            };
            let batch = w
                .directory_listing
                .partial_listing
                .file_statuses
                .file_status;
            let Some(last) = batch.last() else { break };
            after = last.path_suffix.clone();
            for s in batch {
                if s.path_suffix.is_empty() {
                    // The listed path is a file.
                    return Ok(ListResult {
                        common_prefixes: Vec::new(),
                        objects: Vec::new(),
                        extensions: Default::default(),
                    });
                }
                let location = dir.clone().join(s.path_suffix.as_str());
                match s.kind.as_str() {
                    "DIRECTORY" => out.common_prefixes.push(location),
                    _ => out.objects.push(s.meta(location)),
                }
            }
            if w.directory_listing.remaining_entries == 0 {
                break;
            }
        }
        Ok(out)
    }

    async fn copy_opts(&self, _: &Path, _: &Path, _: CopyOptions) -> object_store::Result<()> {
        Err(read_only())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use object_store::GetRange;
    use std::io::{BufRead, BufReader, Write};
    use std::sync::{Arc, Mutex};

    type Handler = dyn Fn(&str, usize) -> (u16, Vec<u8>) + Send + Sync;

    /// An HTTP server on loopback answering each request by `handler(path and query, n)` (`n`:
    /// requests before it), one request per connection; what it was asked, kept.
    struct Server {
        port: u16,
        asked: Arc<Mutex<Vec<String>>>,
    }

    impl Server {
        fn start(handler: Arc<Handler>) -> Server {
            let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            let port = listener.local_addr().unwrap().port();
            let asked = Arc::new(Mutex::new(Vec::new()));
            let log = Arc::clone(&asked);
            std::thread::spawn(move || {
                for conn in listener.incoming() {
                    let Ok(mut conn) = conn else { return };
                    let mut reader = BufReader::new(conn.try_clone().unwrap());
                    let mut first = String::new();
                    let _ = reader.read_line(&mut first);
                    loop {
                        let mut line = String::new();
                        if reader.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
                            break;
                        }
                    }
                    let target = first.split(' ').nth(1).unwrap_or_default().to_string();
                    let n = {
                        let mut l = log.lock().unwrap();
                        l.push(target.clone());
                        l.len() - 1
                    };
                    let (status, body) = handler(&target, n);
                    let head = format!(
                        "HTTP/1.1 {status} X\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                        body.len()
                    );
                    let _ = conn.write_all(head.as_bytes());
                    let _ = conn.write_all(&body);
                }
            });
            Server { port, asked }
        }

        fn asked(&self) -> Vec<String> {
            self.asked.lock().unwrap().clone()
        }
    }

    const DATA: &[u8] = b"0123456789abcdefghij";

    fn status_json(file_id: u64) -> Vec<u8> {
        format!(
            r#"{{"FileStatus":{{"fileId":{file_id},"length":{},"modificationTime":1700000000000,"pathSuffix":"","type":"FILE"}}}}"#,
            DATA.len()
        )
        .into_bytes()
    }

    fn remote(exception: &str) -> Vec<u8> {
        format!(r#"{{"RemoteException":{{"exception":"{exception}","message":"m"}}}}"#).into_bytes()
    }

    /// A NameNode for `DATA` (file id `file_id(n)`), whose OPEN names DataNode `dn(n)`, after
    /// `fault(target, n)` has had its say.
    fn namenode(
        dn: impl Fn(usize) -> u16 + Send + Sync + 'static,
        fault: impl Fn(&str, usize) -> Option<(u16, Vec<u8>)> + Send + Sync + 'static,
    ) -> Server {
        Server::start(Arc::new(move |target: &str, n| {
            if let Some(f) = fault(target, n) {
                return f;
            }
            if target.contains("op=GETFILESTATUS") {
                return (200, status_json(7));
            }
            let location = format!("http://127.0.0.1:{}{target}", dn(n));
            (200, format!(r#"{{"Location":"{location}"}}"#).into_bytes())
        }))
    }

    /// A DataNode serving `DATA`'s bytes `offset..offset+length`.
    fn datanode() -> Server {
        Server::start(Arc::new(|target: &str, _| {
            let arg = |k: &str| -> usize {
                target
                    .split(['?', '&'])
                    .find_map(|kv| kv.strip_prefix(k))
                    .and_then(|v| v.parse().ok())
                    .unwrap()
            };
            let (off, len) = (arg("offset="), arg("length="));
            (200, DATA[off..off + len].to_vec())
        }))
    }

    fn store(namenodes: &[&Server]) -> WebHdfs {
        WebHdfs {
            client: ReqwestConnector::default()
                .connect(&ClientOptions::new().with_allow_http(true))
                .unwrap(),
            namenodes: namenodes
                .iter()
                .map(|s| format!("http://127.0.0.1:{}/webhdfs/v1", s.port))
                .collect(),
            active: AtomicUsize::new(0),
            auth: "user.name=u".into(),
            retry: RetryConfig {
                max_retries: 4,
                retry_timeout: Duration::from_secs(10),
                ..Default::default()
            },
            shown: "webhdfs://test".into(),
        }
    }

    fn get(
        s: &WebHdfs,
        range: Range<u64>,
        if_match: Option<String>,
    ) -> object_store::Result<Bytes> {
        super::super::runtime().block_on(async {
            let o = GetOptions {
                range: Some(GetRange::Bounded(range)),
                if_match,
                ..Default::default()
            };
            let r = s.get_opts(&Path::from("m/data"), o).await?;
            let GetResultPayload::Stream(body) = r.payload else {
                unreachable!()
            };
            let parts: Vec<Bytes> = body
                .collect::<Vec<_>>()
                .await
                .into_iter()
                .collect::<Result<_, _>>()?;
            Ok(parts.concat().into())
        })
    }

    #[test]
    fn faults_of_the_namenode_and_datanodes_are_passed_over_and_never_give_other_bytes() {
        let dn = datanode();
        let dn_port = dn.port;
        // A DataNode that is gone: bound, then let go.
        let gone = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        // A standby NameNode, then an active one whose first OPEN answers 503, whose next names
        // the gone DataNode, then the live one.
        let standby = namenode(
            move |_| dn_port,
            |_, _| Some((403, remote("StandbyException"))),
        );
        let active = namenode(
            move |n| if n == 2 { gone } else { dn_port },
            |t, n| (t.contains("op=OPEN") && n == 1).then(|| (503, b"busy".to_vec())),
        );
        let s = store(&[&standby, &active]);
        assert_eq!(&get(&s, 3..11, None).unwrap()[..], &DATA[3..11]);
        assert_eq!(
            s.active.load(Ordering::Relaxed),
            1,
            "the active NameNode is asked first"
        );
        assert_eq!(standby.asked().len(), 1, "{:?}", standby.asked());
        let asked = active.asked();
        assert!(
            asked.len() == 4 && asked[0].contains("GETFILESTATUS"),
            "{asked:?}"
        );
        assert!(
            asked[1..]
                .iter()
                .all(|a| a.contains("op=OPEN&user.name=u&offset=3&length=8&noredirect=true")),
            "{asked:?}"
        );
        // The next read goes to the active one only.
        assert_eq!(&get(&s, 0..20, None).unwrap()[..], DATA);
        assert_eq!(standby.asked().len(), 1);
    }

    #[test]
    fn another_version_a_refusal_and_a_short_body_are_errors() {
        let dn = datanode();
        let dn_port = dn.port;
        // The file replaced (another inode) after the first status.
        let nn = namenode(
            move |_| dn_port,
            |t, n| (t.contains("GETFILESTATUS") && n > 0).then(|| (200, status_json(8))),
        );
        let s = store(&[&nn]);
        let tag = FileStatus {
            file_id: 7,
            length: DATA.len() as u64,
            modification_time: 1700000000000,
            path_suffix: String::new(),
            kind: "FILE".into(),
        }
        .meta(Path::from("m/data"))
        .e_tag;
        assert_eq!(&get(&s, 0..4, tag.clone()).unwrap()[..], &DATA[..4]);
        let e = get(&s, 4..8, tag).unwrap_err();
        assert!(matches!(e, object_store::Error::Precondition { .. }), "{e}");
        assert!(
            !nn.asked().last().unwrap().contains("OPEN"),
            "read after the change"
        );

        // Refused: said at once, not retried.
        let nn = namenode(|_| 1, |_, _| Some((403, remote("AccessControlException"))));
        let e = get(&store(&[&nn]), 0..4, None).unwrap_err();
        assert!(
            matches!(e, object_store::Error::PermissionDenied { .. }),
            "{e}"
        );
        assert_eq!(nn.asked().len(), 1);

        // A DataNode that sends fewer bytes than asked for, every time.
        let short = Server::start(Arc::new(|_: &str, _| (200, b"01".to_vec())));
        let short_port = short.port;
        let nn = namenode(move |_| short_port, |_, _| None);
        let e = get(&store(&[&nn]), 0..4, None).unwrap_err();
        assert!(e.to_string().contains("got 2 bytes"), "{e}");
    }

    #[test]
    fn a_version_changes_with_the_inode_the_length_and_the_time() {
        let s = |id, m, l| FileStatus {
            file_id: id,
            length: l,
            modification_time: m,
            path_suffix: String::new(),
            kind: "FILE".into(),
        };
        let tag = |f: FileStatus| f.meta(Path::from("a")).e_tag.unwrap();
        let base = tag(s(16386, 1700000000000, 10));
        assert_eq!(base, "4002-18bcfe56800-a");
        assert_ne!(base, tag(s(16387, 1700000000000, 10)));
        assert_ne!(base, tag(s(16386, 1700000000001, 10)));
        assert_ne!(base, tag(s(16386, 1700000000000, 11)));
    }

    #[test]
    fn refusals_become_what_they_mean() {
        let remote = |e: &str| {
            Fault::Remote(RemoteException {
                exception: e.into(),
                message: "Permission denied: user=bob, access=READ\nmore".into(),
            })
        };
        let p = Path::from("a/b");
        assert!(matches!(
            remote("FileNotFoundException").into_error(&p),
            object_store::Error::NotFound { .. }
        ));
        let denied = remote("AccessControlException").into_error(&p);
        assert!(matches!(
            denied,
            object_store::Error::PermissionDenied { .. }
        ));
        assert!(denied.to_string().contains("user=bob"), "{denied}");
        assert!(!denied.to_string().contains("more"), "{denied}");
        assert!(matches!(
            Fault::Status(404, String::new()).into_error(&p),
            object_store::Error::NotFound { .. }
        ));
    }

    /// A Kerberized NameNode's 401 says what is missing and what to use instead, in one line;
    /// Hadoop's error body and other statuses keep their meaning.
    #[test]
    fn a_demand_for_kerberos_is_said_as_such() {
        let p = Path::from("a");
        let html = b"<html><body><h2>HTTP ERROR 401 Authentication required</h2></body></html>";
        let e = fault_of(401, true, html).into_error(&p).to_string();
        assert!(
            e.contains("SPNEGO") && e.contains("not supported") && e.contains("hdfs://"),
            "{e}"
        );
        assert_eq!(e.lines().count(), 1, "{e}");
        assert!(matches!(fault_of(401, false, html), Fault::Status(401, _)));
        let body = br#"{"RemoteException":{"exception":"StandbyException","message":"x"}}"#;
        assert!(matches!(fault_of(403, false, body), Fault::Remote(_)));
    }

    #[test]
    fn paths_are_escaped_segment_by_segment() {
        let w = WebHdfs {
            client: ReqwestConnector::default()
                .connect(&ClientOptions::new().with_allow_http(true))
                .unwrap(),
            namenodes: vec!["http://nn:9870/webhdfs/v1".into()],
            active: AtomicUsize::new(0),
            auth: "user.name=a%20b".into(),
            retry: RetryConfig::default(),
            shown: "webhdfs://nn:9870".into(),
        };
        assert_eq!(
            w.url(0, &Path::from("m/a b/c#d"), "OPEN", "&offset=1"),
            "http://nn:9870/webhdfs/v1/m/a%20b/c%23d?op=OPEN&user.name=a%20b&offset=1"
        );
        assert_eq!(
            w.url(0, &Path::default(), "LISTSTATUS_BATCH", ""),
            "http://nn:9870/webhdfs/v1/?op=LISTSTATUS_BATCH&user.name=a%20b"
        );
    }

    #[test]
    fn a_nameservice_is_its_namenodes() {
        let conf = HadoopConf::from_pairs(&[
            ("fs.defaultFS", "hdfs://ns1"),
            ("dfs.nameservices", "ns1"),
            ("dfs.ha.namenodes.ns1", "nn1, nn2"),
            ("dfs.namenode.http-address.ns1.nn1", "a:50070"),
            ("dfs.namenode.http-address.ns1.nn2", "b:50070"),
            ("dfs.namenode.https-address.ns1.nn1", "a:50470"),
            ("dfs.namenode.https-address.ns1.nn2", "b:50470"),
        ]);
        assert_eq!(
            namenodes("ns1", false, &conf).unwrap(),
            ["a:50070", "b:50070"]
        );
        assert_eq!(
            namenodes("ns1", true, &conf).unwrap(),
            ["a:50470", "b:50470"]
        );
        assert_eq!(namenodes("", false, &conf).unwrap(), ["a:50070", "b:50070"]);
        assert_eq!(namenodes("nn", false, &conf).unwrap(), ["nn:9870"]);
        assert_eq!(namenodes("nn:1", false, &conf).unwrap(), ["nn:1"]);
        let one = HadoopConf::from_pairs(&[
            ("fs.defaultFS", "hdfs://nn:8020"),
            ("dfs.namenode.http-address", "nn:50070"),
        ]);
        assert_eq!(namenodes("", false, &one).unwrap(), ["nn:50070"]);
        assert_eq!(namenodes("", true, &one).unwrap(), ["nn:9871"]);
        let none = HadoopConf::from_pairs(&[]);
        assert!(namenodes("", false, &none)
            .unwrap_err()
            .contains("fs.defaultFS"));
    }
}
