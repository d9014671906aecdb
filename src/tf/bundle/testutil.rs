//! Test helper: writes bundles the way TF's `BundleWriter` does (plus options TF lacks:
//! big-endian, Snappy blocks, small blocks).

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use crate::source::{MemSource, ReadAt};
use crate::tf::coding::{crc32c_extend, mask_crc, put_varint64};
use crate::tf::table::testutil::TableBuilder;

fn field_varint(out: &mut Vec<u8>, field: u32, v: u64) {
    put_varint64(out, u64::from(field << 3));
    put_varint64(out, v);
}

fn field_bytes(out: &mut Vec<u8>, field: u32, b: &[u8]) {
    put_varint64(out, u64::from(field << 3 | 2));
    put_varint64(out, b.len() as u64);
    out.extend_from_slice(b);
}

pub fn shape_proto(shape: &[u64]) -> Vec<u8> {
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
        let offset = file.len();
        file.extend_from_slice(data);
        let mut e = Vec::new();
        field_varint(&mut e, 1, dtype as u64);
        field_bytes(&mut e, 2, &shape_proto(shape));
        if shard != 0 {
            field_varint(&mut e, 3, shard as u64);
        }
        if offset != 0 {
            field_varint(&mut e, 4, offset as u64);
        }
        if !data.is_empty() {
            field_varint(&mut e, 5, data.len() as u64);
        }
        e.push(0x35);
        e.extend_from_slice(&crc.to_le_bytes());
        self.entries.insert(key.to_vec(), e);
    }

    /// Adds a fixed-size tensor from little-endian element bytes (`width` = swap unit).
    pub fn add_fixed(&mut self, key: &[u8], dtype: i32, shape: &[u64], le: &[u8], width: usize) {
        let mut stored = le.to_vec();
        if self.big_endian {
            crate::tf::dtype::swap_in_place(&mut stored, width);
        }
        let crc = mask_crc(crc32c_extend(0, &stored));
        self.add_raw(key, dtype, shape, 0, &stored, crc);
    }

    pub fn add_f32(&mut self, key: &[u8], shape: &[u64], values: &[f32]) {
        let le: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
        self.add_fixed(key, 1, shape, &le, 4);
    }

    pub fn add_strings(&mut self, key: &[u8], shape: &[u64], items: &[&[u8]]) {
        let (data, crc) = crate::tf::bundle::varlen::tests::encode_strings(items, self.big_endian);
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
            let skey = crate::tf::ordered_code::slice_key(key, &proto);
            let lens: Vec<u64> = ext.iter().map(|e| e.1).collect();
            let le: Vec<u8> = vals.iter().flat_map(|v| v.to_le_bytes()).collect();
            self.add_fixed(&skey, 1, &lens, &le, 4);
        }
        self.entries.insert(key.to_vec(), e);
    }

    pub fn add_entry_bytes(&mut self, key: &[u8], entry: Vec<u8>) {
        self.entries.insert(key.to_vec(), entry);
    }

    pub fn header(&self) -> Vec<u8> {
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

    /// (index bytes, shard files by base name).
    pub fn finish(self) -> (Vec<u8>, HashMap<String, Arc<dyn ReadAt>>) {
        let mut t = TableBuilder::new(self.block_size, self.snappy);
        t.add(b"", &self.header());
        for (k, v) in &self.entries {
            t.add(k, v);
        }
        let n = self.num_shards.max(self.data.len() as u32);
        let mut files: HashMap<String, Arc<dyn ReadAt>> = HashMap::new();
        for (i, d) in self.data.into_iter().enumerate() {
            let name = crate::tf::bundle::shard_file_name(&self.prefix, i as u32, n);
            files.insert(name.clone(), Arc::new(MemSource::new(name, d)));
        }
        (t.finish(), files)
    }
}
