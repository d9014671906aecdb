//! Key ↔ tree path mapping (SPEC §2, formats §9.1).
//!
//! Plain (TF1) keys are split on `/`. Object-based (TF2) keys additionally lose the suffix
//! `/.ATTRIBUTES/VARIABLE_VALUE`, and each escaped segment (`..` → `.`, `.S` → `/`) is shown
//! unescaped. The mapping is designed so that a directory of the tree is a key *range*: the
//! display components of a directory re-escape to key segments, so listing it is a seek to
//! `segment/…/segment/` plus a forward scan.
//!
//! In object style a segment that is not a valid escaped name (the markers `.ATTRIBUTES`,
//! `.OPTIMIZER_SLOT`, or stray dots) is shown as it is; looking up such a component tries both
//! its escaped form and the raw form.

/// Dropped from object-based variable keys.
pub(crate) const VARIABLE_SUFFIX: &[u8] = b"/.ATTRIBUTES/VARIABLE_VALUE";
/// The object graph entry of TF2 checkpoints; never shown.
pub(crate) const GRAPH_KEY: &[u8] = b"_CHECKPOINTABLE_OBJECT_GRAPH";

/// At most this many alternative key spellings are tried for one path.
const MAX_CANDIDATES: usize = 16;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum KeyStyle {
    /// TF1 names: components are `/`-separated key parts.
    Plain,
    /// TF2 object-based keys (the bundle holds `_CHECKPOINTABLE_OBJECT_GRAPH`).
    Object,
}

/// Every `.` is followed by `.` or `S` (pairwise, left to right).
pub(crate) fn is_escaped(seg: &[u8]) -> bool {
    let mut i = 0;
    while i < seg.len() {
        if seg[i] == b'.' {
            match seg.get(i + 1) {
                Some(b'.') | Some(b'S') => i += 2,
                _ => return false,
            }
        } else {
            i += 1;
        }
    }
    true
}

pub(crate) fn escape(name: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(name.len());
    for &b in name {
        match b {
            b'.' => out.extend_from_slice(b".."),
            b'/' => out.extend_from_slice(b".S"),
            _ => out.push(b),
        }
    }
    out
}

/// Unescapes a segment for which `is_escaped` holds.
fn unescape(seg: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(seg.len());
    let mut i = 0;
    while i < seg.len() {
        if seg[i] == b'.' {
            out.push(if seg.get(i + 1) == Some(&b'S') {
                b'/'
            } else {
                b'.'
            });
            i += 2;
        } else {
            out.push(seg[i]);
            i += 1;
        }
    }
    out
}

/// The display component of one key segment.
pub(crate) fn display_component(style: KeyStyle, seg: &[u8]) -> Vec<u8> {
    match style {
        KeyStyle::Object if is_escaped(seg) => unescape(seg),
        _ => seg.to_vec(),
    }
}

/// Key segments a display component may come from.
fn segment_candidates(style: KeyStyle, comp: &[u8]) -> Vec<Vec<u8>> {
    match style {
        KeyStyle::Plain if comp.contains(&b'/') => Vec::new(),
        KeyStyle::Plain => vec![comp.to_vec()],
        KeyStyle::Object => {
            let mut v = vec![escape(comp)];
            if !is_escaped(comp) && !comp.contains(&b'/') {
                v.push(comp.to_vec());
            }
            v
        }
    }
}

/// In object style, `key` minus the variable suffix (and whether it had it).
pub(crate) fn strip_variable(style: KeyStyle, key: &[u8]) -> &[u8] {
    match style {
        KeyStyle::Object => key.strip_suffix(VARIABLE_SUFFIX).unwrap_or(key),
        KeyStyle::Plain => key,
    }
}

/// The display path of a (non-hidden) key.
pub(crate) fn display_path(style: KeyStyle, key: &[u8]) -> Vec<Vec<u8>> {
    strip_variable(style, key)
        .split(|&b| b == b'/')
        .map(|seg| display_component(style, seg))
        .collect()
}

