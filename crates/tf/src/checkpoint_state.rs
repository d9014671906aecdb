//! The text-format `checkpoint` state file (§10): which prefixes a directory holds and which
//! is the latest. Paths are bytes; absolute paths that went stale when the directory was
//! copied fall back to `<dir>/basename`.

use crate::source::Storage;
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

#[derive(Debug, Default, Clone, PartialEq)]
pub struct CheckpointState {
    pub model_checkpoint_path: Option<Vec<u8>>,
    pub all_model_checkpoint_paths: Vec<Vec<u8>>,
}

#[derive(Debug, PartialEq)]
enum Token {
    Ident(Vec<u8>),
    Str(Vec<u8>),
    Punct(u8),
    /// Numbers, `inf`, `nan`, … (values of fields we ignore).
    Other,
}

fn tokenize(text: &[u8]) -> Vec<Token> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < text.len() {
        let c = text[i];
        match c {
            b'#' => {
                while i < text.len() && text[i] != b'\n' {
                    i += 1;
                }
            }
            _ if c.is_ascii_whitespace() || c == b',' || c == b';' => i += 1,
            b'"' | b'\'' => {
                let (s, next) = string_literal(text, i);
                // Adjacent literals concatenate.
                match out.last_mut() {
                    Some(Token::Str(prev)) => prev.extend_from_slice(&s),
                    _ => out.push(Token::Str(s)),
                }
                i = next;
            }
            b':' | b'{' | b'}' | b'<' | b'>' | b'[' | b']' => {
                out.push(Token::Punct(c));
                i += 1;
            }
            _ if c.is_ascii_alphabetic() || c == b'_' => {
                let start = i;
                while i < text.len() && (text[i].is_ascii_alphanumeric() || text[i] == b'_') {
                    i += 1;
                }
                out.push(Token::Ident(text[start..i].to_vec()));
            }
            _ => {
                while i < text.len()
                    && !text[i].is_ascii_whitespace()
                    && !matches!(
                        text[i],
                        b'#' | b':' | b'{' | b'}' | b'"' | b'\'' | b',' | b';'
                    )
                {
                    i += 1;
                }
                out.push(Token::Other);
            }
        }
    }
    out
}

/// Parses a quoted literal starting at `text[start]`; returns its bytes and the next index.
fn string_literal(text: &[u8], start: usize) -> (Vec<u8>, usize) {
    let quote = text[start];
    let mut out = Vec::new();
    let mut i = start + 1;
    while i < text.len() && text[i] != quote {
        if text[i] == b'\\' && i + 1 < text.len() {
            i += 1;
            let e = text[i];
            match e {
                b'n' => out.push(b'\n'),
                b'r' => out.push(b'\r'),
                b't' => out.push(b'\t'),
                b'a' => out.push(7),
                b'b' => out.push(8),
                b'f' => out.push(12),
                b'v' => out.push(11),
                b'0'..=b'7' => {
                    let mut v: u32 = 0;
                    let mut n = 0;
                    while n < 3 && i < text.len() && (b'0'..=b'7').contains(&text[i]) {
                        v = v * 8 + u32::from(text[i] - b'0');
                        i += 1;
                        n += 1;
                    }
                    out.push(v as u8);
                    continue;
                }
                b'x' | b'X' => {
                    let mut v: u32 = 0;
                    let mut n = 0;
                    i += 1;
                    while n < 2 && i < text.len() && text[i].is_ascii_hexdigit() {
                        v = v * 16 + (text[i] as char).to_digit(16).unwrap_or(0);
                        i += 1;
                        n += 1;
                    }
                    out.push(v as u8);
                    continue;
                }
                other => out.push(other), // \" \' \\ and unknown escapes
            }
            i += 1;
        } else {
            out.push(text[i]);
            i += 1;
        }
    }
    (out, (i + 1).min(text.len()))
}

