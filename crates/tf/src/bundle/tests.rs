use std::collections::HashMap;
use std::sync::Arc;

use super::testutil::*;
use super::*;
use crate::codec::table::testutil::CountingReadAt;
use crate::codec::table::BlockCache;
use crate::model::{DType, Tensor};
use crate::source::{MemSource, ReadCtx};

fn open_bundle(
    index: Vec<u8>,
    files: HashMap<String, Arc<dyn ReadAt>>,
    prefix: &str,
    verify: bool,
) -> Result<Arc<Bundle>, BundleError> {
    let table = Table::open(
        Arc::new(MemSource::new(format!("{prefix}.index"), index)),
        Arc::new(BlockCache::new(1 << 20)),
    )?;
    Ok(Arc::new(Bundle::open(
        table,
        prefix.into(),
        Box::new(MemShards(files)),
        verify,
    )?))
}

fn build(b: BundleBuilder) -> Arc<Bundle> {
    let prefix = b.prefix.clone();
    let (index, files) = b.finish();
    open_bundle(index, files, &prefix, true).unwrap()
}

fn tensor(b: &Arc<Bundle>, key: &[u8]) -> Arc<dyn Tensor> {
    tensor_for_key(b, key).unwrap().unwrap()
}

fn read_all(t: &dyn Tensor) -> Result<Vec<u8>, ModelError> {
    let n = t.meta().num_elements().unwrap() as usize;
    let mut out = vec![0u8; n * t.meta().dtype.elem_size().unwrap()];
    t.read_elements(ReadCtx::none(), 0, &mut out)?;
    Ok(out)
}

fn strings(t: &dyn Tensor, first: u64, count: u64) -> Result<Vec<Vec<u8>>, ModelError> {
    let mut v = Vec::new();
    t.for_each_string(ReadCtx::none(), first, count, &mut |s| v.push(s.to_vec()))?;
    Ok(v)
}

#[test]
fn worked_example_bundle() {
    let index = crate::codec::table::testutil::worked_example();
    let mut files: HashMap<String, Arc<dyn ReadAt>> = HashMap::new();
    files.insert(
        "P.data-00000-of-00001".into(),
        Arc::new(MemSource::new("P.data-00000-of-00001", vec![0u8; 4])),
    );
    let b = open_bundle(index, files, "P", true).unwrap();
    assert_eq!(b.num_shards, 1);
    let t = tensor(&b, b"counter");
    assert_eq!(t.meta().dtype, DType::F32);
    assert!(t.meta().shape.is_empty());
    assert_eq!(read_all(&*t).unwrap(), [0, 0, 0, 0]);
    assert!(tensor_for_key(&b, b"d").unwrap().is_none());
}

#[test]
fn dtypes_and_endianness() {
    for be in [false, true] {
        let mut b = BundleBuilder::new("m");
        b.big_endian = be;
        b.add_f32(b"f", &[2, 2], &[1.0, -2.5, f32::NAN, 0.0]);
        let i16s: Vec<u8> = [1i16, -2, 300]
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect();
        b.add_fixed(b"i16", 5, &[3], &i16s, 2);
        let c64: Vec<u8> = [1.0f32, 2.0, -3.0, 4.5]
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect();
        b.add_fixed(b"c64", 8, &[2], &c64, 4);
        b.add_fixed(b"bool", 10, &[3], &[0, 1, 7], 1);
        b.add_fixed(b"bf16", 14, &[1], &[0x80, 0x3f], 2);
        b.add_fixed(b"int4", 29, &[2], &[0x0f, 0x07], 1);
        b.add_fixed(b"f8", 24, &[1], &[0x3c], 1);
        b.add_fixed(b"empty", 1, &[0, 3], &[], 4);
        b.add_strings(b"s", &[3], &[b"", b"ab", b"xyz"]);
        b.add_strings(b"es", &[0], &[]);
        let bundle = build(b);
        assert_eq!(bundle.big_endian, be);
        let f = tensor(&bundle, b"f");
        let got = read_all(&*f).unwrap();
        let want: Vec<u8> = [1.0f32, -2.5, f32::NAN, 0.0]
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect();
        assert_eq!(got, want);
        // A middle range.
        let mut two = [0u8; 8];
        f.read_elements(ReadCtx::none(), 1, &mut two).unwrap();
        assert_eq!(&two[..], &want[4..12]);
        assert!(f.read_elements(ReadCtx::none(), 3, &mut two).is_err());
        // Runs: rows 1 and 0 of `f` in one call, as a row diff reads changed rows.
        let mut runs = [0u8; 16];
        f.read_runs_unchecked(ReadCtx::none(), &[2, 0], &mut runs)
            .unwrap();
        assert_eq!((&runs[..8], &runs[8..]), (&want[8..16], &want[..8]));
        assert!(
            f.read_runs_unchecked(ReadCtx::none(), &[3, 0], &mut runs)
                .is_err(),
            "past the end"
        );
        assert!(
            f.read_runs_unchecked(ReadCtx::none(), &[0, 1], &mut runs[..15])
                .is_err(),
            "unequal"
        );
        assert_eq!(read_all(&*tensor(&bundle, b"i16")).unwrap(), i16s);
        assert_eq!(read_all(&*tensor(&bundle, b"c64")).unwrap(), c64);
        assert_eq!(read_all(&*tensor(&bundle, b"bool")).unwrap(), [0, 1, 1]);
        assert_eq!(read_all(&*tensor(&bundle, b"bf16")).unwrap(), [0x80, 0x3f]);
        assert_eq!(tensor(&bundle, b"int4").meta().dtype, DType::Int4);
        assert_eq!(read_all(&*tensor(&bundle, b"int4")).unwrap(), [0x0f, 0x07]);
        assert_eq!(tensor(&bundle, b"f8").meta().dtype, DType::Float8(24));
        assert_eq!(
            read_all(&*tensor(&bundle, b"empty")).unwrap(),
            Vec::<u8>::new()
        );
        let s = tensor(&bundle, b"s");
        assert_eq!(strings(&*s, 0, 3).unwrap(), [&b""[..], b"ab", b"xyz"]);
        assert_eq!(strings(&*s, 1, 1).unwrap(), [b"ab"]);
        assert!(strings(&*tensor(&bundle, b"es"), 0, 0).unwrap().is_empty());
        assert!(s.read_elements(ReadCtx::none(), 0, &mut [0u8; 4]).is_err());
    }
}

