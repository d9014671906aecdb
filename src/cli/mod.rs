//! Command line (SPEC §4): mount, umount, ls, cat, info, index.
//!
//! Exit statuses: 0 success; 1 usage (bad arguments, unknown `-o` option, a path that does not
//! exist in the tree); 2 source not recognised or unreadable (including data that fails to
//! read in `cat`); 3 mount or unmount failed.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::SystemTime;

use clap::{Parser, Subcommand};

use crate::fs::live::Follow;
use crate::fs::{Tree, TreeConfig};
use crate::model::Model;
use crate::options::{Options, Refresh};
use crate::source::remote;

mod browse;
mod cache;
mod check;
mod compare;
mod daemon;
pub(crate) mod index;
#[cfg(test)]
mod index_tests;
mod inspect;
mod keymap;
mod mount;
pub(crate) mod mounts;
mod rowdiff;
#[cfg(test)]
mod rowdiff_tests;
mod serving_lock;
mod umount;

pub(crate) const EXIT_OK: i32 = 0;
pub(crate) const EXIT_USAGE: i32 = 1;
pub(crate) const EXIT_SOURCE: i32 = 2;
pub(crate) const EXIT_MOUNT: i32 = 3;

/// What SOURCE and `-o` accept: at the end of the help of every command that opens a source
/// (the options from their table, `options::SPECS`).
fn source_and_options() -> String {
    format!(
        "\
SOURCE: a TensorFlow checkpoint prefix (or its .index, .data-*, .meta file), a directory of
checkpoints, a SavedModel directory (or its saved_model.pb), a TF Serving base directory, an
Angel model directory; or s3://bucket/key, http(s)://host/path of the same forms.

OPTIONS (-o, comma-separated; also in /etc/fstab):
{}",
        crate::options::options_help()
    )
}

/// The commands whose help ends with `source_and_options`.
const OPENING_SOURCES: [&str; 11] = [
    "mount", "ls", "cat", "row", "stats", "diff", "check", "info", "list", "verify", "index",
];

/// The command line as parsed, with the help texts made from the options table.
fn command() -> clap::Command {
    use clap::CommandFactory;
    let opening = source_and_options();
    Cli::command()
        .after_help(format!("{opening}{AFTER_HELP}"))
        .mut_subcommands(|s| match OPENING_SOURCES.contains(&s.get_name()) {
            true => s.after_help(opening.clone()),
            false => s,
        })
}

/// The end of the top-level help, after `source_and_options`.
const AFTER_HELP: &str = "\n\n\
ENVIRONMENT: MODELFS_LOG (daemon log file), RUST_LOG (log level: error, warn, info, debug),
AWS_* (S3 credentials and region).

EXIT STATUS: 0 success; 1 usage (bad arguments, unknown option, a path not in the tree);
2 source not recognised or unreadable, or problems found by verify; 3 mount or unmount failed.

As a mount(8) helper (`ln -s $(command -v modelfs) /sbin/mount.fuse.modelfs`):
  mount -t fuse.modelfs SOURCE MOUNTPOINT -o OPTIONS, or in /etc/fstab:
  /models/run1  /mnt/run1  fuse.modelfs  defaults,layouts=all  0 0";

/// `-o`: any text (options are checked by `Options::apply`), with the option names offered to
/// shell completion.
#[derive(Clone)]
struct OptionList;

impl clap::builder::TypedValueParser for OptionList {
    type Value = String;
    fn parse_ref(
        &self,
        cmd: &clap::Command,
        arg: Option<&clap::Arg>,
        value: &std::ffi::OsStr,
    ) -> Result<String, clap::Error> {
        clap::builder::StringValueParser::new().parse_ref(cmd, arg, value)
    }
    fn possible_values(
        &self,
    ) -> Option<Box<dyn Iterator<Item = clap::builder::PossibleValue> + '_>> {
        // Made once for the process: clap takes the names as `&'static str`.
        static KEYS: std::sync::OnceLock<Vec<&'static str>> = std::sync::OnceLock::new();
        let keys = KEYS.get_or_init(|| {
            crate::options::keys()
                .map(|k| &*Box::leak(k.into_boxed_str()))
                .collect()
        });
        Some(Box::new(
            keys.iter().map(|k| clap::builder::PossibleValue::new(*k)),
        ))
    }
}

