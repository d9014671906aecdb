//! What a SOURCE is (SPEC §1). Each reader recognises its own forms (`tf::detect`,
//! `angel::is_model_dir`, `numpy::is_source`, …); `FORMATS` asks them in a stated order and the
//! first to take the path opens it. A new format is one line there (and its reader).
//!
//! The entry point is `model_at`: the model a path holds, whatever its format, as the
//! format-neutral `modelfs_model::Model` (metadata only: no tensor's data is read to open it).
//!
//! ```
//! use modelfs_model::DirEntry;
//! let prefix = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
//!     .join("../../fixtures/tf/multi_shard/ckpt");
//! let model = modelfs_detect::model_at(&prefix, &Default::default()).unwrap();
//! // The top directory lists tensors `a` and `b` and a directory `c`.
//! let top = model.list_dir(&[]).unwrap();
//! assert!(top.contains(&DirEntry::Tensor(b"a".to_vec())));
//! assert!(top.contains(&DirEntry::Dir(b"c".to_vec())));
//! ```

use std::path::Path;
use std::sync::Arc;

use modelfs_io::source::ReadExt;
use modelfs_model::{Model, OpenError, ReaderOptions};
use modelfs_monolith::WithTables;

mod collection;
pub mod fingerprint;

/// A kind's opener: the model at a path if it is of that kind, `Ok(None)` if not; the last
/// argument is how many levels of directories of model directories may still be looked into.
type Opener = fn(&Path, &ReaderOptions, usize) -> Result<Option<Arc<dyn Model>>, OpenError>;

/// Levels of directories of model directories below a source (`dense/` holding
/// `savedmodel/` holding the models `a/` and `b/`: 2).
const NESTING: usize = 2;

/// One kind of source.
struct Format {
    /// What a "not recognised" message says was looked for in a directory.
    in_dir: &'static str,
    /// … and for a file (`None`: never a single file); `{index}` is the index path a
    /// checkpoint prefix would have.
    as_file: Option<&'static str>,
    open: Opener,
}

/// The kinds, asked in this order (the first that takes a path opens it):
/// - a Monolith PS export before TensorFlow: its `variables/` is a TF bundle, which TF would
///   show without the export's tables;
/// - an Orbax checkpoint before TensorFlow: older Flax saves keep a `checkpoint` file, which
///   is not TensorFlow's (Orbax is known by `_METADATA`, `manifest.ocdbt`,
///   `_CHECKPOINT_METADATA`);
/// - TensorFlow before the rest: its forms are named by their files (`.index`, `checkpoint`,
///   `saved_model.pb`, `.pb`, `.meta`) and hold Monolith tables of their own (`assets/`);
/// - Angel (a directory of matrices with `meta` files), then numpy (`.npy`/`.npz` by magic),
///   then ONNX (a `.onnx` file, or a directory's only one: a model with its external data),
///   then a PyTorch DCP checkpoint (its `.distcp` files hold `torch.save` archives, which the
///   torch reader must not take for one), then a Keras file (a `.keras` zip, an HDF5 file);
/// - models side by side (`detect::collection`) before safetensors and torch: several files of
///   theirs side by side are a run's checkpoints, not one model's shards (the readers take an
///   index or shard names); GGUF, `.npz` files and model sub-directories are members too;
/// - GGUF last: one file, by its magic.
const FORMATS: &[Format] = &[
    Format {
        in_dir: "a Monolith PS export (assets/ with hash-table shards)",
        as_file: None,
        open: |path, opts, _| monolith_ps_export(path, opts),
    },
    Format {
        in_dir: "an Orbax checkpoint (_METADATA, manifest.ocdbt) or a step of one",
        as_file: None,
        open: |path, opts, _| modelfs_orbax::open_path(path, opts),
    },
    Format {
        in_dir: "V2 checkpoints (*.index) or V1 ones, a `checkpoint` state file, a SavedModel \
                 (saved_model.pb), a frozen graph (*.pb), a MetaGraph (*.meta)",
        as_file: Some(
            "a TensorFlow checkpoint ({index} beside it), a V1 checkpoint, a frozen graph or \
             MetaGraph",
        ),
        open: |path, opts, _| tensorflow(path, opts),
    },
    Format {
        in_dir: "an Angel model directory",
        as_file: None,
        open: |path, opts, _| {
            (modelfs_angel::is_model_dir(&opts.storage, path))
                .then(|| modelfs_angel::open(path, opts))
                .transpose()
        },
    },
    Format {
        in_dir: ".npy/.npz files",
        as_file: Some("an .npy or .npz file"),
        open: |path, opts, _| {
            (modelfs_numpy::is_source(&*opts.storage, path))
                .then(|| modelfs_numpy::open(path, opts))
                .transpose()
        },
    },
    Format {
        in_dir: "an .onnx file",
        as_file: Some("an .onnx file"),
        open: |path, opts, _| {
            modelfs_onnx::model_file(&*opts.storage, path)
                .map(|f| modelfs_onnx::open(&f, opts))
                .transpose()
        },
    },
    Format {
        in_dir: "a PyTorch distributed checkpoint (.metadata and .distcp files)",
        as_file: None,
        open: |path, opts, _| modelfs_torch::dcp::open_path(path, opts),
    },
    Format {
        in_dir: "a Keras file (.keras, .weights.h5, .h5)",
        as_file: Some("a Keras file (.keras zip, HDF5, or the .weights.json of sharded weights)"),
        open: |path, opts, _| modelfs_keras::open_path(path, opts),
    },
    Format {
        in_dir: "models side by side (a training run's torch.save or safetensors files, GGUF, \
                 .npz, model sub-directories)",
        as_file: None,
        open: collection::open,
    },
    Format {
        in_dir: "safetensors files",
        as_file: Some("a safetensors file"),
        open: |path, opts, _| modelfs_safetensors::open_path(path, opts),
    },
    Format {
        in_dir: "torch.save files",
        as_file: Some("a torch.save file (zip or legacy)"),
        open: |path, opts, _| modelfs_torch::open_path(path, opts),
    },
    Format {
        in_dir: "a GGUF file",
        as_file: Some("a GGUF file"),
        open: |path, opts, _| {
            (modelfs_gguf::is_source(&*opts.storage, path))
                .then(|| modelfs_gguf::open(path, opts))
                .transpose()
        },
    },
];

