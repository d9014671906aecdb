//! Cross-layout tests: exact sizes, any-offset reads, numpy-identical `.npy`, text content.

use std::sync::Arc;

use super::cache::ChunkCache;
use super::*;
use crate::model::{DType, SparseRows};
use crate::source::ReadCtx;
use crate::testing::MemTensor;

/// The content of `layout`, `None` when it cannot show the tensor.
fn open(layout: Layout, t: Arc<dyn Tensor>, ctx: &Arc<LayoutCtx>) -> Option<Arc<dyn FileContent>> {
    content(layout, t, ctx).ok()
}

fn ctx_with(layouts: Vec<Layout>, max_dense: u64) -> Arc<LayoutCtx> {
    Arc::new(LayoutCtx {
        max_dense,
        ..LayoutCtx::new(layouts, ChunkCache::new(64 << 20).with_threads(2))
    })
}

fn ctx() -> Arc<LayoutCtx> {
    ctx_with(Layout::GENERIC.to_vec(), 1 << 30)
}

/// The whole file through one read, after checking `size` matches what is read.
fn full(c: &dyn FileContent) -> Vec<u8> {
    let size = c.size().unwrap() as usize;
    let mut buf = vec![0u8; size + 10];
    let n = c.read_at(0, &mut buf).unwrap();
    assert_eq!(n, size, "size() disagrees with the bytes read");
    buf.truncate(n);
    buf
}

fn text(l: Layout, t: Arc<dyn crate::model::Tensor>) -> String {
    let c = open(l, t, &ctx()).expect("layout available");
    String::from_utf8(full(&*c)).unwrap()
}

/// Pseudo-random offsets and lengths, compared with slices of the full content.
fn check_random_reads(c: &dyn FileContent, whole: &[u8]) {
    let mut x = 0x9e3779b97f4a7c15u64;
    for _ in 0..60 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let off = (x % (whole.len() as u64 + 3)) as usize;
        let len = ((x >> 20) % 5000) as usize;
        let mut buf = vec![0u8; len];
        let n = c.read_at(off as u64, &mut buf).unwrap();
        let end = (off + len).min(whole.len()).max(off.min(whole.len()));
        assert_eq!(
            &buf[..n],
            &whole[off.min(whole.len())..end],
            "read at {off}+{len}"
        );
    }
}

fn le<T: Copy, const N: usize>(v: &[T], f: fn(T) -> [u8; N]) -> Vec<u8> {
    v.iter().flat_map(|&x| f(x)).collect()
}

fn npy_cases() -> Vec<(&'static str, MemTensor)> {
    let f16 = |x: f32| half::f16::from_f32(x).to_le_bytes();
    vec![
        (
            "f32_3x4",
            MemTensor::f32(
                &[3, 4],
                &(0..12).map(|i| i as f32 / 4.0).collect::<Vec<_>>(),
            ),
        ),
        ("f64_scalar", MemTensor::f64(&[], &[2.5])),
        (
            "i8_5",
            MemTensor::new(DType::I8, &[5], vec![0xfd, 0xff, 0, 1, 127]),
        ),
        (
            "bool_2x3",
            MemTensor::new(DType::Bool, &[2, 3], vec![1, 0, 1, 0, 0, 1]),
        ),
        (
            "f16_2x2",
            MemTensor::new(DType::F16, &[2, 2], le(&[0.1f32, -2.0, 65504.0, 0.0], f16)),
        ),
        (
            "c64_2",
            MemTensor::new(
                DType::C64,
                &[2],
                le(&[1.0f32, 2.0, -0.5, -1e-5], f32::to_le_bytes),
            ),
        ),
        (
            "bf16_3",
            MemTensor::new(
                DType::BF16,
                &[3],
                le(&[0x3f80u16, 0xbf00, 0x4049], u16::to_le_bytes),
            ),
        ),
        ("u64_0", MemTensor::new(DType::U64, &[0], vec![])),
        ("i32_2x0x3", MemTensor::new(DType::I32, &[2, 0, 3], vec![])),
        (
            "u16_2x3x4",
            MemTensor::new(
                DType::U16,
                &[2, 3, 4],
                le(&(0..24u16).collect::<Vec<_>>(), u16::to_le_bytes),
            ),
        ),
    ]
}

