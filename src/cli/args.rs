//! The command line's shape: the commands and their arguments (clap), the help texts made
//! from the options table, and mount(8)'s helper forms turned into `modelfs mount`.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use clap::{CommandFactory, Parser, Subcommand};

/// What SOURCE and `-o` accept: at the end of the help of every command that opens a source
/// (the options from their table, `options::SPECS`).
fn source_and_options() -> String {
    format!(
        "\
SOURCE: a TensorFlow checkpoint prefix (or its .index, .data-*, .meta file), a directory of
checkpoints, a SavedModel directory (or its saved_model.pb), a frozen graph .pb, a V1
checkpoint, a TF Serving base directory, an Angel model directory, a Monolith PS export, a
.safetensors file or a directory of shards, an .npy or .npz file, a torch.save file or a
directory of shards, a .gguf file; or a URL of the same forms: s3://BUCKET/KEY,
gs://BUCKET/KEY, az://CONTAINER/KEY, abfss://CONTAINER@ACCOUNT.dfs.core.windows.net/KEY,
https://ACCOUNT.blob.core.windows.net/CONTAINER/KEY, http(s)://HOST/PATH.

OPTIONS (-o, comma-separated; also in /etc/fstab):
{}",
        modelfs_core::options::options_help()
    )
}

/// The commands whose help ends with `source_and_options`.
pub(super) const OPENING_SOURCES: [&str; 11] = [
    "mount", "ls", "cat", "row", "stats", "diff", "check", "info", "list", "verify", "index",
];

/// The command line as parsed, with the help texts made from the options table.
pub(super) fn command() -> clap::Command {
    let opening = source_and_options();
    Cli::command()
        .after_help(format!(
            "{opening}\n\n{}{AFTER_HELP}",
            textwrap_types(&modelfs_gguf::types_help())
        ))
        .mut_subcommands(|s| match OPENING_SOURCES.contains(&s.get_name()) {
            true => s.after_help(opening.clone()),
            false => s,
        })
}

/// `text` wrapped at 95 columns, as the rest of the help is.
fn textwrap_types(text: &str) -> String {
    let mut out = String::new();
    let mut line = 0;
    for word in text.split(' ') {
        if line > 0 && line + 1 + word.len() > 95 {
            out.push('\n');
            line = 0;
        } else if line > 0 {
            out.push(' ');
            line += 1;
        }
        out.push_str(word);
        line += word.len();
    }
    out
}

/// The end of the top-level help, after `source_and_options`.
const AFTER_HELP: &str = "\n\n\
ENVIRONMENT: MODELFS_LOG (daemon log file), RUST_LOG (log level: error, warn, info, debug).
S3: AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN, AWS_REGION, AWS_PROFILE,
AWS_ENDPOINT_URL. GCS: GOOGLE_APPLICATION_CREDENTIALS or GOOGLE_SERVICE_ACCOUNT (a service
account's JSON), STORAGE_EMULATOR_HOST (HOST:PORT of an emulator; no credentials sent),
GCE_METADATA_HOST. Azure: AZURE_STORAGE_ACCOUNT_NAME, AZURE_STORAGE_ACCOUNT_KEY,
AZURE_STORAGE_SAS_TOKEN, AZURE_CLIENT_ID/AZURE_CLIENT_SECRET/AZURE_TENANT_ID (a service
principal), AZURE_FEDERATED_TOKEN_FILE (workload identity), AZURE_USE_AZURE_CLI=true (the Azure
CLI's login), AZURE_STORAGE_USE_EMULATOR=true (Azurite's account and key).

EXIT STATUS: 0 success (identical, all found); 1 usage (bad arguments, unknown option), and
for diff: they differ, for row: an id is not there; 2 trouble (a source not recognised or
unreadable; problems found by verify, check or stats); 3 mount or unmount failed; 64 a name or
path not in the model (ls, cat, row, stats, check, diff --rows TABLE).

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
            modelfs_core::options::keys()
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
pub(super) struct OptArgs {
    /// Options, comma-separated (see OPTIONS below).
    #[arg(short = 'o', value_name = "OPT,OPT…", global = true, value_parser = OptionList, hide_possible_values = true)]
    pub(super) list: Vec<String>,
}

#[derive(Parser, Debug)]
#[command(
    name = "modelfs",
    version = modelfs_core::VERSION,
    about = "Mount model files (TensorFlow, Angel, hash tables, safetensors, PyTorch and DCP, numpy, GGUF, ONNX, Keras, Orbax) read-only as files in the layouts you pick"
)]
pub(super) struct Cli {
    #[command(subcommand)]
    pub(super) command: Command,
}

