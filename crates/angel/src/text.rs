//! Text-format helpers (formats/angel.md §6): line slicing with CR tolerance, the literal
//! separator and its optional auto-detection, and number fields parsed straight to the
//! matrix's own type (floats to `f32` directly, never through `f64`).

use super::decimal;
use super::rowtype::ValueType;

/// Number of lines in `data`: its LF bytes, and one more when it ends without LF (Java
/// writers leave some partitions' last line unterminated).
pub(crate) fn count_lines(data: &[u8]) -> u64 {
    let lfs = memchr::memchr_iter(b'\n', data).count() as u64;
    lfs + u64::from(data.last().is_some_and(|&b| b != b'\n'))
}

/// Iterates over the lines of `data` (the last one with or without its LF), without the LF
/// and without one CR before it.
pub(crate) fn lines(data: &[u8]) -> impl Iterator<Item = &[u8]> {
    let body = data.strip_suffix(b"\n").unwrap_or(data);
    let empty = data.is_empty();
    body.split(|&b| b == b'\n')
        .filter(move |_| !empty)
        .map(|l| l.strip_suffix(b"\r").unwrap_or(l))
}

/// Splits `line` on the literal separator `sep`.
pub(crate) fn fields<'a>(line: &'a [u8], sep: &'a [u8]) -> Fields<'a> {
    Fields {
        rest: Some(line),
        sep,
    }
}

pub(crate) struct Fields<'a> {
    rest: Option<&'a [u8]>,
    sep: &'a [u8],
}

impl<'a> Iterator for Fields<'a> {
    type Item = &'a [u8];
    fn next(&mut self) -> Option<&'a [u8]> {
        let rest = self.rest?;
        if self.sep.is_empty() {
            self.rest = None;
            return Some(rest);
        }
        let at = match self.sep {
            [b] => memchr::memchr(*b, rest),
            sep => memchr::memmem::find(rest, sep),
        };
        match at {
            Some(i) => {
                self.rest = Some(&rest[i + self.sep.len()..]);
                Some(&rest[..i])
            }
            None => {
                self.rest = None;
                Some(rest)
            }
        }
    }
}

/// §6: the first byte of `line` that cannot belong to a number is the separator.
pub(crate) fn detect_separator(line: &[u8]) -> Option<u8> {
    line.iter()
        .copied()
        .find(|&b| !(b.is_ascii_digit() || b"+-.EeNaInfinity".contains(&b)))
}

/// Appends the little-endian bytes of `field` parsed as `vt` to `out`; `false` if it does not
/// parse.
pub(crate) fn parse_value(field: &[u8], vt: ValueType, out: &mut Vec<u8>) -> bool {
    match vt {
        ValueType::Float => match decimal::simple_f32(field).or_else(|| parse_std(field)) {
            Some(v) => out.extend_from_slice(&f32::to_le_bytes(v)),
            None => return false,
        },
        ValueType::Double => match decimal::simple_f64(field).or_else(|| parse_std(field)) {
            Some(v) => out.extend_from_slice(&f64::to_le_bytes(v)),
            None => return false,
        },
        ValueType::Long => match parse_i64(field) {
            Some(v) => out.extend_from_slice(&v.to_le_bytes()),
            None => return false,
        },
        ValueType::Int => match parse_i64(field).and_then(|v| i32::try_from(v).ok()) {
            Some(v) => out.extend_from_slice(&v.to_le_bytes()),
            None => return false,
        },
    }
    true
}

/// `str::parse` of a field (`None` for non-UTF-8).
fn parse_std<T: std::str::FromStr>(field: &[u8]) -> Option<T> {
    std::str::from_utf8(field).ok()?.parse().ok()
}

/// Parses a decimal integer field (what `str::parse::<i64>` accepts: an optional sign, then
/// digits), without the UTF-8 check: ids are most of what a text partition holds.
pub(crate) fn parse_i64(field: &[u8]) -> Option<i64> {
    let (neg, digits) = match field {
        [b'-', rest @ ..] => (true, rest),
        [b'+', rest @ ..] => (false, rest),
        _ => (false, field),
    };
    if digits.is_empty() {
        return None;
    }
    // Accumulated negatively so that i64::MIN parses.
    let mut v: i64 = 0;
    for &b in digits {
        let d = b.wrapping_sub(b'0');
        if d > 9 {
            return None;
        }
        v = v.checked_mul(10)?.checked_sub(d as i64)?;
    }
    if neg {
        Some(v)
    } else {
        v.checked_neg()
    }
}

/// `sep` when no number text can contain it (so a field that parses cannot hold it).
pub(crate) fn plain_separator(sep: u8) -> Option<u8> {
    (!sep.is_ascii_alphanumeric() && !b"+-.".contains(&sep)).then_some(sep)
}

