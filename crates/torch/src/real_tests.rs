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

/// The tensor names of `model`, sorted, each with its bytes.
fn named_bytes(model: &dyn Model, under: &str) -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    let dir = crate::model::key_path(under);
    let dir = if under.is_empty() { Vec::new() } else { dir };
    for e in model.list_dir(&dir).unwrap() {
        if let crate::model::DirEntry::Tensor(n) = e {
            let mut p = dir.clone();
            p.push(n.clone());
            let t = model.tensor(&p).unwrap();
            let size = t.meta().stored_bytes().unwrap() as usize;
            let mut buf = vec![0u8; size];
            t.read_elements(crate::source::ReadCtx::none(), 0, &mut buf)
                .unwrap();
            out.push((String::from_utf8(n).unwrap(), buf));
        }
    }
    out.sort();
    out
}

/// One net, four forms: its state dict (`module_sd.pt`), the module saved whole (zip and
/// legacy), TorchScript, and a YOLO-style `{"model": module}`: the same names, dotted as
/// `state_dict()` gives them, one entry each in one directory, with the same bytes (the
/// YOLO copy is float16: its names only). Issue 69: `diff sd.pt whole.pt` found nothing in
/// common when modules split their names on `/`.
#[test]
fn every_form_of_one_net_names_its_tensors_as_its_state_dict() {
    let dir = fixtures_dir().join("torch/more");
    let sd = named_bytes(&*opened(&dir.join("module_sd.pt")), "");
    assert_eq!(sd.len(), 8);
    assert!(
        sd.iter().any(|(n, _)| n == "backbone.0.conv.weight"),
        "{sd:?}"
    );
    for f in ["module.pt", "module_legacy.pt", "scripted.pt"] {
        let got = named_bytes(&*opened(&dir.join(f)), "");
        let names = |v: &[(String, Vec<u8>)]| v.iter().map(|x| x.0.clone()).collect::<Vec<_>>();
        assert_eq!(names(&got), names(&sd), "{f}");
        if f != "scripted.pt" {
            assert_eq!(got, sd, "{f}");
        }
    }
    let yolo = named_bytes(&*opened(&dir.join("module_ckpt.pt")), "model");
    let names: Vec<&String> = yolo.iter().map(|x| &x.0).collect();
    assert_eq!(names, sd.iter().map(|x| &x.0).collect::<Vec<_>>());
}

/// Unrun classes (a whole module, TorchScript's `__torch__` modules and `build_intlist`, a
/// YOLO checkpoint, Lightning's OmegaConf `ListConfig` hyper-parameters) are notes: no file
/// torch or another project wrote has a problem; the classes are still named in the notes.
#[test]
fn unrun_classes_are_notes_not_problems() {
    let more = fixtures_dir().join("torch/more");
    let real = fixtures_dir().join("real/torch");
    let cases = [
        (more.join("module.pt"), "Net"),
        (more.join("module_ckpt.pt"), "Net"),
        (more.join("scripted.pt"), "build_intlist"),
        (real.join("pesto-pitch-2.0.1_mir-1k_g7.ckpt"), "ListConfig"),
    ];
    for (path, class) in cases {
        let s = opened(&path).summary().unwrap();
        assert!(
            s.problems.is_empty(),
            "{}: {:?}",
            path.display(),
            s.problems
        );
        assert!(
            s.notes
                .iter()
                .any(|n| n.contains(class) && n.contains("not run")),
            "{}: {:?}",
            path.display(),
            s.notes
        );
    }
    for e in std::fs::read_dir(&real).unwrap() {
        let path = e.unwrap().path();
        if let Ok(Some(m)) = open_path(&path, &ReaderOptions::default()) {
            let s = m.summary().unwrap();
            assert!(
                s.problems.is_empty(),
                "{}: {:?}",
                path.display(),
                s.problems
            );
        }
    }
}
