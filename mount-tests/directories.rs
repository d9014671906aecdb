//! Directories that are not one model (issue 69): a directory with no model fails every
//! one-shot command naming what is below it (only a mount waits for a first save); a
//! directory of model directories and a directory of model files of any kinds show every
//! model as a member.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use super::support::*;

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures")
}

fn run(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut cmd = Command::new(modelfs());
    cmd.env("MODELFS_LOG", "/dev/null").args(args);
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output().unwrap()
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// A path one level above nothing that is a model (`logs/` only): every one-shot command
/// exits 2 saying so and naming the sub-directory it looked into; none passes as an empty
/// model (`diff` "identical", `check` "0 problems").
#[test]
fn a_directory_with_no_model_fails_every_one_shot_command() {
    let tmp = tempfile::tempdir().unwrap();
    let typo = tmp.path().join("typo");
    std::fs::create_dir_all(typo.join("logs")).unwrap();
    std::fs::write(typo.join("logs/events.txt"), "step 1\n").unwrap();
    let t = typo.to_str().unwrap();
    let commands: Vec<Vec<&str>> = vec![
        vec!["check", t],
        vec!["stats", t],
        vec!["stats", "--check-finite", t],
        vec!["diff", t, t],
        vec!["diff", "--rows", t, t],
        vec!["list", t],
        vec!["list", "--json", t],
        vec!["info", t],
        vec!["ls", t],
        vec!["cat", t, "w.txt"],
        vec!["row", t, "emb", "1"],
        vec!["verify", t],
    ];
    for args in commands {
        let o = run(&args, &[]);
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}{}", stdout(&o));
        assert!(
            err.contains("not recognised") && err.contains("logs/"),
            "{args:?}: {err}"
        );
        assert!(
            err.contains("GGUF") && err.contains(".npz") && err.contains("sub-directories"),
            "{args:?}: every kind is named: {err}"
        );
    }
}

/// A directory of model directories (the repository's `fixtures/tf/hashtable/dense`: three
/// forms, each holding models `a` and `b`) shows each as a member, in one-shot commands and
/// in a mount; two such directories with different models differ.
#[test]
fn a_directory_of_model_directories_shows_each_as_a_member() {
    let dense = fixtures().join("tf/hashtable/dense");
    let d = dense.to_str().unwrap();
    let o = run(&["list", d], &[]);
    assert!(o.status.success(), "{}", stderr(&o));
    let list = stdout(&o);
    for form in ["tf1_meta", "savedmodel", "keras"] {
        for m in ["a", "b"] {
            assert!(
                list.lines().any(|l| l.starts_with(&format!("{form}/{m}/"))),
                "{form}/{m} missing:\n{list}"
            );
        }
    }
    let o = run(&["info", d], &[]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stdout(&o).contains("checkpoints: 3"), "{}", stdout(&o));

    // `typo/run_a/` and `typo2/run_b/` with different models: they differ (exit 1).
    let tmp = tempfile::tempdir().unwrap();
    let (a, b) = (
        tmp.path().join("typo/run_a"),
        tmp.path().join("typo2/run_b"),
    );
    std::fs::create_dir_all(&a).unwrap();
    std::fs::create_dir_all(&b).unwrap();
    std::fs::copy(fixtures().join("torch/tensor.pt"), a.join("sd.pt")).unwrap();
    std::fs::copy(fixtures().join("torch/checkpoint.pt"), b.join("ckpt.pt")).unwrap();
    let (ta, tb) = (tmp.path().join("typo"), tmp.path().join("typo2"));
    let o = run(&["diff", ta.to_str().unwrap(), tb.to_str().unwrap()], &[]);
    assert_eq!(o.status.code(), Some(1), "{}{}", stdout(&o), stderr(&o));
    assert!(
        stdout(&o).contains("only in A") && stdout(&o).contains("only in B"),
        "{}",
        stdout(&o)
    );

    let Some(fuse) = Fuse::check() else { return };
    let m = fuse.mount(&dense, "cache_dir=none");
    for form in ["tf1_meta", "savedmodel", "keras"] {
        let names: Vec<String> = std::fs::read_dir(m.path().join(form))
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert!(
            names.contains(&"a".into()) && names.contains(&"b".into()),
            "{form}: {names:?}"
        );
    }
    m.unmount_and_check();
}

