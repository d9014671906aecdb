//! The safetensors header (huggingface/safetensors `docs`, "Format"): 8 bytes little-endian
//! `N`, then `N` bytes of JSON — an object whose keys are tensor names, each
//! `{"dtype", "shape", "data_offsets": [begin, end]}` with offsets relative to the byte after
//! the header, and the optional `"__metadata__"`, a map of strings to strings.
//!
//! Invariants of a parsed header: every entry's `[begin, end)` lies within the data the file
//! holds (`data_len`) or the entry carries a problem; an entry without a problem has exactly
//! `elements × width` bytes. Nothing is allocated from a length before it is bounded by the
//! file's size.

use std::collections::BTreeMap;

use crate::model::DType;

/// The largest header the safetensors library reads (`MAX_HEADER_SIZE`).
pub(crate) const MAX_HEADER: u64 = 100_000_000;

/// Why a file is not a safetensors file at all.
#[derive(Debug, thiserror::Error)]
pub enum HeaderError {
    #[error("shorter than the 8-byte header length ({0} bytes)")]
    TooShort(u64),
    #[error("header length {len} exceeds {limit} bytes")]
    TooLong { len: u64, limit: u64 },
    #[error("header is not a JSON object: {0}")]
    Json(#[from] serde_json::Error),
    #[error("header entry {0:?} is not an object")]
    NotAnEntry(String),
    #[error("__metadata__ is not a map of strings to strings")]
    Metadata,
}

/// One tensor as the header describes it.
#[derive(Clone, Debug)]
pub(crate) struct Entry {
    pub(crate) name: String,
    /// The dtype as written (`F32`, `BF16`, …).
    pub(crate) st_dtype: String,
    pub(crate) dtype: DType,
    pub(crate) shape: Vec<u64>,
    /// Offsets in the file (the header's plus `8 + N`).
    pub(crate) begin: u64,
    pub(crate) end: u64,
    /// Why the entry cannot be read (its data reads fail; it is still listed): damage.
    pub(crate) problem: Option<String>,
    /// A dtype of `BLOCKS`: its bytes are served as stored, its elements not decoded.
    pub(crate) note: Option<String>,
}

/// The dtypes safetensors writes that modelfs does not decode, and each one's bits per
/// element: their tensors are listed with a note (a verdict passes them), their bytes served
/// as stored (`.bin`), their extents checked like any other's.
pub(crate) const BLOCKS: [(&str, u64); 2] = [("F4", 4), ("F8_E8M0", 8)];

/// A parsed header.
#[derive(Debug, Default)]
pub(crate) struct Header {
    /// In the header's order (the writer's: by alignment, then name).
    pub(crate) entries: Vec<Entry>,
    pub(crate) metadata: BTreeMap<String, String>,
}

/// The dtype of a safetensors dtype name, with the element width; `None`: not decoded here.
pub(crate) fn dtype_of(name: &str) -> Option<DType> {
    use DType::*;
    Some(match name {
        "BOOL" => Bool,
        "U8" => U8,
        "I8" => I8,
        "U16" => U16,
        "I16" => I16,
        "U32" => U32,
        "I32" => I32,
        "U64" => U64,
        "I64" => I64,
        "F16" => F16,
        "BF16" => BF16,
        "F32" => F32,
        "F64" => F64,
        "C64" => C64,
        // TF's codes for the float8 formats (tf/dtype.rs): raw bytes, one per element.
        "F8_E5M2" => Float8(24),
        "F8_E4M3" => Float8(25),
        "F8_E4M3FNUZ" => Float8(26),
        "F8_E5M2FNUZ" => Float8(28),
        _ => return None,
    })
}

/// The length `N` the first 8 bytes of a file of `size` bytes give, checked against the file
/// and `MAX_HEADER`.
pub(crate) fn header_len(first8: &[u8], size: u64) -> Result<u64, HeaderError> {
    let Ok(b) = <[u8; 8]>::try_from(first8) else {
        return Err(HeaderError::TooShort(size));
    };
    let len = u64::from_le_bytes(b);
    let limit = MAX_HEADER.min(size.saturating_sub(8));
    if len > limit {
        return Err(HeaderError::TooLong { len, limit });
    }
    Ok(len)
}

/// Parses the JSON `json` of a file of `size` bytes whose header is `json.len()` long.
pub(crate) fn parse(json: &[u8], size: u64) -> Result<Header, HeaderError> {
    let map: serde_json::Map<String, serde_json::Value> = serde_json::from_slice(json)?;
    // `json.len() <= size - 8` (header_len), so this cannot underflow.
    let data_start = 8 + json.len() as u64;
    let data_len = size - data_start;
    let mut out = Header::default();
    for (name, v) in map {
        if name == "__metadata__" {
            out.metadata = metadata(v)?;
            continue;
        }
        let serde_json::Value::Object(o) = v else {
            return Err(HeaderError::NotAnEntry(name));
        };
        out.entries.push(entry(name, &o, data_start, data_len));
    }
    Ok(out)
}

fn metadata(v: serde_json::Value) -> Result<BTreeMap<String, String>, HeaderError> {
    match v {
        serde_json::Value::Null => Ok(BTreeMap::new()),
        serde_json::Value::Object(o) => o
            .into_iter()
            .map(|(k, v)| match v {
                serde_json::Value::String(s) => Ok((k, s)),
                _ => Err(HeaderError::Metadata),
            })
            .collect(),
        _ => Err(HeaderError::Metadata),
    }
}

/// One entry; whatever is wrong with it becomes its problem.
fn entry(
    name: String,
    o: &serde_json::Map<String, serde_json::Value>,
    data_start: u64,
    data_len: u64,
) -> Entry {
    let st_dtype = o
        .get("dtype")
        .and_then(|d| d.as_str())
        .unwrap_or("")
        .to_string();
    let shape: Option<Vec<u64>> = o
        .get("shape")
        .and_then(|s| s.as_array())
        .and_then(|a| a.iter().map(|d| d.as_u64()).collect());
    let offsets: Option<Vec<u64>> = o
        .get("data_offsets")
        .and_then(|s| s.as_array())
        .and_then(|a| a.iter().map(|d| d.as_u64()).collect());
    let mut e = Entry {
        name,
        dtype: dtype_of(&st_dtype).unwrap_or(DType::Opaque(0)),
        st_dtype,
        shape: shape.clone().unwrap_or_default(),
        begin: data_start,
        end: data_start,
        problem: None,
        note: None,
    };
    let blocks = BLOCKS.iter().find(|(n, _)| *n == e.st_dtype);
    if let Some((n, _)) = blocks {
        e.dtype = DType::Blocks(n);
    }
    let checked = (|| {
        let shape = shape.ok_or("no shape of whole numbers")?;
        let [begin, end] = offsets
            .as_deref()
            .and_then(|o| <[u64; 2]>::try_from(o).ok())
            .ok_or("no data_offsets [begin, end]")?;
        if begin > end || end > data_len {
            return Err(format!(
                "data_offsets [{begin}, {end}] outside the {data_len} data bytes"
            ));
        }
        e.begin = data_start + begin;
        e.end = data_start + end;
        // Bits of an element: a packed dtype's bytes are whole (as the safetensors crate
        // checks them).
        let bits = match blocks {
            Some(&(_, bits)) => bits,
            None => dtype_of(&e.st_dtype)
                .and_then(|d| d.elem_size())
                .map(|w| w as u64 * 8)
                .ok_or_else(|| format!("dtype {:?} is not one safetensors writes", e.st_dtype))?,
        };
        let want_bits = shape
            .iter()
            .try_fold(bits, |a, &d| a.checked_mul(d))
            .ok_or("its size overflows")?;
        if want_bits % 8 != 0 {
            return Err(format!(
                "shape {shape:?} of {} is not a whole number of bytes",
                e.st_dtype
            ));
        }
        let want = want_bits / 8;
        if want != end - begin {
            return Err(format!(
                "{} bytes for shape {shape:?} of {}, {want} expected",
                end - begin,
                e.st_dtype
            ));
        }
        Ok(())
    })();
    match checked {
        Err(why) => e.problem = Some(why.to_string()),
        Ok(()) if blocks.is_some() => {
            e.note = Some(format!(
                "dtype {} is not decoded: .bin holds its bytes",
                e.st_dtype
            ))
        }
        Ok(()) => {}
    }
    debug_assert!(e.problem.is_some() || e.end - e.begin <= data_len);
    e
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(json: &str, data: usize) -> Vec<u8> {
        let mut f = (json.len() as u64).to_le_bytes().to_vec();
        f.extend_from_slice(json.as_bytes());
        f.resize(f.len() + data, 7);
        f
    }

    #[test]
    fn entries_and_metadata() {
        let f = file(
            r#"{"__metadata__":{"format":"pt"},"w":{"dtype":"F32","shape":[2,3],"data_offsets":[0,24]}}"#,
            24,
        );
        let n = header_len(&f[..8], f.len() as u64).unwrap();
        let h = parse(&f[8..8 + n as usize], f.len() as u64).unwrap();
        assert_eq!(h.metadata["format"], "pt");
        let e = &h.entries[0];
        assert_eq!(
            (e.dtype, &e.shape[..], e.problem.as_deref()),
            (DType::F32, &[2, 3][..], None)
        );
        assert_eq!((e.begin, e.end), (8 + n, 8 + n + 24));
    }

    /// Hostile lengths and offsets are problems of the file or of the entry, never a panic or
    /// an allocation of their size.
    #[test]
    fn hostile_headers() {
        assert!(matches!(
            header_len(&[0xff; 8], 100),
            Err(HeaderError::TooLong { .. })
        ));
        assert!(matches!(
            header_len(&[1; 4], 4),
            Err(HeaderError::TooShort(4))
        ));
        // (dtype, shape, data_offsets) of a tensor `w`, and what its problem says.
        let cases = [
            ("F32", "[2]", "[0,99]", "outside"),
            ("F32", "[3]", "[0,8]", "expected"),
            ("F32", "[4294967296,4294967296,16]", "[0,8]", "overflows"),
            ("F8_E8M0", "[2]", "[0,3]", "expected"),
            ("F4", "[3]", "[0,2]", "whole number of bytes"),
            ("F5", "[2]", "[0,2]", "not one safetensors writes"),
            ("F32", "[-1]", "[0,8]", "no shape"),
            ("F32", "[2]", "[8,0]", "outside"),
        ];
        for (dtype, shape, offsets, why) in cases {
            let json = format!(
                r#"{{"w":{{"dtype":"{dtype}","shape":{shape},"data_offsets":{offsets}}}}}"#
            );
            let json = json.as_str();
            let f = file(json, 8);
            let h = parse(&f[8..8 + json.len()], f.len() as u64).unwrap();
            let p = h.entries[0].problem.as_deref().unwrap_or("");
            assert!(p.contains(why), "{json}: {p}");
        }
        // Undecoded dtypes of the right size are notes, not problems.
        for (dtype, shape, offsets) in [("F8_E8M0", "[2]", "[0,2]"), ("F4", "[2,2]", "[0,2]")] {
            let json = format!(
                r#"{{"w":{{"dtype":"{dtype}","shape":{shape},"data_offsets":{offsets}}}}}"#
            );
            let f = file(&json, 8);
            let h = parse(&f[8..8 + json.len()], f.len() as u64).unwrap();
            let e = &h.entries[0];
            assert_eq!(e.problem, None, "{json}");
            assert!(e.note.as_deref().unwrap().contains("not decoded"), "{json}");
            assert_eq!(e.end - e.begin, 2, "{json}");
        }
        assert!(parse(b"[1]", 100).is_err());
        assert!(parse(br#"{"__metadata__":{"a":1}}"#, 100).is_err());
        assert!(parse(br#"{"w":3}"#, 100).is_err());
    }
}
