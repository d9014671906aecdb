//! What a SOURCE is (SPEC §1): each reader recognises its own forms (`tf::detect`,
//! `angel::is_model_dir`); this asks them in turn.

use std::path::Path;
use std::sync::Arc;

use crate::model::{Model, OpenError, ReaderOptions};
use crate::monolith::WithTables;

/// The model at `path`, read by whichever reader recognises it.
pub fn model_at(path: &Path, opts: &ReaderOptions) -> Result<Arc<dyn Model>, OpenError> {
    // Monolith hash tables ride along with the TF model they were exported with.
    let assets = crate::monolith::asset_dirs(path);
    let with_tables = |model: Arc<dyn Model>| -> Arc<dyn Model> {
        match WithTables::find(Some(model.clone()), &assets, opts) {
            Some(w) => Arc::new(w),
            None => model,
        }
    };
    let fs = &opts.storage;
    if let Some(ps) = monolith_ps_export(path, opts)? {
        return Ok(ps);
    }
    if let Some(model) = crate::tf::detect::open(path, opts)? {
        return Ok(with_tables(model));
    }
    if crate::angel::is_model_dir(fs, path) {
        return crate::angel::open(path, opts);
    }
    if crate::numpy::is_source(&**fs, path) {
        return crate::numpy::open(path, opts);
    }
    if let Some(files) = crate::safetensors::files_of(&**fs, path)? {
        return crate::safetensors::open(&files, opts);
    }
    if let Some(files) = crate::torch::files_of(&**fs, path)? {
        return crate::torch::open(&files, opts);
    }
    if crate::gguf::is_source(&**fs, path) {
        return crate::gguf::open(path, opts);
    }
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
    let prefix = crate::tf::detect::strip_checkpoint_suffix(path);
    let looked_for = if fs.is_dir(path) {
        let mut what = "V2 checkpoints (*.index) or V1 ones, a `checkpoint` state file, a \
                        SavedModel (saved_model.pb), a frozen graph (*.pb), a MetaGraph \
                        (*.meta), an Angel model directory, safetensors files, a PyTorch checkpoint, or a GGUF file"
            .to_string();
        let inside = models_inside(path, opts);
        if !inside.is_empty() {
            what.push_str(&format!("; a model one level down: {}", inside.join(", ")));
        }
        what
    } else {
        format!(
            "a TensorFlow checkpoint, {}",
            crate::tf::detect::index_path(&prefix).display()
        )
    };
    Err(OpenError::NotRecognised {
        path: path.to_path_buf(),
        looked_for,
    })
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