/// The `-o` argument, the same for every command that takes one.
#[derive(clap::Args, Debug)]
struct OptArgs {
    /// Options, comma-separated (see OPTIONS below).
    #[arg(short = 'o', value_name = "OPT,OPT…", global = true, value_parser = OptionList, hide_possible_values = true)]
    list: Vec<String>,
}

#[derive(Parser, Debug)]
#[command(
    name = "modelfs",
    version,
    about = "Mount TensorFlow checkpoints and Angel models read-only as files in the layouts you pick"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Mount SOURCE at MOUNTPOINT (created if missing, and removed again at unmount); returns
    /// once the mount is usable.
    Mount {
        /// Stay in the foreground (SIGINT/SIGTERM unmount).
        #[arg(short = 'f', long)]
        foreground: bool,
        /// Debug: log at debug level and stay in the foreground (libfuse's -d).
        #[arg(short = 'd')]
        debug: bool,
        #[command(flatten)]
        options: OptArgs,
        /// Append the daemon's log to FILE (like -o log=FILE).
        #[arg(long, value_name = "FILE")]
        log_file: Option<PathBuf>,
        /// Ignored (mount(8) passes them to helpers): -n no mtab, -s sloppy, -v verbose.
        #[arg(short = 'n', hide = true)]
        no_mtab: bool,
        #[arg(short = 's', hide = true)]
        sloppy: bool,
        #[arg(short = 'v', hide = true)]
        verbose: bool,
        /// The model (see SOURCE below).
        source: PathBuf,
        /// An empty directory (a warning is printed if it is not empty).
        mountpoint: PathBuf,
    },
    /// Unmount MOUNTPOINT (like `fusermount3 -u`; also clears a mount whose daemon died).
    Umount {
        /// Lazy: detach now, finish when the last file in it is closed.
        #[arg(short = 'z', long)]
        lazy: bool,
        mountpoint: PathBuf,
    },
    /// The persistent cache (cache_dir): `du` (what it holds) or `clean` (empty it).
    Cache {
        #[command(subcommand)]
        action: cache::CacheAction,
        #[command(flatten)]
        options: OptArgs,
    },
    /// Print the man page (roff) on stdout: `modelfs man > /usr/local/share/man/man1/modelfs.1`.
    Man,
    /// Print completions for SHELL (bash, zsh, fish, elvish, powershell) on stdout.
    Completions { shell: clap_complete::Shell },
    /// Every path of the tree under PATH, one per line, directories ending in `/`.
    Ls {
        #[command(flatten)]
        options: OptArgs,
        source: PathBuf,
        path: Option<OsString>,
    },
    /// The exact bytes the mounted file PATH would give.
    Cat {
        #[command(flatten)]
        options: OptArgs,
        source: PathBuf,
        path: OsString,
    },
    /// Rows of the keyed tensor NAME (its path in the mount, without a suffix) by ID: one
    /// `id<TAB>values` line per ID found, by lookup (the same as `NAME.rows/ID.txt`). Exit 1
    /// when an ID is not found (each is named on stderr).
    Row {
        /// A JSON array of objects instead (id, tensor, key, dtype, width, position,
        /// partition, values).
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        options: OptArgs,
        source: PathBuf,
        name: OsString,
        #[arg(required = true, allow_negative_numbers = true)]
        ids: Vec<i64>,
    },
    /// Statistics of every tensor at or below each PATH (all when none): count, min, max,
    /// mean, std, NaN/+Inf/-Inf/zero counts, L2 norm (over the finite values, in float64),
    /// read on all cores and remembered in the cache (cache_dir) for the next time.
    Stats {
        /// A JSON array of objects instead (name, dtype, count, min, max, mean, std, nan,
        /// posinf, neginf, zeros, l2).
        #[arg(long)]
        json: bool,
        /// Exit 2 when any value is NaN or infinite (naming the tensors).
        #[arg(long)]
        check_finite: bool,
        #[command(flatten)]
        options: OptArgs,
        source: PathBuf,
        paths: Vec<OsString>,
    },
    /// What differs between two models, tensor by tensor (by key): only in A, only in B,
    /// retyped (dtype or shape), changed (how many elements, max |Δ|, ‖B−A‖/‖A‖), identical.
    /// Both read lazily on all cores; equal stored checksums mean identical without a read.
    /// Exit 0 when identical, 1 when they differ, 2 on trouble.
    Diff {
        /// A JSON array of objects instead (name, status, dtype, shape, count, changed_count,
        /// max_abs_diff, rel_l2; `a` and `b` for retyped ones).
        #[arg(long)]
        json: bool,
        /// Rewrite keys of both models before matching them: REGEX=REPLACEMENT (`$1` for a
        /// group), rules applied in turn; repeatable. E.g. a PyTorch port of a TF model:
        /// --map '\.weight$=/kernel' --map '\.=/'.
        #[arg(long = "map", value_name = "REGEX=REPLACEMENT")]
        map: Vec<String>,
        /// Compare a 2-D tensor of B with A's transposed when its shape is A's reversed
        /// (PyTorch `Linear.weight` [out, in] against a TF kernel [in, out]; square ones too).
        #[arg(long)]
        transpose: bool,
        /// Compare keyed tables (embeddings, hash tables, DeepRec EVs, Angel matrices) id by
        /// id: one `id<TAB>added|removed|changed<TAB>max|Δ|` line per id that differs, then a
        /// `# TABLE` summary line per table (`--json`: one object per line). All tables in
        /// both when no TABLE is named.
        #[arg(long, conflicts_with_all = ["map", "transpose"])]
        rows: bool,
        #[command(flatten)]
        options: OptArgs,
        a: PathBuf,
        b: PathBuf,
        /// With --rows: the tables to compare (their paths in the mount).
        tables: Vec<OsString>,
    },
    /// Is the checkpoint sane: each optimizer slot of a keyed table (the keyed tables under
    /// its path with rows as wide) holds the table's ids, and every floating-point value is
    /// finite with |x| <= --max-abs. Exit 2 naming what fails.
    Check {
        /// The largest |x| a float may have.
        #[arg(long, value_name = "X", default_value_t = 1e6)]
        max_abs: f64,
        /// One JSON object (tensors_checked, tables, slots_checked, problems, errors).
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        options: OptArgs,
        source: PathBuf,
        /// Only what is at or below these paths of the mount.
        paths: Vec<OsString>,
    },
    /// Format, tensor count, dtypes, total bytes (per checkpoint for a directory of several),
    /// problems found in the metadata. Reads no tensor data: `verify` does.
    Info {
        #[command(flatten)]
        options: OptArgs,
        source: PathBuf,
    },
    /// One line per tensor: path in the mount, dtype, shape, bytes, partitions.
    List {
        /// A JSON array of objects instead (path, name, dtype, shape, bytes, partitions,
        /// sparse, problem).
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        options: OptArgs,
        source: PathBuf,
    },
    /// Read every byte of every tensor and check every checksum and structure; exit 2 with
    /// the list of problems when there are any.
    Verify {
        #[command(flatten)]
        options: OptArgs,
        source: PathBuf,
    },
    /// Precompute the exact size of every text file a mount with the same options shows,
    /// into the index cache (cache_dir), so later mounts know them without rendering.
    Index {
        #[command(flatten)]
        options: OptArgs,
        source: PathBuf,
    },
}

