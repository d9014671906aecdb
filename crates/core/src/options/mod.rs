//! `-o opt,opt…` options shared by `mount`, `ls`, `cat` (SPEC §4). Unknown options are errors.

use std::sync::Arc;

mod specs;

use modelfs_io::store::{DiskStore, Store};
use modelfs_layout::Layout;
use modelfs_model::ReaderOptions;
pub use specs::Options;
pub use specs::{help as options_help, keys};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verify {
    Crc,
    None,
}

/// `-o text_size=`: when the exact size of a text file is learnt (SPEC §3 "Sizes").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TextSize {
    /// Known and cheap sizes are exact; the others read as 0 until learnt in the background.
    Auto,
    /// Every size exact before first use (a first `stat` may render a whole text file).
    Exact,
}

/// `-o refresh=`: how a mount follows a source that is written to while mounted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refresh {
    /// A local source is watched (inotify); a remote one is looked at again every 5 s.
    Default,
    /// A local source is watched; a remote one is looked at again every this many seconds.
    Every(std::time::Duration),
    /// The tree of the mount's first look, for the mount's life.
    Never,
}

impl Refresh {
    /// How often a remote source is looked at again (`None`: never).
    pub fn remote_period(self) -> Option<std::time::Duration> {
        match self {
            Refresh::Default => Some(std::time::Duration::from_secs(5)),
            Refresh::Every(d) => Some(d),
            Refresh::Never => None,
        }
    }
}

#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct OptionError(pub String);

fn default_cache_dir() -> Option<std::path::PathBuf> {
    let base = std::env::var_os("XDG_CACHE_HOME")
        .filter(|v| !v.is_empty())
        .map(std::path::PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| std::path::PathBuf::from(h).join(".cache")))?;
    Some(base.join("modelfs"))
}

/// Parses a size such as `256M`, `16G`, `4096`, `1k` (binary multiples).
pub(crate) fn parse_size(s: &str) -> Result<u64, OptionError> {
    let s = s.trim();
    let (num, mult) = match s.char_indices().last() {
        Some((i, c)) if c.is_ascii_alphabetic() => {
            let m: u64 = match c.to_ascii_lowercase() {
                'k' => 1 << 10,
                'm' => 1 << 20,
                'g' => 1 << 30,
                't' => 1 << 40,
                'b' => 1,
                _ => return Err(OptionError(format!("bad size '{s}'"))),
            };
            (&s[..i], m)
        }
        _ => (s, 1),
    };
    num.parse::<u64>()
        .ok()
        .and_then(|n| n.checked_mul(mult))
        .ok_or_else(|| OptionError(format!("bad size '{s}'")))
}

/// How `cache=` is shared between the memory caches of a mount — the one place the shares
/// are set, so that together they are `cache=`: what a reader or a view renders, a row, a
/// fetched block or an index block is kept only in one of these.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Budget {
    /// Rendered text chunks and other byte blocks of layouts and views (the rest).
    pub chunks: u64,
    /// Rendered rows of `NAME.rows/` (1/32).
    pub rows: u64,
    /// Index (SSTable) blocks of TensorFlow checkpoints (1/8).
    pub index_blocks: u64,
    /// Fetched blocks of a remote source, read-ahead included (1/4; unused for a local one).
    pub remote_blocks: u64,
}

impl Budget {
    pub fn of(cache: u64) -> Budget {
        let (rows, index_blocks, remote_blocks) = (cache / 32, cache / 8, cache / 4);
        let b = Budget {
            chunks: cache - rows - index_blocks - remote_blocks,
            rows,
            index_blocks,
            remote_blocks,
        };
        debug_assert_eq!(b.chunks + b.rows + b.index_blocks + b.remote_blocks, cache);
        b
    }
}

impl Options {
    /// The shares of `cache=`.
    pub fn budget(&self) -> Budget {
        Budget::of(self.cache_bytes)
    }

    /// What the readers take from these options: the TF index blocks get their share of
    /// `cache=` (at least 4 MiB); nothing persists (see `reader_for`).
    pub fn reader(&self) -> ReaderOptions {
        ReaderOptions {
            verify: self.verify == Verify::Crc,
            sep: self.sep.clone(),
            block_cache_bytes: self.budget().index_blocks.max(4 << 20),
            verdicts: None,
            indexes: None,
            key_index_dir: None,
            storage: modelfs_io::source::local(),
            members: Arc::default(),
        }
    }

    /// `reader()` for `source` (as shown: an absolute path or a URL), whose checksum
    /// verdicts persist in its store under `cache_dir`.
    pub fn reader_for(&self, source: &str) -> ReaderOptions {
        let mut r = self.reader();
        if r.verify {
            r.verdicts = self.store(source).map(|s| s as Arc<dyn Store>);
        }
        r.key_index_dir = self.cache_dir.clone();
        r.indexes = self
            .store(source)
            .map(|s| s as Arc<dyn modelfs_io::store::Store>);
        r
    }

