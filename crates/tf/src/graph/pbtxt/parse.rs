//! The protobuf text format read back into wire bytes (`saved_model.pbtxt`, an Estimator's
//! `graph.pbtxt`, a `GraphDef` or `MetaGraphDef` written with `as_text=True`), so that a text
//! graph is scanned, listed and read exactly like a binary one.
//!
//! Fields the schema knows are encoded by their number and kind; any other field (the op list
//! of a meta graph, its saver, collections and object graph, `[type.url] { … }` expansions) is
//! parsed and left out: nothing modelfs shows comes from them. Repeated scalars are written
//! unpacked, which every protobuf reader (and `wire`) accepts as the packed form's equal.

use std::fmt;

use super::schema::{fields, Kind, M};
use crate::dtype;

/// Nesting deeper than this is refused (protobuf's own default recursion limit).
const MAX_DEPTH: usize = 100;

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ParseError {
    pub(crate) line: usize,
    pub(crate) what: String,
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "line {}: {}", self.line, self.what)
    }
}

impl std::error::Error for ParseError {}

type Res<T> = Result<T, ParseError>;

/// The wire bytes of the message of type `top` written as `text`.
pub(crate) fn encode(text: &[u8], top: M) -> Res<Vec<u8>> {
    let mut p = Parser {
        s: text,
        pos: 0,
        line: 1,
    };
    let mut out = Vec::with_capacity(text.len() / 2);
    p.fields(Some(top), None, 0, &mut out)?;
    Ok(out)
}

/// The name of the first field when `head` (the start of a file) looks like the text format:
/// a field name, then `:`, `{` or `<`, after any comments and blank lines.
pub(crate) fn first_field(head: &[u8]) -> Option<&[u8]> {
    let mut p = Parser {
        s: head,
        pos: 0,
        line: 1,
    };
    p.skip_space();
    let name = p.ident()?;
    matches!(p.peek(), Some(b':' | b'{' | b'<')).then_some(name)
}

struct Parser<'a> {
    s: &'a [u8],
    pos: usize,
    line: usize,
}

impl<'a> Parser<'a> {
    fn err<T>(&self, what: impl Into<String>) -> Res<T> {
        Err(ParseError {
            line: self.line,
            what: what.into(),
        })
    }

    fn skip_space(&mut self) {
        while let Some(&b) = self.s.get(self.pos) {
            match b {
                b'\n' => {
                    self.line += 1;
                    self.pos += 1;
                }
                b' ' | b'\t' | b'\r' | b'\x0b' | b'\x0c' => self.pos += 1,
                b'#' => {
                    let rest = &self.s[self.pos..];
                    self.pos += memchr::memchr(b'\n', rest).unwrap_or(rest.len());
                }
                _ => return,
            }
        }
    }

    fn peek(&mut self) -> Option<u8> {
        self.skip_space();
        self.s.get(self.pos).copied()
    }

    fn eat(&mut self, b: u8) -> bool {
        if self.peek() == Some(b) {
            self.pos += 1;
            true
        } else {
            false
        }
    }