/// A failure with its exit status; the message is printed as `modelfs: <message>`.
#[derive(Debug)]
pub(crate) struct Failure {
    pub(crate) status: i32,
    /// `None`: nothing (more) to print — it was reported elsewhere, or there is nothing wrong
    /// to tell (the reader of our output went away).
    pub(crate) message: Option<String>,
}

impl Failure {
    pub(crate) fn new(status: i32, message: impl Into<String>) -> Failure {
        Failure {
            status,
            message: Some(message.into()),
        }
    }

    /// Ends the command with `status` without a message.
    pub(crate) fn silent(status: i32) -> Failure {
        Failure {
            status,
            message: None,
        }
    }
}

fn init_logging() {
    // `-d` / `-o debug` (libfuse's) ask for debug lines; logging starts before options parse.
    let debug = std::env::args()
        .skip(1)
        .any(|a| a == "-d" || a.split(',').any(|o| o == "debug"));
    let _ = log_builder(debug).try_init();
}

fn log_builder(debug: bool) -> env_logger::Builder {
    let env = env_logger::Env::default().default_filter_or(if debug { "debug" } else { "warn" });
    let mut b = env_logger::Builder::from_env(env);
    // fuser's own debug lines (every request, the session set-up) drown ours; `RUST_LOG`
    // naming fuser still gets them.
    let wants_fuser = std::env::var("RUST_LOG").is_ok_and(|v| v.contains("fuser"));
    if !wants_fuser {
        b.filter_module("fuser", log::LevelFilter::Warn);
        // "Failed to send FUSE reply": a reply to a request the kernel dropped (interrupted,
        // or the file system unmounted under it, as at Ctrl-C). Nothing a user can act on.
        b.filter_module("fuser::reply", log::LevelFilter::Off);
        // "Failed to umount filesystem" / "Unmount failed" (EINVAL): fuser unmounting again
        // at the end of a session the kernel has already unmounted — every clean unmount.
        b.filter_module("fuser::session", log::LevelFilter::Error);
        b.filter_module("fuser::mnt", log::LevelFilter::Error);
    }
    b.format(|buf, record| {
        use std::io::Write;
        if SYSLOG.load(std::sync::atomic::Ordering::Relaxed) {
            // RFC 3164 priority: facility daemon (3), the record's severity.
            let severity = match record.level() {
                log::Level::Error => 3,
                log::Level::Warn => 4,
                log::Level::Info => 6,
                _ => 7,
            };
            let pid = std::process::id();
            let (target, args) = (record.target(), record.args());
            let tag = MOUNT_TAG.get().map_or("", String::as_str);
            write!(
                buf,
                "<{}>modelfs[{pid}]: {tag}{target}: {args}",
                3 * 8 + severity
            )
        } else {
            let (level, target, args) = (record.level(), record.target(), record.args());
            let ts = buf.timestamp_millis();
            match MOUNT_TAG.get() {
                // Several mounts share one log file: each line says which it is about.
                Some(tag) => {
                    let pid = std::process::id();
                    writeln!(buf, "[{ts} {level:<5} {target}] modelfs[{pid}] {tag}{args}")
                }
                None => writeln!(buf, "[{ts} {level:<5} {target}] {args}"),
            }
        }
    });
    b
}

