//! ggml's tensor types: each a block of `block` elements stored in `bytes` bytes. The plain
//! types (one element a block) are served as their dtype; Q4_0, Q4_1, Q5_0, Q5_1, Q8_0 and
//! the K-quants (Q2_K–Q6_K, and Q8_K as ggml decodes it) are dequantized to float32 exactly as
//! gguf-py's `dequantize` does (float16 scales widened, then float32 products and sums one at
//! a time: no fused multiply-add); every other type is shown by its ggml name, stored blocks
//! only (`.bin`).

use half::f16;

use crate::model::DType;

#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct GgmlType {
    pub(crate) id: u32,
    pub(crate) name: &'static str,
    /// ggml's own name for it (`ggml_type_name`: `q4_k`, `iq4_nl`), as a dtype's.
    pub(crate) lower_name: &'static str,
    /// Elements per block and bytes per block.
    pub(crate) block: u64,
    pub(crate) bytes: u64,
    pub(crate) decode: Decode,
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Decode {
    /// Stored as the elements of this dtype.
    Plain(DType),
    /// Dequantized to float32.
    Quant(Quant),
    /// Not decoded: raw blocks only.
    Raw,
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Quant {
    Q4_0,
    Q4_1,
    Q5_0,
    Q5_1,
    Q8_0,
    Q2K,
    Q3K,
    Q4K,
    Q5K,
    Q6K,
    Q8K,
}

/// The type of ggml id `id`, if known.
pub(crate) fn ggml_type(id: u32) -> Option<GgmlType> {
    use Decode::*;
    const K: u64 = 256;
    let (name, lower_name, block, bytes, decode) = match id {
        0 => ("F32", "f32", 1, 4, Plain(DType::F32)),
        1 => ("F16", "f16", 1, 2, Plain(DType::F16)),
        2 => ("Q4_0", "q4_0", 32, 18, Quant(self::Quant::Q4_0)),
        3 => ("Q4_1", "q4_1", 32, 20, Quant(self::Quant::Q4_1)),
        6 => ("Q5_0", "q5_0", 32, 22, Quant(self::Quant::Q5_0)),
        7 => ("Q5_1", "q5_1", 32, 24, Quant(self::Quant::Q5_1)),
        8 => ("Q8_0", "q8_0", 32, 34, Quant(self::Quant::Q8_0)),
        // ggml's block_q8_1 (a half2 and 32 int8s: 36 bytes; gguf-py 0.19 still says 40).
        9 => ("Q8_1", "q8_1", 32, 36, Raw),
        10 => ("Q2_K", "q2_k", K, 84, Quant(self::Quant::Q2K)),
        11 => ("Q3_K", "q3_k", K, 110, Quant(self::Quant::Q3K)),
        12 => ("Q4_K", "q4_k", K, 144, Quant(self::Quant::Q4K)),
        13 => ("Q5_K", "q5_k", K, 176, Quant(self::Quant::Q5K)),
        14 => ("Q6_K", "q6_k", K, 210, Quant(self::Quant::Q6K)),
        15 => ("Q8_K", "q8_k", K, 292, Quant(self::Quant::Q8K)),
        16 => ("IQ2_XXS", "iq2_xxs", K, 66, Raw),
        17 => ("IQ2_XS", "iq2_xs", K, 74, Raw),
        18 => ("IQ3_XXS", "iq3_xxs", K, 98, Raw),
        19 => ("IQ1_S", "iq1_s", K, 50, Raw),
        20 => ("IQ4_NL", "iq4_nl", 32, 18, Raw),
        21 => ("IQ3_S", "iq3_s", K, 110, Raw),
        22 => ("IQ2_S", "iq2_s", K, 82, Raw),
        23 => ("IQ4_XS", "iq4_xs", K, 136, Raw),
        24 => ("I8", "i8", 1, 1, Plain(DType::I8)),
        25 => ("I16", "i16", 1, 2, Plain(DType::I16)),
        26 => ("I32", "i32", 1, 4, Plain(DType::I32)),
        27 => ("I64", "i64", 1, 8, Plain(DType::I64)),
        28 => ("F64", "f64", 1, 8, Plain(DType::F64)),
        29 => ("IQ1_M", "iq1_m", K, 56, Raw),
        30 => ("BF16", "bf16", 1, 2, Plain(DType::BF16)),
        34 => ("TQ1_0", "tq1_0", K, 54, Raw),
        35 => ("TQ2_0", "tq2_0", K, 66, Raw),
        39 => ("MXFP4", "mxfp4", 32, 17, Raw),
        40 => ("NVFP4", "nvfp4", 64, 36, Raw),
        41 => ("Q1_0", "q1_0", 128, 18, Raw),
        _ => return None,
    };
    Some(GgmlType {
        id,
        name,
        lower_name,
        block,
        bytes,
        decode,
    })
}

/// The ggml types by how they are shown, for `--help`: as stored, dequantized to float32,
/// and blocks shown as stored only (`.bin`).
pub(crate) fn types_by_decode() -> [Vec<&'static str>; 3] {
    let mut out: [Vec<&'static str>; 3] = Default::default();
    for t in (0..64).filter_map(ggml_type) {
        let i = match t.decode {
            Decode::Plain(_) => 0,
            Decode::Quant(_) => 1,
            Decode::Raw => 2,
        };
        out[i].push(t.lower_name);
    }
    out
}

impl Quant {
    /// Elements `from..from + out.len() / 4` of the block `b` (its bytes) as float32, into
    /// `out` (little-endian).
    pub(crate) fn dequantize(self, b: &[u8], from: usize, out: &mut [u8]) {
        debug_assert!(from + out.len() / 4 <= self.block());
        for (k, slot) in out.chunks_exact_mut(4).enumerate() {
            slot.copy_from_slice(&self.value(b, from + k).to_le_bytes());
        }
    }

    /// Elements per block.
    fn block(self) -> usize {
        match self {
            Quant::Q4_0 | Quant::Q4_1 | Quant::Q5_0 | Quant::Q5_1 | Quant::Q8_0 => 32,
            _ => 256,
        }
    }

    /// Element `j` of block `b`. Each is gguf-py's arithmetic in its order: float16 scales
    /// widened, then float32 products and differences one at a time (never fused).
    fn value(self, b: &[u8], j: usize) -> f32 {
        let f16_at = |i: usize| f16::from_le_bytes([b[i], b[i + 1]]).to_f32();
        // Elements 0..16 are the low halves of bytes 0..16, 16..32 the high halves.
        let nibble = |qs: usize| {
            let byte = b[qs + j % 16];
            if j < 16 {
                byte & 0x0f
            } else {
                byte >> 4
            }
        };
        // Q5: the fifth bit of element j is bit j of a little-endian u32.
        let high =
            |qh: usize| (u32::from_le_bytes([b[qh], b[qh + 1], b[qh + 2], b[qh + 3]]) >> j) & 1;
        match self {
            Quant::Q8_0 => f32::from(b[2 + j] as i8) * f16_at(0),
            Quant::Q4_0 => f16_at(0) * f32::from(nibble(2) as i8 - 8),
            Quant::Q4_1 => f16_at(0) * f32::from(nibble(4)) + f16_at(2),
            Quant::Q5_0 => {
                let q = (nibble(6) as u32 | high(2) << 4) as i8 - 16;
                f16_at(0) * f32::from(q)
            }
            Quant::Q5_1 => {
                let q = nibble(8) as u32 | high(4) << 4;
                f16_at(0) * (q as f32) + f16_at(2)
            }
            // scales[16] (low nibble: scale, high: min), qs[64], d, dmin. The 256 elements
            // are 2 halves of 4 shifts of 32 bytes' 2-bit fields; 16 elements share a scale.
            Quant::Q2K => {
                let (h, k, l) = (j / 128, j % 128 / 32, j % 32);
                let q = (b[16 + 32 * h + l] >> (2 * k)) & 3;
                let sc = b[j / 16];
                let dl = f16_at(80) * f32::from(sc & 0x0f);
                let ml = f16_at(82) * f32::from(sc >> 4);
                dl * f32::from(q) - ml
            }
            // hmask[32], qs[64], scales[12] (6-bit, packed), d. The high bit is set when the
            // value is *not* offset by 4.
            Quant::Q3K => {
                let s = j / 16;
                let sc = &b[96..108];
                let low = (sc[s % 8] >> (4 * (s / 8))) & 0x0f;
                let hi = (sc[8 + s % 4] >> (2 * (s / 4))) & 0x03;
                let scale = f32::from((low | hi << 4) as i8 - 32);
                let (h, k, l) = (j / 128, j % 128 / 32, j % 32);
                let ql = ((b[32 + 32 * h + l] >> (2 * k)) & 3) as i8;
                let qh = ((b[l] >> (j / 32)) & 1) ^ 1;
                let q = ql - (qh << 2) as i8;
                (f16_at(108) * scale) * f32::from(q)
            }
            // d, dmin, scales[12] (8 scales and 8 mins of 6 bits), qs[128]: 4 runs of 32 bytes,
            // low nibbles then high; 32 elements share a scale.
            Quant::Q4K => {
                let (sc, m) = scale_min_k4(&b[4..16], j / 32);
                let (c, k, l) = (j / 64, j % 64 / 32, j % 32);
                let q = (b[16 + 32 * c + l] >> (4 * k)) & 0x0f;
                (f16_at(0) * f32::from(sc)) * f32::from(q) - f16_at(2) * f32::from(m)
            }
            // Q4_K's fields and qh[32] (bit j/32 of byte j%32 is the fifth bit) before qs.
            Quant::Q5K => {
                let (sc, m) = scale_min_k4(&b[4..16], j / 32);
                let (c, k, l) = (j / 64, j % 64 / 32, j % 32);
                let low = (b[48 + 32 * c + l] >> (4 * k)) & 0x0f;
                let q = low | ((b[16 + l] >> (j / 32)) & 1) << 4;
                (f16_at(0) * f32::from(sc)) * f32::from(q) - f16_at(2) * f32::from(m)
            }
            // ql[128] (low 4 bits), qh[64] (high 2 bits), scales[16] (int8), d.
            Quant::Q6K => {
                let (h, r) = (j / 128, j % 128);
                let low = (b[64 * h + r % 64] >> (4 * (r / 64))) & 0x0f;
                let hi = (b[128 + 32 * h + r % 32] >> (2 * (r / 32))) & 0x03;
                let q = (low | hi << 4) as i8 - 32;
                (f16_at(208) * f32::from(b[192 + j / 16] as i8)) * f32::from(q)
            }
            // d (float32), qs[256] (int8), bsums[16] (not needed to decode).
            Quant::Q8K => {
                let d = f32::from_le_bytes([b[0], b[1], b[2], b[3]]);
                d * f32::from(b[4 + j] as i8)
            }
        }
    }
}

/// Scale and min `s` (of 8) of a Q4_K/Q5_K block's 12 packed bytes: 6 bits each, the first
/// four in the low bits of bytes 0..4 (scales) and 4..8 (mins), the last four split between
/// bytes 8..12 (low 4 bits) and the top 2 bits of bytes 0..8.
fn scale_min_k4(sc: &[u8], s: usize) -> (u8, u8) {
    if s < 4 {
        (sc[s] & 0x3f, sc[4 + s] & 0x3f)
    } else {
        (
            (sc[4 + s] & 0x0f) | ((sc[s - 4] >> 2) & 0x30),
            (sc[4 + s] >> 4) | ((sc[s] >> 2) & 0x30),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn block_q8(d: f32, q: [i8; 32]) -> Vec<u8> {
        let mut b = f16::from_f32(d).to_le_bytes().to_vec();
        b.extend(q.iter().map(|&x| x as u8));
        b
    }

    use crate::testing::f32s as floats;

    #[test]
    fn q8_0_is_scale_times_integer() {
        let mut q = [0i8; 32];
        q[0] = -128;
        q[31] = 127;
        let b = block_q8(0.5, q);
        let mut out = vec![0u8; 32 * 4];
        Quant::Q8_0.dequantize(&b, 0, &mut out);
        let v = floats(&out);
        assert_eq!((v[0], v[1], v[31]), (-64.0, 0.0, 63.5));
        let mut tail = vec![0u8; 4];
        Quant::Q8_0.dequantize(&b, 31, &mut tail);
        assert_eq!(floats(&tail), [63.5]);
    }

    #[test]
    fn q4_0_nibbles_low_then_high() {
        let mut b = f16::from_f32(2.0).to_le_bytes().to_vec();
        // Byte 0: low nibble 0 (→ element 0 = -8), high nibble 15 (→ element 16 = 7).
        b.push(0xf0);
        b.extend([0x88; 15]);
        let mut out = vec![0u8; 32 * 4];
        Quant::Q4_0.dequantize(&b, 0, &mut out);
        let v = floats(&out);
        assert_eq!((v[0], v[16], v[1], v[17]), (-16.0, 14.0, 0.0, 0.0));
    }

    #[test]
    fn every_type_has_a_block() {
        for id in 0..64 {
            if let Some(t) = ggml_type(id) {
                assert!(t.block > 0 && t.bytes > 0, "{}", t.name);
                assert_eq!(t.lower_name, t.name.to_lowercase());
                if let Decode::Plain(d) = t.decode {
                    assert_eq!(d.elem_size(), Some(t.bytes as usize), "{}", t.name);
                }
            }
        }
    }
}
