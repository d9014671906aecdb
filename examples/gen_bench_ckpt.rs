//! Writes a large TensorFlow checkpoint for `scripts/bench.sh`, streaming: values are
//! generated, checksummed and written a megabyte at a time, so a 4 GiB checkpoint needs a few
//! megabytes of memory. The index is a LevelDB table laid out as TF's `BundleWriter` writes
//! it (256 KiB blocks, restart interval 16, prefix-compressed keys, no compression), so
//! TensorFlow itself reads the result (`tf.train.list_variables`, `load_checkpoint`).
//!
//! ```text
//! gen_bench_ckpt PREFIX TENSORS ROWS COLS [DIR_FANOUT]
//! ```
//! writes `PREFIX.index` and `PREFIX.data-00000-of-00001` holding TENSORS float32 tensors of
//! shape [ROWS, COLS] (COLS only when ROWS is 1). One tensor is called `W`; several are
//! `block_NNN/layer_NNN/kernel`, DIR_FANOUT (default 100) per directory. Values are
//! pseudo-random weights in (-0.25, 0.25), fixed by the tensor's index (and `GEN_SEED`, 0 when
//! unset: another seed gives other values of the same shapes).

use std::fs::File;
use std::io::{BufWriter, Write};

use modelfs_io::codec::{crc32c_extend, mask_crc, put_varint64};
use modelfs_tf::proto::{BundleEntryProto, BundleHeaderProto, Dim, TensorShapeProto, VersionDef};
use prost::Message;

const BLOCK_SIZE: usize = 256 * 1024;
const RESTART_INTERVAL: usize = 16;
const TABLE_MAGIC: u64 = 0xdb4775248b80fb57;

/// A LevelDB block being built.
#[derive(Default)]
struct Block {
    buf: Vec<u8>,
    restarts: Vec<u32>,
    count: usize,
    last_key: Vec<u8>,
}

impl Block {
    fn add(&mut self, key: &[u8], value: &[u8]) {
        let shared = if self.count % RESTART_INTERVAL == 0 {
            self.restarts.push(self.buf.len() as u32);
            0
        } else {
            self.last_key
                .iter()
                .zip(key)
                .take_while(|(a, b)| a == b)
                .count()
        };
        put_varint64(&mut self.buf, shared as u64);
        put_varint64(&mut self.buf, (key.len() - shared) as u64);
        put_varint64(&mut self.buf, value.len() as u64);
        self.buf.extend_from_slice(&key[shared..]);
        self.buf.extend_from_slice(value);
        self.last_key = key.to_vec();
        self.count += 1;
    }

    fn finish(&mut self) -> Vec<u8> {
        let mut out = std::mem::take(&mut self.buf);
        if self.restarts.is_empty() {
            self.restarts.push(0);
        }
        for r in &self.restarts {
            out.extend_from_slice(&r.to_le_bytes());
        }
        out.extend_from_slice(&(self.restarts.len() as u32).to_le_bytes());
        self.restarts.clear();
        self.count = 0;
        out
    }
}

/// A LevelDB table written to a file as entries arrive (keys in ascending order).
struct TableWriter {
    out: BufWriter<File>,
    offset: u64,
    data: Block,
    index: Block,
}

impl TableWriter {
    fn new(path: &str) -> std::io::Result<Self> {
        Ok(TableWriter {
            out: BufWriter::with_capacity(1 << 20, File::create(path)?),
            offset: 0,
            data: Block::default(),
            index: Block::default(),
        })
    }

    /// Writes block contents plus the trailer (type 0, masked CRC); returns its handle.
    fn write_block(&mut self, contents: &[u8]) -> std::io::Result<Vec<u8>> {
        let crc = mask_crc(crc32c_extend(crc32c_extend(0, contents), &[0]));
        self.out.write_all(contents)?;
        self.out.write_all(&[0])?;
        self.out.write_all(&crc.to_le_bytes())?;
        let mut handle = Vec::new();
        put_varint64(&mut handle, self.offset);
        put_varint64(&mut handle, contents.len() as u64);
        self.offset += contents.len() as u64 + 5;
        Ok(handle)
    }

    fn flush_data(&mut self) -> std::io::Result<()> {
        if self.data.count == 0 {
            return Ok(());
        }
        let last = self.data.last_key.clone();
        let contents = self.data.finish();
        let handle = self.write_block(&contents)?;
        self.index.add(&last, &handle);
        Ok(())
    }

