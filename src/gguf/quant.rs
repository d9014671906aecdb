//! ggml's tensor types: each a block of `block` elements stored in `bytes` bytes. The plain
//! types (one element a block) are served as their dtype; Q4_0, Q4_1, Q5_0, Q5_1 and Q8_0 are
//! dequantized to float32 exactly as gguf-py's `dequantize` does (float16 scales widened,
//! then one float32 multiply, and one add for the `_1` types: no fused multiply-add); every
//! other type is shown raw (`.bin` only).

use half::f16;

use crate::model::DType;

#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct GgmlType {
    pub(crate) id: u32,
    pub(crate) name: &'static str,
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
}

/// The type of ggml id `id`, if known.
pub(crate) fn ggml_type(id: u32) -> Option<GgmlType> {
    use Decode::*;
    const K: u64 = 256;
    let (name, block, bytes, decode) = match id {
        0 => ("F32", 1, 4, Plain(DType::F32)),
        1 => ("F16", 1, 2, Plain(DType::F16)),
        2 => ("Q4_0", 32, 18, Quant(self::Quant::Q4_0)),
        3 => ("Q4_1", 32, 20, Quant(self::Quant::Q4_1)),
        6 => ("Q5_0", 32, 22, Quant(self::Quant::Q5_0)),
        7 => ("Q5_1", 32, 24, Quant(self::Quant::Q5_1)),
        8 => ("Q8_0", 32, 34, Quant(self::Quant::Q8_0)),
        9 => ("Q8_1", 32, 40, Raw),
        10 => ("Q2_K", K, 84, Raw),
        11 => ("Q3_K", K, 110, Raw),
        12 => ("Q4_K", K, 144, Raw),
        13 => ("Q5_K", K, 176, Raw),
        14 => ("Q6_K", K, 210, Raw),
        15 => ("Q8_K", K, 292, Raw),
        16 => ("IQ2_XXS", K, 66, Raw),
        17 => ("IQ2_XS", K, 74, Raw),
        18 => ("IQ3_XXS", K, 98, Raw),
        19 => ("IQ1_S", K, 50, Raw),
        20 => ("IQ4_NL", 32, 18, Raw),
        21 => ("IQ3_S", K, 110, Raw),
        22 => ("IQ2_S", K, 82, Raw),
        23 => ("IQ4_XS", K, 136, Raw),
        24 => ("I8", 1, 1, Plain(DType::I8)),
        25 => ("I16", 1, 2, Plain(DType::I16)),
        26 => ("I32", 1, 4, Plain(DType::I32)),
        27 => ("I64", 1, 8, Plain(DType::I64)),
        28 => ("F64", 1, 8, Plain(DType::F64)),
        29 => ("IQ1_M", K, 56, Raw),
        30 => ("BF16", 1, 2, Plain(DType::BF16)),
        34 => ("TQ1_0", K, 54, Raw),
        35 => ("TQ2_0", K, 66, Raw),
        39 => ("MXFP4", 32, 17, Raw),
        40 => ("NVFP4", 64, 36, Raw),
        41 => ("Q1_0", 128, 18, Raw),
        _ => return None,
    };
    Some(GgmlType {
        id,
        name,
        block,
        bytes,
        decode,
    })
}

impl Quant {
    /// Elements `from..from + out.len() / 4` of the block `b` (its bytes) as float32, into
    /// `out` (little-endian).
    pub(crate) fn dequantize(self, b: &[u8], from: usize, out: &mut [u8]) {
        let f16_at = |i: usize| f16::from_le_bytes([b[i], b[i + 1]]).to_f32();
        debug_assert!(from + out.len() / 4 <= 32);
        for (k, slot) in out.chunks_exact_mut(4).enumerate() {
            let j = from + k;
            // The element's nibble: elements 0..16 are the low halves of bytes 0..16, 16..32
            // the high halves.
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
            let v = match self {
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
            };
            slot.copy_from_slice(&v.to_le_bytes());
        }
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

    fn floats(out: &[u8]) -> Vec<f32> {
        out.chunks(4)
            .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
            .collect()
    }

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
                if let Decode::Plain(d) = t.decode {
                    assert_eq!(d.elem_size(), Some(t.bytes as usize), "{}", t.name);
                }
            }
        }
    }
}
