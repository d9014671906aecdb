//! Benchmark baseline: the single-threaded rate of formatting a float32 tensor's values the way
//! `.txt` writes them (`layout::num::write_f32_py` + newline), in one thread, into a buffer.
//!
//! `format_rate PREFIX KEY` prints `values=N bytes=B seconds=S` (used by scripts/bench.sh).

use std::path::PathBuf;
use std::time::Instant;

use modelfs_io::source::ReadCtx;
use modelfs_layout::num::write_f32_py;
use modelfs_model::{DType, ReaderOptions};

/// Values formatted per batch (one read, one buffer).
const BATCH: usize = 1 << 16;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let [_, source, key] = &args[..] else {
        eprintln!("usage: format_rate SOURCE KEY");
        std::process::exit(1);
    };
    let opts = ReaderOptions {
        verify: false,
        ..ReaderOptions::default()
    };
    let model = modelfs_detect::model_at(&PathBuf::from(source), &opts).unwrap_or_else(|e| {
        eprintln!("{e}");
        std::process::exit(2)
    });
    let path: Vec<Vec<u8>> = key.split('/').map(|c| c.as_bytes().to_vec()).collect();
    let t = model.tensor(&path).expect("tensor");
    assert!(
        t.meta().dtype == DType::F32 && !t.meta().sparse,
        "not a dense float32 tensor"
    );
    let n = t.meta().num_elements().unwrap_or(0);
    let mut raw = vec![0u8; BATCH * 4];
    let mut out = Vec::with_capacity(BATCH * 16);
    let (mut bytes, mut first) = (0u64, 0u64);
    let started = Instant::now();
    while first < n {
        let count = (n - first).min(BATCH as u64) as usize;
        let buf = &mut raw[..count * 4];
        t.read_elements(ReadCtx::none(), first, buf).expect("read");
        out.clear();
        for b in buf.chunks_exact(4) {
            write_f32_py(f32::from_le_bytes([b[0], b[1], b[2], b[3]]), &mut out);
            out.push(b'\n');
        }
        bytes += out.len() as u64;
        first += count as u64;
    }
    let secs = started.elapsed().as_secs_f64();
    println!("values={n} bytes={bytes} seconds={secs:.6}");
}