    fn ident(&mut self) -> Option<&'a [u8]> {
        let start = self.pos;
        let first = *self.s.get(start)?;
        if !(first.is_ascii_alphabetic() || first == b'_') {
            return None;
        }
        let len = self.s[start..]
            .iter()
            .take_while(|b| b.is_ascii_alphanumeric() || **b == b'_')
            .count();
        self.pos += len;
        Some(&self.s[start..start + len])
    }

    /// Fields until `close` (or the end of the text when `None`), encoded into `out` when `m`
    /// (the message's type) knows them.
    fn fields(
        &mut self,
        m: Option<M>,
        close: Option<u8>,
        depth: usize,
        out: &mut Vec<u8>,
    ) -> Res<()> {
        if depth > MAX_DEPTH {
            return self.err("messages nested too deep");
        }
        loop {
            match (self.peek(), close) {
                (None, None) => return Ok(()),
                (None, Some(c)) => return self.err(format!("end of text before '{}'", c as char)),
                (Some(b), Some(c)) if b == c => {
                    self.pos += 1;
                    return Ok(());
                }
                _ => {}
            }
            let field = if self.peek() == Some(b'[') {
                // An extension or `Any` expansion: `[type.googleapis.com/Name]`.
                let rest = &self.s[self.pos..];
                let Some(end) = memchr::memchr(b']', rest) else {
                    return self.err("'[' without ']'");
                };
                self.pos += end + 1;
                None
            } else {
                let Some(name) = self.ident() else {
                    return self.err("a field name expected");
                };
                m.and_then(|m| fields(m).iter().find(|f| f.1.as_bytes() == name))
                    .map(|&(number, _, kind)| (number, kind))
            };
            let colon = self.eat(b':');
            if self.eat(b'[') {
                // A list: `name: [v, v, …]`.
                if !self.eat(b']') {
                    loop {
                        self.value(field, colon, depth, out)?;
                        if self.eat(b']') {
                            break;
                        }
                        if !self.eat(b',') {
                            return self.err("',' or ']' expected in a list");
                        }
                    }
                }
            } else {
                self.value(field, colon, depth, out)?;
            }
            // Separators between fields are allowed.
            let _ = self.eat(b',') || self.eat(b';');
        }
    }

    /// One value of `field` (`None`: a field left out).
    fn value(
        &mut self,
        field: Option<(u32, Kind)>,
        colon: bool,
        depth: usize,
        out: &mut Vec<u8>,
    ) -> Res<()> {
        if let Some(open @ (b'{' | b'<')) = self.peek() {
            self.pos += 1;
            let close = if open == b'{' { b'}' } else { b'>' };
            let sub = match field {
                Some((_, Kind::Msg(sub))) => Some(sub),
                Some(_) => return self.err("a message where a scalar was expected"),
                None => None,
            };
            let mut body = Vec::new();
            self.fields(sub, Some(close), depth + 1, &mut body)?;
            if let Some((number, _)) = field {
                put_tag(out, number, 2);
                put_varint(out, body.len() as u64);
                out.extend_from_slice(&body);
            }
            return Ok(());
        }
        if !colon {
            return self.err("':' expected before a scalar value");
        }
        match field {
            None => self.skip_scalar(),
            Some((_, Kind::Msg(_))) => self.err("'{' expected for a message"),
            Some((number, kind)) => self.scalar(number, kind, out),
        }
    }

    fn skip_scalar(&mut self) -> Res<()> {
        match self.peek() {
            Some(b'"' | b'\'') => self.string().map(drop),
            _ => self.token().map(drop),
        }
    }

    /// A number or identifier (`-` allowed in front): `12`, `-1.5e-3`, `0x1F`, `DT_FLOAT`,
    /// `-inf`, `1f`.
    fn token(&mut self) -> Res<&'a [u8]> {
        self.skip_space();
        let start = self.pos;
        if self.s.get(self.pos) == Some(&b'-') {
            self.pos += 1;
        }
        let mut prev = 0u8;
        while let Some(&b) = self.s.get(self.pos) {
            let exp_sign = (b == b'+' || b == b'-') && matches!(prev, b'e' | b'E');
            if b.is_ascii_alphanumeric() || b == b'_' || b == b'.' || exp_sign {
                prev = b;
                self.pos += 1;
            } else {
                break;
            }
        }
        if self.pos == start || &self.s[start..self.pos] == b"-" {
            return self.err("a value expected");
        }
        Ok(&self.s[start..self.pos])
    }

    /// One or more adjacent quoted strings, unescaped and joined.
    fn string(&mut self) -> Res<Vec<u8>> {
        if !matches!(self.peek(), Some(b'"' | b'\'')) {
            return self.err("a quoted string expected");
        }
        let mut out = Vec::new();
        while let Some(q @ (b'"' | b'\'')) = self.peek() {
            self.pos += 1;
            loop {
                let Some(&b) = self.s.get(self.pos) else {
                    return self.err("unterminated string");
                };
                self.pos += 1;
                match b {
                    b'\n' => return self.err("line break in a string"),
                    b'\\' => self.escape(&mut out)?,
                    _ if b == q => break,
                    _ => out.push(b),
                }
            }
        }
        Ok(out)
    }

    /// The escape after a `\` (C escapes, octal `\ooo`, hex `\xhh`; what TF's printer writes
    /// and the text format's parser reads).
    fn escape(&mut self, out: &mut Vec<u8>) -> Res<()> {
        let Some(&b) = self.s.get(self.pos) else {
            return self.err("unterminated string");
        };
        self.pos += 1;
        let simple = match b {
            b'n' => Some(b'\n'),
            b'r' => Some(b'\r'),
            b't' => Some(b'\t'),
            b'a' => Some(7),
            b'b' => Some(8),
            b'f' => Some(12),
            b'v' => Some(11),
            b'\\' | b'\'' | b'"' | b'?' => Some(b),
            _ => None,
        };
        if let Some(c) = simple {
            out.push(c);
            return Ok(());
        }
        let (radix, max_len) = match b {
            b'0'..=b'7' => {
                self.pos -= 1;
                (8, 3)
            }
            b'x' | b'X' => (16, 2),
            _ => return self.err(format!("unknown escape '\\{}'", b as char)),
        };
        let digits = self.s[self.pos..]
            .iter()
            .take(max_len)
            .take_while(|c| (**c as char).is_digit(radix))
            .count();
        let text = std::str::from_utf8(&self.s[self.pos..self.pos + digits]).unwrap_or("");
        match u32::from_str_radix(text, radix) {
            Ok(v) if v <= 255 => out.push(v as u8),
            _ => return self.err("bad numeric escape"),
        }
        self.pos += digits;
        Ok(())
    }

    fn scalar(&mut self, number: u32, kind: Kind, out: &mut Vec<u8>) -> Res<()> {
        if matches!(kind, Kind::Str | Kind::Bytes) {
            let s = self.string()?;
            put_tag(out, number, 2);
            put_varint(out, s.len() as u64);
            out.extend_from_slice(&s);
            return Ok(());
        }
        let t = self.token()?;
        let bad = |p: &Self| {
            p.err(format!(
                "'{}' is no {kind:?} value",
                String::from_utf8_lossy(t)
            ))
        };
        match kind {
            Kind::F32 => {
                let Some(v) = float(t) else { return bad(self) };
                put_tag(out, number, 5);
                out.extend_from_slice(&(v as f32).to_le_bytes());
            }
            Kind::F64 => {
                let Some(v) = float(t) else { return bad(self) };
                put_tag(out, number, 1);
                out.extend_from_slice(&v.to_le_bytes());
            }
            Kind::Fixed64 => {
                let Some(v) = integer(t).and_then(|v| u64::try_from(v).ok()) else {
                    return bad(self);
                };
                put_tag(out, number, 1);
                out.extend_from_slice(&v.to_le_bytes());
            }
            _ => {
                let Some(v) = varint_value(kind, t) else {
                    return bad(self);
                };
                put_tag(out, number, 0);
                put_varint(out, v);
            }
        }
        Ok(())
    }
}

