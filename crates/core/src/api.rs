//! A model opened for a program rather than a mount: the FUSE-free front door the Python
//! package (`python/`) wraps. Every answer is the mount's own: a tensor's bytes are its
//! `NAME.npy` file's (`modelfs_layout::content`), its metadata its `NAME.json`, a row by id its
//! `NAME.rows/ID.npy` — the same options, readers and layouts, no second implementation.
//!
//! ```
//! let fixture = concat!(env!("CARGO_MANIFEST_DIR"), "/../../fixtures/tf/multi_shard/ckpt");
//! let m = modelfs_core::api::Opened::open(fixture, &[]).unwrap();
//! assert!(m.keys().unwrap().contains(&"a".to_string()));
//! let npy = m.npy("a").unwrap();
//! let header = npy.header().unwrap();
//! assert!(header.starts_with(b"\x93NUMPY"));
//! ```

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};

use crate::fs::listing::NodeKind;
use crate::fs::{FileKind, FsError, Tree, TreeConfig};
use crate::options::Options;
use modelfs_layout::{FileContent, Layout, LayoutCtx, LayoutError, Patient, Requester};
use modelfs_model::{Model, ModelError, Tensor};

/// What went wrong, sorted the way a caller reacts to it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// An option or argument the CLI would refuse (exit status 1).
    Usage,
    /// No tensor of that name.
    NotFound,
    /// The tensor has no form asked for (strings as numbers, a dtype numpy lacks).
    Unavailable,
    /// Stored bytes whose checksum does not match.
    Checksum,
    /// The source could not be read (unrecognised, a fault, changed).
    Source,
    /// The source is not there: no file, key or checkpoint prefix of that name.
    Missing,
    /// The caller asked the read to stop.
    Interrupted,
}

