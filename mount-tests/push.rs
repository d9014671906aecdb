//! The page cache filled ahead of readers (`fs::push`, FUSE_NOTIFY_STORE): a sequential
//! reader finds the pages ahead of it cached, a reader that jumps about gets the whole file,
//! an `.npz` read after its checksum pass is pushed like any file — and every byte pushed is
//! the file's (each file compared with the same mount read with `ahead=0`, which pushes
//! nothing).

use std::os::unix::fs::FileExt;
use std::path::Path;

use crate::firstlook::checkpoint;
use crate::support::{resident_share, wait_until, Fuse};

const MIB: u64 = 1 << 20;

/// The bytes of `file` as a mount that pushes nothing reads them.
fn unpushed(fuse: &Fuse, src: &Path, file: &str) -> Vec<u8> {
    let m = fuse.mount(src, "layouts=bin,npy,ahead=0,cache_dir=none");
    let bytes = std::fs::read(m.path().join(file)).unwrap();
    m.unmount_and_check();
    bytes
}

#[test]
fn a_sequential_reader_finds_the_pages_ahead_cached() {
    let Some(fuse) = Fuse::check() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let src = checkpoint(tmp.path(), 4096, 4096); // 64 MiB
    let want = unpushed(&fuse, &src, "W.bin");
    let m = fuse.mount(&src, "layouts=bin,npy,cache_dir=none");
    let p = m.path().join("W.bin");
    let f = std::fs::File::open(&p).unwrap();
    let mut buf = vec![0u8; 128 << 10];
    for i in 0..4u64 {
        f.read_exact_at(&mut buf, i * (128 << 10)).unwrap();
    }
    // The kernel reads 128 KiB ahead by itself; what lies 1 MiB on was pushed.
    let ahead = || resident_share(&p, MIB, 8 * MIB);
    assert!(
        wait_until(|| ahead() > 0.95),
        "pages 1..8 MiB ahead of the reader not cached: {:.2}",
        ahead()
    );
    // Far beyond the window nothing was pushed.
    assert!(resident_share(&p, 48 * MIB, 64 * MIB) < 0.5);
    assert!(std::fs::read(&p).unwrap() == want, "pushed bytes differ");
    drop(f);
    m.unmount_and_check();
}

#[test]
fn a_reader_that_jumps_about_gets_the_whole_file() {
    let Some(fuse) = Fuse::check() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let src = checkpoint(tmp.path(), 2048, 4096); // 32 MiB
    let want = unpushed(&fuse, &src, "W.npy");
    let m = fuse.mount(&src, "layouts=bin,npy,cache_dir=none");
    let p = m.path().join("W.npy");
    let f = std::fs::File::open(&p).unwrap();
    let mut buf = vec![0u8; 4096];
    for at in [20 * MIB, 3 * MIB, 27 * MIB, 11 * MIB] {
        f.read_exact_at(&mut buf, at).unwrap();
        assert!(buf[..] == want[at as usize..at as usize + 4096]);
    }
    let size = want.len() as u64;
    let all = || resident_share(&p, 0, size);
    assert!(
        wait_until(|| all() > 0.95),
        "the file was not pushed whole: {:.2} cached",
        all()
    );
    assert!(std::fs::read(&p).unwrap() == want, "pushed bytes differ");
    drop(f);
    m.unmount_and_check();
}

#[test]
fn nothing_is_pushed_with_ahead_0() {
    let Some(fuse) = Fuse::check() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let src = checkpoint(tmp.path(), 2048, 4096);
    let m = fuse.mount(&src, "layouts=bin,ahead=0,cache_dir=none");
    let p = m.path().join("W.bin");
    let f = std::fs::File::open(&p).unwrap();
    let mut buf = vec![0u8; 128 << 10];
    for i in 0..4u64 {
        f.read_exact_at(&mut buf, i * (128 << 10)).unwrap();
    }
    for at in [20 * MIB, 3 * MIB, 27 * MIB, 11 * MIB] {
        f.read_exact_at(&mut buf[..4096], at).unwrap();
    }
    std::thread::sleep(std::time::Duration::from_millis(300));
    let share = resident_share(&p, 0, 32 * MIB);
    assert!(share < 0.2, "{share:.2} of the file cached with ahead=0");
    drop(f);
    m.unmount_and_check();
}

/// Text is made on read: rendering it ahead of a reader that may stop (`head`) would cost
/// CPU and fill the daemon's chunk cache, so a text reader gets no window (its renderer reads
/// ahead by itself, into memory bounded by `cache=`).
#[test]
fn a_text_reader_gets_no_pushes() {
    let Some(fuse) = Fuse::check() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let src = checkpoint(tmp.path(), 2048, 4096);
    let m = fuse.mount(&src, "layouts=txt,text_size=exact,cache_dir=none");
    let p = m.path().join("W.txt");
    let size = std::fs::metadata(&p).unwrap().len();
    assert!(size > 32 * MIB, "W.txt is {size} bytes");
    let f = std::fs::File::open(&p).unwrap();
    let mut buf = vec![0u8; 128 << 10];
    for i in 0..4u64 {
        f.read_exact_at(&mut buf, i * (128 << 10)).unwrap();
    }
    std::thread::sleep(std::time::Duration::from_millis(500));
    let ahead = resident_share(&p, 2 * MIB, 16 * MIB);
    assert!(
        ahead < 0.1,
        "{ahead:.2} of the text ahead of its reader cached"
    );
    drop(f);
    m.unmount_and_check();
}

/// Reading `.npz`'s central directory computes every member's CRC-32 first; the members
/// are then pushed ahead of the reader like any file's bytes, and are the file's.
#[test]
fn the_npz_read_after_its_checksum_pass_is_pushed_exactly() {
    let Some(fuse) = Fuse::check() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let src = checkpoint(tmp.path(), 2048, 4096);
    let want = unpushed(&fuse, &src, ".npz");
    let m = fuse.mount(&src, "layouts=bin,npy,cache_dir=none");
    let p = m.path().join(".npz");
    let size = std::fs::metadata(&p).unwrap().len();
    assert_eq!(size, want.len() as u64);
    let f = std::fs::File::open(&p).unwrap();
    let mut tail = vec![0u8; 4096.min(size as usize)];
    let at = size - tail.len() as u64;
    f.read_exact_at(&mut tail, at).unwrap();
    assert!(tail[..] == want[want.len() - tail.len()..]);
    assert!(std::fs::read(&p).unwrap() == want, "pushed bytes differ");
    drop(f);
    m.unmount_and_check();
}