#[test]
fn npy_equals_numpy_save() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/src/testdata/npy");
    for (name, t) in npy_cases() {
        let want = std::fs::read(format!("{dir}/{name}.npy")).unwrap();
        let c = open(Layout::Npy, t.arc(), &ctx()).unwrap();
        let got = full(&*c);
        assert_eq!(got, want, "{name}.npy");
        check_random_reads(&*c, &got);
    }
}

/// `read_into` (a caller's buffer filled straight from the tensor) gives numpy's bytes from
/// every offset, for every length: in the header, across its end, in the elements, past the
/// end of the file.
#[test]
fn npy_read_into_equals_numpy_save_at_every_offset() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/src/testdata/npy");
    for (name, t) in npy_cases() {
        let want = std::fs::read(format!("{dir}/{name}.npy")).unwrap();
        let c = open(Layout::Npy, t.arc(), &ctx()).unwrap();
        for offset in 0..=want.len() + 1 {
            for len in [0, 1, 3, 64, want.len() + 8] {
                let mut buf = vec![0xAAu8; len];
                let got = c.read_into(offset as u64, &mut buf, &Patient).unwrap();
                let end = (offset + len).min(want.len()).max(offset.min(want.len()));
                let expect = &want[offset.min(want.len())..end];
                assert_eq!(&buf[..got], expect, "{name}.npy at {offset}, {len} bytes");
            }
        }
    }
}

#[test]
fn npy_headers_equal_numpy() {
    let lines = include_str!("testdata/npy_headers.txt");
    for line in lines.lines() {
        let f: Vec<&str> = line.split(';').collect();
        let shape: Vec<u64> = if let Some(n) = f[1].strip_prefix("1x") {
            vec![1; n.parse().unwrap()]
        } else {
            f[1].split(',')
                .filter(|s| !s.is_empty())
                .map(|s| s.parse().unwrap())
                .collect()
        };
        let h = binary::npy_header(f[0], &shape);
        let hex: String = h.iter().map(|b| format!("{b:02x}")).collect();
        if f.len() == 4 {
            assert_eq!(&hex[..24], f[2], "v2 prefix");
            assert_eq!(h.len(), f[3].parse::<usize>().unwrap());
        } else {
            assert_eq!(hex, f[2], "{} {:?}", f[0], &shape[..shape.len().min(4)]);
        }
        assert_eq!(h.len() % 64, 0);
    }
}

#[test]
fn txt_csv_libsvm_content() {
    let t = MemTensor::f32(&[2, 3], &[0.5, 0.0, -1e-5, 3.0, 1e16, f32::NAN]).arc();
    assert_eq!(
        text(Layout::Txt, t.clone()),
        "0.5\n0.0\n-1e-05\n3.0\n1e+16\nnan\n"
    );
    assert_eq!(
        text(Layout::Csv, t.clone()),
        "0.5,0.0,-1e-05\n3.0,1e+16,nan\n"
    );
    assert_eq!(
        text(Layout::Libsvm, t),
        "0 0:0.5 2:-1e-05\n1 0:3.0 1:1e+16 2:nan\n"
    );
    let v = MemTensor::i64(&[3], &[0, -7, 0]).arc();
    assert_eq!(text(Layout::Csv, v.clone()), "0\n-7\n0\n");
    assert_eq!(text(Layout::Libsvm, v), "0 1:-7\n");
    let s = MemTensor::f64(&[], &[0.1]).arc();
    assert_eq!(text(Layout::Txt, s.clone()), "0.1\n");
    assert_eq!(text(Layout::Csv, s.clone()), "0.1\n");
    assert_eq!(text(Layout::Libsvm, s), "0 0:0.1\n");
    let z = MemTensor::new(DType::F32, &[3, 0], vec![]).arc();
    assert_eq!(text(Layout::Txt, z.clone()), "");
    assert_eq!(text(Layout::Csv, z.clone()), "\n\n\n");
    assert_eq!(text(Layout::Libsvm, z), "0\n1\n2\n");
    let c = MemTensor::new(DType::C128, &[1], le(&[1.0f64, -2.0], f64::to_le_bytes)).arc();
    assert_eq!(text(Layout::Txt, c), "1.0-2.0j\n");
    let b = MemTensor::new(DType::Bool, &[2, 2], vec![0, 1, 2, 0]).arc();
    assert_eq!(text(Layout::Csv, b.clone()), "0,1\n1,0\n");
    let bin = open(Layout::Bin, b, &ctx()).unwrap();
    assert_eq!(full(&*bin), vec![0, 1, 1, 0]);
    let bf = MemTensor::new(DType::BF16, &[2], vec![0x80, 0x3f, 0xcd, 0x3d]).arc();
    assert_eq!(text(Layout::Txt, bf.clone()), "1.0\n0.1001\n");
    let bin = open(Layout::Bin, bf, &ctx()).unwrap();
    assert_eq!(full(&*bin), vec![0x80, 0x3f, 0xcd, 0x3d]);
}