/// An error with the message the CLI prints for it.
#[derive(Debug, Clone)]
pub struct Error {
    pub kind: ErrorKind,
    pub message: String,
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Error {}

fn error(kind: ErrorKind, message: impl Into<String>) -> Error {
    Error {
        kind,
        message: message.into(),
    }
}

/// Whether a link of `e`'s chain is a checksum that did not match. The readers' errors are
/// typed per format (TF's bundle, Monolith's records, zip's CRC-32 in numpy and torch, the
/// LevelDB table's blocks) and share no type; what they share is how they say it, so each
/// link's own words (its text less its source's) are matched against those sayings — never a
/// name or a path a message carries (a tensor `crc_bias`, a directory `checksums/`).
fn is_checksum(e: &(dyn std::error::Error + 'static)) -> bool {
    const SAYINGS: &[&str] = &[
        "checksum mismatch",
        "checksum does not match",
        "crc-32 does not match",
    ];
    let mut cause = Some(e);
    while let Some(c) = cause {
        let text = c.to_string().to_ascii_lowercase();
        let inner = c.source().map(|s| s.to_string().to_ascii_lowercase());
        let own = match &inner {
            Some(i) => text.strip_suffix(i.as_str()).unwrap_or(&text),
            None => &text,
        };
        let zip_crc = own.contains("zip crc-32 ") && own.ends_with(" expected");
        if zip_crc || SAYINGS.iter().any(|s| own.contains(s)) {
            return true;
        }
        cause = c.source();
    }
    false
}

/// A path of the mount that could not be looked at: `NotFound` as a missing file is.
fn fs_error(path: &str, e: FsError) -> Error {
    match e {
        FsError::NotFound => error(
            ErrorKind::NotFound,
            format!("{path}: no such file or directory in the mount"),
        ),
        FsError::NotDir => error(ErrorKind::NotFound, format!("{path}: not a directory")),
        e => error(ErrorKind::Source, format!("{path}: {e}")),
    }
}

/// A tensor whose rows have no ids.
fn unkeyed(name: &str) -> Error {
    let msg = format!("{name}: no rows by id (not a keyed tensor)");
    error(ErrorKind::Unavailable, msg)
}

fn layout_error(name: &str, e: LayoutError) -> Error {
    let kind = match &e {
        LayoutError::Unavailable(_) => ErrorKind::Unavailable,
        LayoutError::Interrupted => ErrorKind::Interrupted,
        LayoutError::Model(ModelError::NotFound(_)) => ErrorKind::NotFound,
        LayoutError::Model(ModelError::Request(_)) => ErrorKind::Usage,
        _ if is_checksum(&e) => ErrorKind::Checksum,
        _ => ErrorKind::Source,
    };
    // Named once: a table's own errors start with its name.
    let why = e.to_string();
    match why.strip_prefix(name).is_some_and(|r| r.starts_with(": ")) {
        true => error(kind, why),
        false => error(kind, format!("{name}: {why}")),
    }
}

/// A model opened from SOURCE (a path or a URL) with `-o` options.
pub struct Opened {
    /// The mount's tree: names resolve as in a mount (escapes, `NAME.rows/` of a table that
    /// is no listed tensor, layouts shown or not), with no FUSE.
    tree: Arc<Tree>,
    model: Arc<dyn Model>,
    ctx: Arc<LayoutCtx>,
    /// Every tensor's path in the mount and its dtype, found on first need (metadata only).
    keys: OnceLock<Vec<(String, String)>>,
}

impl Opened {
    /// Opens `source` as `modelfs ls SOURCE -o OPTIONS` would; `options` are `KEY=VALUE` or
    /// `KEY` strings, applied in order.
    pub fn open(source: &str, options: &[String]) -> Result<Opened, Error> {
        let mut opts = Options::default();
        for o in options {
            opts.apply(o)
                .map_err(|e| error(ErrorKind::Usage, e.to_string()))?;
        }
        let path = &opts.source(Path::new(source));
        let model = crate::open::open_model(path, &opts).map_err(|f| {
            let kind = match f.missing {
                true => ErrorKind::Missing,
                false => ErrorKind::Source,
            };
            error(kind, f.message)
        })?;
        let ctx = crate::fs::layout_ctx(&opts, &crate::open::store_name(path));
        let cfg = TreeConfig::for_user(None, None, std::time::SystemTime::UNIX_EPOCH);
        let tree = Arc::new(Tree::new(Arc::clone(&model), Arc::clone(&ctx), cfg));
        Ok(Opened {
            tree,
            model,
            ctx,
            keys: OnceLock::new(),
        })
    }

    /// Every tensor's path in the mount (`modelfs list`'s first column), sorted.
    pub fn keys(&self) -> Result<Vec<String>, Error> {
        Ok(self.typed_keys()?.iter().map(|(k, _)| k.clone()).collect())
    }

    /// Every tensor's path in the mount, sorted, with its dtype's name (`float32`, `string`,
    /// `Q4_K` for elements stored in an encoding of their own: `list`'s dtype column).
    pub fn typed_keys(&self) -> Result<&[(String, String)], Error> {
        if let Some(k) = self.keys.get() {
            return Ok(k);
        }
        let found =
            crate::walk::walk(&*self.model).map_err(|e| error(ErrorKind::Source, e.to_string()))?;
        let mut keys: Vec<(String, String)> = found
            .into_iter()
            .map(|f| {
                let dtype = f.tensor.meta().dtype.name().into_owned();
                (f.path, dtype)
            })
            .collect();
        keys.sort();
        Ok(self.keys.get_or_init(|| keys))
    }

    /// `NAME: no such tensor`, with the key it likely meant: the one spelled the same with
    /// `.` for `/` or `/` for `.` (`backbone/0/weight` for `backbone.0.weight`).
    fn missing(&self, name: &str) -> Error {
        let name = name.trim_matches('/');
        let plain = |k: &str| k.replace('/', ".");
        let meant = self.keys().ok().and_then(|keys| {
            keys.into_iter()
                .find(|k| k != name && plain(k) == plain(name))
        });
        let message = match meant {
            Some(k) => format!("{name}: no such tensor; did you mean {k}?"),
            None => format!("{name}: no such tensor"),
        };
        error(ErrorKind::NotFound, message)
    }

    /// The node at mount path `path`.
    fn node(&self, name: &str, path: &str) -> Result<Arc<crate::fs::tree::Node>, Error> {
        // Only a name that is not there is "not found": a fault on the way is the source's.
        let why = |e: FsError| match e {
            FsError::NotFound | FsError::NotDir => self.missing(name),
            e => error(ErrorKind::Source, format!("{name}: {e}")),
        };
        let ino = self.tree.resolve(path.as_bytes()).map_err(why)?;
        self.tree.node(ino).map_err(why)
    }

    /// The tensor whose file `NAME.<suffix>` the mount has (`None`: the tensor exists, the
    /// file does not).
    fn tensor_with(&self, name: &str, suffix: &str) -> Result<Option<Arc<dyn Tensor>>, Error> {
        let Some(path) = self.tensor_path_with(name, suffix)? else {
            return Ok(None);
        };
        let t = self
            .model
            .tensor(&path)
            .map_err(|e| layout_error(name.trim_matches('/'), e.into()))?;
        Ok(Some(t))
    }

    /// The model path of the tensor whose file `NAME.<suffix>` the mount has (as
    /// `tensor_with`), without opening the tensor.
    fn tensor_path_with(&self, name: &str, suffix: &str) -> Result<Option<Arc<[Vec<u8>]>>, Error> {
        let name = name.trim_matches('/');
        let path = match self.node(name, &format!("{name}.{suffix}")) {
            Ok(node) => match node.kind() {
                NodeKind::File {
                    tensor,
                    partition: None,
                    ..
                } => tensor.clone(),
                NodeKind::Rows { tensor } | NodeKind::Hidden { tensor, .. } => tensor.clone(),
                _ => return Err(self.missing(name)),
            },
            Err(e) if e.kind != ErrorKind::NotFound => return Err(e),
            Err(e) => {
                // The tensor without that file: its `.json` is always there.
                return match self.node(name, &format!("{name}.json")) {
                    Ok(_) => Ok(None),
                    Err(_) => Err(e),
                };
            }
        };
        Ok(Some(path))
    }

    /// The content of the mount's file `NAME.<l>`; a layout the mount does not show for the
    /// tensor (a sparse tensor's dense `.npy` unless `layouts=` names it, strings as `.npy`)
    /// is unavailable, with the reason.
    fn content(&self, name: &str, l: Layout) -> Result<Arc<dyn FileContent>, Error> {
        let Some(t) = self.tensor_with(name, l.suffix())? else {
            let t = self
                .tensor_with(name, "json")?
                .ok_or_else(|| self.missing(name))?;
            let why = match modelfs_layout::content(l, t, &self.ctx) {
                Err(e) => e.to_string(),
                Ok(_) => format!("no .{} file unless layouts= names it", l.suffix()),
            };
            return Err(error(ErrorKind::Unavailable, format!("{name}: {why}")));
        };
        modelfs_layout::content(l, t, &self.ctx).map_err(|e| layout_error(name, e.into()))
    }

    /// The bytes of `NAME.json`, as a mount shows them. Read to its end, not to a size
    /// taken first: the document may grow meanwhile (a read error's `last_error`).
    pub fn json(&self, name: &str) -> Result<Vec<u8>, Error> {
        let c = self.content(name, Layout::Json)?;
        let mut out = Vec::new();
        loop {
            let got = c
                .read(out.len() as u64, 1 << 16, &Patient)
                .map_err(|e| layout_error(name, e))?;
            if got.is_empty() {
                return Ok(out);
            }
            out.extend_from_slice(&got);
        }
    }

    /// The mount's file at `path` (`NAME.csr.ids.npy`, `__metadata__.json`, `.safetensors`,
    /// any file a mount answers by name), to be read in any ranges.
    pub fn file(&self, path: &str) -> Result<Npy, Error> {
        let path = path.trim_matches('/');
        let content = self
            .tree
            .content_at(path.as_bytes())
            .map_err(|e| fs_error(path, e))?;
        Ok(Npy {
            name: path.to_string(),
            content,
        })
    }

    /// The entries of the mount's directory `path` (`""`: the root) in listing order, as
    /// `ls -l` of the mount shows them (a symlink as what it points at: `latest`). Metadata
    /// only: a size that needs rendering is `None`, as the mount shows a placeholder.
    pub fn list(&self, path: &str) -> Result<Vec<Entry>, Error> {
        let path = path.trim_matches('/');
        let ino = self
            .tree
            .resolve(path.as_bytes())
            .map_err(|e| fs_error(path, e))?;
        let mut items = Vec::new();
        self.tree
            .readdir(ino, 0, |item| {
                items.push(item.owned());
                true
            })
            .map_err(|e| fs_error(path, e))?;
        Ok(items
            .into_iter()
            .map(|item| {
                let full = match path.is_empty() {
                    true => item.name.clone(),
                    false => format!("{path}/{}", item.name),
                };
                let stat = match item.kind {
                    FileKind::Dir => Stat::DIR,
                    // A link to nothing (a checkpoint deleted since) is a file to read
                    // and fail, as `ls` shows it; a file that fails to stat likewise.
                    FileKind::Symlink => self.stat(&full).unwrap_or(Stat::UNKNOWN),
                    _ => self.stat_ino(item.ino).unwrap_or(Stat::UNKNOWN),
                };
                Entry {
                    name: item.name,
                    dir: stat.dir,
                    size: stat.size,
                }
            })
            .collect())
    }

    /// Whether `path` is a directory of the mount (symlinks followed); a missing path is
    /// `NotFound`.
    pub fn is_dir(&self, path: &str) -> Result<bool, Error> {
        Ok(self.stat(path)?.dir)
    }

    /// What `stat` of the mount's `path` says (symlinks followed), metadata only; a missing
    /// path is `NotFound`.
    pub fn stat(&self, path: &str) -> Result<Stat, Error> {
        let path = path.trim_matches('/');
        let ino = self
            .tree
            .resolve(path.as_bytes())
            .map_err(|e| fs_error(path, e))?;
        self.stat_ino(ino).map_err(|e| fs_error(path, e))
    }

    fn stat_ino(&self, ino: crate::fs::Ino) -> Result<Stat, FsError> {
        let attr = self.tree.getattr_for(ino, &Patient)?;
        Ok(match attr.kind {
            FileKind::Dir => Stat::DIR,
            _ => Stat {
                dir: false,
                size: attr.exact.then_some(attr.size),
            },
        })
    }

    /// Whether the mount answers `path` by name (a file or a directory), metadata only.
    pub fn exists(&self, path: &str) -> bool {
        self.tree.resolve(path.trim_matches('/').as_bytes()).is_ok()
    }

    /// The tables the model holds that no tensor of `keys` is (a TF hash table, whose
    /// buckets are its listed tensors): their mount paths.
    pub fn tables(&self) -> Result<Vec<String>, Error> {
        let found = self
            .model
            .unlisted_tables()
            .map_err(|e| error(ErrorKind::Source, e.to_string()))?;
        let mut out: Vec<String> = found
            .iter()
            .map(|p| crate::fs::names::mount_path(p))
            .collect();
        out.sort();
        Ok(out)
    }

    /// The elements of string tensor `name` (a vocabulary, a SavedModel's string constant),
    /// each as stored: its shape is the `.json`'s.
    pub fn strings(&self, name: &str) -> Result<Vec<Vec<u8>>, Error> {
        let name = name.trim_matches('/');
        let t = self
            .tensor_with(name, "json")?
            .ok_or_else(|| self.missing(name))?;
        let Some(s) = t.as_strings() else {
            let dtype = t.meta().dtype.name();
            let msg = format!("{name}: not a string tensor ({dtype})");
            return Err(error(ErrorKind::Unavailable, msg));
        };
        let count = t.meta().num_elements().unwrap_or(0);
        // Bounded by the tensor's stored bytes: each element is at least its length prefix.
        let mut out = Vec::new();
        s.for_each_string(modelfs_io::source::ReadCtx::none(), 0, count, &mut |b| {
            out.push(b.to_vec())
        })
        .map_err(|e| layout_error(name, e.into()))?;
        Ok(out)
    }

    /// The stored bytes of tensor `name` as its `NAME.bin` gives them (GGUF's quantized
    /// blocks, an `F4` tensor's bytes, a dense tensor's elements).
    pub fn raw(&self, name: &str) -> Result<Npy, Error> {
        let name = name.trim_matches('/');
        // Whatever `layouts=` shows: the stored bytes are asked for by name.
        let t = self
            .tensor_with(name, "json")?
            .ok_or_else(|| self.missing(name))?;
        let content = modelfs_layout::content(Layout::Bin, t, &self.ctx)
            .map_err(|e| layout_error(name, e.into()))?;
        Ok(Npy {
            name: name.to_string(),
            content,
        })
    }

    /// `NAME.npy`, to be read in any ranges.
    pub fn npy(&self, name: &str) -> Result<Npy, Error> {
        Ok(Npy {
            name: name.trim_matches('/').to_string(),
            content: self.content(name, Layout::Npy)?,
        })
    }

    /// The element bytes of `NAME.npy` (after its header) as a view of the mapped local
    /// file, where the stored bytes are exactly those (one run of one local file, stored as
    /// served: no widening, byte swap or bool normalisation), checked against the tensor's
    /// checksum first; `None` where they are not (a remote source, a converted dtype, a
    /// tensor in pieces): the caller reads a copy.
    ///
    /// The view lives as long as its `Bytes`, and the mapping with it: a file cut short
    /// underneath faults its reader (SIGBUS), as any mapping of a file does.
    pub fn lend(&self, name: &str) -> Result<Option<bytes::Bytes>, Error> {
        let name = name.trim_matches('/');
        let Some(t) = self.tensor_with(name, "npy")? else {
            return Ok(None);
        };
        let meta = t.meta();
        if meta.sparse {
            return Ok(None);
        }
        let Some(run) = t.stored_run() else {
            return Ok(None);
        };
        let npy = self.npy(name)?;
        let data = npy.size()? - npy.header()?.len() as u64;
        if meta.dtype == modelfs_model::DType::Bool
            || run.len != data
            || run.file.local_file().is_none()
        {
            return Ok(None);
        }
        let len = usize::try_from(data).map_err(|_| error(ErrorKind::Source, "too large"))?;
        let lending = modelfs_io::source::ReadCtx::none().lending();
        let got = t
            .read(&lending, 0, len)
            .map_err(|e| layout_error(name, e.into()))?;
        debug_assert_eq!(got.len(), len);
        Ok(Some(got))
    }

    /// How many parts the rows of keyed tensor or hash table `name` are read in, each on its
    /// own (`scan`): a Monolith table's shards, each read without looking at the others; 1
    /// for a table read whole. Metadata only.
    pub fn scan_parts(&self, name: &str) -> Result<usize, Error> {
        let name = name.trim_matches('/');
        let path = self
            .tensor_path_with(name, "rows")?
            .ok_or_else(|| unkeyed(name))?;
        Ok(self.model.table_parts(&path).unwrap_or(1))
    }

    /// The rows of part `part` (`scan_parts`) of keyed tensor or hash table `name` as
    /// independent pieces (`Scan`); a tensor whose rows have no ids is `Unavailable`.
    pub fn scan(&self, name: &str, part: usize) -> Result<Scan, Error> {
        let name = name.trim_matches('/');
        let path = self
            .tensor_path_with(name, "rows")?
            .ok_or_else(|| unkeyed(name))?;
        let t = match self.model.table_parts(&path) {
            Some(_) => self.model.table_part(&path, part),
            None if part == 0 => self.model.tensor(&path),
            None => {
                let msg = format!("{name}: part {part} of 1");
                return Err(error(ErrorKind::Usage, msg));
            }
        }
        .map_err(|e| layout_error(name, e.into()))?;
        if t.key_kind().is_none() {
            return Err(unkeyed(name));
        }
        let descr = modelfs_layout::binary::npy_descr(t.meta().dtype)
            .map(|(d, _)| d.to_string())
            .ok_or_else(|| {
                let dtype = t.meta().dtype.name();
                error(
                    ErrorKind::Unavailable,
                    format!("{name}: numpy has no type for {dtype}"),
                )
            })?;
        let scan = modelfs_model::scan::TableScan::new(t)
            .map_err(|e| layout_error(name, e.into()))?
            .ok_or_else(|| unkeyed(name))?;
        Ok(Scan {
            name: name.to_string(),
            scan,
            descr,
        })
    }

    /// The rows of keyed tensor `name` with ids `ids`, as `NAME.rows/ID.npy` gives each: the
    /// ids found (in the order asked), the numpy `descr` of the values, the row width in
    /// elements, and the found rows' values one after another.
    pub fn rows(&self, name: &str, ids: &[i64]) -> Result<Rows, Error> {
        let name = name.trim_matches('/');
        let t = match self.tensor_with(name, "rows") {
            Ok(Some(t)) if t.key_kind().is_some() => t,
            Ok(_) => {
                let msg = format!("{name}: no rows by id (not a keyed tensor)");
                return Err(error(ErrorKind::Unavailable, msg));
            }
            Err(e) => return Err(e),
        };
        let meta = t.meta();
        let mut out = Rows {
            descr: modelfs_layout::binary::npy_descr(meta.dtype)
                .map(|(d, _)| d.to_string())
                .unwrap_or_default(),
            width: meta.shape.get(1..).unwrap_or(&[]).iter().product(),
            ..Rows::default()
        };
        for &id in ids {
            let Some(row) =
                modelfs_layout::rows::find(&*t, id).map_err(|e| layout_error(name, e))?
            else {
                continue;
            };
            let npy = row
                .render(&*t, modelfs_layout::rows::RowFile::Npy)
                .ok_or_else(|| {
                    let dtype = t.meta().dtype.name();
                    error(
                        ErrorKind::Unavailable,
                        format!("{name}: numpy has no type for {dtype}"),
                    )
                })?;
            let (descr, width, start) = npy_row_shape(&npy)
                .ok_or_else(|| error(ErrorKind::Source, format!("{name}: a row's header")))?;
            // The first row found says what the rows are; every other must agree (one 2-D
            // array holds them).
            if out.found.is_empty() {
                (out.descr, out.width) = (descr, width);
            } else if (descr.as_str(), width) != (out.descr.as_str(), out.width) {
                let msg = format!(
                    "{name}: rows of different widths ({width} and {})",
                    out.width
                );
                return Err(error(ErrorKind::Unavailable, msg));
            }
            out.found.push(id);
            out.values.extend_from_slice(&npy[start..]);
        }
        Ok(out)
    }
}

/// A keyed tensor's rows as independent pieces of (id, row) pairs in stored order
/// (`Opened::scan`): what an engine's tasks read, each piece on its own, in any process.
pub struct Scan {
    name: String,
    scan: modelfs_model::scan::TableScan,
    descr: String,
}

/// The rows of one piece of a `Scan`: `ids.len()` rows of `width` elements each.
#[derive(Debug, Default)]
pub struct ScanPiece {
    pub ids: Vec<i64>,
    pub values: Vec<u8>,
}

impl Scan {
    /// Pieces, each read by `read` on its own.
    pub fn pieces(&self) -> usize {
        self.scan.pieces()
    }

    /// Rows the pieces hold together (sentinels among them), when known before reading.
    pub fn rows(&self) -> Option<u64> {
        self.scan.rows()
    }

    /// Elements per row.
    pub fn width(&self) -> u64 {
        self.scan.width()
    }

    /// Whether rows are found by ids the table stores (a hash table's keys, a matrix's row or
    /// column ids), not by their index (a dense tensor's rows).
    pub fn by_id(&self) -> bool {
        self.scan.kind() != modelfs_model::KeyKind::RowIndex
    }

    /// The values' numpy type (`<f4`…).
    pub fn descr(&self) -> &str {
        &self.descr
    }

    /// Bytes of a piece's values, about (its rows times a row's bytes).
    pub fn piece_bytes(&self) -> u64 {
        self.scan.rows_per_piece() * self.scan.row_bytes() as u64
    }

    /// The rows of piece `k` in stored order, sentinel ids (empty buckets) left out. Reading
    /// a piece again gives the same rows: an engine may retry it.
    pub fn read(&self, k: usize) -> Result<ScanPiece, Error> {
        if k >= self.pieces() {
            let msg = format!("{}: piece {k} of {}", self.name, self.pieces());
            return Err(error(ErrorKind::Usage, msg));
        }
        let mut batch = modelfs_model::scan::Batch::default();
        self.scan
            .read_piece(k, &mut batch)
            .map_err(|e| layout_error(&self.name, e.into()))?;
        let row = self.scan.row_bytes();
        let sentinels = self.scan.sentinels();
        let mut out = ScanPiece::default();
        let want = batch.ids.len() * row;
        if batch.values().len() < want {
            let msg = format!("{}: piece {k} is short of its rows' values", self.name);
            return Err(error(ErrorKind::Source, msg));
        }
        if sentinels.is_empty() {
            out.values = batch.take_values();
            out.values.truncate(want);
            out.ids = batch.ids;
            return Ok(out);
        }
        let values = batch.values();
        for (i, &id) in batch.ids.iter().enumerate() {
            if !sentinels.contains(&id) {
                out.ids.push(id);
                out.values
                    .extend_from_slice(&values[i * row..(i + 1) * row]);
            }
        }
        Ok(out)
    }
}

/// Rows found by id (see `Opened::rows`).
#[derive(Debug, Default)]
pub struct Rows {
    pub found: Vec<i64>,
    pub descr: String,
    pub width: u64,
    pub values: Vec<u8>,
}

/// A one-dimensional `.npy` of a row: (descr, length, where the data start).
fn npy_row_shape(npy: &[u8]) -> Option<(String, u64, usize)> {
    let len = u16::from_le_bytes([*npy.get(8)?, *npy.get(9)?]) as usize;
    let start = 10usize.checked_add(len)?;
    let header = std::str::from_utf8(npy.get(10..start)?).ok()?;
    let descr = header.split("'descr': '").nth(1)?.split('\'').next()?;
    let shape = header.split("'shape': (").nth(1)?.split(',').next()?;
    Some((descr.to_string(), shape.trim().parse().ok()?, start))
}

fn read_exact(c: &dyn FileContent, name: &str, offset: u64, out: &mut [u8]) -> Result<(), Error> {
    read_exact_for(c, name, offset, out, &Patient)
}

fn read_exact_for(
    c: &dyn FileContent,
    name: &str,
    offset: u64,
    out: &mut [u8],
    req: &dyn Requester,
) -> Result<(), Error> {
    let mut done = 0usize;
    while done < out.len() {
        if req.gone() {
            return Err(error(
                ErrorKind::Interrupted,
                format!("{name}: interrupted"),
            ));
        }
        let at = offset + done as u64;
        let got = c
            .read_into(at, &mut out[done..], req)
            .map_err(|e| layout_error(name, e))?;
        if got == 0 {
            let msg = format!("{name}: the file ended at {at} bytes");
            return Err(error(ErrorKind::Source, msg));
        }
        done += got;
    }
    Ok(())
}

/// A reader that is gone once its flag is set (Ctrl-C in the caller).
struct Until<'a>(&'a AtomicBool);

impl Requester for Until<'_> {
    fn gone(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }
}