/// `MOUNTPOINT (SOURCE): `, set by a mount before it serves: the start of each of its log
/// lines, so that a line in a log shared by several mounts names its mount and source.
pub(crate) static MOUNT_TAG: std::sync::OnceLock<String> = std::sync::OnceLock::new();

/// Set once the daemon's stderr is a syslog socket (`daemon::detach_stdio`): each record is
/// then one syslog message, written in one datagram.
pub(crate) static SYSLOG: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Makes freed memory go back to the system. Rendered text chunks (hundreds of KiB each) are
/// allocated and freed by many threads; with glibc's defaults the mmap threshold adapts upward
/// and per-thread arenas keep freed chunks, so a mount reading a large checkpoint grew to
/// several times its cache size. A fixed threshold maps every large buffer on its own (freed
/// at once) and two arenas bound the rest.
fn tune_malloc() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only sets allocator parameters; called before any thread starts.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 128 << 10);
        libc::mallopt(libc::M_ARENA_MAX, 2);
    }
}

/// Runs the CLI, returning the process exit status (SPEC §4).
pub fn main() -> i32 {
    tune_malloc();
    init_logging();
    let parsed = command()
        .try_get_matches_from(helper_args(std::env::args_os().collect()))
        .and_then(|m| <Cli as clap::FromArgMatches>::from_arg_matches(&m));
    let cli = match parsed {
        Ok(c) => c,
        Err(e) => {
            let _ = e.print();
            return if e.use_stderr() { EXIT_USAGE } else { EXIT_OK };
        }
    };
    let result = match cli.command {
        Command::Mount {
            foreground,
            debug,
            options,
            log_file,
            source,
            mountpoint,
            ..
        } => parse_options(&options.list).and_then(|mut opts| {
            opts.log_file = log_file.or(opts.log_file);
            opts.debug |= debug;
            mount::mount(&source, &mountpoint, opts, foreground || debug)
        }),
        Command::Umount { lazy, mountpoint } => umount::umount(&mountpoint, lazy),
        Command::Man => man(),
        Command::Cache { action, options } => {
            parse_options(&options.list).and_then(|opts| cache::cache(&action, &opts))
        }
        Command::Completions { shell } => {
            let mut cmd = command();
            clap_complete::generate(shell, &mut cmd, "modelfs", &mut std::io::stdout());
            Ok(())
        }
        Command::Ls {
            options,
            source,
            path,
        } => parse_options(&options.list)
            .and_then(|opts| browse::ls(&source, path.as_deref(), &opts)),
        Command::Cat {
            options,
            source,
            path,
        } => parse_options(&options.list).and_then(|opts| browse::cat(&source, &path, &opts)),
        Command::Row {
            json,
            options,
            source,
            name,
            ids,
        } => parse_options(&options.list)
            .and_then(|opts| browse::row(&source, &name, &ids, json, &opts)),
        Command::Info { options, source } => {
            parse_options(&options.list).and_then(|opts| inspect::info(&source, &opts))
        }
        Command::List {
            json,
            options,
            source,
        } => parse_options(&options.list).and_then(|opts| inspect::list(&source, &opts, json)),
        Command::Stats {
            json,
            check_finite,
            options,
            source,
            paths,
        } => parse_options(&options.list)
            .and_then(|opts| compare::stats(&source, &paths, json, check_finite, &opts)),
        Command::Diff {
            json,
            map,
            transpose,
            rows,
            options,
            a,
            b,
            tables,
        } => parse_options(&options.list).and_then(|opts| {
            if rows {
                return rowdiff::diff_rows_cmd(&a, &b, &tables, json, &opts);
            }
            if !tables.is_empty() {
                return Err(Failure::new(EXIT_USAGE, "TABLE names go with --rows"));
            }
            let how = compare::Matching { map, transpose };
            compare::diff(&a, &b, json, &how, &opts)
        }),
        Command::Check {
            max_abs,
            json,
            options,
            source,
            paths,
        } => parse_options(&options.list)
            .and_then(|opts| check::check(&source, &paths, max_abs, json, &opts)),
        Command::Verify { options, source } => {
            parse_options(&options.list).and_then(|opts| inspect::verify(&source, &opts))
        }
        Command::Index { options, source } => {
            parse_options(&options.list).and_then(|opts| index::index(&source, &opts))
        }
    };
    match result {
        Ok(()) => EXIT_OK,
        Err(f) => {
            if let Some(m) = &f.message {
                eprintln!("modelfs: {m}");
            }
            f.status
        }
    }
}

