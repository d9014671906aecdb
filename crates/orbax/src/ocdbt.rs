//! TensorStore's OCDBT key-value store (`manifest.ocdbt`, `d/…`), read-only: the latest
//! version's keys and where each value lies, found by one walk of its B+tree.
//!
//! The format is tensorstore's documented one (`kvstore/ocdbt/index.rst`): every encoded
//! object — the manifest, a version tree node, a B+tree node — is an envelope of a big-endian
//! magic, its little-endian length, a varint format version, a varint compression (0 none,
//! 1 zstd), the body, and a CRC-32C of everything before it. The manifest names the newest
//! versions inline; the last one's B+tree root holds every key of the checkpoint. Data files
//! are named relative to the database's directory through data file tables whose base paths
//! carry down the tree (`transitive + base + relative`); each is opened only inside that
//! directory (`source::open_inside`): a path in a damaged or hostile manifest cannot reach
//! another file.
//!
//! Invariants: every count is bounded before anything is allocated for it (`MAX_KEYS`,
//! `MAX_NODE`, the bytes left to read); every offset and length is checked arithmetic and
//! checked against the file it points into; a CRC-32C mismatch fails the open.

use std::collections::BTreeMap;
use std::io::Read;
use std::path::Path;
use std::sync::Arc;

use crate::model::ModelError;
use crate::source::{open_inside, ReadAt, ReadCtx, ReadExt, Storage};

const MANIFEST_MAGIC: u32 = 0x0cdb_3a2a;
const BTREE_MAGIC: u32 = 0x0cdb_20de;
/// The manifest of a database (`numbered` kind: only its configuration).
pub(crate) const MANIFEST: &str = "manifest.ocdbt";
/// The largest encoded or decoded manifest or node read (tensorstore writes nodes of ~1 MiB).
const MAX_NODE: u64 = 64 << 20;
/// Keys over all nodes, and the B+tree's height: a damaged tree cannot make the walk unbounded.
const MAX_KEYS: usize = 1 << 24;
const MAX_HEIGHT: u8 = 32;
/// Entries of one node (tensorstore's `kMaxNodeArity`), files of one data file table.
const MAX_ARITY: u64 = 1 << 20;
/// tensorstore's own limits on a key's and a data file path's length.
const MAX_KEY_LEN: u64 = 65535;
const MAX_PATH_LEN: usize = 65535;

