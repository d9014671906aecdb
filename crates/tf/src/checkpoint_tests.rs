use std::sync::Arc;

use super::*;
use crate::bundle::testutil::BundleBuilder;
use crate::bundle::MemShards;
use crate::codec::table::testutil::CountingReadAt;
use crate::source::ReadCtx;

fn model_of(b: BundleBuilder) -> (TfModel, Arc<CountingReadAt>) {
    let prefix = b.prefix.clone();
    let (index, files) = b.finish();
    let src = CountingReadAt::new("m.index", index);
    let table = Table::open(src.clone(), Arc::new(BlockCache::new(64 << 20))).unwrap();
    let m = TfModel::from_table(table, prefix, Box::new(MemShards(files)), true).unwrap();
    (m, src)
}

/// The model of `b` with a float32 scalar `[1.0]` at each of `keys`.
fn with_scalars(mut b: BundleBuilder, keys: &[&str]) -> TfModel {
    for k in keys {
        b.add_f32(k.as_bytes(), &[1], &[1.0]);
    }
    model_of(b).0
}

fn p(parts: &[&str]) -> Vec<Vec<u8>> {
    parts.iter().map(|s| s.as_bytes().to_vec()).collect()
}

fn t(s: &str) -> DirEntry {
    DirEntry::Tensor(s.as_bytes().to_vec())
}
fn d(s: &str) -> DirEntry {
    DirEntry::Dir(s.as_bytes().to_vec())
}

#[test]
fn plain_listing_leaf_and_prefix() {
    let keys = [
        "W",
        "W/Adam",
        "W/Adam_1",
        "layer1/W",
        "layer1/b",
        "layer1/sub/x",
        "z",
    ];
    let m = with_scalars(BundleBuilder::new("m"), &keys);
    assert_eq!(m.style(), KeyStyle::Plain);
    let root = m.list_dir(&[]).unwrap();
    assert_eq!(root, vec![d("W"), d("layer1"), t("W"), t("z")]);
    assert_eq!(
        m.list_dir(&p(&["W"])).unwrap(),
        vec![t("Adam"), t("Adam_1")]
    );
    assert_eq!(
        m.list_dir(&p(&["layer1"])).unwrap(),
        vec![d("sub"), t("W"), t("b")]
    );
    assert!(m.list_dir(&p(&["nope"])).is_err());
    assert!(m.list_dir(&p(&["z"])).is_err());
    assert_eq!(
        m.tensor(&p(&["layer1", "sub", "x"])).unwrap().meta().name,
        b"layer1/sub/x"
    );
    assert!(m.tensor(&p(&["layer1"])).is_err());
    assert!(m.tensor(&p(&[""])).is_err()); // the header
    let s = m.summary().unwrap();
    assert_eq!(s.tensors, 7);
    assert_eq!(s.total_bytes, 28);
    assert_eq!(s.dtypes["float32"], 7);
    assert!(s.problems.is_empty());
}

