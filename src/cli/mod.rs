//! Command line (SPEC §4): mount, umount, ls, cat, row, stats, diff, check, info, list,
//! verify, index, cache.
//!
//! Exit statuses: 0 success; 1 usage (bad arguments, unknown `-o` option, a path that does not
//! exist in the tree); 2 source not recognised or unreadable (including data that fails to
//! read in `cat`); 3 mount or unmount failed.
//!
//! Its parts: `args` (the commands' shape and help), `modelfs_core::open` (SOURCE opened as every command
//! opens it, below both faces), `logging`; then one file per command or family of commands.

use self::args::{command, helper_args, Cli, Command};
pub(crate) use self::logging::{MOUNT_TAG, SYSLOG};
pub(crate) use modelfs_core::open::{
    absolute_source, build_mount_tree, build_tree, open_model, remote_url, source_mtime, store_name,
};

mod args;
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
mod logging;
mod mount;
pub(crate) mod mounts;
mod rowdiff;
#[cfg(test)]
mod rowdiff_tests;
mod serving_lock;
mod umount;

// The exit codes, one table for every command (the guide's `docs/commands.md#exit-status`): 0 yes (success,
// identical, all found); 1 usage (bad arguments, an unknown option: SPEC §4), and for diff
// and row "no" (the models or rows differ, an id not found: diff(1)'s convention); 2 trouble
// (a source not recognised or unreadable, problems found by verify, check or stats); 3 a
// mount or unmount failed; 64 a name or path not in the model (sysexits' EX_USAGE), so a
// typo in a name is never read as "they differ" or "not found".
pub(crate) const EXIT_OK: i32 = 0;
pub(crate) const EXIT_USAGE: i32 = 1;
pub(crate) const EXIT_NO: i32 = 1;
pub(crate) const EXIT_UNKNOWN_NAME: i32 = 64;
pub(crate) const EXIT_SOURCE: i32 = 2;
pub(crate) const EXIT_MOUNT: i32 = 3;

/// A failure with its exit status; the message is printed as `modelfs: <message>`.
#[derive(Debug)]
pub(crate) struct Failure {
    pub(crate) status: i32,
    /// `None`: nothing (more) to print — it was reported elsewhere, or there is nothing wrong
    /// to tell (the reader of our output went away).
    pub(crate) message: Option<String>,
}

/// Applies every `-o` argument in order; unknown options are usage errors.
pub(crate) fn parse_options(args: &[String]) -> Result<modelfs_core::options::Options, Failure> {
    Ok(modelfs_core::open::parse_options(args)?)
}

impl From<modelfs_core::open::SourceError> for Failure {
    fn from(e: modelfs_core::open::SourceError) -> Failure {
        Failure::new(EXIT_SOURCE, e.message)
    }
}

impl From<modelfs_core::options::OptionError> for Failure {
    fn from(e: modelfs_core::options::OptionError) -> Failure {
        Failure::new(EXIT_USAGE, e.to_string())
    }
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

/// The command with its SOURCEs as opened (`Options::source`: `-o hdfs /path` is
/// `hdfs:///path`); options that do not parse are left for the command to refuse.
fn hdfs_sources(mut c: Command) -> Command {
    let (options, sources): (&args::OptArgs, Vec<&mut std::path::PathBuf>) = match &mut c {
        Command::Mount {
            options, source, ..
        }
        | Command::Ls {
            options, source, ..
        }
        | Command::Cat {
            options, source, ..
        }
        | Command::Row {
            options, source, ..
        }
        | Command::Info { options, source }
        | Command::List {
            options, source, ..
        }
        | Command::Stats {
            options, source, ..
        }
        | Command::Check {
            options, source, ..
        }
        | Command::Verify {
            options, source, ..
        }
        | Command::Index { options, source } => (options, vec![source]),
        Command::Diff { options, a, b, .. } => (options, vec![a, b]),
        Command::Umount { .. }
        | Command::Man
        | Command::Cache { .. }
        | Command::Completions { .. } => return c,
    };
    if let Ok(opts) = parse_options(&options.list) {
        for s in sources {
            *s = opts.source(s);
        }
    }
    c
}

/// Runs the CLI, returning the process exit status (SPEC §4).
pub fn main() -> i32 {
    tune_malloc();
    logging::init_logging();
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
    let result = match hdfs_sources(cli.command) {
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
        Command::Verify {
            options,
            source,
            json,
        } => parse_options(&options.list).and_then(|opts| inspect::verify(&source, json, &opts)),
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

/// One page for the whole tool: clap_mangen's own subcommand section points at pages
/// (`modelfs-mount(1)` …) that are not installed, so each command's full help goes here.
fn man() -> Result<(), Failure> {
    let mut out = Vec::new();
    let cmd = command();
    let man = clap_mangen::Man::new(cmd.clone());
    let io = |e: std::io::Error| Failure::new(EXIT_SOURCE, e.to_string());
    man.render_title(&mut out).map_err(io)?;
    man.render_name_section(&mut out).map_err(io)?;
    man.render_synopsis_section(&mut out).map_err(io)?;
    man.render_description_section(&mut out).map_err(io)?;
    man.render_options_section(&mut out).map_err(io)?;
    out.extend_from_slice(b".SH COMMANDS\n");
    for sub in cmd.get_subcommands().filter(|s| s.get_name() != "help") {
        let mut sub = sub.clone().bin_name(format!("modelfs {}", sub.get_name()));
        let help = sub.render_long_help().to_string();
        out.extend_from_slice(format!(".SS modelfs {}\n.nf\n", sub.get_name()).as_bytes());
        for line in help.lines() {
            // roff: a backslash is written \e; a line starting . or ' is escaped by \&.
            let line = line.replace('\\', "\\e");
            if line.starts_with(['.', '\'']) {
                out.extend_from_slice(b"\\&");
            }
            out.extend_from_slice(line.as_bytes());
            out.push(b'\n');
        }
        out.extend_from_slice(b".fi\n");
    }
    man.render_extra_section(&mut out).map_err(io)?;
    use std::io::Write;
    std::io::stdout()
        .write_all(&out)
        .map_err(|e| Failure::new(EXIT_SOURCE, format!("writing output: {e}")))
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

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