#[test]
fn checksum_mismatch_fails_only_that_tensor_and_verify_none() {
    let mut b = BundleBuilder::new("m");
    b.add_f32(b"a", &[1], &[1.0]);
    b.add_raw(b"b", 1, &[1], 0, &2.0f32.to_le_bytes(), 0x1234);
    let (index, files) = b.finish();
    let bundle = open_bundle(index.clone(), files.clone(), "m", true).unwrap();
    assert!(read_all(&*tensor(&bundle, b"a")).is_ok());
    let err = read_all(&*tensor(&bundle, b"b")).unwrap_err().to_string();
    assert!(err.contains("checksum"), "{err}");
    let lax = open_bundle(index, files, "m", false).unwrap();
    assert_eq!(
        read_all(&*tensor(&lax, b"b")).unwrap(),
        2.0f32.to_le_bytes()
    );
}

#[test]
fn missing_and_truncated_shards() {
    let mut b = BundleBuilder::new("m");
    b.add_f32(b"a", &[1], &[1.0]);
    b.add_raw(b"far", 1, &[1], 1, &[0, 0, 0, 0], mask_crc0());
    let (index, mut files) = b.finish();
    files.remove("m.data-00001-of-00002");
    let bundle = open_bundle(index, files, "m", true).unwrap();
    assert_eq!(bundle.num_shards, 2);
    assert!(read_all(&*tensor(&bundle, b"a")).is_ok());
    let far = tensor(&bundle, b"far");
    let p = far.meta().problem.clone().unwrap();
    assert!(p.contains("m.data-00001-of-00002"), "{p}");
    assert!(read_all(&*far).is_err());

    // Entry beyond the end of its data file.
    let mut b = BundleBuilder::new("m");
    b.add_f32(b"a", &[2], &[1.0, 2.0]);
    let (index, mut files) = b.finish();
    files.insert(
        "m.data-00000-of-00001".into(),
        Arc::new(MemSource::new("d", vec![0u8; 5])),
    );
    let bundle = open_bundle(index, files, "m", true).unwrap();
    assert!(tensor(&bundle, b"a")
        .meta()
        .problem
        .as_ref()
        .unwrap()
        .contains("past the end"));
}

fn mask_crc0() -> u32 {
    crate::codec::mask_crc(crate::codec::crc32c_extend(0, &[0, 0, 0, 0]))
}

#[test]
fn shard_names() {
    assert_eq!(shard_file_name("p", 0, 1), "p.data-00000-of-00001");
    assert_eq!(shard_file_name("p", 7, 123456), "p.data-00007-of-123456");
}