/// One entry of a mount's directory (`Opened::list`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    pub name: String,
    pub dir: bool,
    /// The file's size as `ls -l` of the mount shows it; `None` until known without
    /// rendering (a big text file's) and for a directory.
    pub size: Option<u64>,
}

/// What `stat` of a mount's path says (`Opened::stat`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Stat {
    pub dir: bool,
    /// As `Entry::size`.
    pub size: Option<u64>,
}

impl Stat {
    const DIR: Stat = Stat {
        dir: true,
        size: None,
    };
    /// A file nothing could be said of (it fails to stat): read it to learn why.
    const UNKNOWN: Stat = Stat {
        dir: false,
        size: None,
    };
}

/// A tensor's `.npy` file: its header, then its elements in any ranges.
pub struct Npy {
    name: String,
    content: Arc<dyn FileContent>,
}

/// Bytes a read hands to one thread: large reads are split over the cores.
const READ_PIECE: usize = 8 << 20;

impl Npy {
    /// Total bytes of the file.
    pub fn size(&self) -> Result<u64, Error> {
        self.content.size().map_err(|e| layout_error(&self.name, e))
    }

    /// The header (magic, version, length, the header dict and its padding).
    pub fn header(&self) -> Result<Vec<u8>, Error> {
        let mut fixed = [0u8; 12];
        read_exact(&*self.content, &self.name, 0, &mut fixed)?;
        // Version 1 has a 2-byte length at 8; versions 2 and 3 a 4-byte one.
        let (len, start) = match fixed[6] {
            1 => (u16::from_le_bytes([fixed[8], fixed[9]]) as usize, 10usize),
            _ => (
                u32::from_le_bytes([fixed[8], fixed[9], fixed[10], fixed[11]]) as usize,
                12usize,
            ),
        };
        let mut header = vec![0u8; start + len];
        read_exact(&*self.content, &self.name, 0, &mut header)?;
        Ok(header)
    }