    fn add(&mut self, key: &[u8], value: &[u8]) -> std::io::Result<()> {
        self.data.add(key, value);
        if self.data.buf.len() >= BLOCK_SIZE {
            self.flush_data()?;
        }
        Ok(())
    }

    fn finish(mut self) -> std::io::Result<()> {
        self.flush_data()?;
        let meta = Block::default().finish();
        let meta_handle = self.write_block(&meta)?;
        let index = self.index.finish();
        let index_handle = self.write_block(&index)?;
        let mut footer = Vec::with_capacity(48);
        footer.extend_from_slice(&meta_handle);
        footer.extend_from_slice(&index_handle);
        footer.resize(40, 0);
        footer.extend_from_slice(&TABLE_MAGIC.to_le_bytes());
        self.out.write_all(&footer)?;
        self.out.flush()
    }
}

/// xorshift64*: fast, deterministic, good enough for benchmark values.
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9E3779B97F4A7C15) | 1)
    }
    fn next_f32(&mut self) -> f32 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        let r = self.0.wrapping_mul(0x2545F4914F6CDD1D);
        // 24 random bits → (-0.25, 0.25), like trained weights (about 9 significant digits).
        ((r >> 40) as f32 / (1u64 << 24) as f32 - 0.5) * 0.5
    }
}

fn main() -> std::io::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    if args.len() < 5 {
        eprintln!("usage: gen_bench_ckpt PREFIX TENSORS ROWS COLS [DIR_FANOUT]");
        std::process::exit(1);
    }
    let prefix = &args[1];
    let num: u64 = args[2].parse().expect("TENSORS");
    let rows: u64 = args[3].parse().expect("ROWS");
    let cols: u64 = args[4].parse().expect("COLS");
    let fanout: u64 = args.get(5).map_or(100, |s| s.parse().expect("DIR_FANOUT"));
    let shape: Vec<u64> = if rows == 1 {
        vec![cols]
    } else {
        vec![rows, cols]
    };
    let elements = rows * cols;

    let mut keys: Vec<(String, u64)> = (0..num)
        .map(|i| {
            let name = if num == 1 {
                "W".to_string()
            } else {
                format!("block_{:03}/layer_{:03}/kernel", i / fanout, i % fanout)
            };
            (name, i)
        })
        .collect();
    keys.sort();

    let data_path = format!("{prefix}.data-00000-of-00001");
    let mut data = BufWriter::with_capacity(4 << 20, File::create(&data_path)?);
    let mut table = TableWriter::new(&format!("{prefix}.index"))?;
    let header = BundleHeaderProto {
        num_shards: 1,
        endianness: 0,
        version: Some(VersionDef {
            producer: 1,
            min_consumer: 0,
            bad_consumers: vec![],
        }),
    };
    table.add(b"", &header.encode_to_vec())?;

    let mut offset = 0u64;
    let mut buf: Vec<u8> = Vec::with_capacity(1 << 20);
    for (name, seed) in &keys {
        // GEN_SEED moves every value (a "later step" of the same model, for `diff`).
        let shift: u64 = std::env::var("GEN_SEED")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(0);
        let mut rng = Rng::new(seed + 1 + shift * 1_000_003);
        let mut crc = 0u32;
        let mut left = elements;
        while left > 0 {
            let n = left.min(256 * 1024);
            buf.clear();
            for _ in 0..n {
                buf.extend_from_slice(&rng.next_f32().to_le_bytes());
            }
            crc = crc32c_extend(crc, &buf);
            data.write_all(&buf)?;
            left -= n;
        }
        let size = elements * 4;
        let entry = BundleEntryProto {
            dtype: 1,
            shape: Some(TensorShapeProto {
                dim: shape
                    .iter()
                    .map(|&d| Dim {
                        size: d as i64,
                        name: String::new(),
                    })
                    .collect(),
                unknown_rank: false,
            }),
            shard_id: 0,
            offset: offset as i64,
            size: size as i64,
            crc32c: mask_crc(crc),
            slices: vec![],
        };
        table.add(name.as_bytes(), &entry.encode_to_vec())?;
        offset += size;
    }
    data.flush()?;
    table.finish()?;
    Ok(())
}