    /// The persistent store of `source` under `cache_dir` (one per source and process).
    pub fn store(&self, source: &str) -> Option<Arc<DiskStore>> {
        let dir = self.cache_dir.as_ref()?;
        Some(DiskStore::shared(dir, source, self.cache_max))
    }

    /// SOURCE as opened: with `hdfs`, a path (not a URL) is the default cluster's
    /// (`hdfs:///PATH`), a relative one under the user's home there (`/user/NAME`), as
    /// `hdfs dfs` takes it.
    pub fn source(&self, source: &std::path::Path) -> std::path::PathBuf {
        let text = source.to_string_lossy();
        if !self.hdfs || modelfs_io::source::remote::is_remote(&text) {
            return source.to_path_buf();
        }
        let path = match text.starts_with('/') {
            true => text.into_owned(),
            false => {
                let user = modelfs_io::source::remote::hadoop_user().unwrap_or_default();
                format!("/user/{user}/{text}")
            }
        };
        std::path::PathBuf::from(format!("hdfs://{path}"))
    }

    /// Settings of a remote source: fetched blocks get their share of `cache=`.
    pub fn remote(&self) -> modelfs_io::source::remote::RemoteSettings {
        modelfs_io::source::remote::RemoteSettings {
            endpoint: self.endpoint.clone(),
            anonymous: self.anonymous,
            region: self.region.clone(),
            profile: self.profile.clone(),
            cache_bytes: self.budget().remote_blocks,
            disk: self.cache_dir.clone().map(|d| (d, self.cache_max)),
        }
    }

    /// Applies one `-o` argument (comma-separated list) on top of `self`: each option by
    /// its entry in `specs::SPECS`.
    pub fn apply(&mut self, arg: &str) -> Result<(), OptionError> {
        for opt in split_options(arg) {
            let (key, value) = match opt.split_once('=') {
                Some((k, v)) => (k, Some(v)),
                None => (opt.as_str(), None),
            };
            match (specs::SPECS.iter().find(|s| s.key == key), value) {
                (Some(spec), Some(v)) if spec.value.is_some() => (spec.apply)(self, v)?,
                (Some(spec), None) if spec.value.is_none() => (spec.apply)(self, "")?,
                (Some(spec), None) if spec.value.is_some() => {
                    return Err(OptionError(format!("option '{key}' needs a value")))
                }
                (None, None) if specs::CONVENTIONS.contains(&key) => {}
                (None, _) if key.starts_with("x-") || key == "comment" => {}
                _ => return Err(OptionError(format!("unknown mount option '{opt}'"))),
            }
        }
        Ok(())
    }
}

/// `cache_dir=DIR`: created when missing; refused unless it is a directory this process can
/// write (a cache that silently keeps nothing would look like a slow machine).
fn usable_dir(v: &str) -> Result<std::path::PathBuf, OptionError> {
    let dir = std::path::PathBuf::from(v);
    let bad = |why: String| OptionError(format!("cache_dir={v}: {why}"));
    std::fs::create_dir_all(&dir).map_err(|e| bad(e.to_string()))?;
    let probe = dir.join(format!(".modelfs-probe-{}", std::process::id()));
    std::fs::write(&probe, b"")
        .and_then(|()| std::fs::remove_file(&probe))
        .map_err(|e| bad(format!("not writable ({e})")))?;
    Ok(dir)
}

/// Splits on commas, except that `sep=,` keeps its comma (`-o sep=,,layouts=all` is awkward;
/// users write `sep=comma`, `sep=tab` or `sep=\t` as well).
fn split_options(arg: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    for c in arg.chars() {
        if c == ',' {
            if cur == "sep=" {
                cur.push(',');
                continue;
            }
            if !cur.is_empty() {
                out.push(std::mem::take(&mut cur));
            }
        } else {
            cur.push(c);
        }
    }
    if !cur.is_empty() {
        out.push(cur);
    }
    join_layout_lists(out)
}

/// SPEC §4 writes `-o layouts=a,b,c`: a bare layout name after `layouts=…` continues its list.
fn join_layout_lists(parts: Vec<String>) -> Vec<String> {
    let mut out: Vec<String> = Vec::with_capacity(parts.len());
    for p in parts {
        let is_layout = !p.contains('=') && (p == "all" || Layout::from_suffix(&p).is_some());
        match out.last_mut() {
            Some(prev) if is_layout && prev.starts_with("layouts=") => {
                prev.push(',');
                prev.push_str(&p);
            }
            _ => out.push(p),
        }
    }
    out
}

