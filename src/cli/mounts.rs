//! The mount table (`/proc/self/mountinfo`) and mountpoint checks.

use std::ffi::{CString, OsStr, OsString};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};

/// One line of mountinfo: where and what.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct MountEntry {
    pub(crate) mount_point: PathBuf,
    pub(crate) fstype: String,
    pub(crate) source: String,
}

/// Undoes mountinfo's octal escapes (`\040` for space, `\011`, `\012`, `\134`).
fn unescape(field: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(field.len());
    let mut i = 0;
    while i < field.len() {
        if field[i] == b'\\' {
            if let Some(oct) = field.get(i + 1..i + 4) {
                if oct.iter().all(|b| (b'0'..=b'7').contains(b)) {
                    let v = oct.iter().fold(0u32, |a, &b| a * 8 + u32::from(b - b'0'));
                    if let Ok(byte) = u8::try_from(v) {
                        out.push(byte);
                        i += 4;
                        continue;
                    }
                }
            }
        }
        out.push(field[i]);
        i += 1;
    }
    out
}

/// Parses mountinfo text: `id parent major:minor root mount_point opts [optional…] - fstype source super_opts`.
pub(crate) fn parse_mountinfo(text: &[u8]) -> Vec<MountEntry> {
    let mut out = Vec::new();
    for line in text.split(|&b| b == b'\n') {
        let fields: Vec<&[u8]> = line.split(|&b| b == b' ').collect();
        let Some(dash) = fields.iter().position(|f| *f == b"-") else {
            continue;
        };
        let (Some(mp), Some(fstype), Some(source)) =
            (fields.get(4), fields.get(dash + 1), fields.get(dash + 2))
        else {
            continue;
        };
        out.push(MountEntry {
            mount_point: PathBuf::from(OsString::from_vec(unescape(mp))),
            fstype: String::from_utf8_lossy(fstype).into_owned(),
            source: String::from_utf8_lossy(&unescape(source)).into_owned(),
        });
    }
    out
}

pub(crate) fn mount_table() -> Vec<MountEntry> {
    std::fs::read("/proc/self/mountinfo")
        .map(|t| parse_mountinfo(&t))
        .unwrap_or_default()
}

/// `path` made absolute with its parent directory's symlinks resolved, without touching
/// `path` itself (stat on a dead FUSE mount fails with ENOTCONN).
pub(crate) fn normalize(path: &Path) -> PathBuf {
    let abs = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
    let (Some(parent), Some(name)) = (abs.parent(), abs.file_name()) else {
        return abs;
    };
    match parent.canonicalize() {
        Ok(p) => p.join(name),
        Err(_) => abs,
    }
}

/// The last (topmost) mount at `path`, if any.
pub(crate) fn mount_at(path: &Path) -> Option<MountEntry> {
    let path = normalize(path);
    mount_table()
        .into_iter()
        .rev()
        .find(|m| m.mount_point == path)
}

pub(crate) fn cstring(path: &Path) -> Option<CString> {
    CString::new(path.as_os_str().as_bytes()).ok()
}

pub(crate) fn os(path: &Path) -> &OsStr {
    path.as_os_str()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_mountinfo_lines() {
        let text =
            b"36 35 98:0 /mnt1 /mnt/a\\040b rw,noatime master:1 - fuse.modelfs modelfs:/x rw\n\
                     22 1 0:5 / /proc rw - proc proc rw\n";
        let m = parse_mountinfo(text);
        assert_eq!(m.len(), 2);
        assert_eq!(m[0].mount_point, PathBuf::from("/mnt/a b"));
        assert_eq!(m[0].fstype, "fuse.modelfs");
        assert_eq!(m[0].source, "modelfs:/x");
        assert_eq!(m[1].fstype, "proc");
    }

    #[test]
    fn proc_is_a_mount() {
        assert!(mount_at(Path::new("/proc")).is_some());
        assert!(mount_at(Path::new("/proc/self")).is_none());
    }
}
