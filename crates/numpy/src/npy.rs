//! The `.npy` header (numpy/lib/format.py, NEP 1): `\x93NUMPY`, major and minor version, the
//! header length (2 bytes little-endian in 1.0, 4 in 2.0 and 3.0), then a Python dict literal
//! `{'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }` padded with spaces to a
//! multiple of 64 and ended by `\n`. Only what `np.save` writes for a plain dtype is read; a
//! structured or object dtype is the array's problem, not the file's.

use crate::model::DType;

/// The longest header read (numpy itself refuses headers over 10,000 bytes unless asked).
pub(crate) const MAX_HEADER: u64 = 1 << 20;

#[derive(Debug, thiserror::Error)]
pub enum NpyError {
    #[error("not a .npy file (no \\x93NUMPY magic)")]
    Magic,
    #[error(".npy version {0}.{1} is not known")]
    Version(u8, u8),
    #[error(".npy header of {0} bytes is longer than {MAX_HEADER}")]
    TooLong(u64),
    #[error(".npy header is not a dict of descr, fortran_order and shape: {0}")]
    Dict(String),
}

/// A parsed header.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct NpyHeader {
    /// `descr` as written (`<f4`, `|b1`, …; a structured dtype's list as its text).
    pub(crate) descr: String,
    pub(crate) fortran: bool,
    pub(crate) shape: Vec<u64>,
    /// Bytes before the data.
    pub(crate) data_offset: u64,
}

/// Bytes of the prefix (magic, version, length) and the header length it gives, from at least
/// the first 12 bytes of the file.
pub(crate) fn prefix(b: &[u8]) -> Result<(u64, u64), NpyError> {
    if b.len() < 10 || &b[..6] != b"\x93NUMPY" {
        return Err(NpyError::Magic);
    }
    let (len_bytes, len) = match b[6] {
        1 => (2u64, u64::from(u16::from_le_bytes([b[8], b[9]]))),
        2 | 3 if b.len() >= 12 => (4, u64::from(u32::from_le_bytes([b[8], b[9], b[10], b[11]]))),
        _ => return Err(NpyError::Version(b[6], b[7])),
    };
    if len > MAX_HEADER {
        return Err(NpyError::TooLong(len));
    }
    Ok((8 + len_bytes, len))
}

/// Parses the dict `text` of a header that ends at `data_offset`.
pub(crate) fn parse(text: &[u8], data_offset: u64) -> Result<NpyHeader, NpyError> {
    let text = std::str::from_utf8(text).map_err(|_| NpyError::Dict("not UTF-8".into()))?;
    let bad = |why: &str| NpyError::Dict(why.to_string());
    let t = text.trim();
    let t = t
        .strip_prefix('{')
        .and_then(|t| t.strip_suffix('}'))
        .ok_or_else(|| bad("no braces"))?;
    let descr = value_of(t, "descr").ok_or_else(|| bad("no 'descr'"))?;
    let descr = match descr.strip_prefix('\'').and_then(|d| d.split_once('\'')) {
        Some((d, _)) => d.to_string(),
        // A structured dtype: a list, shown as written.
        None => descr
            .split("'fortran_order'")
            .next()
            .unwrap_or(descr)
            .trim()
            .trim_end_matches(',')
            .to_string(),
    };
    let fortran = match value_of(t, "fortran_order").map(|v| v.trim_start()) {
        Some(v) if v.starts_with("False") => false,
        Some(v) if v.starts_with("True") => true,
        _ => return Err(bad("no 'fortran_order' True/False")),
    };
    let shape = value_of(t, "shape").ok_or_else(|| bad("no 'shape'"))?;
    let inner = shape
        .trim_start()
        .strip_prefix('(')
        .and_then(|s| s.split_once(')'))
        .map(|(s, _)| s)
        .ok_or_else(|| bad("'shape' is not a tuple"))?;
    let shape = inner
        .split(',')
        .map(str::trim)
        .filter(|d| !d.is_empty())
        .map(|d| d.trim_end_matches('L').parse::<u64>())
        .collect::<Result<Vec<_>, _>>()
        .map_err(|_| bad("'shape' holds something other than whole numbers"))?;
    Ok(NpyHeader {
        descr,
        fortran,
        shape,
        data_offset,
    })
}

