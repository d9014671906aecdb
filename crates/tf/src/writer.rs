//! Writers for tables and tensor bundles, the way LevelDB's `TableBuilder` and TF's
//! `BundleWriter` write them, plus options TF lacks (big-endian, Snappy blocks, small blocks,
//! hand-made entries). Not part of the reader: the `.tf/` view encodes its index with it, and
//! tests, fuzz seeds and benchmark generators build checkpoints with it.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::codec::table::TableBuilder;
use crate::codec::{crc32c_extend, mask_crc, put_varint64};
use crate::source::{MemSource, ReadAt};

/// Encodes strings as a bundle writer does; returns (data, entry crc).
pub fn encode_strings(items: &[&[u8]], big_endian: bool) -> (Vec<u8>, u32) {
    let mut data = Vec::new();
    let mut c = 0u32;
    for s in items {
        put_varint64(&mut data, s.len() as u64);
        let l = s.len() as u32;
        c = crc32c_extend(
            c,
            &if big_endian {
                l.to_be_bytes()
            } else {
                l.to_le_bytes()
            },
        );
    }
    let m = mask_crc(c);
    let cbytes = if big_endian {
        m.to_be_bytes()
    } else {
        m.to_le_bytes()
    };
    data.extend_from_slice(&cbytes);
    let mut crc = crc32c_extend(c, &cbytes);
    for s in items {
        data.extend_from_slice(s);
        crc = crc32c_extend(crc, s);
    }
    (data, mask_crc(crc))
}

fn field_varint(out: &mut Vec<u8>, field: u32, v: u64) {
    put_varint64(out, u64::from(field << 3));
    put_varint64(out, v);
}

fn field_bytes(out: &mut Vec<u8>, field: u32, b: &[u8]) {
    put_varint64(out, u64::from(field << 3 | 2));
    put_varint64(out, b.len() as u64);
    out.extend_from_slice(b);
}

pub(crate) fn shape_proto(shape: &[u64]) -> Vec<u8> {
    let mut s = Vec::new();
    for &d in shape {
        let mut dim = Vec::new();
        if d != 0 {
            field_varint(&mut dim, 1, d);
        }
        field_bytes(&mut s, 2, &dim);
    }
    s
}

/// One extent per dimension: `None` = whole dimension.
pub type SliceSpec = Vec<Option<(i64, i64)>>;

pub fn slice_proto(spec: &SliceSpec) -> Vec<u8> {
    let mut s = Vec::new();
    for e in spec {
        let mut ext = Vec::new();
        if let Some((start, len)) = e {
            if *start != 0 {
                field_varint(&mut ext, 1, *start as u64);
            }
            field_varint(&mut ext, 2, *len as u64);
        }
        field_bytes(&mut s, 1, &ext);
    }
    s
}

/// A plain `BundleEntryProto` (fields written as TF writes them: defaults omitted).
pub fn entry_proto(
    dtype: i32,
    shape: &[u64],
    shard: u32,
    offset: u64,
    size: u64,
    crc: u32,
) -> Vec<u8> {
    let mut e = Vec::new();
    field_varint(&mut e, 1, dtype as u64);
    field_bytes(&mut e, 2, &shape_proto(shape));
    if shard != 0 {
        field_varint(&mut e, 3, shard as u64);
    }
    if offset != 0 {
        field_varint(&mut e, 4, offset);
    }
    if size != 0 {
        field_varint(&mut e, 5, size);
    }
    e.push(0x35);
    e.extend_from_slice(&crc.to_le_bytes());
    e
}

/// A partitioned full entry: dtype, full shape and one slice spec per stored slice.
pub fn partitioned_entry_proto(dtype: i32, shape: &[u64], slices: &[SliceSpec]) -> Vec<u8> {
    let mut e = Vec::new();
    field_varint(&mut e, 1, dtype as u64);
    field_bytes(&mut e, 2, &shape_proto(shape));
    for spec in slices {
        field_bytes(&mut e, 7, &slice_proto(spec));
    }
    e
}

pub struct BundleBuilder {
    pub prefix: String,
    pub num_shards: u32,
    pub big_endian: bool,
    pub block_size: usize,
    pub snappy: bool,
    entries: BTreeMap<Vec<u8>, Vec<u8>>,
    data: Vec<Vec<u8>>,
}

impl BundleBuilder {
    pub fn new(prefix: &str) -> Self {
        BundleBuilder {
            prefix: prefix.into(),
            num_shards: 1,
            big_endian: false,
            block_size: 262144,
            snappy: false,
            entries: BTreeMap::new(),
            data: vec![Vec::new()],
        }
    }

    /// Adds stored bytes `data` (already in the bundle's byte order) with a computed CRC.
    pub fn add_raw(
        &mut self,
        key: &[u8],
        dtype: i32,
        shape: &[u64],
        shard: u32,
        data: &[u8],
        crc: u32,
    ) {
        while self.data.len() <= shard as usize {
            self.data.push(Vec::new());
        }
        let file = &mut self.data[shard as usize];
        let offset = file.len() as u64;
        file.extend_from_slice(data);
        let e = entry_proto(dtype, shape, shard, offset, data.len() as u64, crc);
        self.entries.insert(key.to_vec(), e);
    }

