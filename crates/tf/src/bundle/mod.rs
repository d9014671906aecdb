//! A tensor bundle (§4): the `.index` table's header, its entries, and the lazily opened
//! data shards. `entry` validates one `BundleEntryProto`; `tensor` serves a plain entry's
//! elements; `varlen` decodes strings and variants; `partitioned` reassembles slices.

pub mod entry;
pub mod partitioned;
pub mod tensor;
pub mod varlen;

use std::collections::HashMap;

use entry::DataLoc;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::SystemTime;
use tensor::Verdict;

use prost::Message;

use crate::codec::table::{Table, TableError};
use crate::model::ModelError;
use crate::proto::BundleHeaderProto;
use crate::source::{ReadAt, ReadExt, SourceError, Storage};
use crate::store::Store;

/// The message of §12 for pre-0.12 checkpoints.
pub(crate) const V1_MESSAGE: &str = "TensorFlow V1 checkpoint (format used before TF 0.12) is not supported; re-save it with a newer TensorFlow";

#[derive(Debug, thiserror::Error)]
pub enum BundleError {
    #[error(transparent)]
    Table(#[from] TableError),
    #[error("{file}: {source}")]
    Header {
        file: String,
        #[source]
        source: HeaderError,
    },
}

/// What is wrong with the bundle header (the entry under key `""`).
#[derive(Debug, thiserror::Error)]
pub enum HeaderError {
    #[error("empty table (no bundle header)")]
    Empty,
    #[error("no bundle header (the first key is not empty)")]
    FirstKeyNotEmpty,
    #[error("{}", V1_MESSAGE)]
    V1,
    #[error("unreadable bundle header: {0}")]
    Undecodable(#[from] prost::DecodeError),
    #[error(
        "unsupported bundle version (producer {producer}, min_consumer {min_consumer}, bad_consumers {bad_consumers:?})"
    )]
    Version {
        producer: i32,
        min_consumer: i32,
        bad_consumers: Vec<i32>,
    },
    #[error("bad bundle header: num_shards {0}")]
    NumShards(i32),
    #[error("bad bundle header: endianness {0}")]
    Endianness(i32),
}

impl From<BundleError> for ModelError {
    fn from(e: BundleError) -> Self {
        match e {
            BundleError::Table(t) => t.into(),
            BundleError::Header { file, source } => ModelError::data(file, source),
        }
    }
}

/// Opens a data shard by its file base name (`P.data-00000-of-00001`).
pub trait ShardOpener: Send + Sync {
    fn open(&self, file_name: &str) -> Result<Arc<dyn ReadAt>, SourceError>;
}

/// Shards are files beside the index.
pub(crate) struct DirShards {
    pub storage: Arc<dyn Storage>,
    pub dir: PathBuf,
}

impl ShardOpener for DirShards {
    fn open(&self, file_name: &str) -> Result<Arc<dyn ReadAt>, SourceError> {
        self.storage.open(&self.dir.join(file_name))
    }
}

/// Shards held in memory (tests, synthesized bundles).
#[cfg(any(test, feature = "testkit"))]
pub struct MemShards(pub HashMap<String, Arc<dyn ReadAt>>);

#[cfg(any(test, feature = "testkit"))]
impl ShardOpener for MemShards {
    fn open(&self, file_name: &str) -> Result<Arc<dyn ReadAt>, SourceError> {
        self.0
            .get(file_name)
            .cloned()
            .ok_or_else(|| SourceError::Io {
                path: file_name.to_string(),
                source: std::io::Error::from(std::io::ErrorKind::NotFound),
            })
    }
}

pub struct Bundle {
    pub table: Table,
    pub num_shards: u32,
    pub(crate) big_endian: bool,
    /// Base name of the prefix (`model.ckpt-100`), for shard file names.
    pub(crate) prefix_name: String,
    /// Whether tensor checksums are verified on first read (`-o verify=`).
    pub(crate) verify: bool,
    pub(crate) mtime: SystemTime,
    opener: Box<dyn ShardOpener>,
    /// Where verdicts of large tensors' checksums persist across mounts (`cache_dir`).
    verdicts: std::sync::OnceLock<Arc<dyn Store>>,
    /// Opened shards; the lock is never held while a file is opened.
    shards: Mutex<HashMap<u32, Arc<dyn ReadAt>>>,
    /// The checksum verdicts of large entries, by location: every tensor object made of one
    /// entry (a file of each layout, each row lookup, each API reader) shares one checksum
    /// pass — racing first readers wait for it — with or without a `cache_dir`. At most one
    /// per entry of the index.
    verdicts_by_loc: Mutex<HashMap<DataLoc, Arc<Verdict>>>,
}