#[derive(Subcommand, Debug)]
pub(super) enum Command {
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
        action: super::cache::CacheAction,
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
        /// The model (see SOURCE below).
        source: PathBuf,
        /// A directory or file of the mount (the root when none).
        path: Option<OsString>,
    },
    /// The exact bytes the mounted file PATH would give.
    Cat {
        #[command(flatten)]
        options: OptArgs,
        /// The model (see SOURCE below).
        source: PathBuf,
        /// A file of the mount (`dense/kernel.txt`).
        path: OsString,
    },
    /// Rows of the keyed tensor NAME (its path in the mount, without a suffix) by ID: one
    /// `id<TAB>values` line per ID found, by lookup (the same as `NAME.rows/ID.txt`). Exit 1
    /// when an ID is not found (each is named on stderr), 64 when NAME is not a keyed tensor.
    Row {
        /// A JSON array of objects instead (id, tensor, key, dtype, width, position,
        /// partition, values).
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        options: OptArgs,
        /// The model (see SOURCE below).
        source: PathBuf,
        /// The keyed tensor: its path in the mount, without a suffix (exit 64 if none).
        name: OsString,
        /// Feature ids (row numbers of a dense table; negative ones too).
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
        /// The model (see SOURCE below).
        source: PathBuf,
        /// Tensors or directories of the mount (all when none; exit 64 for a path of nothing).
        paths: Vec<OsString>,
    },
    /// What differs between two models, tensor by tensor (by path in the mount): only in A,
    /// only in B, retyped (dtype or shape; floats of one shape measured as a change is),
    /// changed (how many elements, max |Δ|, ‖B−A‖/‖A‖),
    /// identical. Both read lazily on all cores; equal stored checksums mean identical without
    /// a read. Exit 0 when identical, 1 when they differ, 2 on trouble.
    Diff {
        /// A JSON array of objects instead (name, status, dtype, shape, count, changed_count,
        /// max_abs_diff, rel_l2; `a` and `b` for retyped ones).
        #[arg(long)]
        json: bool,
        /// Rewrite the names of both models before matching them: REGEX=REPLACEMENT (`$1` for a
        /// group), rules applied in turn; repeatable. E.g. a PyTorch port of a TF model:
        /// --map '\.weight$=/kernel' --map '\.=/'.
        #[arg(long = "map", value_name = "REGEX=REPLACEMENT")]
        map: Vec<String>,
        /// Compare a 2-D tensor of B with A's transposed when its shape is A's reversed
        /// (PyTorch `Linear.weight` [out, in] against a TF kernel [in, out]; square ones too;
        /// each such line says so).
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
        /// The first model, A (see SOURCE below).
        a: PathBuf,
        /// The second model, B.
        b: PathBuf,
        /// With --rows: the tables to compare (their paths in the mount; exit 64 for a name of
        /// no table).
        tables: Vec<OsString>,
    },
    /// Is the checkpoint sane: each optimizer slot of a keyed table (the keyed tables under
    /// its path with rows as wide) holds the table's ids, and every floating-point value is
    /// finite with |x| <= --max-abs. Exit 2 naming what fails.
    Check {
        /// The largest |x| a float may have.
        #[arg(long, value_name = "X", default_value_t = 1e6)]
        max_abs: f64,
        /// One JSON object (tensors_checked, tables, slots_checked, problems, notes, errors).
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        options: OptArgs,
        /// The model (see SOURCE below).
        source: PathBuf,
        /// Only what is at or below these paths of the mount.
        paths: Vec<OsString>,
    },
    /// Format, tensor count, dtypes, total bytes (per checkpoint for a directory of several),
    /// problems found in the metadata. Reads no tensor data: `verify` does.
    Info {
        #[command(flatten)]
        options: OptArgs,
        /// The model (see SOURCE below).
        source: PathBuf,
    },
    /// One line per tensor: path in the mount, dtype, shape, bytes, partitions.
    List {
        /// A JSON array of objects instead (path, name: the path again, as in every JSON
        /// answer; key: the reader's own name when it differs; dtype, shape, bytes,
        /// partitions, sparse, problem, note).
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        options: OptArgs,
        /// The model (see SOURCE below).
        source: PathBuf,
    },
    /// Read every byte of every tensor and check every checksum and structure; exit 2 with
    /// the list of problems when there are any (damage, or a pickle's dangerous import);
    /// what modelfs does not run or decode is a note, listed, exit 0.
    Verify {
        /// One JSON object (tensors_checked, bytes_checked, problems, notes: each
        /// {name, detail}, name null for the source's own).
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        options: OptArgs,
        /// The model (see SOURCE below).
        source: PathBuf,
    },
    /// Precompute the exact size of every text file a mount with the same options shows,
    /// into the index cache (cache_dir), so later mounts know them without rendering.
    Index {
        #[command(flatten)]
        options: OptArgs,
        /// The model (see SOURCE below).
        source: PathBuf,
    },
}

