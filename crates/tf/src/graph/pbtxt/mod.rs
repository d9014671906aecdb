//! A `GraphDef` in protobuf text format (`graph.pbtxt`, SPEC §6), printed straight from the
//! wire bytes so that TensorFlow's `text_format.Parse` gives back the same message.
//!
//! Chunks: the text is cut by *input* position. Every printed piece is attributed to a byte
//! position of the wire message — a field's line to its tag, a sub-message's closing brace to
//! its last byte, each byte of a string to itself — and positions never decrease in print
//! order. Chunk `k` is then exactly the pieces whose position lies in its input window, so any
//! chunk renders on its own, skipping every field that ends before its window, and the chunks
//! put together are the whole text.
//!
//! Printing: fields in wire order (a repeated field keeps its order; the text format accepts
//! fields in any order); floats in their shortest form that reads back to the same bits
//! (`inf`, `-inf`, `nan` for the others); `DataType` by name; other enums and fields whose
//! numbers are unknown to the schema as numbers or comments; strings C-escaped (printable
//! ASCII as is, the rest `\ooo`).

pub(crate) mod parse;
mod schema;

pub(crate) use schema::M as Message;

use std::ops::Range;

use schema::{Kind, M};

use crate::codec::wire::{packed_varints, Fields, Value, WireError};
use crate::dtype;

/// Input bytes per chunk of `graph.pbtxt`: rendered text is at most a few times this.
pub(crate) const CHUNK_INPUT: usize = 64 << 10;
/// Nesting beyond this (only `FullTypeDef.args` can recurse) is shown as a comment.
const MAX_DEPTH: usize = 64;

/// How a `GraphDef`'s text is cut: `size` input bytes per chunk.
#[derive(Clone, Debug)]
pub(crate) struct Chunking {
    graph: Range<usize>,
    size: usize,
    /// Per chunk, where to start reading top-level fields: the first one that ends inside or
    /// after the chunk's window (so a chunk never walks the nodes before it).
    resume: Vec<usize>,
}

impl Chunking {
    /// Cuts the `GraphDef` at `graph` of `buf` every `size` input bytes (one pass over its
    /// top-level fields, payloads skipped).
    pub(crate) fn new(buf: &[u8], graph: Range<usize>, size: usize) -> Result<Self, WireError> {
        let size = size.max(1);
        let chunks = (graph.end - graph.start) / size + 1;
        let mut resume = Vec::with_capacity(chunks);
        let mut start = graph.start;
        for k in 0..chunks {
            let lo = graph.start + k * size;
            // Step over the fields that end before this window.
            loop {
                let mut next = Fields::within(buf, start..graph.end);
                match next.next() {
                    Some(f) => {
                        f?;
                        if next.position() >= lo {
                            break;
                        }
                        start = next.position();
                    }
                    None => break,
                }
            }
            resume.push(start);
        }
        Ok(Chunking {
            graph,
            size,
            resume,
        })
    }

    #[cfg(any(test, feature = "testkit"))]
    pub(crate) fn chunks(&self) -> u64 {
        self.resume.len() as u64
    }

    /// Appends chunk `k`'s text to `out`.
    pub(crate) fn render(&self, buf: &[u8], k: u64, out: &mut Vec<u8>) -> Result<(), WireError> {
        let Some(&resume) = usize::try_from(k).ok().and_then(|k| self.resume.get(k)) else {
            return Ok(());
        };
        let lo = self.graph.start + k as usize * self.size;
        let mut p = Printer {
            buf,
            lo,
            hi: lo.saturating_add(self.size),
            out,
        };
        p.message(M::GraphDef, resume..self.graph.end, 0)?;
        Ok(())
    }
}

#[derive(PartialEq, Eq)]
enum Flow {
    Go,
    /// A piece at or past the window's end: everything after it is too.
    Stop,
}

struct Printer<'a> {
    buf: &'a [u8],
    lo: usize,
    hi: usize,
    out: &'a mut Vec<u8>,
}

