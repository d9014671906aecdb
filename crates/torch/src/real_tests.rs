//! Against `torch.save` files written by torch itself in every form people keep (scripts/
//! gen_torch_more.py: the legacy format, pickled modules, a YOLO-style checkpoint, TorchScript,
//! float8) and by other projects (fixtures/real/torch, ORIGIN.md says whose): every tensor reads
//! back as torch reads it (`expected.json`, made by `torch.load` / `torch.jit.load`).

use super::*;
use crate::model::expect::elements_as;
use crate::testing::fixtures_dir;

fn opened(path: &Path) -> Arc<dyn Model> {
    open_path(path, &ReaderOptions::default())
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .unwrap_or_else(|| panic!("{}: not a PyTorch source", path.display()))
}

/// Every listed tensor of every file of `dir` reads as its `expected.json` says: its dtype,
/// shape and bytes (hex, or sha256 for big ones). Returns (files, tensors) compared.
fn check_dir(dir: &Path) -> (usize, usize) {
    let (mut files, mut tensors) = (0, 0);
    for (file, want) in crate::model::expect::expected_at(dir).as_object().unwrap() {
        if file.starts_with('_') || want["format"] == "safetensors" {
            continue;
        }
        let model = opened(&dir.join(file));
        files += 1;
        for (name, w) in want["tensors"].as_object().unwrap() {
            if w.get("embedded").is_some() {
                continue; // inside a TorchScript archive pickled as bytes: not read (yet)
            }
            let path = crate::model::key_path(name);
            let t = model
                .tensor(&path)
                .unwrap_or_else(|e| panic!("{file}: {name}: {e}"));
            assert_eq!(
                t.meta().dtype.name(),
                w["dtype"].as_str().unwrap(),
                "{file}: {name}"
            );
            let _ = elements_as(&*t, w, &format!("{file}: {name}"));
            tensors += 1;
        }
    }
    (files, tensors)
}

/// `check_dir`, which must have compared at least `files` files and `tensors` tensors.
fn check_dir_has(dir: &Path, files: usize, tensors: usize) {
    let got = check_dir(dir);
    assert!(
        got.0 >= files && got.1 >= tensors,
        "{got:?} (files, tensors)"
    );
}

#[test]
fn every_form_torch_writes_reads_as_torch_reads_it() {
    check_dir_has(&fixtures_dir().join("torch/more"), 7, 70);
}

#[test]
fn files_of_other_projects_read_as_torch_reads_them() {
    check_dir_has(&fixtures_dir().join("real/torch"), 19, 900);
}

/// The legacy fuzz target's prefix is three pickles as torch writes them: a real file's
/// object, keys and storages after it read as the file does.
#[test]
fn the_legacy_fuzz_prefix_is_a_valid_start() {
    let bytes = std::fs::read(fixtures_dir().join("torch/more/legacy.pt")).unwrap();
    let mut at = 0;
    for _ in 0..3 {
        at += pickle::load_prefix(&bytes[at..]).unwrap().1;
    }
    let file: Arc<dyn crate::source::ReadAt> =
        Arc::new(crate::source::MemSource::new("f.pt", bytes.clone()));
    let whole = legacy::read(&*file).unwrap();
    // The fuzz entry builds the same file from its own prefix and the rest.
    let mut rebuilt = Vec::new();
    rebuilt.extend_from_slice(b"\x80\x02\x8a\nl\xfc\x9cF\xf9 j\xa8P\x19.\x80\x02M\xe9\x03.");
    rebuilt.extend_from_slice(
        b"\x80\x02}q\x00(X\x10\x00\x00\x00protocol_versionq\x01M\xe9\x03X\r\x00\x00\x00little_endianq\x02\x88u.",
    );
    rebuilt.extend_from_slice(&bytes[at..]);
    let file: Arc<dyn crate::source::ReadAt> =
        Arc::new(crate::source::MemSource::new("g.pt", rebuilt.clone()));
    let again = legacy::read(&*file).unwrap();
    assert_eq!(whole.storages.len(), again.storages.len());
    assert!(whole.storages.len() >= 10 && again.problems.is_empty());
    fuzz_legacy(&bytes[at..]);
}