/// "a, b, or c".
fn one_of(items: &[&str]) -> String {
    match items {
        [] => String::new(),
        [one] => (*one).to_string(),
        [rest @ .., last] => format!("{}, or {last}", rest.join(", ")),
    }
}

/// The model at `path`, read by whichever reader recognises it. A directory with no model
/// (nor any one or two levels down) is an error naming what was looked for: a one-shot
/// command pointed at the wrong level must not pass as an empty model.
pub fn model_at(path: &Path, opts: &ReaderOptions) -> Result<Arc<dyn Model>, OpenError> {
    open_at(path, opts, NESTING, false)
}

/// `model_at`, but a directory with no model yet is an empty model that says so: a training
/// run mounted before its first save, filled as saves appear (what `mount` opens).
pub fn model_or_empty(path: &Path, opts: &ReaderOptions) -> Result<Arc<dyn Model>, OpenError> {
    open_at(path, opts, NESTING, true)
}

fn open_at(
    path: &Path,
    opts: &ReaderOptions,
    depth: usize,
    wait: bool,
) -> Result<Arc<dyn Model>, OpenError> {
    for format in FORMATS {
        if let Some(model) = (format.open)(path, opts, depth)? {
            return Ok(model);
        }
    }
    let fs = &opts.storage;
    let missing = match fs.is_local() {
        true => std::fs::symlink_metadata(path).is_err(),
        false => fs
            .kind(path)
            .map_err(|e| OpenError::unreadable(path, e))?
            .is_none(),
    };
    if missing {
        return Err(OpenError::Missing {
            path: path.to_path_buf(),
        });
    }
    let looked_for = if fs.is_dir(path) {
        let what = one_of(&FORMATS.iter().map(|f| f.in_dir).collect::<Vec<_>>());
        if wait {
            // A training run before its first save: empty now, filled as saves appear.
            let mut empty = modelfs_model::flat::Flat::new("none yet");
            empty.problem(format!("no model here yet (looked for {what})"));
            return Ok(Arc::new(empty));
        }
        format!("{what}{}", below(path, opts))
    } else {
        if let Some(what) = damaged(path, opts) {
            return Err(OpenError::Unsupported {
                path: path.to_path_buf(),
                what,
            });
        }
        let prefix = modelfs_tf::detect::strip_checkpoint_suffix(path);
        let index = modelfs_tf::detect::index_path(&prefix);
        let files: Vec<&str> = FORMATS.iter().filter_map(|f| f.as_file).collect();
        one_of(&files).replace("{index}", &index.display().to_string())
    };
    Err(OpenError::NotRecognised {
        path: path.to_path_buf(),
        looked_for,
    })
}