fn man() -> Result<(), Failure> {
    let mut out = Vec::new();
    clap_mangen::Man::new(command())
        .render(&mut out)
        .map_err(|e| Failure::new(EXIT_USAGE, e.to_string()))?;
    use std::io::Write;
    std::io::stdout()
        .write_all(&out)
        .map_err(|e| Failure::new(EXIT_USAGE, format!("writing output: {e}")))
}

const COMMANDS: [&str; 16] = [
    "mount",
    "umount",
    "ls",
    "cat",
    "row",
    "stats",
    "diff",
    "info",
    "list",
    "verify",
    "index",
    "cache",
    "man",
    "completions",
    "help",
    "version",
];

/// mount(8) runs helpers as `mount.fuse.modelfs SOURCE MOUNTPOINT -o OPTS` and `mount.fuse3`
/// runs `modelfs SOURCE MOUNTPOINT -o OPTS`: both mean `modelfs mount …`.
fn helper_args(mut args: Vec<OsString>) -> Vec<OsString> {
    let as_helper = args
        .first()
        .and_then(|a| Path::new(a).file_name())
        .is_some_and(|n| n.to_string_lossy().starts_with("mount."));
    let first = args.get(1).map(|a| a.to_string_lossy().into_owned());
    // `modelfs SOURCE MOUNTPOINT …` only in that shape: SOURCE a path that exists or a URL,
    // MOUNTPOINT an existing directory. Anything else is a subcommand, and a mistyped one
    // (`modelfs lsit SRC`) is an error with a suggestion, not a mount attempt.
    let helper_shape = || {
        let source = args.get(1).map(Path::new);
        let mountpoint = args.get(2).map(Path::new);
        source.is_some_and(names_a_source) && mountpoint.is_some_and(Path::is_dir)
    };
    let positional = first
        .as_deref()
        .is_some_and(|a| !a.starts_with('-') && !COMMANDS.contains(&a))
        && helper_shape();
    if (as_helper && first.as_deref() != Some("mount")) || positional {
        args.insert(1, "mount".into());
    }
    args
}

