//! `ls`, `cat`, `info`: the mount's tree and bytes without FUSE (same `fs::Tree`).

use std::ffi::OsStr;
use std::io::{self, Write};
use std::os::fd::AsFd;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use modelfs_core::fs::{FileKind, FsError, Opening, Tree};
use modelfs_core::options::Options;
use modelfs_layout::Patient;

use super::{build_tree, Failure, EXIT_OK, EXIT_SOURCE, EXIT_UNKNOWN_NAME};

/// Bytes per read in `cat` (bounded memory whatever the file size).
const CAT_CHUNK: usize = 1 << 20;

fn path_failure(path: &OsStr, e: &FsError) -> Failure {
    let status = match e {
        FsError::Io(_) | FsError::Stale(_) => EXIT_SOURCE,
        _ => EXIT_UNKNOWN_NAME,
    };
    Failure::new(status, format!("{}: {e}", path.to_string_lossy()))
}

fn write_failure(e: io::Error) -> Failure {
    if e.kind() == io::ErrorKind::BrokenPipe {
        // The reader went away (`| head`): stop writing; not an error of ours.
        Failure::silent(EXIT_OK)
    } else {
        Failure::new(EXIT_SOURCE, format!("writing output: {e}"))
    }
}

/// Lists into `out`: every path under `path` (relative to the root, as typed, `/`-trimmed).
pub(crate) fn ls_into(
    tree: &Tree,
    path: Option<&[u8]>,
    out: &mut dyn Write,
) -> Result<(), Failure> {
    let raw = path.unwrap_or(b"");
    let ino = tree
        .resolve(raw)
        .map_err(|e| path_failure(OsStr::from_bytes(raw), &e))?;
    let trimmed = String::from_utf8_lossy(raw).trim_matches('/').to_string();
    let kind = tree
        .node(ino)
        .map(|n| n.file_kind())
        .map_err(|e| path_failure(OsStr::from_bytes(raw), &e))?;
    if kind != FileKind::Dir {
        return writeln!(out, "{trimmed}").map_err(write_failure);
    }
    let prefix = if trimmed.is_empty() {
        String::new()
    } else {
        format!("{trimmed}/")
    };
    let mut result = Ok(());
    tree.walk(ino, &prefix, &mut |p, _| {
        if result.is_ok() {
            result = writeln!(out, "{p}").map_err(write_failure);
        }
    })
    .map_err(|e| path_failure(OsStr::from_bytes(raw), &e))?;
    result
}

pub(crate) fn ls(source: &Path, path: Option<&OsStr>, opts: &Options) -> Result<(), Failure> {
    let tree = build_tree(source, opts)?;
    let stdout = io::stdout();
    let mut out = io::BufWriter::with_capacity(1 << 16, stdout.lock());
    ls_into(&tree, path.map(|p| p.as_bytes()), &mut out)?;
    out.flush().map_err(write_failure)
}

/// Streams the file at `path` into `out`.
pub(crate) fn cat_into(tree: &Tree, path: &[u8], out: &mut dyn Write) -> Result<(), Failure> {
    let shown = OsStr::from_bytes(path);
    let ino = tree.resolve(path).map_err(|e| path_failure(shown, &e))?;
    let node = tree.node(ino).map_err(|e| path_failure(shown, &e))?;
    if node.kind().is_dir() {
        return Err(path_failure(shown, &FsError::IsDir));
    }
    let opened = tree
        .open(ino, false, &Patient)
        .map_err(|e| path_failure(shown, &e))?;
    let fh = opened.fh;
    let result = cat_open(tree, opened, shown, out);
    tree.release(fh);
    result
}

/// Writes open file `o` to `out` from its start, `CAT_CHUNK` at a time.
fn cat_open(tree: &Tree, o: Opening, shown: &OsStr, out: &mut dyn Write) -> Result<(), Failure> {
    let mut offset = 0u64;
    loop {
        let got = tree
            .read(o.fh, offset, CAT_CHUNK, &Patient)
            .map_err(|e| path_failure(shown, &e))?;
        if got.is_empty() {
            // A text file whose size is not known yet is read to its end.
            return match o.size {
                Some(size) if offset < size => {
                    let msg = format!("file ended at {offset} of {size} bytes");
                    Err(path_failure(shown, &FsError::Io(msg)))
                }
                _ => Ok(()),
            };
        }
        out.write_all(&got).map_err(write_failure)?;
        offset += got.len() as u64;
    }
}

pub(crate) fn cat(source: &Path, path: &OsStr, opts: &Options) -> Result<(), Failure> {
    let tree = build_tree(source, opts)?;
    // Writes the reads as they come, to a duplicate of fd 1: `Stdout` is line-buffered and
    // would search each read for its last newline and copy the rest (a twentieth of a
    // `cat` of a text file).
    let stdout = io::stdout();
    let _lock = stdout.lock();
    let mut out = stdout
        .as_fd()
        .try_clone_to_owned()
        .map(std::fs::File::from)
        .map_err(write_failure)?;
    cat_into(&tree, path.as_bytes(), &mut out)?;
    out.flush().map_err(write_failure)
}