#[test]
fn object_listing() {
    let mut b = BundleBuilder::new("ckpt-1");
    b.add_strings(GRAPH_KEY, &[], &[b"graph"]);
    let keys = [
        "model/dense/kernel/.ATTRIBUTES/VARIABLE_VALUE",
        "model/dense/kernel/.OPTIMIZER_SLOT/optimizer/m/.ATTRIBUTES/VARIABLE_VALUE",
        "model/a..b/.ATTRIBUTES/VARIABLE_VALUE",
        "model/c.Sd/.ATTRIBUTES/VARIABLE_VALUE",
        "save_counter/.ATTRIBUTES/VARIABLE_VALUE",
        "table/.ATTRIBUTES/-keys",
        "/.ATTRIBUTES/v1",
        "x/-a/.ATTRIBUTES/VARIABLE_VALUE",
        "x/.ATTRIBUTES/VARIABLE_VALUE",
    ];
    let m = with_scalars(b, &keys);
    assert_eq!(m.style(), KeyStyle::Object);
    assert_eq!(
        m.list_dir(&[]).unwrap(),
        vec![
            d(""),
            d("model"),
            d("table"),
            d("x"),
            t("save_counter"),
            t("x")
        ]
    );
    assert_eq!(
        m.list_dir(&p(&["model"])).unwrap(),
        vec![d("dense"), t("a.b"), t("c/d")]
    );
    assert_eq!(
        m.list_dir(&p(&["model", "dense"])).unwrap(),
        vec![d("kernel"), t("kernel")]
    );
    assert_eq!(
        m.list_dir(&p(&["model", "dense", "kernel"])).unwrap(),
        vec![d(".OPTIMIZER_SLOT")]
    );
    assert_eq!(m.list_dir(&p(&["x"])).unwrap(), vec![t("-a")]);
    assert_eq!(m.list_dir(&p(&["table"])).unwrap(), vec![d(".ATTRIBUTES")]);
    assert_eq!(
        m.list_dir(&p(&["table", ".ATTRIBUTES"])).unwrap(),
        vec![t("-keys")]
    );
    assert_eq!(m.list_dir(&p(&["", ".ATTRIBUTES"])).unwrap(), vec![t("v1")]);
    let k = m.tensor(&p(&["model", "c/d"])).unwrap();
    assert_eq!(k.meta().name, b"model/c.Sd/.ATTRIBUTES/VARIABLE_VALUE");
    assert!(m
        .tensor(&p(&[
            "model",
            "dense",
            "kernel",
            ".OPTIMIZER_SLOT",
            "optimizer",
            "m"
        ]))
        .is_ok());
    assert!(m.tensor(&p(&["table", ".ATTRIBUTES", "-keys"])).is_ok());
    assert!(m
        .tensor(&p(&["x", ".ATTRIBUTES", "VARIABLE_VALUE"]))
        .is_err());
    assert!(m.tensor(&p(&["_CHECKPOINTABLE_OBJECT_GRAPH"])).is_err());
    assert_eq!(m.summary().unwrap().tensors, 9);
}

#[test]
fn partitioned_slices_hidden() {
    let mut b = BundleBuilder::new("m");
    let full: Vec<f32> = (0..40).map(|i| i as f32).collect();
    b.add_partitioned_f32(
        b"emb",
        &[10, 4],
        &full,
        &[vec![Some((0, 5)), None], vec![Some((5, 5)), None]],
    );
    b.add_partitioned_f32(
        b"l/emb",
        &[10, 4],
        &full,
        &[vec![Some((0, 5)), None], vec![Some((5, 5)), None]],
    );
    // An unreferenced 00-prefixed key is listed like any key.
    b.add_f32(b"\x00stray", &[1], &[1.0]);
    let (m, _) = model_of(b);
    assert_eq!(
        m.list_dir(&[]).unwrap(),
        vec![d("l"), t("\x00stray"), t("emb")]
    );
    let e = m.tensor(&p(&["l", "emb"])).unwrap();
    assert_eq!(e.meta().shape, [10, 4]);
    assert_eq!(e.meta().partitions.len(), 2);
    assert_eq!(m.summary().unwrap().tensors, 3);
}

#[test]
fn listing_one_directory_reads_few_blocks() {
    let mut b = BundleBuilder::new("m");
    b.block_size = 4096;
    // 40 directories × 500 keys, ~50 bytes per entry: ~250 data blocks.
    for dir in 0..40 {
        for i in 0..500 {
            b.add_entry_bytes(
                format!("dir{dir:02}/var{i:04}").as_bytes(),
                vec![0x08, 0x01, 0x12, 0x00, 0x28, 0x04, 0x35, 0, 0, 0, 0],
            );
        }
    }
    let (m, src) = model_of(b);
    let total_blocks = m.bundle().table.num_blocks();
    assert!(total_blocks > 100, "{total_blocks}");
    src.take();
    let listing = m.list_dir(&p(&["dir17"])).unwrap();
    assert_eq!(listing.len(), 500);
    let reads = src.take().len();
    // 500 entries of ~20 bytes = ~10 KiB: 3–5 blocks.
    assert!(reads <= 6, "{reads} reads");
    // Root: one seek per sub-directory, each reading at most one new block.
    let root = m.list_dir(&[]).unwrap();
    assert_eq!(root.len(), 40);
    let reads = src.take().len();
    assert!(reads <= 41, "{reads} reads");
    assert!(reads < total_blocks / 2);
}