/// Whether `s` can be a SOURCE as mount(8) passes it: a path that exists, a URL, or a
/// checkpoint prefix — a name that is no file itself but the start of files beside it
/// (`P.index`, `P.data-…`, V1's `P-00000-of-00001`).
fn names_a_source(s: &Path) -> bool {
    if s.exists() || s.to_string_lossy().contains("://") {
        return true;
    }
    let (Some(dir), Some(name)) = (s.parent(), s.file_name()) else {
        return false;
    };
    let dir = if dir.as_os_str().is_empty() {
        Path::new(".")
    } else {
        dir
    };
    let prefix = name.as_encoded_bytes();
    std::fs::read_dir(dir).is_ok_and(|entries| {
        entries.flatten().any(|e| {
            let n = e.file_name();
            let n = n.as_encoded_bytes();
            n.len() > prefix.len()
                && n.starts_with(prefix)
                && matches!(n[prefix.len()], b'.' | b'-')
        })
    })
}

/// Applies every `-o` argument in order; unknown options are usage errors.
pub(crate) fn parse_options(args: &[String]) -> Result<Options, Failure> {
    let mut opts = Options::default();
    for a in args {
        opts.apply(a)
            .map_err(|e| Failure::new(EXIT_USAGE, e.to_string()))?;
    }
    Ok(opts)
}

/// SOURCE as an absolute path (readers may reopen files by path later, after a daemon chdir).
/// SOURCE as shown (mount's fsname): a URL as given, a local path made absolute.
pub(crate) fn absolute_source(source: &Path) -> PathBuf {
    if remote_url(source).is_some() {
        return source.to_path_buf();
    }
    std::path::absolute(source).unwrap_or_else(|_| source.to_path_buf())
}

/// The name of SOURCE's persistent store: as shown, lossy for paths that are not UTF-8.
pub(crate) fn store_name(source: &Path) -> String {
    absolute_source(source).to_string_lossy().into_owned()
}

fn remote_url(source: &Path) -> Option<&str> {
    source.to_str().filter(|s| remote::is_remote(s))
}