impl std::fmt::Debug for Bundle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Bundle")
            .field("prefix", &self.prefix_name)
            .finish()
    }
}

/// `P.data-SSSSS-of-NNNNN`, zero-padded to at least 5 digits (§1).
pub fn shard_file_name(prefix_name: &str, shard: u32, num_shards: u32) -> String {
    format!("{prefix_name}.data-{shard:05}-of-{num_shards:05}")
}

impl Bundle {
    /// Reads and checks the header (key `""`, the first entry: one data block).
    pub fn open(
        table: Table,
        prefix_name: String,
        opener: Box<dyn ShardOpener>,
        verify: bool,
    ) -> Result<Bundle, BundleError> {
        let header_error = |source| BundleError::Header {
            file: table.file().name().to_string(),
            source,
        };
        let header = {
            let mut it = table.iter();
            it.seek_to_first()?;
            if !it.valid() {
                return Err(header_error(HeaderError::Empty));
            }
            if !it.key().is_empty() {
                return Err(header_error(HeaderError::FirstKeyNotEmpty));
            }
            parse_header(it.value()).map_err(header_error)?
        };
        Ok(Bundle {
            mtime: table.file().mtime(),
            table,
            num_shards: header.0,
            big_endian: header.1,
            prefix_name,
            verify,
            opener,
            verdicts: std::sync::OnceLock::new(),
            shards: Mutex::new(HashMap::new()),
            verdicts_by_loc: Mutex::default(),
        })
    }

    /// Keeps checksum verdicts of large tensors in `store` (set once; see `TfTensor`).
    pub fn set_verdict_store(&self, store: Arc<dyn Store>) {
        let _ = self.verdicts.set(store);
    }

    pub fn verdict_store(&self) -> Option<&Arc<dyn Store>> {
        self.verdicts.get()
    }

    /// The one checksum verdict of the entry at `loc`, shared by every tensor object of it.
    pub(crate) fn shared_verdict(&self, loc: DataLoc) -> Arc<Verdict> {
        self.verdicts_by_loc
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .entry(loc)
            .or_default()
            .clone()
    }

    pub fn shard_name(&self, shard: u32) -> String {
        shard_file_name(&self.prefix_name, shard, self.num_shards)
    }

    /// The data file of `shard`, opened on first use.
    pub fn shard(&self, shard: u32) -> Result<Arc<dyn ReadAt>, ModelError> {
        if let Some(f) = self
            .shards
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&shard)
        {
            return Ok(Arc::clone(f));
        }
        let name = self.shard_name(shard);
        let file = self.opener.open(&name)?;
        let mut map = self.shards.lock().unwrap_or_else(|e| e.into_inner());
        Ok(Arc::clone(map.entry(shard).or_insert(file)))
    }
}

/// The tensor stored under exactly `key` (plain or partitioned), `None` if absent.
pub fn tensor_for_key(
    bundle: &Arc<Bundle>,
    key: &[u8],
) -> Result<Option<Arc<dyn crate::model::Tensor>>, ModelError> {
    let Some(value) = bundle.table.get(key)? else {
        return Ok(None);
    };
    Ok(Some(tensor_from_value(bundle, key, &value)))
}

/// The tensor of entry `value` stored under `key`.
pub fn tensor_from_value(
    bundle: &Arc<Bundle>,
    key: &[u8],
    value: &[u8],
) -> Arc<dyn crate::model::Tensor> {
    let entry = entry::parse_entry(value, bundle.num_shards);
    if entry.slices.is_empty() {
        Arc::new(tensor::TfTensor::new(
            Arc::clone(bundle),
            key.to_vec(),
            &entry,
        ))
    } else {
        Arc::new(partitioned::new(Arc::clone(bundle), key.to_vec(), &entry))
    }
}

/// Checks a header value: `(num_shards, big_endian)`.
fn parse_header(value: &[u8]) -> Result<(u32, bool), HeaderError> {
    if value.first() == Some(&0x0a) {
        return Err(HeaderError::V1);
    }
    let h = BundleHeaderProto::decode(value)?;
    let v = h.version.unwrap_or_default();
    if v.producer < 0 || v.min_consumer > 1 || v.bad_consumers.contains(&1) {
        return Err(HeaderError::Version {
            producer: v.producer,
            min_consumer: v.min_consumer,
            bad_consumers: v.bad_consumers,
        });
    }
    if h.num_shards < 1 {
        return Err(HeaderError::NumShards(h.num_shards));
    }
    let big = match h.endianness {
        0 => false,
        1 => true,
        e => return Err(HeaderError::Endianness(e)),
    };
    Ok((h.num_shards as u32, big))
}

#[cfg(test)]
mod tests;
#[cfg(any(test, feature = "testkit"))]
pub mod testutil;