#[test]
fn opening_reads_footer_index_and_header_block() {
    let mut b = BundleBuilder::new("m");
    b.block_size = 4096;
    for i in 0..5000 {
        b.add_f32(format!("v{i:05}").as_bytes(), &[1], &[1.0]);
    }
    let (m, src) = model_of(b);
    // footer, index block, first data block (header); the object-graph probe may read one more.
    let reads = src.take();
    assert!(reads.len() <= 4, "{reads:?}");
    assert_eq!(reads[0].1, 48);
    drop(m);
}

/// Issue 26 item 4: a transient fault while the object graph is first read (S3 down for a
/// moment) leaves no lasting mark: `by-name/` appears once the store is back.
#[test]
fn a_transient_fault_on_the_object_graph_is_not_remembered() {
    let (flaky, opts) = flaky_local();
    let dir = crate::testing::fixtures_dir().join("tf/object_tf2");
    let model = crate::detect::open(&dir.join("obj"), &opts)
        .unwrap()
        .unwrap();
    let by_name = || {
        model.list_dir(&[]).map(|l| {
            l.iter()
                .any(|e| matches!(e, DirEntry::Reserved(n) if n == b"by-name"))
        })
    };
    flaky.down.store(true, std::sync::atomic::Ordering::SeqCst);
    assert!(!by_name().unwrap_or(false));
    flaky.down.store(false, std::sync::atomic::Ordering::SeqCst);
    assert!(by_name().unwrap(), "by-name/ is back once the store is");
}

/// The same for a graph's scan (constants and signatures of a SavedModel).
#[test]
fn a_transient_fault_on_a_graph_scan_is_not_remembered() {
    let (flaky, opts) = flaky_local();
    let dir = crate::testing::fixtures_dir().join("tf/graphs/tf1/frozen/frozen.pb");
    let model = crate::detect::open(&dir, &opts).unwrap().unwrap();
    flaky.down.store(true, std::sync::atomic::Ordering::SeqCst);
    assert!(model.list_dir(&[]).is_err());
    flaky.down.store(false, std::sync::atomic::Ordering::SeqCst);
    assert!(!model.list_dir(&[]).unwrap().is_empty());
}

/// Rows by index of partitioned 2-D variables (slices by rows, by columns, a grid) equal the
/// rows of the assembled tensor, and name the partition holding them when slices are by row.
#[test]
fn rows_of_partitioned_variables_cross_their_slices() {
    let dir = crate::testing::fixtures_dir().join("tf/partitioned/ckpt");
    let model = crate::detect::open(&dir, &Default::default())
        .unwrap()
        .unwrap();
    for name in ["rows_10x4", "cols_3x5_i64", "grid_4x6"] {
        let t = model.tensor(&[name.as_bytes().to_vec()]).unwrap();
        assert_eq!(
            t.key_kind(),
            Some(crate::model::KeyKind::RowIndex),
            "{name}"
        );
        let (rows, cols) = (t.meta().shape[0], t.meta().shape[1]);
        let w = t.meta().dtype.elem_size().unwrap();
        let mut all = vec![0u8; (rows * cols) as usize * w];
        t.read_elements(ReadCtx::none(), 0, &mut all).unwrap();
        for r in 0..rows {
            let mut got = Vec::new();
            let hit = t.row_by_id(r as i64, &mut got).unwrap().unwrap();
            let row = (r * cols) as usize * w..((r + 1) * cols) as usize * w;
            assert_eq!(got, all[row], "{name} row {r}");
            let p = hit.partition.map(|i| &t.meta().partitions[i]);
            assert!(p.is_none_or(|p| (p.extent[0].0..p.extent[0].0 + p.extent[0].1).contains(&r)));
        }
        assert!(t.row_by_id(rows as i64, &mut Vec::new()).unwrap().is_none());
    }
}

/// Local files through a storage that can be taken down, and reader options reading them.
fn flaky_local() -> (
    Arc<crate::testing::FlakyStorage>,
    crate::model::ReaderOptions,
) {
    let flaky = Arc::new(crate::testing::FlakyStorage::new(crate::source::local()));
    let storage = flaky.clone();
    (
        flaky,
        crate::model::ReaderOptions {
            storage,
            ..Default::default()
        },
    )
}