/// What a directory with no model holds one level down, for its "not recognised" message:
/// the sub-directories looked into (a few), or that there are none.
fn below(dir: &Path, opts: &ReaderOptions) -> String {
    const SHOWN: usize = 5;
    let mut subs: Vec<String> = opts
        .storage
        .list(dir)
        .into_iter()
        .flatten()
        .filter(|(_, k)| *k == modelfs_io::source::EntryKind::Dir)
        .map(|(n, _)| format!("{}/", n.to_string_lossy()))
        .collect();
    subs.sort();
    match subs.len() {
        0 => "; no sub-directories".into(),
        n if n <= SHOWN => format!(
            "; no model {NESTING} levels down either, in {}",
            subs.join(", ")
        ),
        n => format!(
            "; no model {NESTING} levels down either, in {} and {} more",
            subs[..SHOWN].join(", "),
            n - SHOWN
        ),
    }
}

/// A TensorFlow source, with the Monolith hash tables exported beside it (`assets/`).
fn tensorflow(path: &Path, opts: &ReaderOptions) -> Result<Option<Arc<dyn Model>>, OpenError> {
    let Some(model) = modelfs_tf::detect::open(path, opts)? else {
        return Ok(None);
    };
    let assets = modelfs_monolith::asset_dirs(path);
    Ok(Some(
        match WithTables::find(Some(model.clone()), &assets, opts) {
            Some(w) => Arc::new(w),
            None => model,
        },
    ))
}

/// What is wrong with a file whose first bytes say which format it is meant to be, when no
/// reader took it: a zip whose directory cannot be read, a pickle that is not a `torch.save`
/// file.
fn damaged(path: &Path, opts: &ReaderOptions) -> Option<String> {
    let file = opts.storage.open(path).ok()?;
    let head = file.read_vec(0, 8.min(file.size()) as usize).ok()?;
    if head.starts_with(b"PK\x03\x04") {
        let read = |at: u64, buf: &mut [u8]| -> Result<(), modelfs_io::source::SourceError> {
            buf.copy_from_slice(&file.read_vec(at, buf.len())?);
            Ok(())
        };
        return Some(match modelfs_io::codec::zip::entries(file.size(), read) {
            Err(e) => format!(
                "a zip archive whose central directory cannot be read ({e}): truncated? (a \
                 torch.save file and an .npz are zips)"
            ),
            Ok(_) => "a zip archive that is neither a torch.save file (no <name>/data.pkl) nor \
                      an .npz (no .npy members)"
                .into(),
        });
    }
    // PROTO 2–5: a pickle (torch.save's start with its magic number, or are zips).
    if head.len() >= 2 && head[0] == 0x80 && (2..=5).contains(&head[1]) {
        return Some(
            "a pickle that is not a torch.save file (not its magic number, nor a zip): not \
             read (a pickle is never unpickled)"
                .into(),
        );
    }
    None
}