#[test]
fn bad_headers() {
    let cases: &[(&[u8], &str)] = &[
        (&[0x0a, 0x02, 0x0a, 0x00], "V1 checkpoint"),
        (&[0x08, 0x00, 0x1a, 0x02, 0x08, 0x01], "num_shards"),
        (
            &[0x08, 0x01, 0x10, 0x02, 0x1a, 0x02, 0x08, 0x01],
            "endianness",
        ),
        (&[0x08, 0x01, 0x1a, 0x02, 0x10, 0x05], "version"),
        (&[0x08, 0x01, 0x1a, 0x02, 0x18, 0x01], "version"),
        (&[0x08], "unreadable"),
    ];
    for (header, want) in cases {
        let mut t = crate::codec::table::testutil::TableBuilder::new(1 << 18, false);
        t.add(b"", header);
        let err = open_bundle(t.finish(), HashMap::new(), "m", true)
            .unwrap_err()
            .to_string();
        assert!(err.contains(want), "{err} / {want}");
    }
    let mut t = crate::codec::table::testutil::TableBuilder::new(1 << 18, false);
    t.add(b"a", b"");
    assert!(open_bundle(t.finish(), HashMap::new(), "m", true).is_err());
}

fn floats(n: usize) -> Vec<f32> {
    (0..n).map(|i| i as f32).collect()
}

/// A bundle with `emb`, `[10, 4]` floats 0..40 saved as two partitions of 5 rows.
fn emb_in_two_row_parts() -> (BundleBuilder, Vec<f32>) {
    let mut b = BundleBuilder::new("m");
    let full = floats(40);
    let rows = [vec![Some((0, 5)), None], vec![Some((5, 5)), None]];
    b.add_partitioned_f32(b"emb", &[10, 4], &full, &rows);
    (b, full)
}

#[test]
fn partitioned_rows_and_blocks() {
    let (mut b, full) = emb_in_two_row_parts();
    let m = floats(24);
    b.add_partitioned_f32(
        b"mat",
        &[4, 6],
        &m,
        &[
            vec![Some((0, 2)), Some((0, 3))],
            vec![Some((0, 2)), Some((3, 3))],
            vec![Some((2, 2)), Some((0, 3))],
            vec![Some((2, 2)), Some((3, 3))],
        ],
    );
    let bundle = build(b);
    for (key, vals) in [(&b"emb"[..], &full), (&b"mat"[..], &m)] {
        let t = tensor(&bundle, key);
        assert!(t.meta().problem.is_none(), "{:?}", t.meta().problem);
        let want: Vec<u8> = vals.iter().flat_map(|v| v.to_le_bytes()).collect();
        assert_eq!(read_all(&*t).unwrap(), want);
        for first in 0..vals.len() {
            for n in [1, 3, 7] {
                if first + n <= vals.len() {
                    let mut out = vec![0u8; 4 * n];
                    t.read_elements(ReadCtx::none(), first as u64, &mut out)
                        .unwrap();
                    assert_eq!(out, want[4 * first..4 * (first + n)]);
                }
            }
        }
    }
    let emb = tensor(&bundle, b"emb");
    let parts = &emb.meta().partitions;
    assert_eq!(parts.len(), 2);
    assert_eq!(parts[1].extent, [(5, 5), (0, 4)]);
    assert_eq!(parts[1].file, "data-00000-of-00001");
    assert_eq!(parts[1].length, 80);
    let p1 = emb.partition(1).unwrap();
    assert_eq!(p1.meta().shape, [5, 4]);
    assert_eq!(read_all(&*p1).unwrap()[..4], 20.0f32.to_le_bytes());
    assert!(emb.partition(2).is_err());
}

#[test]
fn partitioned_read_touches_only_intersecting_slices() {
    let (b, _) = emb_in_two_row_parts();
    let (index, files) = b.finish();
    let data = files["m.data-00000-of-00001"].read_vec(0, 160).unwrap();
    let counting = CountingReadAt::new("m.data-00000-of-00001", data);
    let mut files2: HashMap<String, Arc<dyn ReadAt>> = HashMap::new();
    files2.insert("m.data-00000-of-00001".into(), counting.clone());
    let bundle = open_bundle(index, files2, "m", true).unwrap();
    let t = tensor(&bundle, b"emb");
    // Where does slice 1 live?
    let p1 = t.meta().partitions[1].clone();
    counting.take();
    let mut out = [0u8; 8];
    t.read_elements(ReadCtx::none(), 30, &mut out).unwrap();
    assert_eq!(out[..4], 30.0f32.to_le_bytes());
    for (off, len) in counting.take() {
        assert!(
            off >= p1.offset && off + len as u64 <= p1.offset + p1.length,
            "{off}+{len}"
        );
    }
}