/// Joined key spellings of `components` (each alternative), `/`-separated.
fn joined(style: KeyStyle, components: &[Vec<u8>]) -> Vec<Vec<u8>> {
    let mut out: Vec<Vec<u8>> = vec![Vec::new()];
    for (i, comp) in components.iter().enumerate() {
        let segs = segment_candidates(style, comp);
        let mut next = Vec::new();
        for base in &out {
            for seg in &segs {
                if next.len() >= MAX_CANDIDATES {
                    break;
                }
                let mut k = base.clone();
                if i > 0 {
                    k.push(b'/');
                }
                k.extend_from_slice(seg);
                next.push(k);
            }
        }
        out = next;
    }
    out
}

/// Key prefixes (each ending in `/`, or empty for the root) of the directory `dir`.
pub(crate) fn dir_prefixes(style: KeyStyle, dir: &[Vec<u8>]) -> Vec<Vec<u8>> {
    if dir.is_empty() {
        return vec![Vec::new()];
    }
    let mut v = joined(style, dir);
    for p in &mut v {
        p.push(b'/');
    }
    v
}

/// Keys that display as `path`, most likely first.
pub(crate) fn key_candidates(style: KeyStyle, path: &[Vec<u8>]) -> Vec<Vec<u8>> {
    if path.is_empty() {
        return Vec::new();
    }
    let mut out = Vec::new();
    for k in joined(style, path) {
        if style == KeyStyle::Object {
            let mut v = k.clone();
            v.extend_from_slice(VARIABLE_SUFFIX);
            out.push(v);
            if k.ends_with(VARIABLE_SUFFIX) {
                continue; // shown without its suffix, never under this path
            }
        }
        out.push(k);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(parts: &[&str]) -> Vec<Vec<u8>> {
        parts.iter().map(|s| s.as_bytes().to_vec()).collect()
    }

    #[test]
    fn object_keys() {
        let o = KeyStyle::Object;
        assert_eq!(
            display_path(
                o,
                b"model/layer_with_weights-0/kernel/.ATTRIBUTES/VARIABLE_VALUE"
            ),
            p(&["model", "layer_with_weights-0", "kernel"])
        );
        assert_eq!(
            display_path(o, b"a..b/c.Sd/.ATTRIBUTES/VARIABLE_VALUE"),
            p(&["a.b", "c/d"])
        );
        assert_eq!(
            display_path(o, b"table/.ATTRIBUTES/-keys"),
            p(&["table", ".ATTRIBUTES", "-keys"])
        );
        assert_eq!(
            display_path(o, b"/.ATTRIBUTES/v1"),
            p(&["", ".ATTRIBUTES", "v1"])
        );
        assert_eq!(
            display_path(o, b"x/.ATTRIBUTES/"),
            p(&["x", ".ATTRIBUTES", ""])
        );
        assert_eq!(
            key_candidates(o, &p(&["a.b", "c/d"]))[0],
            b"a..b/c.Sd/.ATTRIBUTES/VARIABLE_VALUE".to_vec()
        );
        assert!(key_candidates(o, &p(&["table", ".ATTRIBUTES", "-keys"]))
            .contains(&b"table/.ATTRIBUTES/-keys".to_vec()));
        assert_eq!(dir_prefixes(o, &p(&["a.b"]))[0], b"a..b/".to_vec());
        assert_eq!(dir_prefixes(o, &p(&[".ATTRIBUTES"])).len(), 2);
        // The suffix-bearing raw key is not reachable under its long path.
        assert!(
            !key_candidates(o, &p(&["x", ".ATTRIBUTES", "VARIABLE_VALUE"]))
                .contains(&b"x/.ATTRIBUTES/VARIABLE_VALUE".to_vec())
        );
        for name in [&b"a.b/c..d.S"[..], b"", b"."] {
            assert!(is_escaped(&escape(name)));
            assert_eq!(unescape(&escape(name)), name);
        }
    }

    #[test]
    fn plain_keys() {
        let s = KeyStyle::Plain;
        assert_eq!(display_path(s, b"layer1/W"), p(&["layer1", "W"]));
        assert_eq!(display_path(s, b"a.b/.ATTRIBUTES/VARIABLE_VALUE").len(), 3);
        assert_eq!(
            key_candidates(s, &p(&["layer1", "W"])),
            [b"layer1/W".to_vec()]
        );
        assert_eq!(dir_prefixes(s, &p(&["layer1"])), [b"layer1/".to_vec()]);
        assert!(key_candidates(s, &p(&["a/b"])).is_empty());
    }
}