impl CheckpointState {
    pub fn parse(text: &[u8]) -> CheckpointState {
        let tokens = tokenize(text);
        let mut st = CheckpointState::default();
        let mut i = 0;
        while i < tokens.len() {
            if let (Token::Ident(name), Some(Token::Punct(b':')), Some(Token::Str(v))) =
                (&tokens[i], tokens.get(i + 1), tokens.get(i + 2))
            {
                match name.as_slice() {
                    b"model_checkpoint_path" => st.model_checkpoint_path = Some(v.clone()),
                    b"all_model_checkpoint_paths" => st.all_model_checkpoint_paths.push(v.clone()),
                    _ => {}
                }
                i += 3;
            } else {
                i += 1;
            }
        }
        st
    }

    /// The state file at `path`; a state file is a few lines, anything past 1 MiB is ignored.
    pub fn read(storage: &dyn Storage, path: &Path) -> Option<CheckpointState> {
        let text = storage.read_small(path, 1 << 20).ok()?;
        Some(CheckpointState::parse(&text))
    }
}

/// Where the prefix named `p` in the state file of `dir` is: `dir/p` (or `p` if absolute),
/// falling back to `dir/basename(p)` when `exists` is false for the first.
pub fn resolve_prefix(dir: &Path, p: &[u8], exists: &dyn Fn(&Path) -> bool) -> Option<PathBuf> {
    if p.is_empty() {
        return None;
    }
    let direct = dir.join(OsStr::from_bytes(p));
    if exists(&direct) {
        return Some(direct);
    }
    let base = p.rsplit(|&b| b == b'/' || b == b'\\').next().unwrap_or(p);
    // `"."` (or `…/.`): the checkpoint with an empty base name, `dir/.index` (Keras
    // `save_weights("dir/")` writes that state).
    if base == b"." {
        let mut s = dir.as_os_str().to_owned();
        s.push("/");
        let unnamed = PathBuf::from(s);
        return exists(&unnamed).then_some(unnamed);
    }
    if base.is_empty() {
        return None;
    }
    let fallback = dir.join(OsStr::from_bytes(base));
    exists(&fallback).then_some(fallback)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_variants() {
        let s = CheckpointState::parse(
            b"# comment\nall_model_checkpoint_paths: \"ckpt-2\"\nmodel_checkpoint_path: 'ckpt-3' # latest\n\
              all_model_checkpoint_timestamps: 1700000000.123\nall_model_checkpoint_paths: \"ckpt\" \"-3\"\n\
              last_preserved_timestamp: inf\n",
        );
        assert_eq!(s.model_checkpoint_path.as_deref(), Some(&b"ckpt-3"[..]));
        assert_eq!(
            s.all_model_checkpoint_paths,
            [b"ckpt-2".to_vec(), b"ckpt-3".to_vec()]
        );
        let e = CheckpointState::parse(br#"model_checkpoint_path: "C:\\run\\m\303\251\x41\"q\n""#);
        assert_eq!(
            e.model_checkpoint_path.unwrap(),
            b"C:\\run\\m\xc3\xa9A\"q\n"
        );
        assert_eq!(CheckpointState::parse(b""), CheckpointState::default());
        assert_eq!(
            CheckpointState::parse(b"model_checkpoint_path: \"unterminated")
                .model_checkpoint_path
                .unwrap(),
            b"unterminated"
        );
    }

    #[test]
    fn stale_paths_fall_back() {
        let dir = Path::new("/d");
        let exists = |p: &Path| p == Path::new("/d/export") || p == Path::new("/d/m");
        assert_eq!(
            resolve_prefix(dir, b"/tmp/x/00000123/export", &exists),
            Some("/d/export".into())
        );
        assert_eq!(
            resolve_prefix(dir, b"C:\\x\\m", &exists),
            Some("/d/m".into())
        );
        assert_eq!(resolve_prefix(dir, b"m", &exists), Some("/d/m".into()));
        assert_eq!(resolve_prefix(dir, b"gone", &exists), None);
    }
}
