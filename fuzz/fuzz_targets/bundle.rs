#![no_main]
//! A whole bundle: input = `u32 LE index length ‖ index bytes ‖ data file bytes` (see
//! `seed.sh`). The data bytes are shard 0 of 1 (and, for bundles claiming two shards, shard 1
//! is the same bytes). Opens the model, lists the tree recursively and reads every tensor in
//! small ranges: numbers, strings, partitions.

use std::collections::HashMap;
use std::sync::Arc;

use libfuzzer_sys::fuzz_target;
use modelfs_model::{DirEntry, Model, Tensor};
use modelfs_io::source::{MemSource, ReadAt, ReadCtx};
use modelfs_tf::bundle::{shard_file_name, MemShards};
use modelfs_tf::checkpoint::TfModel;
use modelfs_io::codec::table::{BlockCache, Table};

const PREFIX: &str = "fuzz";

fn read_tensor(t: &dyn Tensor, budget: &mut usize) {
    let meta = t.meta();
    let ctx = ReadCtx::none();
    let n = meta.num_elements().unwrap_or(0);
    if let Some(elem) = meta.dtype.elem_size() {
        let mut buf = vec![0u8; elem * 8];
        let mut first = 0u64;
        while first < n && *budget > 0 {
            let k = (n - first).min(8) as usize;
            if t.read_elements(ctx, first, &mut buf[..k * elem]).is_err() {
                break;
            }
            first += k as u64;
            *budget -= 1;
        }
        let _ = t.read_elements(ctx, n.saturating_sub(1), &mut buf[..elem]);
        let _ = t.read_elements(ctx, n, &mut buf[..elem]);
    } else {
        let mut total = 0usize;
        let _ = t.for_each_string(ctx, 0, n.min(64), &mut |s| total += s.len());
        let _ = t.for_each_string(ctx, n.saturating_sub(2), 2, &mut |s| total += s.len());
        let _ = t.for_each_string(ctx, n, 1, &mut |s| total += s.len());
    }
    for i in 0..meta.partitions.len().min(8) {
        if let Ok(p) = t.partition(i) {
            read_tensor(&*p, budget);
        }
    }
}

fn walk(model: &dyn Model, dir: &mut Vec<Vec<u8>>, budget: &mut usize, depth: usize) {
    if depth > 16 {
        return;
    }
    let Ok(entries) = model.list_dir(dir) else {
        return;
    };
    for e in entries {
        if *budget == 0 {
            return;
        }
        *budget -= 1;
        match e {
            DirEntry::Dir(name) => {
                dir.push(name);
                walk(model, dir, budget, depth + 1);
                dir.pop();
            }
            DirEntry::Tensor(name) => {
                dir.push(name);
                if let Ok(t) = model.tensor(dir) {
                    read_tensor(&*t, budget);
                }
                dir.pop();
            }
            DirEntry::Symlink { .. }
            | DirEntry::Document(_)
            | DirEntry::Alias { .. }
            | DirEntry::Reserved(_) => {}
        }
    }
}

fuzz_target!(|input: &[u8]| {
    if input.len() < 4 {
        return;
    }
    let n = u32::from_le_bytes(input[..4].try_into().unwrap()) as usize;
    let rest = &input[4..];
    let (index, data) = rest.split_at(n.min(rest.len()));
    let file = Arc::new(MemSource::new("fuzz.index", index.to_vec()));
    let Ok(table) = Table::open(file, Arc::new(BlockCache::new(1 << 20))) else {
        return;
    };
    let data: Arc<dyn ReadAt> = Arc::new(MemSource::new("fuzz.data", data.to_vec()));
    let mut files: HashMap<String, Arc<dyn ReadAt>> = HashMap::new();
    files.insert(shard_file_name(PREFIX, 0, 1), Arc::clone(&data));
    for i in 0..2 {
        files.insert(shard_file_name(PREFIX, i, 2), Arc::clone(&data));
    }
    let Ok(model) = TfModel::from_table(table, PREFIX.into(), Box::new(MemShards(files)), true)
    else {
        return;
    };
    let _ = model.summary();
    let mut budget = 2000;
    walk(&model, &mut Vec::new(), &mut budget, 0);
});