/// `modelfs row`: the rows of tensor `name` with ids `ids`, as `id<TAB>values` lines (or one
/// JSON array), read through the tree's `NAME.rows/` files.
pub(crate) fn row_into(
    tree: &Tree,
    name: &[u8],
    ids: &[i64],
    json: bool,
    out: &mut dyn Write,
) -> Result<(), Failure> {
    let base = String::from_utf8_lossy(name).trim_matches('/').to_string();
    let mut missing = Vec::new();
    let mut rows = Vec::new();
    for &id in ids {
        let suffix = if json { "json" } else { "txt" };
        let path = format!("{base}.rows/{id}.{suffix}");
        let mut bytes = Vec::new();
        match cat_into(tree, path.as_bytes(), &mut bytes) {
            Ok(()) if json => rows.push(
                serde_json::from_slice::<serde_json::Value>(&bytes)
                    .map_err(|e| Failure::new(EXIT_SOURCE, format!("{path}: {e}")))?,
            ),
            Ok(()) => {
                write!(out, "{id}\t").map_err(write_failure)?;
                out.write_all(&bytes).map_err(write_failure)?;
            }
            Err(f) => match tree.resolve(format!("{base}.rows").as_bytes()) {
                // The tensor is keyed and the id is absent: say so, go on.
                Ok(_) if f.status == EXIT_UNKNOWN_NAME => missing.push(id),
                Ok(_) => return Err(f),
                Err(_) => {
                    let msg = format!("{base}: no such keyed tensor (see `modelfs list`)");
                    return Err(Failure::new(EXIT_UNKNOWN_NAME, msg));
                }
            },
        }
    }
    if json {
        let text = serde_json::to_string_pretty(&rows).unwrap_or_default();
        writeln!(out, "{text}").map_err(write_failure)?;
    }
    if !missing.is_empty() {
        for id in &missing {
            eprintln!("modelfs: {base}: no row with id {id}");
        }
        return Err(Failure::silent(super::EXIT_NO));
    }
    Ok(())
}

pub(crate) fn row(
    source: &Path,
    name: &OsStr,
    ids: &[i64],
    json: bool,
    opts: &Options,
) -> Result<(), Failure> {
    let tree = build_tree(source, opts)?;
    let stdout = io::stdout();
    let mut out = io::BufWriter::new(stdout.lock());
    row_into(&tree, name.as_bytes(), ids, json, &mut out)?;
    out.flush().map_err(write_failure)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::SystemTime;

    use super::*;
    use modelfs_core::fs::testing::ctx;
    use modelfs_core::fs::TreeConfig;
    use modelfs_layout::Layout;
    use modelfs_model::testing::{key, MemModel, MemTensor};

    fn tree() -> Tree {
        let mut m = MemModel::default();
        m.add(key("a/W"), MemTensor::f32(&[2], &[1.5, 2.0]).named(b"a/W"));
        m.add(key("b"), MemTensor::f32(&[1], &[3.0]).named(b"b"));
        m.symlinks
            .push((Vec::new(), b"latest".to_vec(), b"a".to_vec()));
        let cfg = TreeConfig {
            uid: 0,
            gid: 0,
            mtime: SystemTime::UNIX_EPOCH,
            text_size: modelfs_core::options::TextSize::Exact,
        };
        Tree::new(Arc::new(m), ctx(&[Layout::Json, Layout::Txt]), cfg)
    }

    fn ls_text(t: &Tree, path: Option<&str>) -> Result<String, Failure> {
        let mut out = Vec::new();
        ls_into(t, path.map(str::as_bytes), &mut out)?;
        Ok(String::from_utf8(out).unwrap())
    }

    #[test]
    fn ls_lists_like_the_mount() {
        let t = tree();
        assert_eq!(
            ls_text(&t, None).unwrap(),
            "a/\na/W.json\na/W.txt\nb.json\nb.txt\nlatest\n"
        );
        assert_eq!(ls_text(&t, Some("/a/")).unwrap(), "a/W.json\na/W.txt\n");
        assert_eq!(
            ls_text(&t, Some("latest")).unwrap(),
            "latest/W.json\nlatest/W.txt\n"
        );
        assert_eq!(ls_text(&t, Some("b.txt")).unwrap(), "b.txt\n");
        assert_eq!(
            ls_text(&t, Some("nope")).unwrap_err().status,
            EXIT_UNKNOWN_NAME
        );
    }

    #[test]
    fn cat_streams_exact_bytes() {
        let t = tree();
        let mut out = Vec::new();
        cat_into(&t, b"a/W.txt", &mut out).unwrap();
        assert_eq!(out, b"1.5\n2.0\n");
        let mut out = Vec::new();
        cat_into(&t, b"latest/W.txt", &mut out).unwrap();
        assert_eq!(out, b"1.5\n2.0\n");
        assert_eq!(
            cat_into(&t, b"a", &mut Vec::new()).unwrap_err().status,
            EXIT_UNKNOWN_NAME
        );
        assert_eq!(
            cat_into(&t, b"x.txt", &mut Vec::new()).unwrap_err().status,
            EXIT_UNKNOWN_NAME
        );
    }

    /// The program API's bytes are the mount's: a tensor's `npy` is its `NAME.npy` file.
    #[test]
    fn the_api_reads_a_tensor_as_its_npy_file() {
        let src = format!(
            "{}/fixtures/tf/multi_shard/ckpt",
            env!("CARGO_MANIFEST_DIR")
        );
        let m = modelfs_core::api::Opened::open(&src, &[]).unwrap();
        let tree = modelfs_core::open::build_tree(std::path::Path::new(&src), &Default::default())
            .unwrap();
        let mut compared = 0;
        for name in m.keys().unwrap() {
            let mut expected = Vec::new();
            let in_mount = cat_into(&tree, format!("{name}.npy").as_bytes(), &mut expected);
            let Ok(npy) = m.npy(&name) else {
                // No `.npy` here: none in the mount either (the string tensor `s`).
                assert!(in_mount.is_err(), "{name}");
                continue;
            };
            let mut whole = vec![0u8; npy.size().unwrap() as usize];
            npy.read_into(0, &mut whole).unwrap();
            assert_eq!(whole, expected, "{name}");
            let header = npy.header().unwrap();
            assert_eq!(&whole[..header.len()], &header[..], "{name}");
            compared += 1;
        }
        assert_eq!(compared, 4);
    }
}
