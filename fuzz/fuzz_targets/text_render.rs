#![no_main]
//! Every layout (txt, csv, json, bin, npy, libsvm and the eight Angel formats) over an
//! in-memory tensor built from the input: dense (any fixed-size dtype, rank ≤ 4), strings or
//! sparse rows. Checks `size()` equals the bytes served, reads in odd pieces agree with one
//! whole read, and a read at the end returns nothing.
//!
//! Input: `kind/dtype byte ‖ rank byte ‖ dims ‖ separator byte ‖ flags byte ‖ payload`.

use std::sync::Arc;

use libfuzzer_sys::fuzz_target;
use modelfs_layout::cache::ChunkCache;
use modelfs_model::testing::MemTensor;
use modelfs_layout::{Layout, LayoutCtx};
use modelfs_model::{DType, SparseRows, Tensor};

const DTYPES: [DType; 22] = [
    DType::F16,
    DType::BF16,
    DType::F32,
    DType::F64,
    DType::I8,
    DType::I16,
    DType::I32,
    DType::I64,
    DType::U8,
    DType::U16,
    DType::U32,
    DType::U64,
    DType::Bool,
    DType::C64,
    DType::C128,
    DType::QInt8,
    DType::QUInt16,
    DType::Int4,
    DType::UInt2,
    DType::Float8(24),
    DType::Str,
    DType::Variant,
];

const SEPS: [&str; 4] = [",", " ", "\t", "::"];

/// Largest file read whole.
const MAX_READ: u64 = 4 << 20;

fn build(input: &[u8]) -> Option<(Arc<dyn Tensor>, String, u8)> {
    let (&kind, rest) = input.split_first()?;
    let (&rank, rest) = rest.split_first()?;
    let rank = (rank % 5) as usize;
    if rest.len() < rank + 2 {
        return None;
    }
    let shape: Vec<u64> = rest[..rank].iter().map(|&d| u64::from(d % 16)).collect();
    let sep = SEPS[(rest[rank] % 4) as usize].to_string();
    let flags = rest[rank + 1];
    let payload = &rest[rank + 2..];
    let n: u64 = shape.iter().product();
    if n > 4096 {
        return None;
    }
    let dtype = DTYPES[(kind as usize) % DTYPES.len()];
    let t = if kind >= 0xC0 {
        // Sparse rows × cols, entries (row, col, value) from the payload, made valid CSR.
        let vt = [DType::F32, DType::F64, DType::I32, DType::I64][(kind % 4) as usize];
        let es = vt.elem_size()?;
        let rows = u64::from(flags % 16) + 1;
        let cols = if flags & 0x80 != 0 {
            1 << 40
        } else {
            u64::from(flags % 32) + 1
        };
        let mut entries: Vec<(u64, i64, &[u8])> = payload
            .chunks_exact(3 + es)
            .take(2000)
            .map(|c| {
                let r = u64::from(c[0]) % rows;
                let col = (u64::from(u16::from_le_bytes([c[1], c[2]])) * 7919) % cols.min(1 << 20);
                (r, col as i64, &c[3..])
            })
            .collect();
        entries.sort_by_key(|e| (e.0, e.1));
        entries.dedup_by_key(|e| (e.0, e.1));
        let mut s = SparseRows::default();
        s.row_ptr.push(0);
        for (r, c, v) in entries {
            if s.rows.last() != Some(&r) {
                if !s.rows.is_empty() {
                    s.row_ptr.push(s.cols.len() as u64);
                }
                s.rows.push(r);
            }
            s.cols.push(c);
            s.values.extend_from_slice(v);
        }
        if !s.rows.is_empty() {
            s.row_ptr.push(s.cols.len() as u64);
        }
        MemTensor::sparse(vt, rows, cols, s)
    } else if matches!(dtype, DType::Str | DType::Variant) {
        let mut strings: Vec<Vec<u8>> = payload.split(|&b| b == 0xff).map(<[u8]>::to_vec).collect();
        strings.resize(n as usize, Vec::new());
        let mut t = MemTensor::strings(&shape, strings);
        t.meta.dtype = dtype;
        t
    } else {
        let es = dtype.elem_size()?;
        let mut data = payload.to_vec();
        data.resize(n as usize * es, 0);
        MemTensor::new(dtype, &shape, data)
    };
    let t = if flags & 0x40 != 0 && kind < 0xC0 {
        t.failing("fuzz: reads fail")
    } else {
        t
    };
    Some((t.arc(), sep, flags))
}

fuzz_target!(|input: &[u8]| {
    let Some((tensor, sep, flags)) = build(input) else {
        return;
    };
    let ctx = Arc::new(LayoutCtx {
        sep,
        max_dense: if flags & 0x20 != 0 { 1 << 10 } else { 1 << 24 },
        layouts: Layout::all(),
        sparse_default: false,
        cache: Arc::new(ChunkCache::new(1 << 20).with_threads(1)),
        rows: Arc::new(ChunkCache::new(1 << 20).with_threads(1)),
        angel_format: None,
        faults: Default::default(),
    });
    let mut piece = 1 + usize::from(flags % 13) * 37;
    for &l in &ctx.layouts {
        let Ok(file) = modelfs_layout::content(l, Arc::clone(&tensor), &ctx) else {
            continue;
        };
        let Ok(size) = file.size() else {
            continue;
        };
        if size > MAX_READ {
            let mut buf = [0u8; 64];
            let _ = file.read_at(size - 1, &mut buf);
            continue;
        }
        let mut whole = vec![0u8; size as usize + 7];
        let Ok(got) = file.read_at(0, &mut whole) else {
            continue;
        };
        assert_eq!(
            got as u64,
            size,
            "{}: one read gives {got} of {size} bytes",
            l.suffix()
        );
        whole.truncate(got);
        assert_eq!(
            file.read_at(size, &mut [0u8; 8]).ok(),
            Some(0),
            "{}: read at end",
            l.suffix()
        );
        let mut off = 0usize;
        let mut buf = vec![0u8; 4096];
        while off < whole.len() {
            let want = piece.min(buf.len());
            let Ok(n) = file.read_at(off as u64, &mut buf[..want]) else {
                break;
            };
            assert!(n > 0, "{}: short read at {off} of {size}", l.suffix());
            assert_eq!(
                &buf[..n],
                &whole[off..off + n],
                "{}: bytes at {off} differ",
                l.suffix()
            );
            off += n;
            piece = piece * 5 % 4093 + 1;
        }
    }
});
