//! Every `-o` option, once: how it is written, what the help says, how it applies. `KEYS`
//! (shell completion), `--help`, the man page and the option parser all come from `SPECS`;
//! a test checks README's options table against it. Adding an option is one entry here
//! (and its field in `Options`).

use super::{
    parse_size, unescape_sep, usable_dir, OptionError, Options, Refresh, TextSize, Verify,
};
use crate::layout::Layout;

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

pub(crate) const SPECS: &[Spec] = &[
    Spec {
        key: "layouts",
        value: Some("L,L…"),
        help: "json txt csv bin npy libsvm, the eight Angel formats (ValueText ValueBinary\n\
               TextColumn BinaryColumn ColIdValueText ColIdValueBinary RowIdColIdValueText\n\
               RowIdColIdValueBinary), or the groups generic, angel, all (default json,txt,npy)",
        apply: |o, v| {
            o.layouts = Layout::parse_list(v).map_err(|e| OptionError(e.to_string()))?;
            o.layouts_chosen = true;
            Ok(())
        },
    },
    Spec {
        key: "sep",
        value: Some("S"),
        help: "separator of csv and Angel text formats: a string, tab, space, comma (default ,)",
        apply: |o, v| {
            o.sep = unescape_sep(v);
            if o.sep.is_empty() {
                return Err(OptionError("sep= must not be empty".into()));
            }
            Ok(())
        },
    },
    Spec {
        key: "max_dense",
        value: Some("SIZE"),
        help: "largest dense form of a sparse tensor (default 16G)",
        apply: |o, v| {
            o.max_dense = size(v)?;
            Ok(())
        },
    },
    Spec {
        key: "angel_format",
        value: Some("NAME"),
        help: "the .angel/ view's format: any of Angel's eight (default ColIdValueBinaryRowFormat)",
        apply: |o, v| {
            let simple = v.rsplit('.').next().unwrap_or(v);
            let f = crate::angel::AngelFormat::ALL
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
        },
    },
    Spec {
        key: "text_size",
        value: Some("auto|exact"),
        help: "auto: a big text file reads as 0 bytes in stat until its size is learnt\n\
               (in the background, or by reading it); exact: every size before first use",
        apply: |o, v| {
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
        },
    },
    Spec {
        key: "threads",
        value: Some("N"),
        help: "FUSE and rendering threads (default: the number of cores)",
        apply: |o, v| {
            o.threads = v
                .parse()
                .ok()
                .filter(|n| (1..=1024).contains(n))
                .ok_or_else(|| OptionError("threads= takes 1..1024".into()))?;
            Ok(())
        },
    },
    Spec {
        key: "cache",
        value: Some("SIZE"),
        help: "memory for rendered text and fetched blocks (default 256M)",
        apply: |o, v| {
            o.cache_bytes = size(v)?;
            Ok(())
        },
    },
    Spec {
        key: "cache_dir",
        value: Some("DIR|none"),
        help: "persistent cache (default $XDG_CACHE_HOME/modelfs or ~/.cache/modelfs)",
        apply: |o, v| {
            o.cache_dir = match v {
                "none" => None,
                _ => Some(usable_dir(v)?),
            };
            Ok(())
        },
    },
    Spec {
        key: "cache_max",
        value: Some("SIZE"),
        help: "most bytes kept under cache_dir (default 1G, least recently used go first)",
        apply: |o, v| {
            o.cache_max = size(v)?;
            Ok(())
        },
    },
    Spec {
        key: "verify",
        value: Some("crc|none"),
        help: "check checksums on first read (default crc)",
        apply: |o, v| {
            o.verify = match v {
                "crc" => Verify::Crc,
                "none" => Verify::None,
                v => return Err(OptionError(format!("verify= takes crc or none, not '{v}'"))),
            };
            Ok(())
        },
    },
    Spec {
        key: "refresh",
        value: Some("SECS|never"),
        help: "follow a source written to while mounted: a local one is watched, a\n\
               remote one listed again every SECS (default 5); never: the first look only",
        apply: |o, v| {
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
        },
    },
    Spec {
        key: "allow_other",
        value: None,
        help: "every user may read",
        apply: |o, _| {
            o.allow_other = true;
            Ok(())
        },
    },
    Spec {
        key: "allow_root",
        value: None,
        help: "the owner and root may read (libfuse's)",
        apply: |o, _| {
            o.allow_root = true;
            Ok(())
        },
    },
    Spec {
        key: "uid",
        value: Some("N"),
        help: "the owner shown (default: the mounting user)",
        apply: |o, v| {
            o.uid = Some(number(v, "uid")?);
            Ok(())
        },
    },
    Spec {
        key: "gid",
        value: Some("N"),
        help: "the group shown (default: the mounting user's)",
        apply: |o, v| {
            o.gid = Some(number(v, "gid")?);
            Ok(())
        },
    },
    Spec {
        key: "fsname",
        value: Some("NAME"),
        help: "the mount table's source column (libfuse's; default the source)",
        apply: |o, v| {
            o.fsname = Some(v.to_string());
            Ok(())
        },
    },
    Spec {
        key: "auto_unmount",
        value: None,
        help: "unmount when the daemon dies (libfuse's; needs fusermount3)",
        apply: |o, _| {
            o.auto_unmount = true;
            Ok(())
        },
    },
    Spec {
        key: "debug",
        value: None,
        help: "debug log, and stay in the foreground (libfuse's; also -d)",
        apply: |o, _| {
            o.debug = true;
            Ok(())
        },
    },
    Spec {
        key: "endpoint",
        value: Some("URL"),
        help: "S3-compatible endpoint (else AWS_ENDPOINT_URL)",
        apply: |o, v| {
            o.endpoint = Some(v.to_string());
            Ok(())
        },
    },
    Spec {
        key: "region",
        value: Some("R"),
        help: "S3 region (else AWS_REGION, ~/.aws/config)",
        apply: |o, v| {
            o.region = Some(v.to_string());
            Ok(())
        },
    },
    Spec {
        key: "profile",
        value: Some("P"),
        help: "profile of ~/.aws/credentials (else AWS_PROFILE); credentials from the environment",
        apply: |o, v| {
            o.profile = Some(v.to_string());
            Ok(())
        },
    },
    Spec {
        key: "log",
        value: Some("FILE"),
        help: "the daemon's log (else $MODELFS_LOG, else syslog at /dev/log, else\n\
               $XDG_STATE_HOME/modelfs/modelfs.log; mount says which)",
        apply: |o, v| {
            o.log_file = Some(v.into());
            Ok(())
        },
    },
];

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
pub(crate) fn keys() -> impl Iterator<Item = String> {
    SPECS.iter().map(|s| match s.value {
        Some(_) => format!("{}=", s.key),
        None => s.key.to_string(),
    })
}

/// Column of the help where the text starts.
const HELP_COLUMN: usize = 19;

/// The OPTIONS list of `--help` and the man page, one option per entry.
pub(crate) fn help() -> String {
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

    /// README's options table names every option, and nothing else.
    #[test]
    fn the_readme_table_is_the_table() {
        let readme =
            std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md")).unwrap();
        let section = readme.split("\n## Options\n").nth(1).unwrap();
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
                "README's table lacks {}",
                s.key
            );
        }
        for n in &named {
            let known = SPECS.iter().any(|s| s.key == n) || n == "mount";
            assert!(known, "README's table names '{n}', which is no option");
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
