//! Every `-o` option, once: its field in `Options` and default, how it is written, what the
//! help says, and how it applies — one entry of the `options!` table below. `Options`, its
//! `Default`, `SPECS`, `KEYS` (shell completion), `--help`, the man page and the option
//! parser all come from that table; a test checks the guide's options table (`docs/options.md`) against it.

use super::{parse_size, unescape_sep, usable_dir, OptionError, Refresh, TextSize, Verify};
use modelfs_layout::Layout;

/// One `-o` option.
pub(crate) struct Spec {
    pub(crate) key: &'static str,
    /// The value's form as the help shows it (`SIZE`, `auto|exact`); `None`: a flag.
    pub(crate) value: Option<&'static str>,
    /// What it does (continuation lines start with a newline; the help indents them).
    pub(crate) help: &'static str,
    /// Applies the value (`""` for a flag).
    pub(crate) apply: fn(&mut Options, &str) -> Result<(), OptionError>,
}

fn size(v: &str) -> Result<u64, OptionError> {
    parse_size(v)
}

fn number<T: std::str::FromStr>(v: &str, what: &str) -> Result<T, OptionError> {
    v.parse().map_err(|_| OptionError(format!("bad {what}=")))
}

/// The table: each entry is a field of `Options` with its type and default, and, when users
/// set it, `option "key" [= "FORM"], "help", apply;` (no `= "FORM"`: a flag). `SPECS` keeps
/// the table's order (the order of `--help`).
macro_rules! options {
    (
        $(
            $(#[$doc:meta])*
            $field:ident : $ty:ty = $default:expr
            $(, option $key:literal $(= $form:literal)?, $help:literal, $apply:expr)?
            ;
        )*
    ) => {
        /// The options of a command (SPEC §4), each from the `options!` table.
        #[derive(Clone, Debug)]
        pub struct Options {
            $( $(#[$doc])* pub $field: $ty, )*
        }

        impl Default for Options {
            fn default() -> Self {
                Options { $( $field: $default, )* }
            }
        }

        pub(crate) const SPECS: &[Spec] = &[
            $( $( Spec {
                key: $key,
                value: options!(@form $($form)?),
                help: $help,
                apply: $apply,
            }, )? )*
        ];
    };
    (@form) => { None };
    (@form $form:literal) => { Some($form) };
}

options! {
    layouts: Vec<Layout> = vec![Layout::Json, Layout::Txt, Layout::Npy],
        option "layouts" = "L,L…",
        "json txt csv bin npy libsvm, the eight Angel formats (ValueText ValueBinary\n\
               TextColumn BinaryColumn ColIdValueText ColIdValueBinary RowIdColIdValueText\n\
               RowIdColIdValueBinary), or the groups generic, angel, all (default json,txt,npy)",
        |o, v| {
            o.layouts = Layout::parse_list(v).map_err(|e| OptionError(e.to_string()))?;
            o.layouts_chosen = true;
            Ok(())
        };
    /// `layouts=` was given (else sparse matrices show `json,libsvm`: see `LayoutCtx`).
    layouts_chosen: bool = false;
    sep: String = ",".into(),
        option "sep" = "S",
        "separator of csv and Angel text formats: a string, tab, space, comma (default ,)",
        |o, v| {
            o.sep = unescape_sep(v);
            if o.sep.is_empty() {
                return Err(OptionError("sep= must not be empty".into()));
            }
            Ok(())
        };
    max_dense: u64 = 16 << 30,
        option "max_dense" = "SIZE",
        "largest dense form of a sparse tensor (default 16G)",
        |o, v| {
            o.max_dense = size(v)?;
            Ok(())
        };
    /// `angel_format=`: the `.angel/` view's format (Angel's class name or layout name).
    angel_format: Option<modelfs_io::codec::angel::AngelFormat> = None,
        option "angel_format" = "NAME",
        "the .angel/ view's format: any of Angel's eight (default ColIdValueBinaryRowFormat)",
        |o, v| {
            let simple = v.rsplit('.').next().unwrap_or(v);
            let f = modelfs_io::codec::angel::AngelFormat::ALL
                .into_iter()
                .find(|f| f.class_name() == simple || f.name() == simple)
                .ok_or_else(|| {
                    OptionError(format!(
                        "angel_format= takes one of Angel's eight formats \
                         (e.g. ColIdValueBinaryRowFormat), not '{v}'"
                    ))
                })?;
            o.angel_format = Some(f);
            Ok(())
        };
    text_size: TextSize = TextSize::Auto,
        option "text_size" = "auto|exact",
        "auto: a big text file reads as 0 bytes in stat until its size is learnt\n\
               (in the background, or by reading it); exact: every size before first use",
        |o, v| {
            o.text_size = match v {
                "auto" => TextSize::Auto,
                "exact" => TextSize::Exact,
                v => {
                    return Err(OptionError(format!(
                        "text_size= takes auto or exact, not '{v}'"
                    )))
                }
            };
            Ok(())
        };
    threads: usize = std::thread::available_parallelism()
    .map(|n| n.get())
    .unwrap_or(2),
        option "threads" = "N",
        "FUSE and rendering threads (default: the number of cores)",
        |o, v| {
            o.threads = v
                .parse()
                .ok()
                .filter(|n| (1..=1024).contains(n))
                .ok_or_else(|| OptionError("threads= takes 1..1024".into()))?;
            Ok(())
        };
    /// `ahead=SIZE`: how far the daemon fills the kernel's page cache ahead of a reader
    /// (`fs::push`); 0 = off.
    ahead: u64 = 4 << 30,
        option "ahead" = "SIZE",
        "page cache filled ahead of a reader, by threads of the daemon: a window ahead of\n\
               a sequential reader, a file up to this size whole for a reader that jumps\n\
               about (default 4G; 0: off)",
        |o, v| {
            o.ahead = size(v)?;
            Ok(())
        };
    cache_bytes: u64 = 256 << 20,
        option "cache" = "SIZE",
        "memory for rendered text and fetched blocks (default 256M)",
        |o, v| {
            o.cache_bytes = size(v)?;
            Ok(())
        };
    /// Persistent chunk-index cache directory; `None` = disabled (`cache_dir=none`).
    cache_dir: Option<std::path::PathBuf> = super::default_cache_dir(),
        option "cache_dir" = "DIR|none",
        "persistent cache (default $XDG_CACHE_HOME/modelfs or ~/.cache/modelfs)",
        |o, v| {
            o.cache_dir = match v {
                "none" => None,
                _ => Some(usable_dir(v)?),
            };
            Ok(())
        };
    /// Most bytes kept under `cache_dir` (`cache_max=`).
    cache_max: u64 = 1 << 30,
        option "cache_max" = "SIZE",
        "most bytes kept under cache_dir (default 1G, least recently used go first)",
        |o, v| {
            o.cache_max = size(v)?;
            Ok(())
        };
    verify: Verify = Verify::Crc,
        option "verify" = "crc|none",
        "check checksums on first read (default crc)",
        |o, v| {
            o.verify = match v {
                "crc" => Verify::Crc,
                "none" => Verify::None,
                v => return Err(OptionError(format!("verify= takes crc or none, not '{v}'"))),
            };
            Ok(())
        };
    /// `refresh=SECS|never`: following a source written to while mounted.
    refresh: Refresh = Refresh::Default,
        option "refresh" = "SECS|never",
        "follow a source written to while mounted: a local one is watched, a\n\
               remote one listed again every SECS (default 5); never: the first look only",
        |o, v| {
            o.refresh = match v {
                "never" => Refresh::Never,
                _ => Refresh::Every(
                    v.parse::<f64>()
                        .ok()
                        .filter(|s| (0.1..=86_400.0).contains(s))
                        .map(std::time::Duration::from_secs_f64)
                        .ok_or_else(|| {
                            OptionError(format!(
                                "refresh= takes seconds (0.1 to 86400) or never, not '{v}'"
                            ))
                        })?,
                ),
            };
            Ok(())
        };
    allow_other: bool = false,
        option "allow_other",
        "every user may read",
        |o, _| {
            o.allow_other = true;
            Ok(())
        };
    /// `allow_root`: the owner and root may read.
    allow_root: bool = false,
        option "allow_root",
        "the owner and root may read (libfuse's)",
        |o, _| {
            o.allow_root = true;
            Ok(())
        };
    uid: Option<u32> = None,
        option "uid" = "N",
        "the owner shown (default: the mounting user)",
        |o, v| {
            o.uid = Some(number(v, "uid")?);
            Ok(())
        };
    gid: Option<u32> = None,
        option "gid" = "N",
        "the group shown (default: the mounting user's)",
        |o, v| {
            o.gid = Some(number(v, "gid")?);
            Ok(())
        };
    /// `fsname=`: the source column of the mount table (else the source).
    fsname: Option<String> = None,
        option "fsname" = "NAME",
        "the mount table's source column (libfuse's; default the source)",
        |o, v| {
            o.fsname = Some(v.to_string());
            Ok(())
        };
    /// `auto_unmount`: the kernel unmounts when the daemon dies (through fusermount3).
    auto_unmount: bool = false,
        option "auto_unmount",
        "unmount when the daemon dies (libfuse's; needs fusermount3)",
        |o, _| {
            o.auto_unmount = true;
            Ok(())
        };
    /// `debug` (`-d`): the daemon logs at debug level.
    debug: bool = false,
        option "debug",
        "debug log, and stay in the foreground (libfuse's; also -d)",
        |o, _| {
            o.debug = true;
            Ok(())
        };
    /// Remote sources: `endpoint=`, `region=`, `profile=`, `anonymous`.
    endpoint: Option<String> = None,
        option "endpoint" = "URL",
        "the store's endpoint: S3-compatible (else AWS_ENDPOINT_URL), GCS (else\n\
               STORAGE_EMULATOR_HOST), Azure (http://HOST:PORT/ACCOUNT for Azurite)",
        |o, v| {
            // Refused here, as a usage error: object_store panics on a URL it cannot request.
            modelfs_io::source::remote::check_endpoint("endpoint=", v).map_err(OptionError)?;
            o.endpoint = Some(v.to_string());
            Ok(())
        };
    region: Option<String> = None,
        option "region" = "R",
        "S3 region (else AWS_REGION, ~/.aws/config)",
        |o, v| {
            o.region = Some(v.to_string());
            Ok(())
        };
    profile: Option<String> = None,
        option "profile" = "P",
        "profile of ~/.aws/credentials (else AWS_PROFILE); credentials from the environment",
        |o, v| {
            o.profile = Some(v.to_string());
            Ok(())
        };
    anonymous: bool = false,
        option "anonymous",
        "public buckets and containers: unsigned requests, no credentials looked for",
        |o, _| {
            o.anonymous = true;
            Ok(())
        };
    /// `hdfs`: SOURCE paths are on the default HDFS cluster (`Options::source`).
    hdfs: bool = false,
        option "hdfs",
        "a SOURCE path names a path of the default HDFS cluster (fs.defaultFS of\n\
               HADOOP_CONF_DIR): -o hdfs /user/me/model is hdfs:///user/me/model",
        |o, _| {
            o.hdfs = true;
            Ok(())
        };
    /// `log=FILE`: where the daemon's log goes (else `$MODELFS_LOG`, else nowhere).
    log_file: Option<std::path::PathBuf> = None,
        option "log" = "FILE",
        "the daemon's log (else $MODELFS_LOG, else syslog at /dev/log, else\n\
               $XDG_STATE_HOME/modelfs/modelfs.log; mount says which)",
        |o, v| {
            o.log_file = Some(v.into());
            Ok(())
        };
}

/// mount(8)/fstab conventions: accepted and implied (the mount is always read-only, nosuid,
/// nodev) or meaningful only to mount(8) itself; also any `x-…` and `comment`.
pub(crate) const CONVENTIONS: &[&str] = &[
    "defaults",
    "ro",
    "rw",
    "default_permissions",
    "nosuid",
    "nodev",
    "suid",
    "dev",
    "exec",
    "noexec",
    "noatime",
    "atime",
    "relatime",
    "nodiratime",
    "_netdev",
    "auto",
    "noauto",
    "nofail",
    "user",
    "users",
    "nouser",
    "async",
    "sync",
];

/// The options as shell completion offers them (`key=` when they take a value).
pub fn keys() -> impl Iterator<Item = String> {
    SPECS.iter().map(|s| match s.value {
        Some(_) => format!("{}=", s.key),
        None => s.key.to_string(),
    })
}

/// Column of the help where the text starts.
const HELP_COLUMN: usize = 19;

/// The OPTIONS list of `--help` and the man page, one option per entry.
pub fn help() -> String {
    let mut out = String::new();
    for s in SPECS {
        let head = match s.value {
            Some(v) => format!("  {}={v}", s.key),
            None => format!("  {}", s.key),
        };
        out.push_str(&head);
        let mut lines = s.help.lines();
        let width = head.chars().count();
        match width + 2 <= HELP_COLUMN {
            true => out.push_str(&" ".repeat(HELP_COLUMN - width)),
            false => out.push_str("  "),
        }
        out.push_str(lines.next().unwrap_or_default().trim());
        for l in lines {
            out.push('\n');
            out.push_str(&" ".repeat(HELP_COLUMN));
            out.push_str(l.trim());
        }
        out.push('\n');
    }
    out.push_str(
        "  defaults, ro, nosuid, nodev, noatime, _netdev, x-…   accepted for mount(8) and fstab",
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The guide's options table names every option, and nothing else (its `--help` and man
    /// page come from `SPECS` itself).
    #[test]
    fn the_guides_table_is_the_table() {
        let page = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/options.md");
        let page = std::fs::read_to_string(page).unwrap();
        let section = page.split("\n## Options\n").nth(1).unwrap();
        let table: Vec<&str> = section
            .lines()
            .skip_while(|l| !l.starts_with('|'))
            .take_while(|l| l.starts_with('|'))
            .skip(2)
            .collect();
        assert!(table.len() > 10, "{table:?}");
        let mut named = Vec::new();
        for row in &table {
            let first = row.split(" | ").next().unwrap_or_default();
            for tok in first.split('`').skip(1).step_by(2) {
                let key = tok.split(['=', '\\', ' ', '(']).next().unwrap_or_default();
                named.push(key.to_string());
            }
        }
        for s in SPECS {
            assert!(
                named.iter().any(|n| n == s.key),
                "docs/options.md lacks {}",
                s.key
            );
        }
        for n in &named {
            let known = SPECS.iter().any(|s| s.key == n) || n == "mount";
            assert!(known, "docs/options.md names '{n}', which is no option");
        }
    }

    #[test]
    fn keys_are_unique() {
        let mut k: Vec<&str> = SPECS.iter().map(|s| s.key).collect();
        k.sort();
        k.dedup();
        assert_eq!(k.len(), SPECS.len());
    }
}