/// A Monolith PS export directory: `assets/` with hash-table shards and `variables/` (a TF
/// bundle, maybe absent), but no `saved_model.pb`: its variables plus its tables.
fn monolith_ps_export(
    path: &Path,
    opts: &ReaderOptions,
) -> Result<Option<Arc<dyn Model>>, OpenError> {
    let fs = &opts.storage;
    let saved_model = ["saved_model.pb", "saved_model.pbtxt"];
    if !fs.is_dir(&path.join("assets")) || saved_model.iter().any(|f| fs.is_file(&path.join(f))) {
        return Ok(None);
    }
    let prefix = path.join("variables").join("variables");
    let variables = match fs.is_file(&modelfs_tf::detect::index_path(&prefix)) {
        true => modelfs_tf::detect::open(&prefix, opts)?,
        false => None,
    };
    let dirs = [path.join("assets")];
    Ok(WithTables::find(variables, &dirs, opts).map(|w| Arc::new(w) as Arc<dyn Model>))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A directory holding a model one level down shows it as a member, named by its
    /// sub-directory.
    #[test]
    fn a_model_one_level_down_is_a_member() {
        let tmp = tempfile::tempdir().unwrap();
        let angel = modelfs_model::testing::fixtures_dir().join("angel/lr35/model");
        let down = tmp.path().join("daw/angel/input_weight");
        std::fs::create_dir_all(&down).unwrap();
        for f in std::fs::read_dir(angel.join("input_weight")).unwrap() {
            let f = f.unwrap();
            std::fs::copy(f.path(), down.join(f.file_name())).unwrap();
        }
        std::fs::create_dir_all(tmp.path().join("daw/logs")).unwrap();
        let daw = model_at(&tmp.path().join("daw"), &ReaderOptions::default()).unwrap();
        let root = daw.list_dir(&[]).unwrap();
        assert_eq!(
            root,
            vec![modelfs_model::DirEntry::Dir(b"angel".to_vec())],
            "logs/ holds no model"
        );
        assert_eq!(daw.summary().unwrap().format, "angel");
    }

    /// A directory with no model, nor any below: an error naming every kind looked for and
    /// the sub-directories looked into; only a mount (`model_or_empty`) waits for a save.
    #[test]
    fn no_model_here_nor_below_is_an_error_naming_every_kind() {
        let tmp = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(tmp.path().join("logs/deeper")).unwrap();
        std::fs::write(tmp.path().join("logs/events.txt"), "step 1").unwrap();
        let err = model_at(tmp.path(), &ReaderOptions::default())
            .err()
            .unwrap()
            .to_string();
        assert!(
            err.contains("not recognised") && err.contains("logs/"),
            "{err}"
        );
        // Every kind is named, in the order asked.
        let mut at = 0;
        for f in FORMATS {
            let found = err[at..].find(f.in_dir);
            assert!(
                found.is_some(),
                "{:?} missing or out of order: {err}",
                f.in_dir
            );
            at += found.unwrap_or(0);
        }
        let empty = model_or_empty(tmp.path(), &ReaderOptions::default()).unwrap();
        assert!(empty.list_dir(&[]).unwrap().is_empty());
        assert!(empty.summary().unwrap().problems[0].contains("no model here yet"));
    }

    /// A file no reader takes names every single-file kind.
    #[test]
    fn a_file_not_recognised_names_every_file_kind() {
        let tmp = tempfile::tempdir().unwrap();
        let file = tmp.path().join("notes.bin");
        std::fs::write(&file, b"hello, not a model").unwrap();
        let err = model_at(&file, &ReaderOptions::default())
            .err()
            .unwrap()
            .to_string();
        for f in FORMATS.iter().filter_map(|f| f.as_file) {
            let want = f.split(" ({index}").next().unwrap_or(f);
            assert!(err.contains(want), "{want:?} missing: {err}");
        }
        assert!(
            err.contains("notes.bin.index beside it") || err.contains(".index beside it"),
            "{err}"
        );
    }

    /// A truncated index says so, naming its path once.
    #[test]
    fn a_truncated_index_says_truncated_once() {
        let tmp = tempfile::tempdir().unwrap();
        for f in std::fs::read_dir(modelfs_model::testing::fixtures_dir().join("tf/multi_shard"))
            .unwrap()
        {
            let f = f.unwrap();
            if f.path().is_file() {
                std::fs::copy(f.path(), tmp.path().join(f.file_name())).unwrap();
            }
        }
        let index = tmp.path().join("ckpt.index");
        let len = std::fs::metadata(&index).unwrap().len();
        std::fs::OpenOptions::new()
            .write(true)
            .open(&index)
            .unwrap()
            .set_len(len / 2)
            .unwrap();
        let err = model_at(tmp.path(), &ReaderOptions::default())
            .err()
            .unwrap()
            .to_string();
        assert!(err.contains("truncated"), "{err}");
        assert_eq!(err.matches("ckpt.index").count(), 1, "{err}");
    }
}
