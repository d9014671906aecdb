//! Opening SOURCE as the commands do: `-o` options parsed, a path made absolute or a URL
//! opened, the model read by whichever reader knows it, and the tree a mount shows.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::SystemTime;

use crate::fs::live::Follow;
use crate::fs::{Tree, TreeConfig};
use crate::options::{OptionError, Options, Refresh};
use modelfs_io::source::remote;
use modelfs_model::Model;

/// Applies every `-o` argument in order; unknown options are usage errors.
pub fn parse_options(args: &[String]) -> Result<Options, OptionError> {
    let mut opts = Options::default();
    for a in args {
        opts.apply(a)?;
    }
    Ok(opts)
}

/// Why SOURCE could not be opened: the reader's one-line reason, said of SOURCE as the user
/// gave it (a URL once, not the key inside it).
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub struct SourceError {
    pub message: String,
    /// The source is not there (no file, key or prefix of that name): the API's
    /// `ErrorKind::Missing`, Python's `FileNotFoundError`.
    pub missing: bool,
}

impl SourceError {
    fn new(message: impl Into<String>) -> SourceError {
        SourceError {
            message: message.into(),
            missing: false,
        }
    }
}

/// SOURCE as an absolute path (readers may reopen files by path later, after a daemon chdir).
/// SOURCE as shown (mount's fsname): a URL as given, a local path made absolute.
pub fn absolute_source(source: &Path) -> PathBuf {
    if remote_url(source).is_some() {
        return source.to_path_buf();
    }
    std::path::absolute(source).unwrap_or_else(|_| source.to_path_buf())
}

/// The name of SOURCE's persistent store: as shown, lossy for paths that are not UTF-8.
pub fn store_name(source: &Path) -> String {
    absolute_source(source).to_string_lossy().into_owned()
}

pub fn remote_url(source: &Path) -> Option<&str> {
    source.to_str().filter(|s| remote::is_remote(s))
}

/// Opens SOURCE (a local path or a URL); failures are exit status 2 with the reader's
/// one-line reason.
pub fn open_model(source: &Path, opts: &Options) -> Result<Arc<dyn Model>, SourceError> {
    open_source(source, opts, Opening::Once).map(|(model, _)| model)
}

/// What SOURCE is opened for.
#[derive(Clone, Copy, PartialEq)]
enum Opening {
    /// A one-shot command: a source with no model is an error.
    Once,
    /// A mount: a directory with no model yet mounts empty (a training run before its first
    /// save); `following` when the mount looks at its source again.
    Mount { following: bool },
}

/// `open_model`, and how to open it again as it is then (the same reader options: the
/// members opened are found again). When `following`, the source's fingerprint is taken
/// before the open, so that a change made while it opens is never taken for the state shown.
fn open_source(
    source: &Path,
    opts: &Options,
    opening: Opening,
) -> Result<(Arc<dyn Model>, Follow), SourceError> {
    let following = opening == Opening::Mount { following: true };
    let open = match opening {
        Opening::Once => modelfs_detect::model_at,
        Opening::Mount { .. } => modelfs_detect::model_or_empty,
    };
    let mut reader = opts.reader_for(&store_name(source));
    let path = match remote_url(source) {
        Some(url) => {
            let (storage, key) =
                remote::open(url, &opts.remote()).map_err(|e| SourceError::new(e.to_string()))?;
            reader.storage = storage;
            key
        }
        None => absolute_source(source),
    };
    let local = remote_url(source).is_none();
    let watch = following && local;
    let period = (following && !local)
        .then(|| opts.refresh.remote_period())
        .flatten();
    let opened_from = (watch || period.is_some())
        .then(|| crate::fs::live::fingerprint(&*reader.storage, &path))
        .flatten();
    let model = open(&path, &reader).map_err(|e| {
        let missing = matches!(e, modelfs_model::OpenError::Missing { .. });
        let mut f = opening_failure(source, &path, e);
        f.missing = missing;
        f
    })?;
    let follow = Follow {
        path: path.clone(),
        storage: Arc::clone(&reader.storage),
        watch,
        period,
        opened_from,
        reopen: Box::new(move || open(&path, &reader).map_err(|e| e.to_string())),
    };
    Ok((model, follow))
}

/// The failure to open `source` (read at `path`) with `e`.
fn opening_failure(source: &Path, path: &Path, e: modelfs_model::OpenError) -> SourceError {
    match remote_url(source) {
        // Said of the URL once: a key the error starts with is the URL's (`m: …` of `gs://b/m`).
        Some(url) => {
            let why = e.to_string();
            let key = format!("{}: ", path.display());
            let why = why.strip_prefix(&key).unwrap_or(&why);
            let url = url.trim_end_matches('/');
            match why.starts_with(url) {
                true => SourceError::new(why.to_string()),
                false => SourceError::new(format!("{url}: {why}")),
            }
        }
        None => SourceError::new(e.to_string()),
    }
}

/// The source's mtime (for directories): the path itself, else `<prefix>.index`; the time of
/// the mount for a remote source.
pub fn source_mtime(source: &Path) -> SystemTime {
    if remote_url(source).is_some() {
        return SystemTime::now();
    }
    std::fs::metadata(source)
        .or_else(|_| std::fs::metadata(modelfs_tf::detect::index_path(source)))
        .and_then(|m| m.modified())
        .unwrap_or(SystemTime::UNIX_EPOCH)
}

/// The tree that a mount of SOURCE with `opts` shows, for a one-shot command (`ls`, `cat`):
/// a source with no model is an error, as for `open_model`.
pub fn build_tree(source: &Path, opts: &Options) -> Result<Arc<Tree>, SourceError> {
    let (model, _) = open_source(source, opts, Opening::Once)?;
    Ok(tree_of(model, source, opts))
}

/// `build_tree`, and how the mount follows its source (`None`: `refresh=never`).
pub fn build_mount_tree(
    source: &Path,
    opts: &Options,
) -> Result<(Arc<Tree>, Option<Follow>), SourceError> {
    let following = opts.refresh != Refresh::Never;
    let (model, follow) = open_source(source, opts, Opening::Mount { following })?;
    let follow = (follow.watch || follow.period.is_some()).then_some(follow);
    Ok((tree_of(model, source, opts), follow))
}

fn tree_of(model: Arc<dyn Model>, source: &Path, opts: &Options) -> Arc<Tree> {
    let mut cfg = TreeConfig::for_user(opts.uid, opts.gid, source_mtime(source));
    cfg.text_size = opts.text_size;
    Arc::new(Tree::new(
        model,
        crate::fs::layout_ctx(opts, &store_name(source)),
        cfg,
    ))
}