/// The varint a scalar of `kind` is written as (negative ints sign-extended to 64 bits).
fn varint_value(kind: Kind, t: &[u8]) -> Option<u64> {
    let int = integer(t);
    let v: i128 = match kind {
        Kind::Bool => match t {
            b"true" | b"True" | b"t" | b"1" => 1,
            b"false" | b"False" | b"f" | b"0" => 0,
            _ => return None,
        },
        Kind::I32 => i128::from(i32::try_from(int?).ok()?),
        Kind::I64 => i128::from(i64::try_from(int?).ok()?),
        Kind::U32 => i128::from(u32::try_from(int?).ok()?),
        Kind::U64 => i128::from(u64::try_from(int?).ok()?),
        Kind::DataType => match int {
            Some(v) => i128::from(i32::try_from(v).ok()?),
            None => {
                (0..=200).find(|&c| dtype::enum_name(c).is_some_and(|n| n.as_bytes() == t))? as i128
            }
        },
        Kind::FullTypeId => match int {
            Some(v) => i128::from(i32::try_from(v).ok()?),
            None => i128::from(full_type_number(t)?),
        },
        Kind::Enum(names) => match int {
            Some(v) => i128::from(i32::try_from(v).ok()?),
            None => i128::from(names.iter().find(|(_, n)| n.as_bytes() == t)?.0),
        },
        _ => return None,
    };
    Some(v as i64 as u64)
}

fn full_type_number(t: &[u8]) -> Option<i32> {
    (0..=20_000).find(|&v| super::schema::full_type_name(v).is_some_and(|n| n.as_bytes() == t))
}

/// A decimal, hex (`0x`) or octal (leading `0`) integer, with an optional `-`.
fn integer(t: &[u8]) -> Option<i128> {
    let (neg, digits) = match t {
        [b'-', rest @ ..] => (true, rest),
        _ => (false, t),
    };
    let s = std::str::from_utf8(digits).ok()?;
    let v = if let Some(hex) = s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        u64::from_str_radix(hex, 16).ok()?
    } else if s.len() > 1 && s.starts_with('0') {
        u64::from_str_radix(&s[1..], 8).ok()?
    } else {
        s.parse::<u64>().ok()?
    };
    Some(if neg { -(v as i128) } else { v as i128 })
}

/// A float as the text format writes it: `1.5`, `-2e-07`, `1f`, `inf`, `-inf`, `nan`, or an
/// integer.
fn float(t: &[u8]) -> Option<f64> {
    let s = std::str::from_utf8(t).ok()?;
    if let Ok(v) = s.parse::<f64>() {
        return Some(v);
    }
    let lower = s.to_ascii_lowercase();
    let trimmed = lower.strip_suffix('f').unwrap_or(&lower);
    trimmed
        .parse::<f64>()
        .ok()
        .or_else(|| integer(trimmed.as_bytes()).map(|v| v as f64))
}

fn put_tag(out: &mut Vec<u8>, number: u32, wire_type: u8) {
    put_varint(out, (u64::from(number) << 3) | u64::from(wire_type));
}

fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push(v as u8 | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}
