//! File-system names for model path components (SPEC §2).
//!
//! Every raw component (arbitrary bytes) maps to a valid, unique file name:
//! - `%` → `%25`; NUL, `/` and bytes that are not part of valid UTF-8 → `%XX` (upper-case hex);
//!   also the other ASCII control characters (0x01–0x1F, 0x7F), which SPEC leaves open: a
//!   newline in a name would break `modelfs ls` (one path per line) and every line-oriented
//!   tool, and escape sequences would garble terminals;
//! - a component that is empty, `.` or `..` → `%`, `%2E`, `%2E%2E`;
//! - a name whose escaped form plus the longest layout suffix (over *all* layouts, so names do
//!   not change with `-o layouts=`) would exceed 255 bytes is cut to at most 200 bytes (on a
//!   character and escape boundary) followed by `~` and 16 hex digits of FNV-1a 64 of the whole
//!   key (every raw component from the root, joined by `/`).
//!
//! Invariant (injectivity): escaping is reversible for uncut names because every `%` produced
//! from input is `%25`, and every other `%` starts an escape or is the lone `%` of the empty
//! component. Cut names carry a 64-bit hash of the whole key.

use modelfs_io::store::fnv1a64;
use modelfs_layout::Layout;

/// Longest name most file systems accept (NAME_MAX).
pub(crate) const NAME_MAX: usize = 255;
/// Bytes kept from an over-long escaped name before `~` and the hash.
pub(crate) const CUT_TO: usize = 200;

/// Length of the longest `.suffix` any file of a tensor can get (`.parts` included).
pub(crate) fn longest_suffix_len() -> usize {
    Layout::all()
        .into_iter()
        .map(|l| l.suffix().len())
        .chain(std::iter::once(PARTS_SUFFIX.len()))
        .max()
        .unwrap_or(0)
        + 1
}

/// Suffix of the directory holding a tensor's partitions.
pub(crate) const PARTS_SUFFIX: &str = "parts";

fn push_hex(out: &mut String, b: u8) {
    const HEX: &[u8; 16] = b"0123456789ABCDEF";
    out.push('%');
    out.push(HEX[usize::from(b >> 4)] as char);
    out.push(HEX[usize::from(b & 15)] as char);
}

/// Escapes one raw component without the length limit. Also returns the byte offsets in the
/// output where a cut is allowed (between characters and escapes).
fn escape_with_boundaries(raw: &[u8]) -> (String, Vec<usize>) {
    let mut out = String::with_capacity(raw.len());
    let mut cuts = vec![0];
    match raw {
        b"" => return ("%".into(), vec![0, 1]),
        b"." => return ("%2E".into(), vec![0, 3]),
        b".." => return ("%2E%2E".into(), vec![0, 3, 6]),
        _ => {}
    }
    let mut rest = raw;
    while !rest.is_empty() {
        let (valid, bad) = match std::str::from_utf8(rest) {
            Ok(s) => (s, 0),
            Err(e) => {
                let up_to = e.valid_up_to();
                // Safe: `valid_up_to` bytes are valid UTF-8 by definition.
                let s = std::str::from_utf8(&rest[..up_to]).unwrap_or("");
                let bad = e.error_len().unwrap_or(rest.len() - up_to);
                (s, bad)
            }
        };
        for c in valid.chars() {
            match c {
                '%' | '/' | '\0'..='\x1f' | '\x7f' => push_hex(&mut out, c as u8),
                _ => out.push(c),
            }
            cuts.push(out.len());
        }
        let after_valid = valid.len();
        for &b in &rest[after_valid..after_valid + bad] {
            push_hex(&mut out, b);
            cuts.push(out.len());
        }
        rest = &rest[after_valid + bad..];
    }
    (out, cuts)
}

/// Escapes a raw component (no length limit). Used for symlink targets and tests.
pub(crate) fn escape_component(raw: &[u8]) -> String {
    escape_with_boundaries(raw).0
}

/// A tensor's model path as the mount shows it: a reader's own directory by its name (not its
/// marker, `model::own_component`), a key's components escaped (`fs::names`).
pub fn mount_path(p: &[Vec<u8>]) -> String {
    (0..p.len())
        .map(|i| match p[i].split_first() {
            Some((0, own)) => String::from_utf8_lossy(own).into_owned(),
            _ => component_name(&p[..=i]),
        })
        .collect::<Vec<_>>()
        .join("/")
}

/// The file-system name of the last component of `key` (raw components from the root), cut
/// with a hash of the whole key when it would be too long once a suffix is added.
pub(crate) fn component_name(key: &[Vec<u8>]) -> String {
    let Some(last) = key.last() else {
        return String::new();
    };
    let (escaped, cuts) = escape_with_boundaries(last);
    if escaped.len() + longest_suffix_len() <= NAME_MAX {
        return escaped;
    }
    let cut = cuts
        .iter()
        .copied()
        .filter(|&c| c <= CUT_TO)
        .max()
        .unwrap_or(0);
    format!("{}~{:016x}", &escaped[..cut], fnv1a64(&key.join(&b'/')))
}

/// `name` with its first byte `%XX`-escaped: a key's name that a reader's own entry
/// (`constants/`, `signatures.txt`, …) takes (SPEC §6). Stays unique: `escape_component`
/// never escapes a printable ASCII byte other than `%`, so no other key's name is this one.
pub(crate) fn escape_first_byte(name: &str) -> String {
    let mut out = String::with_capacity(name.len() + 2);
    match name.as_bytes().first() {
        Some(&b) if b.is_ascii() && b != b'%' => {
            push_hex(&mut out, b);
            out.push_str(&name[1..]);
        }
        // Already starts with an escape (or non-ASCII, which no reserved name has).
        _ => out.push_str(name),
    }
    out
}