#[test]
fn partition_coverage_problems() {
    let full = floats(40);
    let cases: Vec<(Vec<SliceSpec>, &str)> = vec![
        (vec![vec![Some((0, 5)), None]], "gaps"),
        (
            vec![vec![Some((0, 6)), None], vec![Some((5, 5)), None]],
            "overlap",
        ),
        (
            vec![vec![Some((0, 5)), None], vec![Some((5, 6)), None]],
            "exceeds",
        ),
        (vec![vec![Some((0, 10))]], "rank"),
    ];
    for (specs, want) in cases {
        let mut b = BundleBuilder::new("m");
        // Build slice entries only for well-formed specs; the full entry lists them all.
        let mut e = Vec::new();
        e.extend_from_slice(&[
            0x08, 0x01, 0x12, 0x08, 0x12, 0x02, 0x08, 0x0a, 0x12, 0x02, 0x08, 0x04,
        ]);
        for s in &specs {
            let sp = slice_proto(s);
            e.push(0x3a);
            e.push(sp.len() as u8);
            e.extend_from_slice(&sp);
        }
        let ok_specs: Vec<SliceSpec> = specs
            .iter()
            .filter(|s| s.len() == 2 && s[0].is_some_and(|(a, l)| a + l <= 10))
            .cloned()
            .collect();
        b.add_partitioned_f32(b"emb", &[10, 4], &full, &ok_specs);
        b.add_entry_bytes(b"emb", e);
        let bundle = build(b);
        let t = tensor(&bundle, b"emb");
        let p = t.meta().problem.clone().unwrap_or_default();
        assert!(p.contains(want), "{p} / {want}");
        assert!(t.read_elements(ReadCtx::none(), 0, &mut [0u8; 4]).is_err());
    }
}

#[test]
fn big_endian_partitioned_strings() {
    let mut b = BundleBuilder::new("m");
    b.big_endian = true;
    b.add_strings(b"s", &[], &[b"hello\n\x00\xff"]);
    let bundle = build(b);
    assert_eq!(
        strings(&*tensor(&bundle, b"s"), 0, 1).unwrap(),
        [b"hello\n\x00\xff"]
    );
}

/// A data file that takes its time to answer, as a remote one does: readers starting at once
/// all reach the checksum before any pass ends.
#[derive(Debug)]
struct Slow(Arc<CountingReadAt>);

impl ReadAt for Slow {
    fn about(&self) -> &crate::source::About {
        self.0.about()
    }
    fn read_with(
        &self,
        ctx: &ReadCtx,
        offset: u64,
        to: crate::source::To<'_>,
    ) -> Result<(), SourceError> {
        std::thread::sleep(std::time::Duration::from_millis(20));
        self.0.read_with(ctx, offset, to)
    }
}

#[test]
fn readers_of_one_entry_share_one_checksum_pass() {
    // 2 MiB: large enough to share its verdict between tensor objects.
    let values = floats(1 << 19);
    let mut b = BundleBuilder::new("m");
    b.add_f32(b"w", &[values.len() as u64], &values);
    let (index, files) = b.finish();
    let name = "m.data-00000-of-00001";
    let data = files[name]
        .read_vec(0, files[name].size() as usize)
        .unwrap();
    let counting = CountingReadAt::new(name, data);
    let mut slow: HashMap<String, Arc<dyn ReadAt>> = HashMap::new();
    slow.insert(name.into(), Arc::new(Slow(counting.clone())));
    let bundle = open_bundle(index, slow, "m", true).unwrap();
    counting.take();
    // Four readers, each with its own tensor object (as each file of a mount, each API call
    // has), each reading a quarter, all starting at once.
    let quarter = values.len() / 4;
    let start = std::sync::Barrier::new(4);
    std::thread::scope(|s| {
        for q in 0..4 {
            let (bundle, start, values) = (&bundle, &start, &values);
            s.spawn(move || {
                let t = tensor(bundle, b"w");
                let mut out = vec![0u8; quarter * 4];
                start.wait();
                t.read_elements(ReadCtx::none(), (q * quarter) as u64, &mut out)
                    .unwrap();
                let want: Vec<u8> = values[q * quarter..(q + 1) * quarter]
                    .iter()
                    .flat_map(|v| v.to_le_bytes())
                    .collect();
                assert!(out == want, "quarter {q}");
            });
        }
    });
    let read: usize = counting.take().iter().map(|&(_, n)| n).sum();
    let whole = values.len() * 4;
    // One pass over the whole entry, then each quarter once.
    assert_eq!(read, 2 * whole, "{read} bytes read for {whole}");
}
