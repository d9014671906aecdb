//! In-process mount of the in-memory model (needs /dev/fuse and the right to mount; skipped
//! with a message otherwise, failed if MODELFS_REQUIRE_FUSE=1).

use std::io::{Read, Seek, SeekFrom};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileExt, MetadataExt, PermissionsExt};
use std::path::Path;
use std::sync::Arc;
use std::time::SystemTime;

use super::fuse::{mount_config, ModelFs};
use super::testing::ctx;
use super::{Tree, TreeConfig};
use crate::options::Options;
use modelfs_layout::Layout;
use modelfs_model::testing::{key, MemModel, MemTensor};

fn getxattr(path: &Path, name: &str) -> Result<Vec<u8>, i32> {
    let p = std::ffi::CString::new(path.as_os_str().as_bytes()).unwrap();
    let n = std::ffi::CString::new(name).unwrap();
    let mut buf = vec![0u8; 256];
    // SAFETY: valid C strings and buffer.
    let r = unsafe { libc::getxattr(p.as_ptr(), n.as_ptr(), buf.as_mut_ptr().cast(), buf.len()) };
    if r < 0 {
        return Err(std::io::Error::last_os_error().raw_os_error().unwrap_or(0));
    }
    buf.truncate(r as usize);
    Ok(buf)
}

#[test]
fn mounted_tree_behaves_like_files() {
    let require = modelfs_model::testing::must_be_complete();
    let mut m = MemModel::default();
    let values: Vec<f32> = (0..3000).map(|i| i as f32 * 0.5).collect();
    m.add(
        key("layer1/W"),
        MemTensor::f32(&[1000, 3], &values).named(b"layer1/W"),
    );
    m.add(
        key("layer1/W/Adam"),
        MemTensor::f32(&[2], &[1.0, 2.0]).named(b"layer1/W/Adam"),
    );
    m.add(
        key("emb"),
        MemTensor::partitioned(&[1.0, 2.0, 3.0], &[1, 2], false),
    );
    m.symlinks
        .push((Vec::new(), b"latest".to_vec(), b"layer1".to_vec()));
    let cfg = TreeConfig::for_user(None, None, SystemTime::UNIX_EPOCH);
    let tree = Arc::new(Tree::new(
        Arc::new(m),
        ctx(&[Layout::Json, Layout::Txt, Layout::Bin]),
        cfg,
    ));
    let dir = tempfile::tempdir().unwrap();
    let opts = Options {
        threads: 2,
        ..Options::default()
    };
    let session = match fuser::spawn_mount(
        ModelFs::new(tree.clone()),
        dir.path(),
        &mount_config(&opts, "modelfs-test"),
    ) {
        Ok(s) => s,
        Err(e) => {
            assert!(!require, "cannot mount: {e}");
            eprintln!("skipping FUSE test: cannot mount ({e})");
            return;
        }
    };
    let root = dir.path();
    let mounts = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    let shown = format!(" {} ", root.display());
    assert!(mounts.contains(&shown), "not mounted");
    let result = std::panic::catch_unwind(|| {
        // readdir == the tree's walk
        let mut names: Vec<String> = std::fs::read_dir(root)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        assert_eq!(
            names,
            [
                "emb.bin",
                "emb.json",
                "emb.parts",
                "emb.txt",
                "latest",
                "layer1"
            ]
        );
        // sizes and reads
        let bin = root.join("layer1/W.bin");
        let meta = std::fs::metadata(&bin).unwrap();
        assert_eq!(meta.len(), 12000);
        assert_eq!(meta.permissions().mode() & 0o777, 0o644);
        let full = std::fs::read(&bin).unwrap();
        assert_eq!(full.len(), 12000);
        assert_eq!(&full[4..8], &0.5f32.to_le_bytes());
        let f = std::fs::File::open(&bin).unwrap();
        for off in [0u64, 1, 4095, 4096, 8191, 11999] {
            let mut b = [0u8; 7];
            let n = f.read_at(&mut b, off).unwrap();
            assert_eq!(&b[..n], &full[off as usize..(off as usize + 7).min(12000)]);
        }
        let mut f2 = std::fs::File::open(root.join("layer1/W.txt")).unwrap();
        f2.seek(SeekFrom::Start(0)).unwrap();
        let mut txt = String::new();
        f2.read_to_string(&mut txt).unwrap();
        assert_eq!(txt.lines().count(), 3000);
        // mmap works (no direct_io)
        // SAFETY: the mounted file is read-only and outlives the mapping.
        let mm = unsafe { memmap2::Mmap::map(&f).unwrap() };
        assert_eq!(&mm[..], &full[..]);
        // partitions, side-by-side dir and file, symlink
        assert_eq!(
            std::fs::read(root.join("emb.parts/1.bin")).unwrap().len(),
            8
        );
        assert!(root.join("layer1/W").is_dir() && root.join("layer1/W.txt").is_file());
        assert_eq!(
            std::fs::read_link(root.join("latest")).unwrap(),
            Path::new("layer1")
        );
        assert_eq!(std::fs::read(root.join("latest/W.bin")).unwrap(), full);
        // xattrs
        assert_eq!(getxattr(&bin, "user.modelfs.shape").unwrap(), b"[1000, 3]");
        assert_eq!(getxattr(&bin, "user.modelfs.dtype").unwrap(), b"float32");
        assert_eq!(getxattr(&bin, "user.nope"), Err(libc::ENODATA));
        assert_eq!(getxattr(&bin, "security.selinux"), Err(libc::EOPNOTSUPP));
        // read-only
        let w = std::fs::OpenOptions::new()
            .write(true)
            .open(&bin)
            .unwrap_err();
        assert!(
            matches!(w.raw_os_error(), Some(libc::EROFS) | Some(libc::EACCES)),
            "{w}"
        );
        assert_eq!(
            std::fs::create_dir(root.join("new"))
                .unwrap_err()
                .raw_os_error(),
            Some(libc::EROFS)
        );
        assert_eq!(
            std::fs::remove_file(&bin).unwrap_err().raw_os_error(),
            Some(libc::EROFS)
        );
        // SAFETY: getuid cannot fail and touches no memory.
        let uid = unsafe { libc::getuid() };
        assert_eq!(std::fs::metadata(root).unwrap().uid(), uid);
        assert!(std::fs::metadata(root.join("nope.txt")).is_err());
    });
    session.umount_and_join().unwrap();
    if let Err(p) = result {
        std::panic::resume_unwind(p);
    }
}
