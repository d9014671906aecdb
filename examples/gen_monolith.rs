//! Writes Monolith hash-table dump shards (formats/monolith.md) for tests and
//! `scripts/bench.sh`, streaming (a few MB of memory whatever N):
//!
//! ```text
//! gen_monolith DIR TABLE N DIM SHARDS [next]
//! ```
//! writes `DIR/TABLE-NNNNN-of-NNNNN` holding N entries of DIM float32 values, ids
//! `slot << 48 | fid` (slots 0..63), each entry in the shard its id hashes to, and
//! `DIR/TABLE.samples.json`: 200 ids with their values (the reference the reads are checked on).
//!
//! `next`: the table's next save (`diff --rows`, bench target 15): entry `i` is left out when
//! `i % 1000 == 5` (removed), has value `i % DIM` raised by 0.25 when `i % 100 == 1` (changed),
//! and N/1000 entries follow with new ids (added); `DIR/../TABLE.truth` lists each such id
//! and what happened to it (`id<TAB>removed|changed|added`).

use std::fs::File;
use std::io::{BufWriter, Write};

use modelfs_monolith::{write_entry, write_record};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let (dir, table, n, dim, shards, next) = match &args[..] {
        [_, d, t, n, dim, s] => (d, t, n, dim, s, false),
        [_, d, t, n, dim, s, x] if x == "next" => (d, t, n, dim, s, true),
        _ => {
            eprintln!("usage: gen_monolith DIR TABLE N DIM SHARDS [next]");
            std::process::exit(1);
        }
    };
    let (n, dim, shards): (u64, usize, usize) = (
        n.parse().unwrap(),
        dim.parse().unwrap(),
        shards.parse().unwrap(),
    );
    std::fs::create_dir_all(dir).unwrap();
    let mut files: Vec<BufWriter<File>> = (0..shards)
        .map(|k| {
            let p = format!("{dir}/{table}-{k:05}-of-{shards:05}");
            BufWriter::with_capacity(1 << 20, File::create(p).unwrap())
        })
        .collect();
    let mut samples = Vec::new();
    let (mut e, mut r, mut v) = (Vec::new(), Vec::new(), vec![0f32; dim]);
    let mut x = 0x2545_f491_4f6c_dd1du64;
    let mut truth = String::new();
    let total = if next { n + n / 1000 } else { n };
    for i in 0..total {
        let slot = (i % 64) as i64;
        let id = (slot << 48) | ((i.wrapping_mul(2_654_435_761)) & ((1 << 48) - 1)) as i64;
        for val in v.iter_mut() {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            *val = (x >> 40) as f32 / (1u64 << 24) as f32 - 0.5;
        }
        if next && i < n && i % 1000 == 5 {
            truth.push_str(&format!("{id}\tremoved\n"));
            continue;
        }
        if next && i < n && i % 100 == 1 {
            v[i as usize % dim] += 0.25;
            truth.push_str(&format!("{id}\tchanged\n"));
        }
        if i >= n {
            truth.push_str(&format!("{id}\tadded\n"));
        }
        e.clear();
        r.clear();
        write_entry(id, &v, i % 3 != 0, &mut e);
        write_record(&e, &mut r);
        let k = (id as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) as usize % shards;
        files[k].write_all(&r).unwrap();
        if i % (n / 200).max(1) == 0 && samples.len() < 200 {
            samples.push(format!("\"{id}\": {:?}", v));
        }
    }
    for mut f in files {
        f.flush().unwrap();
    }
    if next {
        std::fs::write(format!("{dir}/../{table}.truth"), truth).unwrap();
    }
    let json = format!("{{{}}}\n", samples.join(", "));
    std::fs::write(format!("{dir}/../{table}.samples.json"), json).unwrap();
}