#[test]
fn strings_in_text_layouts_only() {
    let t = MemTensor::strings(
        &[2, 2],
        vec![b"a,b".to_vec(), b"x\ny".to_vec(), vec![0xff], vec![]],
    )
    .arc();
    assert_eq!(text(Layout::Txt, t.clone()), "a,b\nx\\ny\n\\xff\n\n");
    assert_eq!(text(Layout::Csv, t.clone()), "a,b,x\\ny\n\\xff,\n");
    assert!(open(Layout::Bin, t.clone(), &ctx()).is_none());
    assert!(open(Layout::Libsvm, t.clone(), &ctx()).is_none());
    // No `.npy` either: numpy cannot reduce `|S` arrays (README, "Decisions").
    assert!(open(Layout::Npy, t, &ctx()).is_none());
}

fn all_dtype_tensors() -> Vec<MemTensor> {
    use DType::*;
    let mut v = Vec::new();
    let numeric = [
        F16, BF16, F32, F64, I8, I16, I32, I64, U8, U16, U32, U64, Bool, C64, C128,
    ];
    for dt in numeric
        .into_iter()
        .chain([QInt8, QUInt16, Int4, Float8(24)])
    {
        let es = dt.elem_size().unwrap();
        for shape in [
            vec![],
            vec![0],
            vec![7],
            vec![3, 5],
            vec![2, 0, 4],
            vec![2, 3, 4],
        ] {
            let n: u64 = shape.iter().product();
            // Bytes that exercise signs, NaNs and sub-normals across dtypes.
            let data: Vec<u8> = (0..n as usize * es)
                .map(|i| (i * 37 + 11) as u8 ^ (i as u8 >> 1))
                .collect();
            v.push(MemTensor::new(dt, &shape, data));
        }
    }
    v.push(MemTensor::strings(
        &[3],
        vec![b"x".to_vec(), vec![], b"\t\x01".to_vec()],
    ));
    v.push(MemTensor::strings(&[0], vec![]));
    v
}

#[test]
fn sizes_exact_and_reads_at_any_offset() {
    let ctx = ctx();
    for t in all_dtype_tensors() {
        let t = t.arc();
        for l in Layout::GENERIC {
            let Some(c) = open(l, t.clone(), &ctx) else {
                continue;
            };
            let whole = full(&*c);
            if !whole.is_empty() {
                check_random_reads(&*c, &whole);
            }
            if l == Layout::Bin {
                let es = t.meta().dtype.elem_size().unwrap() as u64;
                assert_eq!(whole.len() as u64, t.meta().num_elements().unwrap() * es);
            }
        }
    }
}