/// The text after `'key':` in the dict body `t`.
fn value_of<'a>(t: &'a str, key: &str) -> Option<&'a str> {
    let at = t.find(&format!("'{key}'"))?;
    let rest = &t[at + key.len() + 2..];
    Some(rest.trim_start().strip_prefix(':')?.trim_start())
}

/// The dtype of a plain `descr` and whether its bytes are big-endian; `Err` names why an
/// array of this dtype is not read (object arrays are pickles, never unpickled).
pub(crate) fn dtype_of(descr: &str) -> Result<(DType, bool), String> {
    use DType::*;
    // `|O8` and `|O4`: Python 2's numpy named object arrays by their pointer width.
    if matches!(
        descr,
        "O" | "|O" | "|O8" | "|O4" | "<O8" | ">O8" | "<O4" | ">O4"
    ) {
        return Err("an object array (a pickle): refused, never unpickled".into());
    }
    let (order, code) = match descr.as_bytes().first() {
        Some(b'<' | b'|' | b'=') => (false, &descr[1..]),
        Some(b'>') => (true, &descr[1..]),
        _ => (false, descr),
    };
    let dtype = match code {
        "b1" => Bool,
        "i1" => I8,
        "u1" => U8,
        "i2" => I16,
        "u2" => U16,
        "i4" => I32,
        "u4" => U32,
        "i8" => I64,
        "u8" => U64,
        "f2" => F16,
        "f4" => F32,
        "f8" => F64,
        "c8" => C64,
        "c16" => C128,
        _ => {
            return Err(format!(
                "numpy dtype {descr:?} is not read (its .json only)"
            ))
        }
    };
    let width = dtype.elem_size().unwrap_or(1);
    Ok((dtype, order && width > 1))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headers_numpy_writes() {
        let h = parse(
            b"{'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }    \n",
            128,
        )
        .unwrap();
        assert_eq!(
            (h.descr.as_str(), h.fortran, &h.shape[..]),
            ("<f4", false, &[3, 4][..])
        );
        let h = parse(
            b"{'descr': '>i8', 'fortran_order': True, 'shape': (5,), }",
            64,
        )
        .unwrap();
        assert_eq!((h.fortran, &h.shape[..]), (true, &[5][..]));
        assert_eq!(
            parse(
                b"{'descr': '|b1', 'fortran_order': False, 'shape': (), }",
                64
            )
            .unwrap()
            .shape,
            Vec::<u64>::new()
        );
        let s = parse(
            b"{'descr': [('a', '<i4'), ('b', '<f8')], 'fortran_order': False, 'shape': (2,), }",
            64,
        )
        .unwrap();
        assert!(s.descr.starts_with('[') && dtype_of(&s.descr).is_err());
        assert_eq!(dtype_of(">f8"), Ok((DType::F64, true)));
        assert_eq!(dtype_of("|u1"), Ok((DType::U8, false)));
        assert!(dtype_of("|O").unwrap_err().contains("pickle"));
        assert!(dtype_of("<U5").is_err());
    }

    #[test]
    fn hostile_headers_are_errors() {
        assert!(matches!(
            prefix(b"\x93NUMPX\x01\x00\x10\x00"),
            Err(NpyError::Magic)
        ));
        assert!(matches!(
            prefix(b"\x93NUMPY\x09\x00\x10\x00"),
            Err(NpyError::Version(9, 0))
        ));
        assert!(matches!(
            prefix(b"\x93NUMPY\x02\x00\xff\xff\xff\xff"),
            Err(NpyError::TooLong(_))
        ));
        for bad in [
            &b"{}"[..],
            b"{'descr': '<f4'}",
            b"{'descr': '<f4', 'fortran_order': False, 'shape': (-1,), }",
            b"\xff",
        ] {
            assert!(parse(bad, 64).is_err());
        }
    }
}