/// `NAME.suffix` for a tensor file.
pub(crate) fn file_name(base: &str, layout: Layout) -> String {
    format!("{base}.{}", layout.suffix())
}

/// `NAME.parts` for a tensor's partition directory.
pub(crate) fn parts_dir_name(base: &str) -> String {
    format!("{base}.{PARTS_SUFFIX}")
}

/// The alternative name of a plain entry (directory, symlink) whose name collides with a file
/// derived from a sibling tensor (`a.txt/` next to tensor `a`'s `a.txt`): its last `.` becomes
/// `%2E`. Unique because `%2E` never comes out of escaping except for the component `.`, and
/// derived names always end in `.suffix` while this one has one dot fewer at the end.
pub(crate) fn dodge_collision(name: &str) -> String {
    match name.rfind('.') {
        Some(i) => format!("{}%2E{}", &name[..i], &name[i + 1..]),
        None => format!("{name}%2E"),
    }
}

/// Reverses `escape_component` on an uncut name (for tests and diagnostics).
#[cfg(test)]
pub(crate) fn unescape(name: &str) -> Option<Vec<u8>> {
    match name {
        "%" => return Some(Vec::new()),
        "%2E" => return Some(b".".to_vec()),
        "%2E%2E" => return Some(b"..".to_vec()),
        _ => {}
    }
    let b = name.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' {
            let hex = b.get(i + 1..i + 3)?;
            let s = std::str::from_utf8(hex).ok()?;
            out.push(u8::from_str_radix(s, 16).ok()?);
            i += 3;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn name(raw: &[u8]) -> String {
        component_name(&[raw.to_vec()])
    }

    #[test]
    fn special_components() {
        assert_eq!(name(b""), "%");
        assert_eq!(name(b"."), "%2E");
        assert_eq!(name(b".."), "%2E%2E");
        assert_eq!(name(b"..."), "...");
        assert_eq!(name(b".a"), ".a");
    }

    #[test]
    fn unsafe_bytes() {
        assert_eq!(name(b"a%b"), "a%25b");
        assert_eq!(name(b"a/b"), "a%2Fb");
        assert_eq!(name(b"a\0b"), "a%00b");
        assert_eq!(name(b"\xffx\xc3"), "%FFx%C3");
        assert_eq!(name("héllo".as_bytes()), "héllo");
        assert_eq!(name(b"%2E"), "%252E");
        assert_eq!(name(b"new\nline\ttab\x7f\x1b"), "new%0Aline%09tab%7F%1B");
    }

    #[test]
    fn round_trip_and_injective() {
        let raws: Vec<&[u8]> = vec![
            b"",
            b".",
            b"..",
            b"%",
            b"%2E",
            b"%25",
            b"a/b",
            b"a%2Fb",
            b"\xff",
            b"%FF",
            b"x\0",
            b"ok",
            "ünï".as_bytes(),
            b"\xe2\x82",
            b"...",
        ];
        let mut seen = std::collections::HashSet::new();
        for r in &raws {
            let n = name(r);
            assert!(!n.contains('/') && !n.contains('\0'), "{n}");
            assert!(n != "." && n != ".." && !n.is_empty());
            assert_eq!(unescape(&n).as_deref(), Some(*r), "{n}");
            assert!(seen.insert(n.clone()), "duplicate {n}");
        }
    }

    #[test]
    fn long_names_are_cut_with_hash() {
        let limit = NAME_MAX - longest_suffix_len();
        let ok = vec![b'a'; limit];
        assert_eq!(name(&ok).len(), limit);
        let long = vec![b'a'; limit + 1];
        let n = name(&long);
        assert_eq!(n.len(), CUT_TO + 1 + 16);
        assert!(n.starts_with(&"a".repeat(CUT_TO)));
        assert_eq!(&n[CUT_TO..CUT_TO + 1], "~");
        // The whole key is hashed: same last component under another parent differs.
        let a = component_name(&[b"p".to_vec(), long.clone()]);
        let b = component_name(&[b"q".to_vec(), long.clone()]);
        assert_ne!(a, b);
        // Stable across runs (fixed hash).
        assert_eq!(fnv1a64(b"a"), 0xaf63dc4c8601ec8c);
        assert!(n.len() + longest_suffix_len() <= NAME_MAX);
    }

    #[test]
    fn cut_respects_char_and_escape_boundaries() {
        // 3-byte chars: 200 is not a boundary (199 is).
        let raw = "€".repeat(100);
        let n = name(raw.as_bytes());
        let (prefix, hash) = n.split_once('~').unwrap();
        assert_eq!(prefix.len(), 198);
        assert_eq!(hash.len(), 16);
        // Escapes are never split.
        let mut raw = vec![b'a'; 199];
        raw.extend(std::iter::repeat_n(b'%', 40));
        let n = name(&raw);
        assert!(n.starts_with(&format!("{}~", "a".repeat(199))), "{n}");
    }

    #[test]
    fn derived_names_and_collisions() {
        assert_eq!(file_name("W", Layout::Txt), "W.txt");
        assert_eq!(parts_dir_name("W"), "W.parts");
        assert_eq!(dodge_collision("a.txt"), "a%2Etxt");
        assert_eq!(dodge_collision("a.b.txt"), "a.b%2Etxt");
        assert_eq!(longest_suffix_len(), ".RowIdColIdValueBinary".len());
    }
}
