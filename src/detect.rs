//! What a SOURCE is (SPEC §1). Each reader recognises its own forms (`tf::detect`,
//! `angel::is_model_dir`, `numpy::is_source`, …); `FORMATS` asks them in a stated order and the
//! first to take the path opens it. A new format is one line there (and its reader).

use std::path::Path;
use std::sync::Arc;

use crate::model::{Model, OpenError, ReaderOptions};
use crate::monolith::WithTables;
use crate::source::ReadExt;

/// A kind's opener: the model at a path if it is of that kind, `Ok(None)` if not.
type Opener = fn(&Path, &ReaderOptions) -> Result<Option<Arc<dyn Model>>, OpenError>;

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
/// - TensorFlow before the rest: its forms are named by their files (`.index`, `checkpoint`,
///   `saved_model.pb`, `.pb`, `.meta`) and hold Monolith tables of their own (`assets/`);
/// - Angel (a directory of matrices with `meta` files), then numpy (`.npy`/`.npz` by magic);
/// - a run directory before safetensors and torch: several files of theirs side by side are a
///   run's checkpoints, not one model's shards (the readers take an index or shard names);
/// - GGUF last: one file, by its magic.
const FORMATS: &[Format] = &[
    Format {
        in_dir: "a Monolith PS export (assets/ with hash-table shards)",
        as_file: None,
        open: monolith_ps_export,
    },
    Format {
        in_dir: "V2 checkpoints (*.index) or V1 ones, a `checkpoint` state file, a SavedModel \
                 (saved_model.pb), a frozen graph (*.pb), a MetaGraph (*.meta)",
        as_file: Some(
            "a TensorFlow checkpoint ({index} beside it), a V1 checkpoint, a frozen graph or \
             MetaGraph",
        ),
        open: tensorflow,
    },
    Format {
        in_dir: "an Angel model directory",
        as_file: None,
        open: |path, opts| {
            (crate::angel::is_model_dir(&opts.storage, path))
                .then(|| crate::angel::open(path, opts))
                .transpose()
        },
    },
    Format {
        in_dir: ".npy/.npz files",
        as_file: Some("an .npy or .npz file"),
        open: |path, opts| {
            (crate::numpy::is_source(&*opts.storage, path))
                .then(|| crate::numpy::open(path, opts))
                .transpose()
        },
    },
    Format {
        in_dir: "a training run's torch.save or safetensors files",
        as_file: None,
        open: run_directory,
    },
    Format {
        in_dir: "safetensors files",
        as_file: Some("a safetensors file"),
        open: crate::safetensors::open_path,
    },
    Format {
        in_dir: "torch.save files",
        as_file: Some("a torch.save file (zip or legacy)"),
        open: crate::torch::open_path,
    },
    Format {
        in_dir: "a GGUF file",
        as_file: Some("a GGUF file"),
        open: |path, opts| {
            (crate::gguf::is_source(&*opts.storage, path))
                .then(|| crate::gguf::open(path, opts))
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

/// The model at `path`, read by whichever reader recognises it.
pub fn model_at(path: &Path, opts: &ReaderOptions) -> Result<Arc<dyn Model>, OpenError> {
    for format in FORMATS {
        if let Some(model) = (format.open)(path, opts)? {
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
        let mut what = one_of(&FORMATS.iter().map(|f| f.in_dir).collect::<Vec<_>>());
        let inside = models_inside(path, opts);
        if inside.is_empty() {
            // A training run before its first save: empty now, filled as saves appear.
            let mut empty = crate::model::flat::Flat::new("none yet");
            empty.problem(format!("no model here yet (looked for {what})"));
            return Ok(Arc::new(empty));
        }
        what.push_str(&format!("; a model one level down: {}", inside.join(", ")));
        what
    } else {
        if let Some(what) = damaged(path, opts) {
            return Err(OpenError::Unsupported {
                path: path.to_path_buf(),
                what,
            });
        }
        let prefix = crate::tf::detect::strip_checkpoint_suffix(path);
        let index = crate::tf::detect::index_path(&prefix);
        let files: Vec<&str> = FORMATS.iter().filter_map(|f| f.as_file).collect();
        one_of(&files).replace("{index}", &index.display().to_string())
    };
    Err(OpenError::NotRecognised {
        path: path.to_path_buf(),
        looked_for,
    })
}

/// A TensorFlow source, with the Monolith hash tables exported beside it (`assets/`).
fn tensorflow(path: &Path, opts: &ReaderOptions) -> Result<Option<Arc<dyn Model>>, OpenError> {
    let Some(model) = crate::tf::detect::open(path, opts)? else {
        return Ok(None);
    };
    let assets = crate::monolith::asset_dirs(path);
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
        let read = |at: u64, buf: &mut [u8]| -> Result<(), crate::source::SourceError> {
            buf.copy_from_slice(&file.read_vec(at, buf.len())?);
            Ok(())
        };
        return Some(match crate::codec::zip::entries(file.size(), read) {
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

/// A directory of checkpoints of a training run: several `torch.save` files (`epoch1.pt`,
/// `last.pt`, `*.ckpt`) or safetensors files, each a member named by its file name, `latest`
/// the newest. `None` for one model: a directory with an index of shards, `model.safetensors`
/// or `pytorch_model.bin` (the readers' own), files all named as shards, or one safetensors
/// file alone.
fn run_directory(path: &Path, opts: &ReaderOptions) -> Result<Option<Arc<dyn Model>>, OpenError> {
    let fs = &opts.storage;
    if !fs.is_dir(path) {
        return Ok(None);
    }
    let Ok(entries) = fs.list(path) else {
        return Ok(None);
    };
    let one_model = entries.iter().any(|(n, _)| {
        n.to_str().is_some_and(|n| {
            n.ends_with(".index.json") || n == "model.safetensors" || n == "pytorch_model.bin"
        })
    });
    if one_model {
        return Ok(None);
    }
    let mut members = Vec::new();
    let mut newest: Option<(std::time::SystemTime, Vec<u8>)> = None;
    for (name, kind) in entries.into_iter().take(MAX_RUN_FILES) {
        let file = path.join(&name);
        let Some(text) = name.to_str() else { continue };
        if kind != crate::source::EntryKind::File || text.ends_with(".json") {
            continue;
        }
        // Opened once: its kind and its mtime.
        let Ok(opened) = fs.open(&file) else { continue };
        if !(text.ends_with(".safetensors") || crate::torch::is_torch_reader(&*opened)) {
            continue;
        }
        let stamp = fs
            .stamp(&file)
            .map_err(|e| OpenError::unreadable(&file, e))?
            .unwrap_or_default();
        let (o, f) = (opts.clone(), file.clone());
        let open =
            Box::new(
                move || match f.to_str().is_some_and(|n| n.ends_with(".safetensors")) {
                    true => crate::safetensors::open(std::slice::from_ref(&f), &o),
                    false => crate::torch::open(std::slice::from_ref(&f), &o),
                },
            );
        let mtime = opened.mtime();
        if newest.as_ref().is_none_or(|(t, _)| mtime > *t) {
            newest = Some((mtime, text.as_bytes().to_vec()));
        }
        members.push((
            text.as_bytes().to_vec(),
            opts.members.get_or_make(&file, stamp, open),
        ));
    }
    let shards = members
        .iter()
        .all(|(n, _)| n.windows(4).any(|w| w == b"-of-"));
    // One safetensors file is a model of its own (`safetensors::files_of`); one torch.save
    // file of a run is its first member, as the second will be.
    let lone_safetensors = members.len() == 1 && members[0].0.ends_with(b".safetensors");
    if members.is_empty() || shards || lone_safetensors {
        return Ok(None);
    }
    let latest = newest.map(|(_, n)| n);
    Ok(Some(Arc::new(crate::model::multi::MultiModel::new(
        members, latest,
    ))))
}

/// The most files of a run directory looked at.
const MAX_RUN_FILES: usize = 100_000;

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
    let variables = match fs.is_file(&crate::tf::detect::index_path(&prefix)) {
        true => crate::tf::detect::open(&prefix, opts)?,
        false => None,
    };
    let dirs = [path.join("assets")];
    Ok(WithTables::find(variables, &dirs, opts).map(|w| Arc::new(w) as Arc<dyn Model>))
}

/// The sub-directories of `dir` that are models themselves (a user pointed one level too
/// high: `daw/` holding `daw/angel`), at most a few, for the "not recognised" message.
fn models_inside(dir: &Path, opts: &ReaderOptions) -> Vec<String> {
    let Ok(entries) = opts.storage.list(dir) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for (name, kind) in entries {
        if kind != crate::source::EntryKind::Dir || out.len() == 3 {
            continue;
        }
        let sub = dir.join(&name);
        let known = crate::angel::is_model_dir(&opts.storage, &sub)
            || matches!(crate::tf::detect::open(&sub, opts), Ok(Some(_)));
        if known {
            out.push(sub.display().to_string());
        }
    }
    out.sort();
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A directory holding a model one level down says where it is.
    #[test]
    fn not_recognised_points_one_level_down() {
        let tmp = tempfile::tempdir().unwrap();
        let angel = crate::testing::fixtures_dir().join("angel/lr35/model");
        let down = tmp.path().join("daw/angel/input_weight");
        std::fs::create_dir_all(&down).unwrap();
        for f in std::fs::read_dir(angel.join("input_weight")).unwrap() {
            let f = f.unwrap();
            std::fs::copy(f.path(), down.join(f.file_name())).unwrap();
        }
        let daw = tmp.path().join("daw");
        let err = model_at(&daw, &ReaderOptions::default())
            .err()
            .unwrap()
            .to_string();
        assert!(
            err.contains("one level down") && err.contains("daw/angel"),
            "{err}"
        );
        assert!(
            err.contains("frozen graph") && err.contains("Angel"),
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
        assert!(err.contains("Monolith") && err.contains(".npy"), "{err}");
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
        for f in std::fs::read_dir(crate::testing::fixtures_dir().join("tf/multi_shard")).unwrap() {
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
