//! `modelfs cache du|clean`: what the persistent cache (`cache_dir`) holds, and emptying it.
//! Only modelfs's own files are counted and removed (`store::lru::OURS`).

use std::io::Write;

use modelfs_core::options::Options;
use modelfs_io::store::lru;

use super::{Failure, EXIT_SOURCE, EXIT_USAGE};

#[derive(clap::Subcommand, Debug)]
pub(crate) enum CacheAction {
    /// Files and bytes in the cache directory, by kind.
    Du,
    /// Remove every file modelfs keeps in the cache directory.
    Clean,
}

pub(crate) fn cache(action: &CacheAction, opts: &Options) -> Result<(), Failure> {
    let Some(dir) = &opts.cache_dir else {
        return Err(Failure::new(
            EXIT_USAGE,
            "no cache directory (cache_dir=none)",
        ));
    };
    let files = lru::scan(dir);
    let text = match action {
        CacheAction::Du => {
            let mut by_kind = [(0u64, 0u64); 4];
            for (p, len, _) in &files {
                let ext = p.extension().and_then(|x| x.to_str()).unwrap_or("");
                if let Some(i) = lru::OURS.iter().position(|o| *o == ext) {
                    by_kind[i].0 += 1;
                    by_kind[i].1 += len;
                }
            }
            let total: u64 = files.iter().map(|f| f.1).sum();
            format!(
                "{}\t{}\n  sources (text indexes, checksum verdicts): {} files, {} bytes\n  remote blocks: {} files, {} bytes\n  older versions' files: {} files, {} bytes\n  limit (cache_max): {} bytes\n",
                total,
                dir.display(),
                by_kind[0].0,
                by_kind[0].1,
                by_kind[1].0,
                by_kind[1].1,
                by_kind[2].0 + by_kind[3].0,
                by_kind[2].1 + by_kind[3].1,
                opts.cache_max
            )
        }
        CacheAction::Clean => {
            let mut removed = (0u64, 0u64);
            for (p, len, _) in &files {
                if std::fs::remove_file(p).is_ok() {
                    removed.0 += 1;
                    removed.1 += len;
                }
            }
            let _ = std::fs::remove_dir(dir.join("verdicts"));
            let _ = std::fs::remove_dir(dir.join("blocks"));
            format!(
                "removed {} files, {} bytes from {}\n",
                removed.0,
                removed.1,
                dir.display()
            )
        }
    };
    std::io::stdout()
        .write_all(text.as_bytes())
        .map_err(|e| Failure::new(EXIT_SOURCE, format!("writing output: {e}")))
}