impl Printer<'_> {
    /// Prints `piece` if `pos` is in the window.
    fn emit(&mut self, pos: usize, piece: &[u8]) -> Flow {
        if pos >= self.hi {
            return Flow::Stop;
        }
        if pos >= self.lo {
            self.out.extend_from_slice(piece);
        }
        Flow::Go
    }

    fn line(&mut self, pos: usize, depth: usize, name: &str, value: &str) -> Flow {
        if pos >= self.hi {
            return Flow::Stop;
        }
        if pos >= self.lo {
            indent(self.out, depth);
            self.out.extend_from_slice(name.as_bytes());
            self.out.extend_from_slice(b": ");
            self.out.extend_from_slice(value.as_bytes());
            self.out.push(b'\n');
        }
        Flow::Go
    }

    fn message(&mut self, m: M, range: Range<usize>, depth: usize) -> Result<Flow, WireError> {
        let fields = schema::fields(m);
        let mut it = Fields::within(self.buf, range);
        loop {
            let tag = it.position();
            if tag >= self.hi {
                return Ok(Flow::Stop);
            }
            let Some(f) = it.next() else { break };
            let f = f?;
            let end = it.position();
            // Every piece of a field lies at `tag..=end`: nothing to print before the window.
            if end < self.lo {
                continue;
            }
            let known = fields.iter().find(|(n, _, _)| *n == f.number);
            let flow = match known {
                Some(&(_, name, kind)) => self.field(tag, name, kind, f.value, depth)?,
                None => self.comment(tag, depth, &format!("unknown field {}", f.number)),
            };
            if flow == Flow::Stop {
                return Ok(Flow::Stop);
            }
        }
        Ok(Flow::Go)
    }

    fn comment(&mut self, pos: usize, depth: usize, what: &str) -> Flow {
        if pos >= self.hi {
            return Flow::Stop;
        }
        if pos >= self.lo {
            indent(self.out, depth);
            self.out.extend_from_slice(b"# ");
            self.out.extend_from_slice(what.as_bytes());
            self.out.push(b'\n');
        }
        Flow::Go
    }

    fn field(
        &mut self,
        tag: usize,
        name: &str,
        kind: Kind,
        value: Value,
        depth: usize,
    ) -> Result<Flow, WireError> {
        match (kind, value) {
            (Kind::Msg(m), Value::Bytes { start, end }) => {
                if depth + 1 > MAX_DEPTH {
                    return Ok(self.comment(tag, depth, &format!("{name}: nested too deep")));
                }
                if tag >= self.lo && tag < self.hi {
                    indent(self.out, depth);
                    self.out.extend_from_slice(name.as_bytes());
                    self.out.extend_from_slice(b" {\n");
                }
                if self.message(m, start..end, depth + 1)? == Flow::Stop {
                    return Ok(Flow::Stop);
                }
                if end >= self.hi {
                    return Ok(Flow::Stop);
                }
                if end >= self.lo {
                    indent(self.out, depth);
                    self.out.extend_from_slice(b"}\n");
                }
                Ok(Flow::Go)
            }
            (Kind::Str | Kind::Bytes, Value::Bytes { start, end }) => {
                Ok(self.string(tag, name, start..end, depth))
            }
            (Kind::Msg(_) | Kind::Str | Kind::Bytes, _) => {
                Ok(self.comment(tag, depth, &format!("{name}: unexpected wire type")))
            }
            (_, Value::Bytes { start, end }) => self.packed(name, kind, start..end, depth),
            (_, v) => match scalar(kind, v) {
                Some(text) => Ok(self.line(tag, depth, name, &text)),
                None => Ok(self.comment(tag, depth, &format!("{name}: unexpected wire type"))),
            },
        }
    }

    /// `name: "…"`: the opening at the tag, each byte at its own position, the closing quote
    /// at the end, so a long `tensor_content` spreads over many chunks.
    fn string(&mut self, tag: usize, name: &str, bytes: Range<usize>, depth: usize) -> Flow {
        if tag >= self.hi {
            return Flow::Stop;
        }
        if tag >= self.lo {
            indent(self.out, depth);
            self.out.extend_from_slice(name.as_bytes());
            self.out.extend_from_slice(b": \"");
        }
        let from = bytes.start.max(self.lo);
        let to = bytes.end.min(self.hi);
        if from < to {
            escape(&self.buf[from..to], self.out);
        }
        self.emit(bytes.end, b"\"\n")
    }

    /// A packed repeated scalar: one `name: value` line per element, at the element's bytes.
    fn packed(
        &mut self,
        name: &str,
        kind: Kind,
        bytes: Range<usize>,
        depth: usize,
    ) -> Result<Flow, WireError> {
        let width = match kind {
            Kind::F32 => 4,
            Kind::F64 | Kind::Fixed64 => 8,
            _ => 0,
        };
        if width > 0 {
            let payload = &self.buf[bytes.clone()];
            if payload.len() % width != 0 {
                return Err(WireError::Malformed(bytes.start));
            }
            // Elements before the window print nothing: start at the first one inside it.
            let skip = self.lo.saturating_sub(bytes.start).div_ceil(width);
            for (i, e) in payload.chunks_exact(width).enumerate().skip(skip) {
                let pos = bytes.start + i * width;
                let v = match width {
                    4 => Value::Fixed32(u32::from_le_bytes(e.try_into().unwrap_or([0; 4]))),
                    _ => Value::Fixed64(u64::from_le_bytes(e.try_into().unwrap_or([0; 8]))),
                };
                let text = scalar(kind, v).unwrap_or_default();
                if self.line(pos, depth, name, &text) == Flow::Stop {
                    return Ok(Flow::Stop);
                }
            }
            return Ok(Flow::Go);
        }
        let payload = &self.buf[bytes.clone()];
        let mut pos = bytes.start;
        for v in packed_varints(payload) {
            let v = v.map_err(|e| match e {
                WireError::Malformed(at) => WireError::Malformed(bytes.start + at),
                other => other,
            })?;
            let here = pos;
            pos += varint_len(v);
            if here < self.lo {
                continue;
            }
            let Some(text) = scalar(kind, Value::Varint(v)) else {
                return Ok(self.comment(here, depth, &format!("{name}: unexpected wire type")));
            };
            if self.line(here, depth, name, &text) == Flow::Stop {
                return Ok(Flow::Stop);
            }
        }
        Ok(Flow::Go)
    }
}