/// The integer id at the start of `line` and what follows the `sep` just after it: one pass
/// for what `fields` and `parse_i64` do in two. `None` when the line does not start so.
#[inline]
pub(crate) fn split_id(line: &[u8], sep: u8) -> Option<(i64, &[u8])> {
    let (neg, body) = match line {
        [b'-', rest @ ..] => (true, rest),
        _ => (false, line),
    };
    // Ids of up to 15 digits, nearly all, a word at a time; below 10^15 they cannot overflow.
    if let Some((n, v)) = super::decimal::leading_digits(body) {
        if n > 0 && body[n] == sep {
            let v = v as i64;
            return Some((if neg { -v } else { v }, &body[n + 1..]));
        }
    }
    let mut v: i64 = 0;
    for (i, &b) in body.iter().enumerate() {
        let d = b.wrapping_sub(b'0');
        if d <= 9 {
            // Accumulated negatively so that i64::MIN reads.
            v = v.checked_mul(10)?.checked_sub(d as i64)?;
        } else if b == sep && i > 0 {
            let v = if neg { v } else { v.checked_neg()? };
            return Some((v, &body[i + 1..]));
        } else {
            return None;
        }
    }
    None
}

/// A short printable form of a field for error messages.
pub(crate) fn show(field: &[u8]) -> String {
    let s = String::from_utf8_lossy(&field[..field.len().min(40)]).into_owned();
    if field.len() > 40 {
        format!("{s}…")
    } else {
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_and_fields() {
        let l: Vec<&[u8]> = lines(b"a,b\r\nc\n").collect();
        assert_eq!(l, vec![&b"a,b"[..], &b"c"[..]]);
        assert_eq!(lines(b"").count(), 0);
        assert_eq!(lines(b"\n").collect::<Vec<_>>(), vec![&b""[..]]);
        let f: Vec<&[u8]> = fields(b"7,", b",").collect();
        assert_eq!(f, vec![&b"7"[..], &b""[..]]);
        let f: Vec<&[u8]> = fields(b"1::2::3", b"::").collect();
        assert_eq!(f, vec![&b"1"[..], &b"2"[..], &b"3"[..]]);
    }

    #[test]
    fn split_id_reads_like_fields_then_parse_i64() {
        for l in [
            "7,1.5",
            "-7,1.5",
            "0,",
            ",1",
            "-,1",
            "7",
            "7;1",
            "+7,1",
            "1,2,3",
            "9223372036854775807,1",
            "9223372036854775808,1",
            "-9223372036854775808,0",
            "-9223372036854775809,0",
            "007,x",
            // Long enough for the word-at-a-time read, at and around its limits.
            "12345678,1.5",
            "-98765432,0.25",
            "123456789012345,1",
            "1234567890123456,1",
            "12345678901234567,1",
            "000000000000001,7",
            "12345678;1.5",
            "123456789x12,1",
            "1234567890,",
            "-1234567890123,-4.5\n",
        ]
        .into_iter()
        // Padded too: the word-at-a-time read needs 16 bytes after the sign, as in a buffer.
        .flat_map(|l| [l.to_string(), format!("{l}{}", " ".repeat(16))])
        {
            let l = l.as_str();
            let want = {
                let mut f = fields(l.as_bytes(), b",");
                let key = f.next().and_then(parse_i64);
                let rest = f.next().map(|_| &l.as_bytes()[l.find(',').unwrap() + 1..]);
                key.zip(rest).filter(|_| !l.starts_with('+'))
            };
            assert_eq!(split_id(l.as_bytes(), b','), want, "{l:?}");
        }
        assert_eq!(plain_separator(b','), Some(b','));
        assert_eq!(plain_separator(b'e'), None);
        assert_eq!(plain_separator(b'-'), None);
    }

    #[test]
    fn integers_parse_like_str_parse() {
        for s in [
            "0",
            "-0",
            "+7",
            "-",
            "+",
            "",
            "12a",
            "9223372036854775807",
            "9223372036854775808",
            "-9223372036854775808",
            "-9223372036854775809",
            " 1",
            "1 ",
            "007",
            "--1",
        ] {
            assert_eq!(parse_i64(s.as_bytes()), s.parse::<i64>().ok(), "{s:?}");
        }
    }

    #[test]
    fn java_numbers() {
        let mut out = Vec::new();
        for s in [
            "0.0",
            "-0.0",
            "NaN",
            "Infinity",
            "-Infinity",
            "9.999E-4",
            "1.08223285E-5",
            "1.0E7",
            "9999999.0",
            "3.4028235E38",
            "1.4E-45",
            "-3",
            "5",
        ] {
            out.clear();
            assert!(parse_value(s.as_bytes(), ValueType::Float, &mut out), "{s}");
        }
        out.clear();
        parse_value(b"1.4E-45", ValueType::Float, &mut out);
        assert_eq!(out, 1u32.to_le_bytes());
        out.clear();
        parse_value(b"-0", ValueType::Double, &mut out);
        assert_eq!(out, (-0.0f64).to_le_bytes());
        assert!(!parse_value(b"1.5", ValueType::Int, &mut out));
        assert!(!parse_value(b"", ValueType::Double, &mut out));
        assert!(!parse_value(b"1x", ValueType::Double, &mut out));
        assert_eq!(detect_separator(b"-1.5E-4\t2"), Some(b'\t'));
        assert_eq!(detect_separator(b"NaN:2"), Some(b':'));
        assert_eq!(detect_separator(b"12"), None);
    }
}
