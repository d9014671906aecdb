//! `modelfs format-rate SOURCE PATH` (hidden, for `scripts/bench.sh`): formats every value of
//! the float32 tensor behind file PATH with the `txt` layout's formatter
//! (`layout::num::write_f32_py` + newline), on one thread, in process, and prints
//! `values=N bytes=B seconds=S`. It is the baseline that the FUSE `txt` path is measured
//! against: same values, same formatter, no file system, no parallelism.

use std::path::Path;
use std::time::Instant;

use crate::fs::listing::NodeKind;
use crate::layout::num::write_f32_py;
use crate::layout::text::CHUNK_ELEMENTS;
use crate::model::DType;
use crate::options::Options;

use super::{build_tree, Failure, EXIT_SOURCE, EXIT_USAGE};

pub fn format_rate(source: &Path, path: &[u8], opts: &Options) -> Result<(), Failure> {
    let tree = build_tree(source, opts)?;
    let shown = String::from_utf8_lossy(path).into_owned();
    let fail = |status, m: String| Failure::new(status, format!("{shown}: {m}"));
    let ino = tree
        .resolve(path)
        .map_err(|e| fail(EXIT_USAGE, e.to_string()))?;
    let node = tree
        .node(ino)
        .map_err(|e| fail(EXIT_USAGE, e.to_string()))?;
    let NodeKind::File {
        tensor, partition, ..
    } = &node.kind
    else {
        return Err(fail(EXIT_USAGE, "not a tensor file".into()));
    };
    let model = super::open_model(source, opts)?;
    let mut t = model
        .tensor(tensor)
        .map_err(|e| fail(EXIT_SOURCE, e.to_string()))?;
    if let Some(i) = partition {
        t = t
            .partition(*i)
            .map_err(|e| fail(EXIT_SOURCE, e.to_string()))?;
    }
    if t.meta().dtype != DType::F32 || t.meta().sparse {
        return Err(fail(EXIT_USAGE, "not a dense float32 tensor".into()));
    }
    let n = t.meta().num_elements().unwrap_or(0);
    let mut raw = vec![0u8; CHUNK_ELEMENTS as usize * 4];
    let mut out = Vec::with_capacity(CHUNK_ELEMENTS as usize * 16);
    let mut bytes = 0u64;
    let started = Instant::now();
    let mut first = 0u64;
    while first < n {
        let count = (n - first).min(CHUNK_ELEMENTS) as usize;
        let buf = &mut raw[..count * 4];
        t.read_elements(first, buf)
            .map_err(|e| fail(EXIT_SOURCE, e.to_string()))?;
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
    Ok(())
}
