//! Graph files (formats/tf-checkpoint.md §11) flipped byte by byte and truncated: a protobuf has
//! no checksum, so a changed byte may well read as another valid graph — what must hold is that
//! nothing panics, hangs or allocates beyond the file's size, and that listing, constants,
//! signatures and `graph.pbtxt` either work or fail with an error.

use std::path::Path;

use modelfs_detect::model_at;
use modelfs_layout::Layout;

use super::harness::*;
use super::tf::options;

fn mutate(label: &str, source_rel: &str, file: &str, every: usize) {
    let src = fixtures().join("tf/graphs").join(source_rel);
    let tmp = tempfile::tempdir().unwrap();
    copy_tree(&src, tmp.path());
    let path = tmp.path().join(file);
    let pristine = std::fs::read(&path).unwrap();
    let bound = ALLOC_SLACK + tree_bytes(tmp.path());
    let open = |dir: &Path, layouts: bool| -> Result<Snapshot, String> {
        let model = model_at(dir, &options().reader()).map_err(|e| e.to_string())?;
        let ctx = layouts.then(|| layout_ctx(Layout::all()));
        Ok(snapshot(&*model, ctx.as_ref()))
    };
    let good = open(tmp.path(), true).unwrap();
    assert!(
        good.tensors.len() > 2,
        "{label}: {} entries",
        good.tensors.len()
    );
    let cuts = (0..20).map(|i| pristine.len() * i / 20);
    let flips = (0..pristine.len()).step_by(every);
    let (mut n, mut refused, mut changed) = (0, 0, 0);
    for (kind, pos) in cuts.map(|c| ("cut", c)).chain(flips.map(|p| ("flip", p))) {
        let mut bad = pristine.clone();
        match kind {
            "cut" => bad.truncate(pos),
            _ => bad[pos] ^= 0xff,
        }
        std::fs::write(&path, &bad).unwrap();
        let dir = tmp.path().to_path_buf();
        let layouts = n % 8 == 0;
        n += 1;
        let case = format!("{label}: {file} {kind} at {pos}");
        match run_case(&case, bound, move || open(&dir, layouts)) {
            Err(_) => refused += 1,
            Ok(s) => changed += usize::from(s.tensors.len() != good.tensors.len()),
        }
    }
    std::fs::write(&path, &pristine).unwrap();
    eprintln!("{label}: {n} cases, {refused} refused at open, {changed} with other entries");
}

#[test]
fn graph_files_flipped_and_truncated() {
    let _serial = serial();
    mutate("frozen", "tf1/frozen", "frozen.pb", 1);
    mutate("typed", "typed", "graph.pb", 7);
    mutate("savedmodel", "tf1/savedmodel", "saved_model.pb", 13);
    mutate("tf2 savedmodel", "tf2/savedmodel", "saved_model.pb", 97);
}