    /// Fills `out` with the file's bytes at `offset`, pieces in parallel on every core.
    pub fn read_into(&self, offset: u64, out: &mut [u8]) -> Result<(), Error> {
        self.read_into_until(offset, out, &AtomicBool::new(false))
    }

    /// `read_into`, given up (`ErrorKind::Interrupted`) soon after `stop` is set: between
    /// pieces, and inside a piece wherever the content looks (a text renderer, a remote
    /// stream).
    pub fn read_into_until(
        &self,
        offset: u64,
        out: &mut [u8],
        stop: &AtomicBool,
    ) -> Result<(), Error> {
        let req = Until(stop);
        if out.len() <= READ_PIECE {
            return read_exact_for(&*self.content, &self.name, offset, out, &req);
        }
        let size = self.size()?;
        if offset
            .checked_add(out.len() as u64)
            .is_none_or(|end| end > size)
        {
            let msg = format!(
                "{}: {} bytes at {offset} are past the end ({size})",
                self.name,
                out.len()
            );
            return Err(error(ErrorKind::Usage, msg));
        }
        let pieces: Vec<(u64, &mut [u8])> = out
            .chunks_mut(READ_PIECE)
            .enumerate()
            .map(|(i, p)| (offset + (i * READ_PIECE) as u64, p))
            .collect();
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        let threads = cores.min(pieces.len());
        let next = std::sync::Mutex::new(pieces.into_iter());
        let first_error: std::sync::Mutex<Option<Error>> = std::sync::Mutex::new(None);
        std::thread::scope(|s| {
            for _ in 0..threads {
                s.spawn(|| loop {
                    if first_error.lock().map(|e| e.is_some()).unwrap_or(true) {
                        return;
                    }
                    let piece = next.lock().ok().and_then(|mut it| it.next());
                    let Some((at, buf)) = piece else { return };
                    if let Err(e) = read_exact_for(&*self.content, &self.name, at, buf, &req) {
                        if let Ok(mut slot) = first_error.lock() {
                            slot.get_or_insert(e);
                        }
                    }
                });
            }
        });
        match first_error.into_inner() {
            Ok(None) => Ok(()),
            Ok(Some(e)) => Err(e),
            Err(_) => Err(error(ErrorKind::Source, "a reading thread panicked")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture(rel: &str) -> String {
        format!("{}/../../fixtures/{rel}", env!("CARGO_MANIFEST_DIR"))
    }

    /// Python's `modelfs.open` of a path one level above nothing that is a model fails as
    /// the one-shot commands do (never an empty model that passes every check).
    #[test]
    fn a_directory_with_no_model_does_not_open() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("logs")).unwrap();
        let e = Opened::open(dir.path().to_str().unwrap(), &[])
            .err()
            .unwrap();
        assert!(matches!(e.kind, ErrorKind::Source), "{e}");
        assert!(
            e.message.contains("not recognised") && e.message.contains("logs/"),
            "{e}"
        );
    }

    /// A table's error that names it already is not prefixed with its name again.
    #[test]
    fn an_error_names_its_tensor_once() {
        let own = ModelError::data("user_emb", "key index: No such file or directory");
        let e = layout_error("user_emb", LayoutError::Model(own));
        assert_eq!(e.message, "user_emb: key index: No such file or directory");
        let other = ModelError::data("user_emb_v2", "bad");
        let e = layout_error("user_emb", LayoutError::Model(other));
        assert_eq!(e.message, "user_emb: user_emb_v2: bad");
    }

    #[test]
    fn checksum_errors_are_told_by_what_they_say_not_by_names() {
        let data = |what: &str, why: &str| ModelError::data(what.to_string(), why.to_string());
        for (e, want) in [
            (data("w", "checksum does not match (data file 0)"), true),
            (data("t", "record at 8: data checksum mismatch"), true),
            (
                data(
                    "x in a.npz",
                    "zip CRC-32 00000001 of the member, 00000002 expected",
                ),
                true,
            ),
            (data("crc_bias", "the file ended early"), false),
            (data("checksums/w", "unsupported dtype"), false),
            (data("w", "a string's length is past the end"), false),
        ] {
            assert_eq!(is_checksum(&LayoutError::Model(e)), want);
        }
    }

    /// A read larger than one thread's piece is split over threads and still exact.
    #[test]
    fn a_large_read_splits_over_threads() {
        let dir = tempfile::tempdir().unwrap();
        let values: Vec<f32> = (0..(3 * READ_PIECE / 4 + 1000)).map(|i| i as f32).collect();
        let npy = modelfs_layout::binary::npy_header("<f4", &[values.len() as u64]);
        let mut file = npy.clone();
        file.extend(values.iter().flat_map(|v| v.to_le_bytes()));
        let path = dir.path().join("big.npy");
        std::fs::write(&path, &file).unwrap();
        let m = Opened::open(path.to_str().unwrap(), &[]).unwrap();
        let name = m.keys().unwrap().remove(0);
        let npy = m.npy(&name).unwrap();
        let mut whole = vec![0u8; npy.size().unwrap() as usize];
        assert!(whole.len() > 2 * READ_PIECE);
        npy.read_into(0, &mut whole).unwrap();
        assert_eq!(whole, file);
        let mut tail = vec![0u8; READ_PIECE + 12];
        let at = (file.len() - tail.len()) as u64;
        npy.read_into(at, &mut tail).unwrap();
        assert_eq!(&tail[..], &file[at as usize..]);
    }

    #[test]
    fn errors_are_sorted_by_kind() {
        let m = Opened::open(&fixture("tf/multi_shard/ckpt"), &[]).unwrap();
        assert_eq!(m.npy("nope").err().unwrap().kind, ErrorKind::NotFound);
        let bad = Opened::open(&fixture("tf/multi_shard/ckpt"), &["nosuchoption=1".into()]);
        assert_eq!(bad.err().unwrap().kind, ErrorKind::Usage);
        let missing = Opened::open(&fixture("no/such/model"), &[]);
        assert_eq!(missing.err().unwrap().kind, ErrorKind::Missing);
        let dir = tempfile::tempdir().unwrap();
        let junk = dir.path().join("notes.txt");
        std::fs::write(&junk, b"no model").unwrap();
        let unrecognised = Opened::open(junk.to_str().unwrap(), &[]);
        assert_eq!(unrecognised.err().unwrap().kind, ErrorKind::Source);
    }
}
