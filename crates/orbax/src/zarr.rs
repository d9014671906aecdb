//! A zarr array's metadata (v2 `.zarray`, v3 `zarr.json`) and its chunks' decoding, as
//! TensorStore writes them for Orbax: a regular chunk grid, chunks stored whole (edge chunks
//! padded) and compressed by zstd, gzip or zlib, or not at all; a chunk never written holds
//! the fill value. What this reader does not decode (blosc, a Fortran-order chunk, v3 codecs
//! beyond `bytes`, `zstd`, `gzip`, `crc32c`) becomes the array's note: it is listed, its `.json`
//! says why, its data reads fail saying so.

use std::io::Read;

use serde_json::Value as Json;

use crate::model::DType;

/// How chunk coordinates name a chunk's key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Keys {
    /// zarr v2 (and v3's `v2` encoding): `0.1` (`0` for a 0-d array).
    V2(char),
    /// v3's `default`: `c/0/1` (`c` for a 0-d array).
    Default(char),
}

impl Keys {
    pub(crate) fn key(&self, chunk: &[u64]) -> String {
        let join = |sep: char| {
            chunk
                .iter()
                .map(|c| c.to_string())
                .collect::<Vec<_>>()
                .join(&sep.to_string())
        };
        match self {
            Keys::V2(_) if chunk.is_empty() => "0".into(),
            Keys::V2(sep) => join(*sep),
            Keys::Default(_) if chunk.is_empty() => "c".into(),
            Keys::Default(sep) => format!("c{sep}{}", join(*sep)),
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Compression {
    None,
    Zstd,
    Gzip,
    Zlib,
}

/// v3's `sharding_indexed`: each stored chunk (a shard) holds `per` inner chunks (the grid's
/// chunks) and an index of where each lies (`offset`, `nbytes`: little-endian u64s, all ones
/// for one never written), at its end or start, with a CRC-32C.
#[derive(Clone, Debug)]
pub(crate) struct Shard {
    /// Inner chunks along each dimension of a shard.
    pub per: Vec<u64>,
    pub index_at_end: bool,
    pub index_crc: bool,
}

impl Shard {
    /// Inner chunks in a shard.
    pub(crate) fn count(&self) -> u64 {
        self.per.iter().product()
    }

    /// Bytes of a shard's index.
    pub(crate) fn index_bytes(&self) -> u64 {
        self.count() * 16 + if self.index_crc { 4 } else { 0 }
    }
}

/// An array's metadata, as far as reading its elements needs.
#[derive(Clone, Debug)]
pub(crate) struct Array {
    pub dtype: DType,
    pub shape: Vec<u64>,
    pub chunk: Vec<u64>,
    pub big_endian: bool,
    /// One element of the fill value, little-endian.
    pub fill: Vec<u8>,
    pub compression: Compression,
    /// A CRC-32C (v3's `crc32c` codec) ends every stored chunk.
    pub crc32c: bool,
    pub keys: Keys,
    /// Chunks stored in shards (`chunk` is then the inner chunks' shape).
    pub shard: Option<Shard>,
    /// What is not decoded here (the elements are then not served).
    pub note: Option<String>,
    /// The metadata as stored, for the `.json`.
    pub json: Json,
}

fn shape_of(v: Option<&Json>, what: &str) -> Result<Vec<u64>, String> {
    v.and_then(Json::as_array)
        .ok_or_else(|| format!("no {what}"))?
        .iter()
        .map(|d| {
            d.as_u64()
                .ok_or_else(|| format!("{what}: {d} is not a length"))
        })
        .collect()
}

/// The dtype a zarr v2 `dtype` string names (`<f4`, `|b1`, `bfloat16`…) and its byte order.
fn v2_dtype(s: &str) -> Result<(DType, bool), String> {
    if let Some(d) = named(s) {
        return Ok((d, false));
    }
    let (order, code) = s.split_at(1.min(s.len()));
    let big = match order {
        "<" | "|" => false,
        ">" => true,
        _ => return Err(format!("dtype {s:?}")),
    };
    let d = match code {
        "b1" => DType::Bool,
        "i1" => DType::I8,
        "u1" => DType::U8,
        "i2" => DType::I16,
        "u2" => DType::U16,
        "i4" => DType::I32,
        "u4" => DType::U32,
        "i8" => DType::I64,
        "u8" => DType::U64,
        "f2" => DType::F16,
        "f4" => DType::F32,
        "f8" => DType::F64,
        "c8" => DType::C64,
        "c16" => DType::C128,
        _ => return Err(format!("dtype {s:?}")),
    };
    Ok((d, big && d.elem_size() != Some(1)))
}

/// A dtype by the name zarr v3 (and ml_dtypes) gives it.
fn named(s: &str) -> Option<DType> {
    use DType::*;
    [
        Bool,
        I8,
        I16,
        I32,
        I64,
        U8,
        U16,
        U32,
        U64,
        F16,
        BF16,
        F32,
        F64,
        C64,
        C128,
        Float8(24),
        Float8(25),
        Float8(26),
        Float8(27),
        Float8(28),
    ]
    .into_iter()
    .find(|d| d.name() == s)
}

/// One element of `dtype` holding the fill value `v` (zarr's JSON forms: a number, `NaN`,
/// `Infinity`, `-Infinity`, a `0x…` bit pattern, a bool; `null`: zero).
fn fill_of(dtype: DType, v: &Json) -> Result<Vec<u8>, String> {
    let width = dtype.elem_size().unwrap_or(1);
    let f = match v {
        Json::Null => return Ok(vec![0; width]),
        Json::Bool(b) => f64::from(u8::from(*b)),
        Json::String(s) if s.starts_with("0x") => {
            let bits =
                u128::from_str_radix(&s[2..], 16).map_err(|_| format!("fill value {s:?}"))?;
            return Ok(bits.to_le_bytes()[..width.min(16)].to_vec());
        }
        Json::String(s) => match s.as_str() {
            "NaN" => f64::NAN,
            "Infinity" => f64::INFINITY,
            "-Infinity" => f64::NEG_INFINITY,
            _ => return Err(format!("fill value {s:?}")),
        },
        Json::Number(n) => {
            // Integers exactly (an i64/u64 fill value is not always a double).
            if let Some(i) = n.as_i64() {
                if !matches!(
                    dtype,
                    DType::F16 | DType::BF16 | DType::F32 | DType::F64 | DType::C64 | DType::C128
                ) {
                    return Ok(i.to_le_bytes()[..width].to_vec());
                }
            }
            if let Some(u) = n.as_u64() {
                if !matches!(
                    dtype,
                    DType::F16 | DType::BF16 | DType::F32 | DType::F64 | DType::C64 | DType::C128
                ) {
                    return Ok(u.to_le_bytes()[..width].to_vec());
                }
            }
            n.as_f64().ok_or_else(|| format!("fill value {n}"))?
        }
        // A complex fill value `[re, im]` and anything else.
        other => {
            if let (Some(re), Some(im)) = (
                other.get(0).and_then(Json::as_f64),
                other.get(1).and_then(Json::as_f64),
            ) {
                return Ok(match dtype {
                    DType::C64 => [(re as f32).to_le_bytes(), (im as f32).to_le_bytes()].concat(),
                    _ => [re.to_le_bytes(), im.to_le_bytes()].concat(),
                });
            }
            return Err(format!("fill value {other}"));
        }
    };
    Ok(match dtype {
        DType::F16 => half::f16::from_f64(f).to_le_bytes().to_vec(),
        DType::BF16 => half::bf16::from_f64(f).to_le_bytes().to_vec(),
        DType::F32 => (f as f32).to_le_bytes().to_vec(),
        DType::F64 => f.to_le_bytes().to_vec(),
        DType::C64 => [(f as f32).to_le_bytes(), 0f32.to_le_bytes()].concat(),
        DType::C128 => [f.to_le_bytes(), 0f64.to_le_bytes()].concat(),
        DType::Bool => vec![u8::from(f != 0.0)],
        _ => (f as i64).to_le_bytes()[..width].to_vec(),
    })
}

impl Array {
    /// A v2 `.zarray`.
    pub(crate) fn v2(bytes: &[u8]) -> Result<Array, String> {
        let json: Json = serde_json::from_slice(bytes).map_err(|e| format!(".zarray: {e}"))?;
        let shape = shape_of(json.get("shape"), "shape")?;
        let chunk = shape_of(json.get("chunks"), "chunks")?;
        let dt = json.get("dtype").and_then(Json::as_str).ok_or("no dtype")?;
        let (dtype, big_endian) = v2_dtype(dt)?;
        let fill = fill_of(dtype, json.get("fill_value").unwrap_or(&Json::Null))?;
        let mut note = None;
        let compression = match json.get("compressor") {
            None | Some(Json::Null) => Compression::None,
            Some(c) => match c.get("id").and_then(Json::as_str) {
                Some("zstd") => Compression::Zstd,
                Some("gzip") => Compression::Gzip,
                Some("zlib") => Compression::Zlib,
                id => {
                    note = Some(format!(
                        "compressed by {}, which this reader does not decode",
                        id.unwrap_or("?")
                    ));
                    Compression::None
                }
            },
        };
        if json
            .get("filters")
            .is_some_and(|f| !f.is_null() && f.as_array().is_none_or(|a| !a.is_empty()))
        {
            note = Some("written through zarr filters, which this reader does not decode".into());
        }
        if json.get("order").and_then(Json::as_str) == Some("F") && shape.len() > 1 {
            note = Some("chunks in Fortran order, which this reader does not decode".into());
        }
        let sep = match json.get("dimension_separator").and_then(Json::as_str) {
            None | Some(".") => '.',
            Some("/") => '/',
            Some(s) => return Err(format!("dimension separator {s:?}")),
        };
        Ok(Array {
            dtype,
            shape,
            chunk,
            big_endian,
            fill,
            compression,
            crc32c: false,
            keys: Keys::V2(sep),
            shard: None,
            note,
            json,
        })
    }

    /// A v3 `zarr.json` of an array.
    pub(crate) fn v3(bytes: &[u8]) -> Result<Array, String> {
        let json: Json = serde_json::from_slice(bytes).map_err(|e| format!("zarr.json: {e}"))?;
        if json.get("node_type").and_then(Json::as_str) != Some("array") {
            return Err("zarr.json of a group, not an array".into());
        }
        let shape = shape_of(json.get("shape"), "shape")?;
        let grid = json.get("chunk_grid").ok_or("no chunk_grid")?;
        if grid.get("name").and_then(Json::as_str) != Some("regular") {
            return Err(format!("chunk grid {grid}"));
        }
        let chunk = shape_of(grid.pointer("/configuration/chunk_shape"), "chunk_shape")?;
        let dt = json
            .get("data_type")
            .and_then(Json::as_str)
            .ok_or("no data_type")?;
        let (dtype, mut note) = match named(dt) {
            Some(d) => (d, None),
            None => (
                DType::U8,
                Some(format!(
                    "data type {dt:?}, which this reader does not decode"
                )),
            ),
        };
        let fill = fill_of(dtype, json.get("fill_value").unwrap_or(&Json::Null))?;
        let enc = json.get("chunk_key_encoding");
        let sep = |default: char| match enc
            .and_then(|e| e.pointer("/configuration/separator"))
            .and_then(Json::as_str)
        {
            None => Ok(default),
            Some(".") => Ok('.'),
            Some("/") => Ok('/'),
            Some(s) => Err(format!("chunk key separator {s:?}")),
        };
        let keys = match enc.and_then(|e| e.get("name")).and_then(Json::as_str) {
            None | Some("default") => Keys::Default(sep('/')?),
            Some("v2") => Keys::V2(sep('.')?),
            Some(n) => return Err(format!("chunk key encoding {n:?}")),
        };
        let codecs = json
            .get("codecs")
            .and_then(Json::as_array)
            .ok_or("no codecs")?;
        let mut chunk = chunk;
        let mut shard = None;
        let list = match codecs.first() {
            Some(c)
                if c.get("name").and_then(Json::as_str) == Some("sharding_indexed")
                    && codecs.len() == 1 =>
            {
                let conf = c
                    .get("configuration")
                    .ok_or("sharding_indexed without configuration")?;
                let inner = shape_of(conf.get("chunk_shape"), "inner chunk_shape")?;
                if inner.len() != chunk.len()
                    || inner
                        .iter()
                        .zip(&chunk)
                        .any(|(&i, &o)| i == 0 || o % i != 0)
                {
                    return Err(format!(
                        "inner chunks {inner:?} do not tile shards {chunk:?}"
                    ));
                }
                let index = conf
                    .get("index_codecs")
                    .and_then(Json::as_array)
                    .ok_or("no index_codecs")?;
                let names: Vec<&str> = index
                    .iter()
                    .filter_map(|c| c.get("name").and_then(Json::as_str))
                    .collect();
                let little = index
                    .first()
                    .and_then(|c| c.pointer("/configuration/endian"))
                    .and_then(Json::as_str)
                    != Some("big");
                let index_crc = match names.as_slice() {
                    ["bytes"] => false,
                    ["bytes", "crc32c"] => true,
                    _ => return Err(format!("shard index codecs {names:?}")),
                };
                if !little {
                    return Err("a big-endian shard index".into());
                }
                let index_at_end = match conf.get("index_location").and_then(Json::as_str) {
                    None | Some("end") => true,
                    Some("start") => false,
                    Some(l) => return Err(format!("shard index location {l:?}")),
                };
                shard = Some(Shard {
                    per: chunk.iter().zip(&inner).map(|(o, i)| o / i).collect(),
                    index_at_end,
                    index_crc,
                });
                chunk = inner;
                conf.get("codecs")
                    .and_then(Json::as_array)
                    .ok_or("no inner codecs")?
            }
            _ => codecs,
        };
        let (mut big_endian, mut compression, mut crc32c) = (false, Compression::None, false);
        for (i, c) in list.iter().enumerate() {
            let name = c.get("name").and_then(Json::as_str).unwrap_or("?");
            match name {
                "bytes" if i == 0 => {
                    big_endian = c.pointer("/configuration/endian").and_then(Json::as_str)
                        == Some("big")
                        && dtype.elem_size() != Some(1);
                }
                "zstd" if compression == Compression::None && !crc32c => {
                    compression = Compression::Zstd
                }
                "gzip" if compression == Compression::None && !crc32c => {
                    compression = Compression::Gzip
                }
                // Stored last, checked first.
                "crc32c" if !crc32c => crc32c = true,
                _ => {
                    note.get_or_insert_with(|| format!("written through the zarr codec {name:?}, which this reader does not decode"));
                }
            }
        }
        Ok(Array {
            dtype,
            shape,
            chunk,
            big_endian,
            fill,
            compression,
            crc32c,
            keys,
            shard,
            note,
            json,
        })
    }

    /// Bytes of one decoded (padded) chunk.
    pub(crate) fn chunk_bytes(&self) -> Option<u64> {
        self.chunk
            .iter()
            .try_fold(self.dtype.elem_size()? as u64, |a, &d| a.checked_mul(d))
    }

    /// Whether a stored chunk is its elements as served (no codec, little-endian, no bools to
    /// normalise): read in place.
    pub(crate) fn raw(&self) -> bool {
        self.compression == Compression::None
            && !self.big_endian
            && !self.crc32c
            && self.dtype != DType::Bool
    }

    /// Whether a chunk's decoded bytes are its elements as served, in order (a stream of
    /// them can be read by range).
    pub(crate) fn streams(&self) -> bool {
        !self.big_endian && !self.crc32c && self.dtype != DType::Bool
    }

    /// A stored chunk decoded into its elements, little-endian (`len` bytes: `chunk_bytes`).
    pub(crate) fn decode(&self, stored: &[u8], len: usize) -> Result<Vec<u8>, String> {
        let mut data = stored;
        if self.crc32c {
            let n = data
                .len()
                .checked_sub(4)
                .ok_or("chunk shorter than its CRC-32C")?;
            let want = u32::from_le_bytes(data[n..].try_into().expect("4 bytes"));
            if crc32c::crc32c(&data[..n]) != want {
                return Err("chunk CRC-32C mismatch: damaged".into());
            }
            data = &data[..n];
        }
        let mut out = vec![0u8; len];
        let got = match self.compression {
            Compression::None => {
                if data.len() != len {
                    return Err(format!("chunk of {} bytes, {len} expected", data.len()));
                }
                out.copy_from_slice(data);
                len
            }
            Compression::Zstd => {
                // libzstd checks a frame's content checksum where the writer stored one.
                zstd::bulk::decompress_to_buffer(data, &mut out[..])
                    .map_err(|e| format!("zstd: {e}"))?
            }
            Compression::Gzip => read_all(flate2::read::GzDecoder::new(data), &mut out)?,
            Compression::Zlib => read_all(flate2::read::ZlibDecoder::new(data), &mut out)?,
        };
        if got != len {
            return Err(format!("chunk decodes to {got} bytes, {len} expected"));
        }
        if self.big_endian {
            let w = self.dtype.elem_size().unwrap_or(1);
            let w = if matches!(self.dtype, DType::C64 | DType::C128) {
                w / 2
            } else {
                w
            };
            for e in out.chunks_exact_mut(w) {
                e.reverse();
            }
        }
        if self.dtype == DType::Bool {
            for b in &mut out {
                *b = u8::from(*b != 0);
            }
        }
        Ok(out)
    }
}

/// Reads `r` into `out` exactly; more bytes than `out` holds is an error.
fn read_all(mut r: impl Read, out: &mut [u8]) -> Result<usize, String> {
    let mut n = 0;
    while n < out.len() {
        match r.read(&mut out[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) => return Err(format!("deflate: {e}")),
        }
    }
    let mut extra = [0u8; 1];
    if n == out.len() && r.read(&mut extra).map_err(|e| format!("deflate: {e}"))? > 0 {
        return Err(format!("chunk decodes to more than {} bytes", out.len()));
    }
    Ok(n)
}

impl Array {
    /// The array of a tensor whose metadata could not be read (never read from).
    pub(crate) fn empty() -> Array {
        Array {
            dtype: DType::U8,
            shape: Vec::new(),
            chunk: Vec::new(),
            big_endian: false,
            fill: vec![0],
            compression: Compression::None,
            crc32c: false,
            keys: Keys::V2('.'),
            shard: None,
            note: None,
            json: Json::Null,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_as_zarr_names_them() {
        assert_eq!(Keys::V2('.').key(&[0, 1]), "0.1");
        assert_eq!(Keys::V2('.').key(&[]), "0");
        assert_eq!(Keys::Default('/').key(&[2, 0]), "c/2/0");
        assert_eq!(Keys::Default('/').key(&[]), "c");
    }

    #[test]
    fn fill_values_in_every_form() {
        assert_eq!(fill_of(DType::F32, &Json::Null).unwrap(), vec![0; 4]);
        assert_eq!(
            fill_of(DType::F32, &"NaN".into()).unwrap(),
            f32::NAN.to_le_bytes()
        );
        assert_eq!(
            fill_of(DType::I64, &(-3).into()).unwrap(),
            (-3i64).to_le_bytes()
        );
        assert_eq!(
            fill_of(DType::U64, &u64::MAX.into()).unwrap(),
            u64::MAX.to_le_bytes()
        );
        assert_eq!(fill_of(DType::BF16, &1.0.into()).unwrap(), [0x80, 0x3f]);
        assert_eq!(
            fill_of(DType::F32, &"0x7fc00001".into()).unwrap(),
            0x7fc00001u32.to_le_bytes()
        );
        assert_eq!(fill_of(DType::Bool, &true.into()).unwrap(), [1]);
    }

    #[test]
    fn v2_dtypes_and_byte_order() {
        assert_eq!(v2_dtype("<f4").unwrap(), (DType::F32, false));
        assert_eq!(v2_dtype(">i8").unwrap(), (DType::I64, true));
        assert_eq!(v2_dtype("|b1").unwrap(), (DType::Bool, false));
        assert_eq!(v2_dtype("bfloat16").unwrap(), (DType::BF16, false));
        assert!(v2_dtype("<U8").is_err());
    }
}
