//! The protobuf wire format, read in place: fields of a message as (number, value) with the
//! byte positions of length-delimited values, so that big payloads (a `Const`'s
//! `tensor_content`) stay byte ranges of the source instead of copies.
//!
//! Invariant: every position handed out lies inside the slice the reader was made from, and a
//! length is accepted only when the bytes it claims exist.

use super::decode_varint64;

/// A field's value by wire type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Value {
    Varint(u64),
    Fixed64(u64),
    Fixed32(u32),
    /// Length-delimited: `start..end` of the payload, relative to the slice.
    Bytes {
        start: usize,
        end: usize,
    },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum WireError {
    #[error("protobuf truncated or malformed at byte {0}")]
    Malformed(usize),
    #[error("protobuf wire type {0} at byte {1} is not supported")]
    WireType(u8, usize),
}

/// One field: its number and value.
#[derive(Clone, Copy, Debug)]
pub struct Field {
    pub number: u32,
    pub value: Value,
}

impl Field {
    pub fn range(&self) -> Option<std::ops::Range<usize>> {
        match self.value {
            Value::Bytes { start, end } => Some(start..end),
            _ => None,
        }
    }
}

/// The fields of the message in `buf[start..end]`, in wire order.
pub struct Fields<'a> {
    buf: &'a [u8],
    pos: usize,
    end: usize,
    failed: bool,
}

impl<'a> Fields<'a> {
    pub fn new(buf: &'a [u8]) -> Self {
        Fields::within(buf, 0..buf.len())
    }

    /// The fields of the sub-message at `range` of `buf` (positions stay relative to `buf`).
    pub fn within(buf: &'a [u8], range: std::ops::Range<usize>) -> Self {
        let end = range.end.min(buf.len());
        Fields {
            buf,
            pos: range.start.min(end),
            end,
            failed: false,
        }
    }

    /// Where the next field starts (the end of the last one read).
    pub fn position(&self) -> usize {
        self.pos
    }

    fn varint(&mut self) -> Result<u64, WireError> {
        let (v, n) =
            decode_varint64(&self.buf[self.pos..self.end]).ok_or(WireError::Malformed(self.pos))?;
        self.pos += n;
        Ok(v)
    }

    fn next_field(&mut self) -> Result<Field, WireError> {
        let at = self.pos;
        let tag = self.varint()?;
        let number = u32::try_from(tag >> 3)
            .ok()
            .filter(|&n| n > 0)
            .ok_or(WireError::Malformed(at))?;
        let value = match (tag & 7) as u8 {
            0 => Value::Varint(self.varint()?),
            1 => {
                let b = self
                    .buf
                    .get(self.pos..self.pos + 8)
                    .filter(|_| self.pos + 8 <= self.end)
                    .ok_or(WireError::Malformed(self.pos))?;
                self.pos += 8;
                Value::Fixed64(u64::from_le_bytes(b.try_into().unwrap_or([0; 8])))
            }
            5 => {
                let b = self
                    .buf
                    .get(self.pos..self.pos + 4)
                    .filter(|_| self.pos + 4 <= self.end)
                    .ok_or(WireError::Malformed(self.pos))?;
                self.pos += 4;
                Value::Fixed32(u32::from_le_bytes(b.try_into().unwrap_or([0; 4])))
            }
            2 => {
                let len = self.varint()?;
                let start = self.pos;
                let end = usize::try_from(len)
                    .ok()
                    .and_then(|l| start.checked_add(l))
                    .filter(|&e| e <= self.end)
                    .ok_or(WireError::Malformed(start))?;
                self.pos = end;
                Value::Bytes { start, end }
            }
            t => return Err(WireError::WireType(t, at)),
        };
        Ok(Field { number, value })
    }
}

impl Iterator for Fields<'_> {
    type Item = Result<Field, WireError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.failed || self.pos >= self.end {
            return None;
        }
        let r = self.next_field();
        self.failed = r.is_err();
        Some(r)
    }
}

/// The varints of a packed repeated field's payload.
pub fn packed_varints(buf: &[u8]) -> impl Iterator<Item = Result<u64, WireError>> + '_ {
    let mut pos = 0;
    std::iter::from_fn(move || {
        if pos >= buf.len() {
            return None;
        }
        match decode_varint64(&buf[pos..]) {
            Some((v, n)) => {
                pos += n;
                Some(Ok(v))
            }
            None => {
                let at = pos;
                pos = buf.len();
                Some(Err(WireError::Malformed(at)))
            }
        }
    })
}

/// A string field's bytes as UTF-8 (lossy: names in graphs are UTF-8 by TF's rules).
pub fn text(buf: &[u8], f: &Field) -> String {
    f.range()
        .map(|r| String::from_utf8_lossy(&buf[r]).into_owned())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_in_order_with_ranges() {
        // field 1 varint 150; field 2 bytes "ab"; field 5 fixed32; field 6 fixed64
        let buf = [
            0x08, 0x96, 0x01, 0x12, 2, b'a', b'b', 0x2d, 1, 0, 0, 0, 0x31, 2, 0, 0, 0, 0, 0, 0, 0,
        ];
        let f: Vec<Field> = Fields::new(&buf).map(Result::unwrap).collect();
        assert_eq!(f.len(), 4);
        assert_eq!(f[0].value, Value::Varint(150));
        assert_eq!(f[1].value, Value::Bytes { start: 5, end: 7 });
        assert_eq!(f[2].value, Value::Fixed32(1));
        assert_eq!(f[3].value, Value::Fixed64(2));
    }

    #[test]
    fn lengths_past_the_end_and_bad_tags_fail_once() {
        for bad in [
            &[0x12, 5, b'a'][..],
            &[0x08][..],
            &[0x0b, 0][..],
            &[0x00, 1][..],
        ] {
            let r: Vec<_> = Fields::new(bad).collect();
            assert_eq!(r.len(), 1, "{bad:?}");
            assert!(r[0].is_err());
        }
        // A sub-message's length may not reach past its parent's end.
        let buf = [0x12, 1, b'x', b'y'];
        assert!(Fields::within(&buf, 0..3).next().unwrap().is_ok());
        assert!(Fields::within(&buf, 0..2).next().unwrap().is_err());
    }

    #[test]
    fn packed() {
        let v: Vec<u64> = packed_varints(&[1, 0x96, 0x01])
            .map(Result::unwrap)
            .collect();
        assert_eq!(v, [1, 150]);
        assert!(packed_varints(&[0x80]).next().unwrap().is_err());
    }
}