/// Whether `arg` names a command (or clap's `help`): the helper form never takes it for a
/// SOURCE.
fn is_command(arg: &str) -> bool {
    arg == "help"
        || Cli::command()
            .get_subcommands()
            .any(|c| c.get_name() == arg)
}

/// mount(8) runs helpers as `mount.fuse.modelfs SOURCE MOUNTPOINT -o OPTS` and `mount.fuse3`
/// runs `modelfs SOURCE MOUNTPOINT -o OPTS`: both mean `modelfs mount …`.
pub(super) fn helper_args(mut args: Vec<OsString>) -> Vec<OsString> {
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
        .is_some_and(|a| !a.starts_with('-') && !is_command(a))
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
#[cfg(test)]
mod tests {
    use super::*;

    /// `--help` and the man page name the variables each cloud's credentials and emulators are
    /// found by, not S3's alone.
    #[test]
    fn help_and_man_name_every_clouds_variables() {
        let help = command().render_long_help().to_string();
        let mut man = Vec::new();
        clap_mangen::Man::new(command())
            .render_extra_section(&mut man)
            .unwrap();
        let man = String::from_utf8(man)
            .unwrap()
            .replace("\\-", "-")
            .replace("\\_", "_");
        for var in [
            "AWS_ACCESS_KEY_ID",
            "AWS_ENDPOINT_URL",
            "GOOGLE_APPLICATION_CREDENTIALS",
            "GOOGLE_SERVICE_ACCOUNT",
            "STORAGE_EMULATOR_HOST",
            "AZURE_STORAGE_ACCOUNT_NAME",
            "AZURE_STORAGE_ACCOUNT_KEY",
            "AZURE_STORAGE_SAS_TOKEN",
            "AZURE_STORAGE_USE_EMULATOR",
            "AZURE_USE_AZURE_CLI",
        ] {
            assert!(help.contains(var), "--help lacks {var}");
            assert!(man.contains(var), "the man page lacks {var}");
        }
    }

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

    /// The helper form takes no command for a SOURCE, whatever files the current directory
    /// holds: the names come from the commands themselves.
    #[test]
    fn every_command_is_known_to_the_helper_form() {
        for c in command().get_subcommands() {
            assert!(is_command(c.get_name()), "{}", c.get_name());
        }
        for name in ["check", "row", "help", "completions"] {
            assert!(is_command(name), "{name}");
        }
        assert!(!is_command("fixtures") && !is_command("lsit"));
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
}