    /// Adds a fixed-size tensor from little-endian element bytes (`width` = swap unit).
    pub fn add_fixed(&mut self, key: &[u8], dtype: i32, shape: &[u64], le: &[u8], width: usize) {
        let mut stored = le.to_vec();
        if self.big_endian {
            crate::dtype::swap_in_place(&mut stored, width);
        }
        let crc = mask_crc(crc32c_extend(0, &stored));
        self.add_raw(key, dtype, shape, 0, &stored, crc);
    }

    pub fn add_f32(&mut self, key: &[u8], shape: &[u64], values: &[f32]) {
        let le: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
        self.add_fixed(key, 1, shape, &le, 4);
    }

    pub fn add_strings(&mut self, key: &[u8], shape: &[u64], items: &[&[u8]]) {
        let (data, crc) = encode_strings(items, self.big_endian);
        self.add_raw(key, 7, shape, 0, &data, crc);
    }

    /// A partitioned f32 tensor: full entry plus one slice entry per spec, values taken from
    /// `full` (row-major, shape `shape`).
    pub fn add_partitioned_f32(
        &mut self,
        key: &[u8],
        shape: &[u64],
        full: &[f32],
        specs: &[SliceSpec],
    ) {
        let mut e = Vec::new();
        field_varint(&mut e, 1, 1);
        field_bytes(&mut e, 2, &shape_proto(shape));
        for spec in specs {
            field_bytes(&mut e, 7, &slice_proto(spec));
            let ext: Vec<(u64, u64)> = spec
                .iter()
                .zip(shape)
                .map(|(e, &d)| e.map_or((0, d), |(s, l)| (s as u64, l as u64)))
                .collect();
            let mut vals = Vec::new();
            let total: u64 = ext.iter().map(|e| e.1).product();
            for flat in 0..total {
                let mut rem = flat;
                let mut idx = vec![0u64; shape.len()];
                for d in (0..shape.len()).rev() {
                    idx[d] = ext[d].0 + rem % ext[d].1;
                    rem /= ext[d].1;
                }
                let mut f = 0u64;
                for d in 0..shape.len() {
                    f = f * shape[d] + idx[d];
                }
                vals.push(full[f as usize]);
            }
            let proto = prost::Message::decode(&slice_proto(spec)[..]).unwrap();
            let skey = crate::ordered_code::slice_key(key, &proto);
            let lens: Vec<u64> = ext.iter().map(|e| e.1).collect();
            let le: Vec<u8> = vals.iter().flat_map(|v| v.to_le_bytes()).collect();
            self.add_fixed(&skey, 1, &lens, &le, 4);
        }
        self.entries.insert(key.to_vec(), e);
    }

    pub fn add_entry_bytes(&mut self, key: &[u8], entry: Vec<u8>) {
        self.entries.insert(key.to_vec(), entry);
    }

    pub(crate) fn header(&self) -> Vec<u8> {
        let mut h = Vec::new();
        field_varint(
            &mut h,
            1,
            self.num_shards.max(self.data.len() as u32) as u64,
        );
        if self.big_endian {
            field_varint(&mut h, 2, 1);
        }
        field_bytes(&mut h, 3, &[0x08, 0x01]);
        h
    }

    /// The index bytes and every data file as `(base name, bytes)`, shard order.
    pub(crate) fn finish_bytes(self) -> (Vec<u8>, Vec<(String, Vec<u8>)>) {
        let mut t = TableBuilder::new(self.block_size, self.snappy);
        t.add(b"", &self.header());
        for (k, v) in &self.entries {
            t.add(k, v);
        }
        let n = self.num_shards.max(self.data.len() as u32);
        let files = self
            .data
            .into_iter()
            .enumerate()
            .map(|(i, d)| (crate::bundle::shard_file_name(&self.prefix, i as u32, n), d))
            .collect();
        (t.finish(), files)
    }

    /// (index bytes, shard files by base name).
    pub fn finish(self) -> (Vec<u8>, HashMap<String, Arc<dyn ReadAt>>) {
        let (index, data) = self.finish_bytes();
        let files = data
            .into_iter()
            .map(|(name, d)| {
                let src: Arc<dyn ReadAt> = Arc::new(MemSource::new(name.clone(), d));
                (name, src)
            })
            .collect();
        (index, files)
    }

    /// Writes `<dir>/<prefix>.index` and the data files; returns the prefix path.
    pub fn write_to_dir(self, dir: &Path) -> std::io::Result<PathBuf> {
        let prefix = dir.join(&self.prefix);
        let index_path = dir.join(format!("{}.index", self.prefix));
        let (index, data) = self.finish_bytes();
        std::fs::write(index_path, index)?;
        for (name, d) in data {
            std::fs::write(dir.join(name), d)?;
        }
        Ok(prefix)
    }
}
