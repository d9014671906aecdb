//! Writing a LevelDB table (formats/tf-checkpoint.md §3) the way LevelDB's `TableBuilder`
//! does, plus options TF lacks (Snappy blocks, small blocks): the TF writer, the `.tf/` view
//! and the tests build checkpoint indexes with it.

use crate::codec::{crc32c_extend, mask_crc, put_varint64};

/// The last 8 bytes of every table: LevelDB's `kTableMagicNumber`, `0xdb4775248b80fb57`
/// little-endian.
pub const TABLE_MAGIC: [u8; 8] = [0x57, 0xfb, 0x80, 0x8b, 0x24, 0x75, 0x47, 0xdb];

/// Builds block contents the way LevelDB's BlockBuilder does.
pub(crate) fn build_block(entries: &[(&[u8], &[u8])], restart_interval: usize) -> Vec<u8> {
    let mut out = Vec::new();
    let mut restarts = Vec::new();
    let mut prev: &[u8] = &[];
    for (i, (k, v)) in entries.iter().enumerate() {
        let shared = if i % restart_interval == 0 {
            restarts.push(out.len() as u32);
            0
        } else {
            prev.iter()
                .zip(k.iter())
                .take_while(|(a, b)| a == b)
                .count()
        };
        put_varint64(&mut out, shared as u64);
        put_varint64(&mut out, (k.len() - shared) as u64);
        put_varint64(&mut out, v.len() as u64);
        out.extend_from_slice(&k[shared..]);
        out.extend_from_slice(v);
        prev = k;
    }
    if restarts.is_empty() {
        restarts.push(0);
    }
    for r in &restarts {
        out.extend_from_slice(&r.to_le_bytes());
    }
    out.extend_from_slice(&(restarts.len() as u32).to_le_bytes());
    out
}

/// Shortest separator between `last` and `next` (§3.4).
pub(crate) fn separator(last: &[u8], next: &[u8]) -> Vec<u8> {
    let p = last.iter().zip(next).take_while(|(a, b)| a == b).count();
    if p < last.len() && p < next.len() && last[p] < 0xff && last[p] + 1 < next[p] {
        let mut s = last[..p].to_vec();
        s.push(last[p] + 1);
        return s;
    }
    last.to_vec()
}

/// Short successor of the last key (§3.4).
pub(crate) fn successor(last: &[u8]) -> Vec<u8> {
    for (i, &b) in last.iter().enumerate() {
        if b != 0xff {
            let mut s = last[..i].to_vec();
            s.push(b + 1);
            return s;
        }
    }
    last.to_vec()
}

pub struct TableBuilder {
    pub block_size: usize,
    pub snappy: bool,
    out: Vec<u8>,
    pending: Vec<(Vec<u8>, Vec<u8>)>,
    pending_bytes: usize,
    index: Vec<(Vec<u8>, Vec<u8>)>,
    last_block_last_key: Option<Vec<u8>>,
}

impl TableBuilder {
    pub fn new(block_size: usize, snappy: bool) -> Self {
        TableBuilder {
            block_size,
            snappy,
            out: Vec::new(),
            pending: Vec::new(),
            pending_bytes: 0,
            index: Vec::new(),
            last_block_last_key: None,
        }
    }

    fn write_raw_block(&mut self, contents: &[u8], compress: bool) -> Vec<u8> {
        let (stored, ty) = if compress {
            (
                snap::raw::Encoder::new().compress_vec(contents).unwrap(),
                1u8,
            )
        } else {
            (contents.to_vec(), 0u8)
        };
        let mut handle = Vec::new();
        put_varint64(&mut handle, self.out.len() as u64);
        put_varint64(&mut handle, stored.len() as u64);
        self.out.extend_from_slice(&stored);
        self.out.push(ty);
        let crc = mask_crc(crc32c_extend(crc32c_extend(0, &stored), &[ty]));
        self.out.extend_from_slice(&crc.to_le_bytes());
        handle
    }

    fn flush(&mut self, next_key: Option<&[u8]>) {
        if self.pending.is_empty() {
            return;
        }
        let refs: Vec<(&[u8], &[u8])> =
            self.pending.iter().map(|(k, v)| (&k[..], &v[..])).collect();
        let contents = build_block(&refs, 16);
        let handle = self.write_raw_block(&contents, self.snappy);
        let last = self.pending.last().unwrap().0.clone();
        let sep = match next_key {
            Some(n) => separator(&last, n),
            None => successor(&last),
        };
        self.index.push((sep, handle));
        self.last_block_last_key = Some(last);
        self.pending.clear();
        self.pending_bytes = 0;
    }

    pub fn add(&mut self, key: &[u8], value: &[u8]) {
        if self.pending_bytes >= self.block_size {
            self.flush(Some(key));
        }
        self.pending_bytes += key.len() + value.len() + 3;
        self.pending.push((key.to_vec(), value.to_vec()));
    }

    pub fn finish(mut self) -> Vec<u8> {
        self.flush(None);
        let meta = self.write_raw_block(&[0, 0, 0, 0, 1, 0, 0, 0], false);
        let refs: Vec<(&[u8], &[u8])> = self.index.iter().map(|(k, v)| (&k[..], &v[..])).collect();
        let index_contents = build_block(&refs, 1);
        let index = self.write_raw_block(&index_contents, false);
        let mut footer = meta;
        footer.extend_from_slice(&index);
        footer.resize(40, 0);
        footer.extend_from_slice(&TABLE_MAGIC);
        self.out.extend_from_slice(&footer);
        self.out
    }
}