#[test]
fn json_reports_layouts_problems_and_errors() {
    let ctx = ctx();
    let t = MemTensor::f32(&[2], &[1.0, 2.0]).named(b"a/b\xffc").arc();
    let j = open(Layout::Json, t.clone(), &ctx).unwrap();
    let s = String::from_utf8(full(&*j)).unwrap();
    assert!(s.contains(r#""name": "a/b\u00ffc""#), "{s}");
    let v: serde_json::Value = serde_json::from_str(&s).unwrap();
    assert_eq!(v["dtype"], "float32");
    assert_eq!(v["shape"], serde_json::json!([2]));
    assert_eq!(v["format"], "tf-checkpoint");
    let layouts = v["layouts"].as_array().unwrap();
    let txt = layouts.iter().find(|l| l["layout"] == "txt").unwrap();
    // Not rendered yet: the size is not known, and the .json does not render to learn it.
    assert_eq!(txt["size"], serde_json::Value::Null);
    let npy = layouts.iter().find(|l| l["layout"] == "npy").unwrap();
    assert_eq!(npy["size"], 136);
    assert!(v.get("error").is_none() && v.get("problem").is_none());
    assert_eq!(ctx.cache.rendered_chunks(), 0);
    // Once the text is rendered, a new .json knows its size.
    assert_eq!(
        open(Layout::Txt, t.clone(), &ctx).unwrap().size().unwrap(),
        8
    );
    let j = open(Layout::Json, t.clone(), &ctx).unwrap();
    let v: serde_json::Value = serde_json::from_slice(&full(&*j)).unwrap();
    let txt = named(&v["layouts"], "txt");
    assert_eq!(txt["size"], 8);
    // Layouts that cannot show a tensor are named with the reason.
    let s = MemTensor::strings(&[1], vec![b"x".to_vec()]).arc();
    let j = open(Layout::Json, s, &ctx).unwrap();
    let v: serde_json::Value = serde_json::from_slice(&full(&*j)).unwrap();
    let bin = named(&v["unavailable"], "bin");
    assert_eq!(bin["why"], "strings have no numeric form");

    let bad = MemTensor::f32(&[2], &[1.0, 2.0])
        .with_problem("slice 1 missing")
        .arc();
    let j = open(Layout::Json, bad.clone(), &ctx).unwrap();
    let v: serde_json::Value = serde_json::from_slice(&full(&*j)).unwrap();
    assert_eq!(v["problem"], "slice 1 missing");
    // Data layouts of a broken tensor fail (fs turns that into EIO).
    assert!(open(Layout::Txt, bad.clone(), &ctx)
        .unwrap()
        .size()
        .is_err());
    let bin = open(Layout::Bin, bad, &ctx).unwrap();
    assert_eq!(bin.size().unwrap(), 8);
    assert!(bin.read_at(0, &mut [0u8; 8]).is_err());
}

#[test]
fn a_json_is_fixed_once_shown_but_for_its_last_error() {
    let ctx = ctx();
    let t = MemTensor::f32(&[2], &[1.0, 2.0]).named(b"w").arc();
    let j = open(Layout::Json, t.clone(), &ctx).unwrap();
    let first = full(&*j);
    assert!(String::from_utf8_lossy(&first).contains(r#""size":null"#));
    // The text's size is learnt after the document was shown: the document stays as it was
    // (its size was given out), while a new one knows the size.
    assert_eq!(
        open(Layout::Txt, t.clone(), &ctx).unwrap().size().unwrap(),
        8
    );
    assert_eq!(full(&*j), first);
    assert_eq!(j.size().unwrap(), first.len() as u64);
    let fresh = full(&*open(Layout::Json, t.clone(), &ctx).unwrap());
    assert!(String::from_utf8_lossy(&fresh).contains(r#""size":8"#));
    // A read error of the tensor shows, and the document stays valid JSON.
    ctx.faults.note(b"w", "w.npy: read".into(), "EIO");
    let v: serde_json::Value = serde_json::from_slice(&full(&*j)).unwrap();
    assert_eq!(v["last_error"], "w.npy: read");
    assert_eq!(j.size().unwrap(), full(&*j).len() as u64);
    // The content keeps no tensor once rendered (a node keeps it for the file's life).
    drop(fresh);
    assert_eq!(Arc::strong_count(&t), 1);
}

fn sparse_sample() -> MemTensor {
    let s = SparseRows {
        rows: vec![0, 2, 5],
        row_ptr: vec![0, 2, 2, 3],
        cols: vec![1, 3, 0],
        values: le(&[1.5f32, -2.0, 7.0], f32::to_le_bytes),
    };
    MemTensor::sparse(DType::F32, 6, 4, s)
}

#[test]
fn sparse_tensors() {
    let t = sparse_sample().arc();
    assert_eq!(
        text(Layout::Libsvm, t.clone()),
        "0 1:1.5 3:-2.0\n2\n5 0:7.0\n"
    );
    let csv = text(Layout::Csv, t.clone());
    assert_eq!(csv, "0.0,1.5,0.0,-2.0\n0.0,0.0,0.0,0.0\n0.0,0.0,0.0,0.0\n0.0,0.0,0.0,0.0\n0.0,0.0,0.0,0.0\n7.0,0.0,0.0,0.0\n");
    let small = ctx_with(Layout::GENERIC.to_vec(), 95);
    for l in [Layout::Txt, Layout::Csv, Layout::Bin, Layout::Npy] {
        assert!(
            open(l, t.clone(), &small).is_none(),
            "{l:?} beyond max_dense"
        );
    }
    assert!(open(Layout::Libsvm, t.clone(), &small).is_some());
    let j = open(Layout::Json, t, &small).unwrap();
    let v: serde_json::Value = serde_json::from_slice(&full(&*j)).unwrap();
    assert_eq!(v["sparse"], true);
    assert_eq!(v["layouts"].as_array().unwrap().len(), 1);
}

#[test]
fn random_read_of_large_text_renders_only_needed_chunks() {
    let n = 10 * text::CHUNK_ELEMENTS + 123;
    let vals: Vec<f32> = (0..n).map(|i| (i as f32) * 0.37 - 1000.0).collect();
    let ctx = ctx();
    let t = MemTensor::f32(&[n], &vals).arc();
    let c = open(Layout::Txt, t.clone(), &ctx).unwrap();
    let size = c.size().unwrap();
    let after_index = ctx.cache.rendered_chunks();
    assert_eq!(after_index, 11);
    let mut buf = vec![0u8; 4096];
    let got = c.read_at(size / 2 + 77, &mut buf).unwrap();
    assert_eq!(got, 4096);
    let used = ctx.cache.rendered_chunks() - after_index;
    assert!((1..=2).contains(&used), "rendered {used} chunks");
    // The bytes are those of a full render.
    let mut want = Vec::new();
    for v in &vals {
        num::write_f32_py(*v, &mut want);
        want.push(b'\n');
    }
    assert_eq!(size, want.len() as u64);
    let off = (size / 2 + 77) as usize;
    assert_eq!(&buf[..], &want[off..off + 4096]);
    // A second open of the same tensor reuses the index: no re-render.
    let again = open(Layout::Txt, t, &ctx).unwrap();
    let before = ctx.cache.rendered_chunks();
    assert_eq!(again.size().unwrap(), size);
    assert_eq!(ctx.cache.rendered_chunks(), before);
}

#[test]
fn unrepresentable_dtypes_are_not_shown() {
    let t = MemTensor::new(DType::Variant, &[2], vec![]).arc();
    for l in [
        Layout::Txt,
        Layout::Csv,
        Layout::Bin,
        Layout::Npy,
        Layout::Libsvm,
    ] {
        assert!(open(l, t.clone(), &ctx()).is_none());
    }
    assert!(open(Layout::Json, t, &ctx()).is_some());
}

/// Lines break after every `cols` values also where a chunk starts mid-line (32 Ki elements
/// per chunk is not a multiple of 7 or 5000).
#[test]
fn element_lines_break_rows_across_chunks() {
    for cols in [1u64, 2, 7, 5000, 32768, 40000] {
        let n = 3 * text::CHUNK_ELEMENTS + 11;
        let vals = crate::testing::pseudo_random_f32(n);
        let t = MemTensor::f32(&[n], &vals).arc();
        let src = gentext::ElementLines {
            tensor: t,
            elements: n,
            cols,
            sep: b",".to_vec(),
        };
        let mut got = Vec::new();
        for i in 0..text::ChunkSource::num_chunks(&src) {
            text::ChunkSource::render(&src, ReadCtx::none(), i, &mut got).unwrap();
        }
        let mut want = Vec::new();
        for (i, v) in vals.iter().enumerate() {
            num::write_f32_py(*v, &mut want);
            want.push(if (i as u64 + 1) % cols == 0 {
                b'\n'
            } else {
                b','
            });
        }
        assert!(got == want, "cols {cols}");
    }
}

/// `cargo test --release --lib layout::tests::txt_throughput -- --ignored --nocapture`
#[test]
#[ignore]
fn txt_throughput() {
    let n = 4_000_000u64;
    let vals = crate::testing::pseudo_random_f32(n);
    let t = MemTensor::f32(&[n], &vals).arc();
    let src = gentext::ElementLines {
        tensor: t,
        elements: n,
        cols: 1,
        sep: b",".to_vec(),
    };
    let mut out = Vec::new();
    let start = std::time::Instant::now();
    for i in 0..text::ChunkSource::num_chunks(&src) {
        out.clear();
        text::ChunkSource::render(&src, ReadCtx::none(), i, &mut out).unwrap();
    }
    let dt = start.elapsed().as_secs_f64();
    let bytes = n as f64 * 11.5;
    println!(
        "{:.0} ns/elem, ~{:.0} MB/s",
        dt * 1e9 / n as f64,
        bytes / dt / 1e6
    );
}

/// A tensor that counts the reads it is asked for with a lending context and without.
struct Seen {
    inner: MemTensor,
    lending: std::sync::atomic::AtomicU64,
    other: std::sync::atomic::AtomicU64,
}

impl Seen {
    fn note(&self, ctx: &ReadCtx) {
        use std::sync::atomic::Ordering::Relaxed;
        match ctx.lends() {
            true => self.lending.fetch_add(1, Relaxed),
            false => self.other.fetch_add(1, Relaxed),
        };
    }
}

impl Tensor for Seen {
    fn meta(&self) -> &crate::model::TensorMeta {
        self.inner.meta()
    }
    fn fill_elements(
        &self,
        ctx: &ReadCtx,
        first: u64,
        out: &mut [u8],
    ) -> crate::model::ModelResult {
        self.note(ctx);
        self.inner.fill_elements(ctx, first, out)
    }
    fn lend(
        &self,
        ctx: &ReadCtx,
        _first: u64,
        _len: usize,
    ) -> Option<crate::model::ModelResult<bytes::Bytes>> {
        self.note(ctx);
        None
    }
}

/// A read's context reaches the tensor through every layout, header or not, on the reader's
/// thread or the text crew's: a push's lending read is never turned into a copy on the way
/// (a text file's size pass, for no reader, reads with a context of its own).
#[test]
fn reads_carry_the_requests_context() {
    use std::sync::atomic::Ordering::Relaxed;
    let values: Vec<f32> = (0..4096).map(|i| i as f32).collect();
    let ctx = ctx();
    let lending = Reading {
        req: &Patient,
        ctx: ReadCtx::none().lending(),
    };
    for layout in [Layout::Npy, Layout::Bin, Layout::Csv, Layout::Txt] {
        let seen = Arc::new(Seen {
            inner: MemTensor::f32(&[64, 64], &values),
            lending: Default::default(),
            other: Default::default(),
        });
        let c = open(layout, seen.clone(), &ctx).unwrap();
        for offset in [0u64, 100, 5000] {
            c.read(offset, 4096, &lending).unwrap();
        }
        assert!(seen.lending.load(Relaxed) > 0, "{layout:?}");
        if matches!(layout, Layout::Npy | Layout::Bin) {
            assert_eq!(
                seen.other.load(Relaxed),
                0,
                "{layout:?}: a read lost its context"
            );
        }
    }
}

/// The entry of a `.json` list of layouts (`layouts`, `unavailable`) for `layout`.
fn named<'a>(list: &'a serde_json::Value, layout: &str) -> &'a serde_json::Value {
    let list = list.as_array().unwrap();
    list.iter().find(|l| l["layout"] == layout).unwrap()
}