fn unescape_sep(v: &str) -> String {
    match v {
        "tab" | "\\t" => "\t".into(),
        "space" => " ".into(),
        "comma" => ",".into(),
        "colon" => ":".into(),
        "semicolon" => ";".into(),
        _ => v.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn o_hdfs_makes_a_path_the_default_clusters() {
        let mut o = Options::default();
        let p = |o: &Options, s: &str| o.source(std::path::Path::new(s)).display().to_string();
        assert_eq!(p(&o, "/user/a/m"), "/user/a/m");
        o.apply("hdfs").unwrap();
        assert_eq!(p(&o, "/user/a/m"), "hdfs:///user/a/m");
        assert_eq!(p(&o, "s3://b/m"), "s3://b/m");
        assert_eq!(p(&o, "hdfs://nn/m"), "hdfs://nn/m");
        let home = format!(
            "hdfs:///user/{}/m",
            modelfs_io::source::remote::hadoop_user().unwrap()
        );
        assert_eq!(p(&o, "m"), home);
    }

    /// Every option completion offers is one `apply` takes (with a sample value).
    #[test]
    fn completion_keys_are_options() {
        let tmp = tempfile::tempdir().unwrap();
        for k in keys() {
            let k = k.as_str();
            let sample = match k {
                "layouts=" => "all".to_string(),
                "sep=" => "tab".to_string(),
                "angel_format=" => "ColIdValueBinaryRowFormat".to_string(),
                "text_size=" => "exact".to_string(),
                "threads=" | "uid=" | "gid=" => "2".to_string(),
                "max_dense=" | "cache=" | "cache_max=" | "ahead=" => "1M".to_string(),
                "cache_dir=" => tmp.path().display().to_string(),
                "verify=" => "none".to_string(),
                "refresh=" => "2.5".to_string(),
                "endpoint=" => "http://127.0.0.1:9000".to_string(),
                k if k.ends_with('=') => "x".to_string(),
                _ => String::new(),
            };
            let mut o = Options::default();
            o.apply(&format!("{k}{sample}"))
                .unwrap_or_else(|e| panic!("{k}: {e}"));
        }
    }

    /// `endpoint=HOST:PORT` (what `STORAGE_EMULATOR_HOST` takes) is a usage error naming the
    /// URL meant, not a panic in the store's client.
    #[test]
    fn an_endpoint_needs_a_scheme() {
        let mut o = Options::default();
        let e = o.apply("endpoint=127.0.0.1:4443").unwrap_err().to_string();
        assert!(
            e.contains("endpoint= needs a URL with a scheme: http://127.0.0.1:4443"),
            "{e}"
        );
        o.apply("endpoint=http://127.0.0.1:4443").unwrap();
        assert_eq!(o.endpoint.as_deref(), Some("http://127.0.0.1:4443"));
    }

    #[test]
    fn cache_dir_must_be_usable() {
        let mut o = Options::default();
        let e = o.apply("cache_dir=/proc/nope").unwrap_err().to_string();
        assert!(e.contains("cache_dir=/proc/nope"), "{e}");
        let tmp = tempfile::tempdir().unwrap();
        let d = tmp.path().join("a/b");
        o.apply(&format!("cache_dir={}", d.display())).unwrap();
        assert!(d.is_dir() && o.cache_dir == Some(d));
        o.apply("cache_dir=none").unwrap();
        assert_eq!(o.cache_dir, None);
    }

    #[test]
    fn sizes() {
        assert_eq!(parse_size("256M").unwrap(), 256 << 20);
        assert_eq!(parse_size("16G").unwrap(), 16 << 30);
        assert_eq!(parse_size("100").unwrap(), 100);
        assert!(parse_size("x").is_err());
        assert!(parse_size("99999999999999999999T").is_err());
    }

    #[test]
    fn apply_and_reject() {
        let mut o = Options::default();
        o.apply("threads=3,cache=1G,verify=none,sep=tab").unwrap();
        assert_eq!(o.threads, 3);
        assert_eq!(o.cache_bytes, 1 << 30);
        // The shares add up to `cache=`, whatever it is.
        for cache in [0, 1, 31, 32 << 20, 1 << 30, (1 << 30) + 7, u64::MAX / 2] {
            let b = Budget::of(cache);
            assert_eq!(b.chunks + b.rows + b.index_blocks + b.remote_blocks, cache);
        }
        assert_eq!(o.verify, Verify::None);
        assert_eq!(o.sep, "\t");
        assert!(o.apply("bogus=1").is_err());
        assert!(o.apply("threads=0").is_err());
        let mut o = Options::default();
        o.apply("sep=,,threads=1").unwrap();
        assert_eq!(o.sep, ",");
        assert_eq!(o.threads, 1);
        let mut o = Options::default();
        o.apply("layouts=txt,bin,ColIdValueText,threads=2,allow_other")
            .unwrap();
        assert_eq!(
            o.layouts,
            [
                Layout::Json,
                Layout::Txt,
                Layout::Bin,
                Layout::Angel(modelfs_layout::AngelFormat::ColIdValueText)
            ]
        );
        assert!(o.allow_other);
        assert!(o.apply("txt").is_err());
    }
}