/// A directory holding a GGUF, an `.npz`, a safetensors file and torch files beside a run's
/// sub-directory: every one a member; a file named as a model that no reader takes is a
/// problem line naming it, not dropped without a word.
#[test]
fn a_mixed_directory_shows_every_model_and_names_what_it_skips() {
    let tmp = tempfile::tempdir().unwrap();
    let zoo = tmp.path().join("zoo");
    std::fs::create_dir_all(zoo.join("run")).unwrap();
    let copy = |from: &str, to: &str| {
        std::fs::copy(fixtures().join(from), zoo.join(to)).unwrap();
    };
    copy("torch/tensor.pt", "run/epoch1.pt");
    copy("torch/checkpoint.pt", "run/epoch2.pt");
    copy("gguf/plain.gguf", "tiny.gguf");
    copy("numpy/arrays.npz", "feats.npz");
    copy("safetensors/dtypes.safetensors", "fp8.safetensors");
    copy("torch/tensor.pt", "sd.pt");
    let z = zoo.to_str().unwrap();
    let o = run(&["ls", z], &[]);
    assert!(o.status.success(), "{}", stderr(&o));
    let ls = stdout(&o);
    for member in [
        "run/",
        "run/epoch1.pt/",
        "tiny.gguf/",
        "feats.npz/",
        "fp8.safetensors/",
        "sd.pt/",
    ] {
        assert!(ls.lines().any(|l| l == member), "{member} missing:\n{ls}");
    }
    let o = run(&["info", z], &[]);
    let info = stdout(&o);
    assert!(o.status.success(), "{}", stderr(&o));
    for kind in ["gguf", "numpy", "pytorch", "safetensors"] {
        assert!(
            info.lines().next().is_some() && info.contains(kind),
            "{kind}: {info}"
        );
    }
    // (`dtypes.safetensors`'s own notes on F4 and F8_E8M0 aside.)
    assert!(!info.contains("skipped"), "{info}");

    std::fs::write(zoo.join("broken.gguf"), b"not a gguf at all").unwrap();
    let o = run(&["info", z], &[]);
    let info = stdout(&o);
    assert!(
        info.contains("broken.gguf: skipped"),
        "a skipped file is named: {info}"
    );
}

/// A sharded checkpoint (with its index, or shards by name alone) beside a GGUF and an `.npy`:
/// the checkpoint is one member named by its index or its shards, the others members of their
/// own — the GGUF is not dropped without a word, as it was when the index took the directory.
#[test]
fn a_sharded_checkpoint_beside_a_gguf_shows_both() {
    for with_index in [true, false] {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("hf");
        std::fs::create_dir_all(&dir).unwrap();
        for f in std::fs::read_dir(fixtures().join("torch/sharded")).unwrap() {
            let f = f.unwrap().path();
            if with_index || !f.to_str().unwrap().ends_with(".json") {
                std::fs::copy(&f, dir.join(f.file_name().unwrap())).unwrap();
            }
        }
        std::fs::copy(fixtures().join("gguf/plain.gguf"), dir.join("q4.gguf")).unwrap();
        let d = dir.to_str().unwrap();
        let o = run(&["list", d], &[]);
        assert!(o.status.success(), "{}", stderr(&o));
        let list = stdout(&o);
        for want in ["pytorch_model.bin/lm_head.weight", "\nq4.gguf/"] {
            assert!(list.contains(want), "{with_index}: {want} missing:\n{list}");
        }
        let o = run(&["info", d], &[]);
        assert!(o.status.success(), "{}", stderr(&o));
        assert!(stdout(&o).contains("gguf+pytorch"), "{}", stdout(&o));
        // Without the GGUF the directory is the one model, at the top as before.
        std::fs::remove_file(dir.join("q4.gguf")).unwrap();
        let o = run(&["list", d], &[]);
        if with_index {
            assert!(stdout(&o).starts_with("lm_head.weight"), "{}", stdout(&o));
        }
    }
}