/// Opens SOURCE (a local path or a URL); failures are exit status 2 with the reader's
/// one-line reason.
pub(crate) fn open_model(source: &Path, opts: &Options) -> Result<Arc<dyn Model>, Failure> {
    open_source(source, opts, false).map(|(model, _)| model)
}

/// `open_model`, and how to open it again as it is then (the same reader options: the
/// members opened are found again). When `following`, the source's fingerprint is taken
/// before the open, so that a change made while it opens is never taken for the state shown.
fn open_source(
    source: &Path,
    opts: &Options,
    following: bool,
) -> Result<(Arc<dyn Model>, Follow), Failure> {
    let mut reader = opts.reader_for(&store_name(source));
    let path = match remote_url(source) {
        Some(url) => {
            let (storage, key) = remote::open(url, &opts.remote())
                .map_err(|e| Failure::new(EXIT_SOURCE, e.to_string()))?;
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
    let model = crate::detect::model_at(&path, &reader).map_err(|e| match remote_url(source) {
        Some(url) => Failure::new(EXIT_SOURCE, format!("{url}: {e}")),
        None => Failure::new(EXIT_SOURCE, e.to_string()),
    })?;
    let follow = Follow {
        path: path.clone(),
        storage: Arc::clone(&reader.storage),
        watch,
        period,
        opened_from,
        reopen: Box::new(move || {
            crate::detect::model_at(&path, &reader).map_err(|e| e.to_string())
        }),
    };
    Ok((model, follow))
}

/// The source's mtime (for directories): the path itself, else `<prefix>.index`; the time of
/// the mount for a remote source.
pub(crate) fn source_mtime(source: &Path) -> SystemTime {
    if remote_url(source).is_some() {
        return SystemTime::now();
    }
    std::fs::metadata(source)
        .or_else(|_| std::fs::metadata(crate::tf::detect::index_path(source)))
        .and_then(|m| m.modified())
        .unwrap_or(SystemTime::UNIX_EPOCH)
}

/// The tree that a mount of SOURCE with `opts` shows.
pub(crate) fn build_tree(source: &Path, opts: &Options) -> Result<Arc<Tree>, Failure> {
    build_mount_tree(source, opts).map(|(tree, _)| tree)
}

/// `build_tree`, and how the mount follows its source (`None`: `refresh=never`).
pub(crate) fn build_mount_tree(
    source: &Path,
    opts: &Options,
) -> Result<(Arc<Tree>, Option<Follow>), Failure> {
    let following = opts.refresh != Refresh::Never;
    let (model, follow) = open_source(source, opts, following)?;
    let follow = (follow.watch || follow.period.is_some()).then_some(follow);
    let mut cfg = TreeConfig::for_user(opts.uid, opts.gid, source_mtime(source));
    cfg.text_size = opts.text_size;
    let tree = Arc::new(Tree::new(
        model,
        crate::fs::layout_ctx(opts, &store_name(source)),
        cfg,
    ));
    Ok((tree, follow))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A mistyped subcommand is an error that suggests the command, not a mount attempt; the
    /// `SOURCE MOUNTPOINT` shape (a source that exists, a directory) still mounts.
    #[test]
    fn unknown_subcommands_are_errors_with_a_suggestion() {
        let args = |v: &[&str]| v.iter().map(OsString::from).collect::<Vec<_>>();
        let typo = helper_args(args(&["modelfs", "lsit", "fixtures"]));
        assert_eq!(typo, args(&["modelfs", "lsit", "fixtures"]));
        let err = Cli::try_parse_from(typo).unwrap_err().to_string();
        assert!(err.contains("'ls'") && err.contains("list"), "{err}");
        let dir = tempfile::tempdir().unwrap();
        let mnt = dir.path().to_str().unwrap();
        let shaped = helper_args(args(&["modelfs", "fixtures", mnt]));
        assert_eq!(shaped, args(&["modelfs", "mount", "fixtures", mnt]));
        let url = helper_args(args(&["modelfs", "s3://b/m", mnt, "-o", "ro"]));
        assert_eq!(url[1], "mount");
        let helper = helper_args(args(&["/sbin/mount.fuse.modelfs", "x", "y"]));
        assert_eq!(helper[1], "mount");
        // mount.fuse3's form with a checkpoint prefix (no file of that name exists) and a V1
        // shard prefix; a name that starts no file beside it is not a source.
        let here = Path::new(env!("CARGO_MANIFEST_DIR"));
        for prefix in [
            "fixtures/tf/tf1_saver/model.ckpt-1",
            "fixtures/tf/tf1_saver/model",
        ] {
            let p = here.join(prefix);
            assert!(!p.exists());
            let shaped = helper_args(vec!["modelfs".into(), p.clone().into(), mnt.into()]);
            assert_eq!(shaped[1], "mount", "{prefix}");
        }
        let none = here.join("fixtures/tf/tf1_saver/nothing");
        let not = helper_args(vec!["modelfs".into(), none.into(), mnt.into()]);
        assert_ne!(not[1], "mount");
    }

    /// Issue 26 item 8: every command that opens a source explains SOURCE and OPTIONS in its
    /// own help, and completions offer the `-o` option names.
    #[test]
    fn help_and_completions_name_the_options() {
        let mut cmd = command();
        for sub in OPENING_SOURCES {
            let help = cmd
                .find_subcommand_mut(sub)
                .unwrap()
                .render_help()
                .to_string();
            assert!(
                help.contains("OPTIONS (-o") && help.contains("cache_dir="),
                "{sub}"
            );
            assert!(help.contains("SOURCE: a TensorFlow"), "{sub}");
            assert!(!help.contains("possible values"), "{sub}: {help}");
        }
        let mut out = Vec::new();
        clap_complete::generate(clap_complete::Shell::Bash, &mut cmd, "modelfs", &mut out);
        let bash = String::from_utf8(out).unwrap();
        assert!(bash.contains("layouts=") && bash.contains("cache_dir="));
    }

    /// Issue 26 item 10: Ctrl-C of a foreground mount with reads in flight logs no "Failed
    /// to send FUSE reply" (fuser's, for replies to requests the kernel dropped), nor a clean
    /// unmount its session's second unmount; our own warnings and fuser's other ones show.
    #[test]
    fn the_log_drops_fusers_reply_failures_only() {
        use log::Log;
        let logger = log_builder(false).build();
        let at = |target: &str, level| {
            let m = log::Metadata::builder().target(target).level(level).build();
            logger.enabled(&m)
        };
        if std::env::var_os("RUST_LOG").is_some() {
            return; // the user's filter decides
        }
        assert!(!at("fuser::reply", log::Level::Error));
        // The second unmount at the end of every clean unmount (issue 37): errors only.
        assert!(!at("fuser::session", log::Level::Warn));
        assert!(!at("fuser::mnt", log::Level::Warn));
        assert!(at("fuser::session", log::Level::Error));
        assert!(at("fuser", log::Level::Warn));
        assert!(at("modelfs::fs", log::Level::Warn));
    }

    #[test]
    fn usage_errors_are_status_1() {
        assert!(Cli::try_parse_from(["modelfs", "mount", "only-one"]).is_err());
        let c = Cli::try_parse_from(["modelfs", "mount", "-f", "-o", "a", "-o", "b", "s", "m"])
            .unwrap();
        match c.command {
            Command::Mount {
                foreground,
                options,
                ..
            } => {
                assert!(foreground);
                assert_eq!(options.list, ["a", "b"]);
            }
            _ => panic!(),
        }
        let e = parse_options(&["layouts=txt".into(), "bogus".into()]).unwrap_err();
        assert_eq!(e.status, EXIT_USAGE);
        assert!(e.message.is_some_and(|m| m.contains("bogus")));
    }
}