/// The text of one scalar, `None` when the wire type does not fit the kind.
fn scalar(kind: Kind, v: Value) -> Option<String> {
    Some(match (kind, v) {
        (Kind::I32, Value::Varint(v)) => (v as i32).to_string(),
        (Kind::I64, Value::Varint(v)) => (v as i64).to_string(),
        (Kind::U32, Value::Varint(v)) => (v as u32).to_string(),
        (Kind::U64, Value::Varint(v)) => v.to_string(),
        (Kind::Bool, Value::Varint(v)) => (if v != 0 { "true" } else { "false" }).to_string(),
        (Kind::FullTypeId, Value::Varint(v)) => {
            let v = v as i32;
            schema::full_type_name(v).map_or_else(|| v.to_string(), str::to_string)
        }
        (Kind::DataType, Value::Varint(v)) => {
            let code = i64::from(v as i32);
            dtype::enum_name(code).map_or_else(|| code.to_string(), |n| n.into_owned())
        }
        (Kind::Enum(names), Value::Varint(v)) => {
            let v = v as i32;
            let name = names.iter().find(|(n, _)| *n == v);
            name.map_or_else(|| v.to_string(), |(_, n)| n.to_string())
        }
        (Kind::F32, Value::Fixed32(b)) => float32(f32::from_bits(b)),
        (Kind::F64, Value::Fixed64(b)) => float64(f64::from_bits(b)),
        (Kind::Fixed64, Value::Fixed64(b)) => b.to_string(),
        _ => return None,
    })
}

fn float32(x: f32) -> String {
    if x.is_finite() {
        ryu::Buffer::new().format_finite(x).to_string()
    } else {
        non_finite(x.is_nan(), x.is_sign_negative())
    }
}

fn float64(x: f64) -> String {
    if x.is_finite() {
        ryu::Buffer::new().format_finite(x).to_string()
    } else {
        non_finite(x.is_nan(), x.is_sign_negative())
    }
}

fn non_finite(nan: bool, negative: bool) -> String {
    match (nan, negative) {
        (true, _) => "nan",
        (false, true) => "-inf",
        (false, false) => "inf",
    }
    .to_string()
}

fn varint_len(v: u64) -> usize {
    (64 - v.max(1).leading_zeros() as usize).div_ceil(7)
}

fn indent(out: &mut Vec<u8>, depth: usize) {
    out.resize(out.len() + 2 * depth, b' ');
}

/// C escapes as the text format reads them: printable ASCII as is, `\"`, `\\`, `\n`, `\r`,
/// `\t`, and every other byte as three octal digits.
fn escape(bytes: &[u8], out: &mut Vec<u8>) {
    for &b in bytes {
        match b {
            b'"' => out.extend_from_slice(b"\\\""),
            b'\\' => out.extend_from_slice(b"\\\\"),
            b'\n' => out.extend_from_slice(b"\\n"),
            b'\r' => out.extend_from_slice(b"\\r"),
            b'\t' => out.extend_from_slice(b"\\t"),
            0x20..=0x7e => out.push(b),
            _ => out.extend_from_slice(&[
                b'\\',
                b'0' + (b >> 6),
                b'0' + ((b >> 3) & 7),
                b'0' + (b & 7),
            ]),
        }
    }
}

#[cfg(test)]
mod tests;