/// Why an OCDBT database could not be read.
#[derive(Debug, thiserror::Error)]
pub(crate) enum OcdbtFault {
    #[error("{what}: not an OCDBT object (magic {found:#010x}, expected {expected:#010x})")]
    Magic {
        what: &'static str,
        found: u32,
        expected: u32,
    },
    #[error("{0}: CRC-32C mismatch: damaged")]
    Crc(&'static str),
    #[error("{0}: truncated")]
    Truncated(&'static str),
    #[error("{what}: {why}")]
    Bad { what: &'static str, why: String },
}

fn bad(what: &'static str, why: impl Into<String>) -> OcdbtFault {
    OcdbtFault::Bad {
        what,
        why: why.into(),
    }
}

/// A data file table: each file's full path, and the transitive path of what it holds.
type Table = Vec<(Arc<str>, Arc<str>)>;

/// Where a value lies.
#[derive(Clone)]
pub(crate) enum Value {
    /// Stored in its leaf node.
    Inline(Arc<[u8]>),
    /// `len` bytes at `offset` of a data file (checked inside it).
    At {
        file: Arc<dyn ReadAt>,
        offset: u64,
        len: u64,
    },
}

impl Value {
    pub(crate) fn len(&self) -> u64 {
        match self {
            Value::Inline(b) => b.len() as u64,
            Value::At { len, .. } => *len,
        }
    }

    /// Bytes `[at, at + len)` of the value, checked inside it.
    pub(crate) fn slice(&self, at: u64, len: u64) -> Option<Value> {
        let end = at.checked_add(len).filter(|&e| e <= self.len())?;
        Some(match self {
            Value::Inline(b) => Value::Inline(b[at as usize..end as usize].into()),
            Value::At { file, offset, .. } => Value::At {
                file: Arc::clone(file),
                offset: offset + at,
                len,
            },
        })
    }

    /// The whole value (bounded by the caller: `len` first).
    pub(crate) fn read(&self, ctx: &ReadCtx) -> Result<Vec<u8>, ModelError> {
        match self {
            Value::Inline(b) => Ok(b.to_vec()),
            Value::At { file, offset, len } => {
                let mut out = vec![0; usize::try_from(*len).map_err(|_| too_big(file))?];
                file.read_into(ctx, *offset, &mut out)?;
                Ok(out)
            }
        }
    }
}

fn too_big(file: &Arc<dyn ReadAt>) -> ModelError {
    ModelError::data(file.name(), "value too large for this machine")
}

/// The keys of the latest version of the database in `dir`, in key order, with their values.
pub(crate) fn read(fs: &dyn Storage, dir: &Path) -> Result<BTreeMap<Vec<u8>, Value>, ModelError> {
    let mut files = Files {
        fs,
        dir,
        open: BTreeMap::new(),
    };
    let manifest = files.whole(MANIFEST)?;
    let name = files.name(MANIFEST);
    let root = match Manifest::decode(&manifest).map_err(|e| ModelError::data(&name, e))? {
        Manifest::Single(root) => root,
        Manifest::Numbered => {
            // The newest `manifest.<16 hex digits>` holds the versions.
            let latest = fs
                .list(dir)?
                .into_iter()
                .filter_map(|(n, _)| n.into_string().ok())
                .filter(|n| {
                    n.len() == 25
                        && n.starts_with("manifest.")
                        && n[9..].bytes().all(|b| b.is_ascii_hexdigit())
                })
                .max()
                .ok_or_else(|| ModelError::data(&name, "numbered manifest without manifest.<n>"))?;
            let bytes = files.whole(&latest)?;
            match Manifest::decode(&bytes).map_err(|e| ModelError::data(files.name(&latest), e))? {
                Manifest::Single(root) => root,
                Manifest::Numbered => {
                    return Err(ModelError::data(files.name(&latest), "names no versions"))
                }
            }
        }
    };
    let mut out = BTreeMap::new();
    if let Some(root) = root {
        files.walk(&root.node, root.height, Vec::new(), &mut out, 0)?;
    }
    Ok(out)
}

/// A reference to an encoded node: its data file (full path, and the transitive path its
/// own table's paths are relative to), offset and length.
#[derive(Clone, Debug)]
struct NodeRef {
    path: Arc<str>,
    base: Arc<str>,
    offset: u64,
    length: u64,
}

struct Root {
    node: NodeRef,
    height: u8,
}

enum Manifest {
    /// The latest version's B+tree root (`None`: the database is empty).
    Single(Option<Root>),
    Numbered,
}

impl Manifest {
    fn decode(bytes: &[u8]) -> Result<Manifest, OcdbtFault> {
        const WHAT: &str = "manifest";
        let body = envelope(bytes, MANIFEST_MAGIC, WHAT)?;
        let mut r = Bytes {
            buf: &body,
            at: 0,
            what: WHAT,
        };
        r.take(16)?; // uuid
        let kind = r.varint()?;
        let _max_inline = r.varint()?;
        let _max_node = r.varint()?;
        let arity_log2 = r.byte()?;
        if !(1..=16).contains(&arity_log2) {
            return Err(bad(WHAT, format!("version tree arity 2^{arity_log2}")));
        }
        match r.varint()? {
            0 => {}
            1 => {
                r.take(4)?; // zstd level
            }
            c => return Err(bad(WHAT, format!("compression method {c}"))),
        }
        match kind {
            0 => {}
            1 => return Ok(Manifest::Numbered),
            k => return Err(bad(WHAT, format!("manifest kind {k}"))),
        }
        let table = r.table("")?;
        // The inline versions, oldest first: the last is the latest.
        let n = r.varint()?;
        if n == 0 || n > 1 << arity_log2 {
            return Err(bad(WHAT, format!("{n} inline versions")));
        }
        let n = n as usize;
        let mut generation = 0;
        for _ in 0..n {
            let g = r.varint()?;
            if g <= generation {
                return Err(bad(WHAT, "generation numbers not increasing"));
            }
            generation = g;
        }
        let mut height = 0;
        for _ in 0..n {
            height = r.byte()?;
        }
        let refs = r.refs(n, &table, true)?;
        let root = refs.into_iter().last().flatten();
        if height > MAX_HEIGHT {
            return Err(bad(WHAT, format!("B+tree height {height}")));
        }
        // The statistics, commit times and older version nodes follow; nothing here uses them.
        Ok(Manifest::Single(root.map(|node| Root { node, height })))
    }
}

/// The decoded body of an envelope, its CRC-32C checked.
fn envelope(bytes: &[u8], magic: u32, what: &'static str) -> Result<Vec<u8>, OcdbtFault> {
    let n = bytes.len();
    if n < 4 + 8 + 4 {
        return Err(OcdbtFault::Truncated(what));
    }
    let found = u32::from_be_bytes(bytes[..4].try_into().expect("4 bytes"));
    if found != magic {
        return Err(OcdbtFault::Magic {
            what,
            found,
            expected: magic,
        });
    }
    let length = u64::from_le_bytes(bytes[4..12].try_into().expect("8 bytes"));
    if length != n as u64 {
        return Err(bad(
            what,
            format!("length {length} in its header, {n} stored"),
        ));
    }
    let stored = u32::from_le_bytes(bytes[n - 4..].try_into().expect("4 bytes"));
    if crc32c::crc32c(&bytes[..n - 4]) != stored {
        return Err(OcdbtFault::Crc(what));
    }
    let mut r = Bytes {
        buf: &bytes[..n - 4],
        at: 12,
        what,
    };
    let version = r.varint()?;
    if version != 0 {
        return Err(bad(what, format!("format version {version}")));
    }
    match r.varint()? {
        0 => Ok(bytes[r.at..n - 4].to_vec()),
        1 => {
            let rest = &bytes[r.at..n - 4];
            let mut out = Vec::new();
            zstd::stream::read::Decoder::new(rest)
                .and_then(|d| d.take(MAX_NODE + 1).read_to_end(&mut out))
                .map_err(|e| bad(what, format!("zstd: {e}")))?;
            if out.len() as u64 > MAX_NODE {
                return Err(bad(what, format!("decodes to more than {MAX_NODE} bytes")));
            }
            Ok(out)
        }
        c => Err(bad(what, format!("compression format {c}"))),
    }
}

/// A cursor over a decoded body.
struct Bytes<'a> {
    buf: &'a [u8],
    at: usize,
    what: &'static str,
}

impl<'a> Bytes<'a> {
    fn left(&self) -> usize {
        self.buf.len() - self.at
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8], OcdbtFault> {
        if n > self.left() {
            return Err(OcdbtFault::Truncated(self.what));
        }
        let s = &self.buf[self.at..self.at + n];
        self.at += n;
        Ok(s)
    }

    fn byte(&mut self) -> Result<u8, OcdbtFault> {
        Ok(self.take(1)?[0])
    }

    /// An unsigned LEB128 of at most 64 bits.
    fn varint(&mut self) -> Result<u64, OcdbtFault> {
        let mut v = 0u64;
        for i in 0..10 {
            let b = self.byte()?;
            if i == 9 && b > 1 {
                return Err(bad(self.what, "varint overflows 64 bits"));
            }
            v |= u64::from(b & 0x7f) << (7 * i);
            if b & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err(bad(self.what, "varint overflows 64 bits"))
    }

    /// A count of items each taking at least one byte: bounded by the bytes left, and by
    /// tensorstore's own limit on a node's entries (`MAX_ARITY`), so that the columns read
    /// for them (8 bytes an item) stay small whatever the count says.
    fn count(&mut self) -> Result<usize, OcdbtFault> {
        let n = self.varint()?;
        if n > self.left() as u64 {
            return Err(OcdbtFault::Truncated(self.what));
        }
        if n > MAX_ARITY {
            return Err(bad(self.what, format!("{n} entries (at most {MAX_ARITY})")));
        }
        Ok(n as usize)
    }

    /// `n` varints, each at least one byte.
    fn column(&mut self, n: usize) -> Result<Vec<u64>, OcdbtFault> {
        if n > self.left() {
            return Err(OcdbtFault::Truncated(self.what));
        }
        (0..n).map(|_| self.varint()).collect()
    }

    /// A data file table: each file's full path and the base for the paths of what it holds.
    fn table(&mut self, transitive: &str) -> Result<Table, OcdbtFault> {
        let n = self.count()?;
        let mut prefix = vec![0u64];
        prefix.extend(self.column(n.saturating_sub(1))?);
        let suffix = self.column(n)?;
        let base = self.column(n)?;
        let mut out: Table = Vec::with_capacity(n);
        let mut prev: Vec<u8> = Vec::new();
        for i in 0..n {
            let (p, s, b) = (prefix[i], suffix[i], base[i]);
            let len = p
                .checked_add(s)
                .filter(|&l| l <= (MAX_PATH_LEN - transitive.len().min(MAX_PATH_LEN)) as u64);
            let Some(len) = len else {
                return Err(bad(self.what, format!("data file path {i} too long")));
            };
            if p > prev.len() as u64 || b > len {
                return Err(bad(self.what, format!("data file path {i}: bad lengths")));
            }
            let mut path = prev[..p as usize].to_vec();
            path.extend_from_slice(self.take(s as usize)?);
            let full = String::from_utf8(path.clone())
                .map_err(|_| bad(self.what, format!("data file path {i} is not UTF-8")))?;
            if !full.is_char_boundary(b as usize) {
                return Err(bad(
                    self.what,
                    format!("data file path {i}: bad base length"),
                ));
            }
            out.push((
                format!("{transitive}{full}").into(),
                format!("{transitive}{}", &full[..b as usize]).into(),
            ));
            prev = path;
        }
        Ok(out)
    }

    /// `n` references (file ids, offsets, lengths, then three statistics columns); a
    /// reference of offset and length `u64::MAX` is missing (an empty tree) where `missing`.
    fn refs(
        &mut self,
        n: usize,
        table: &Table,
        missing: bool,
    ) -> Result<Vec<Option<NodeRef>>, OcdbtFault> {
        let ids = self.column(n)?;
        let offsets = self.column(n)?;
        let lengths = self.column(n)?;
        for _ in 0..3 {
            self.column(n)?;
        }
        let mut out = Vec::with_capacity(n);
        for i in 0..n {
            if missing && offsets[i] == u64::MAX && lengths[i] == u64::MAX {
                out.push(None);
                continue;
            }
            out.push(Some(self.node_ref(table, ids[i], offsets[i], lengths[i])?));
        }
        Ok(out)
    }

    fn node_ref(
        &self,
        table: &Table,
        id: u64,
        offset: u64,
        length: u64,
    ) -> Result<NodeRef, OcdbtFault> {
        let (path, base) = usize::try_from(id)
            .ok()
            .and_then(|i| table.get(i))
            .ok_or_else(|| bad(self.what, format!("data file {id} not in its table")))?;
        if offset
            .checked_add(length)
            .is_none_or(|e| e > i64::MAX as u64)
        {
            return Err(bad(self.what, "offset and length overflow"));
        }
        Ok(NodeRef {
            path: Arc::clone(path),
            base: Arc::clone(base),
            offset,
            length,
        })
    }

    /// `n` keys stored as prefix lengths (after the first), suffix lengths, and (interior
    /// nodes) subtree common prefix lengths, then the suffixes: full keys relative to the
    /// node's implicit prefix, and the subtree prefix lengths.
    fn keys(&mut self, n: usize, interior: bool) -> Result<(Vec<Vec<u8>>, Vec<u64>), OcdbtFault> {
        let mut prefix = vec![0u64];
        prefix.extend(self.column(n - 1)?);
        let suffix = self.column(n)?;
        let common = if interior {
            self.column(n)?
        } else {
            Vec::new()
        };
        let mut keys: Vec<Vec<u8>> = Vec::with_capacity(n);
        for i in 0..n {
            let prev = keys.last().map_or(&[][..], |k| &k[..]);
            let (p, s) = (prefix[i], suffix[i]);
            if p > prev.len() as u64 {
                return Err(bad(
                    self.what,
                    format!("key {i}: prefix longer than the key before"),
                ));
            }
            if p.checked_add(s).is_none_or(|l| l > MAX_KEY_LEN) {
                return Err(bad(self.what, format!("key {i} too long")));
            }
            let mut key = prev[..p as usize].to_vec();
            key.extend_from_slice(self.take(s as usize)?);
            if i > 0 && key.as_slice() <= prev {
                return Err(bad(self.what, "keys out of order"));
            }
            if interior && common[i] > key.len() as u64 {
                return Err(bad(
                    self.what,
                    format!("key {i}: subtree prefix longer than the key"),
                ));
            }
            keys.push(key);
        }
        Ok((keys, common))
    }
}

/// The database's files, each opened once, only inside its directory.
struct Files<'a> {
    fs: &'a dyn Storage,
    dir: &'a Path,
    open: BTreeMap<Arc<str>, Arc<dyn ReadAt>>,
}

impl Files<'_> {
    fn name(&self, rel: &str) -> String {
        self.dir.join(rel).display().to_string()
    }

    fn file(&mut self, rel: &str) -> Result<Arc<dyn ReadAt>, ModelError> {
        if let Some(f) = self.open.get(rel) {
            return Ok(Arc::clone(f));
        }
        let f = open_inside(self.fs, self.dir, rel).map_err(|e| match e {
            // The source's error names the file already (and may be transient).
            crate::source::Outside::Source(s) => ModelError::Source(s),
            refused => ModelError::data(self.name(rel), refused),
        })?;
        self.open.insert(rel.into(), Arc::clone(&f));
        Ok(f)
    }

    fn whole(&mut self, rel: &str) -> Result<Vec<u8>, ModelError> {
        let f = self.file(rel)?;
        if f.size() > MAX_NODE {
            return Err(ModelError::data(
                f.name(),
                "manifest larger than 64 MiB: not read",
            ));
        }
        Ok(f.read_vec(0, f.size() as usize)?)
    }

    /// The bytes `node` refers to, checked inside its file.
    fn bytes(&mut self, node: &NodeRef) -> Result<(Vec<u8>, String), ModelError> {
        let f = self.file(&node.path)?;
        if node.length > MAX_NODE
            || node
                .offset
                .checked_add(node.length)
                .is_none_or(|e| e > f.size())
        {
            return Err(ModelError::data(
                f.name(),
                format!(
                    "node at {}+{} is outside the file ({} bytes)",
                    node.offset,
                    node.length,
                    f.size()
                ),
            ));
        }
        let mut buf = vec![0; node.length as usize];
        f.read_into(ReadCtx::metadata(), node.offset, &mut buf)?;
        Ok((buf, f.name().to_string()))
    }

    /// Adds every key of the subtree at `node` (of `height`, its keys after `prefix`) to `out`.
    fn walk(
        &mut self,
        node: &NodeRef,
        height: u8,
        prefix: Vec<u8>,
        out: &mut BTreeMap<Vec<u8>, Value>,
        depth: u8,
    ) -> Result<(), ModelError> {
        const WHAT: &str = "B+tree node";
        let (bytes, name) = self.bytes(node)?;
        let fail = |e: OcdbtFault| ModelError::data(&name, e);
        let body = envelope(&bytes, BTREE_MAGIC, WHAT).map_err(fail)?;
        let mut r = Bytes {
            buf: &body,
            at: 0,
            what: WHAT,
        };
        let h = r.byte().map_err(fail)?;
        if h != height || depth > MAX_HEIGHT {
            return Err(fail(bad(WHAT, format!("height {h}, expected {height}"))));
        }
        let table = r.table(&node.base).map_err(fail)?;
        let n = r.count().map_err(fail)?;
        if n == 0 {
            return Err(fail(bad(WHAT, "empty node")));
        }
        let (keys, common) = r.keys(n, height > 0).map_err(fail)?;
        if height > 0 {
            let refs = r.refs(n, &table, false).map_err(fail)?;
            for ((key, common), child) in keys.iter().zip(common).zip(refs) {
                let child = child.expect("not missing");
                let mut sub = prefix.clone();
                sub.extend_from_slice(&key[..common as usize]);
                self.walk(&child, height - 1, sub, out, depth + 1)?;
            }
            return Ok(());
        }
        if out.len().saturating_add(n) > MAX_KEYS {
            return Err(fail(bad(WHAT, format!("more than {MAX_KEYS} keys"))));
        }
        let lengths = r.column(n).map_err(fail)?;
        let mut kinds = Vec::with_capacity(n);
        for i in 0..n {
            match r.byte().map_err(fail)? {
                k @ (0 | 1) => kinds.push(k),
                k => return Err(fail(bad(WHAT, format!("value kind {k} of entry {i}")))),
            }
        }
        let indirect = kinds.iter().filter(|&&k| k == 1).count();
        let ids = r.column(indirect).map_err(fail)?;
        let offsets = r.column(indirect).map_err(fail)?;
        let mut j = 0;
        for (i, key) in keys.into_iter().enumerate() {
            let value = if kinds[i] == 1 {
                let at = r
                    .node_ref(&table, ids[j], offsets[j], lengths[i])
                    .map_err(fail)?;
                j += 1;
                let file = self.file(&at.path)?;
                if at
                    .offset
                    .checked_add(at.length)
                    .is_none_or(|e| e > file.size())
                {
                    return Err(ModelError::data(
                        file.name(),
                        format!(
                            "value at {}+{} is outside the file ({} bytes)",
                            at.offset,
                            at.length,
                            file.size()
                        ),
                    ));
                }
                Value::At {
                    file,
                    offset: at.offset,
                    len: at.length,
                }
            } else {
                let len = usize::try_from(lengths[i]).unwrap_or(usize::MAX);
                Value::Inline(r.take(len).map_err(fail)?.into())
            };
            let mut full = prefix.clone();
            full.extend_from_slice(&key);
            out.insert(full, value);
        }
        if r.left() != 0 {
            return Err(fail(bad(WHAT, "bytes after its entries")));
        }
        Ok(())
    }
}
