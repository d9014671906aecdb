//! TF `DataType` codes (§5) ↔ `model::DType`, and the byte-swap width of each (§4.5).

use crate::model::DType;

/// Maps a stored dtype code. Codes that cannot be decoded (0, resource, `_ref` types,
/// unknown future codes) become `Opaque(code)`: listed, never decoded.
pub(crate) fn from_tf(code: i32) -> DType {
    use DType::*;
    match code {
        1 => F32,
        2 => F64,
        3 => I32,
        4 => U8,
        5 => I16,
        6 => I8,
        7 => Str,
        8 => C64,
        9 => I64,
        10 => Bool,
        11 => QInt8,
        12 => QUInt8,
        13 => QInt32,
        14 => BF16,
        15 => QInt16,
        16 => QUInt16,
        17 => U16,
        18 => C128,
        19 => F16,
        21 => Variant,
        22 => U32,
        23 => U64,
        24..=28 | 33 => Float8(code as u8),
        29 => Int4,
        30 => UInt4,
        31 => Int2,
        32 => UInt2,
        other => Opaque(other),
    }
}

/// Width of the units to byte-swap when the bundle's endianness differs from little-endian:
/// the element size, or each half of a complex; 1 = nothing to swap.
pub(crate) fn swap_width(dtype: DType) -> usize {
    match dtype {
        DType::C64 => 4,
        DType::C128 => 8,
        other => other.elem_size().unwrap_or(1),
    }
}

/// Byte-swaps every `width`-byte unit of `buf` in place (`buf.len()` is a multiple).
pub(crate) fn swap_in_place(buf: &mut [u8], width: usize) {
    if width > 1 {
        for unit in buf.chunks_exact_mut(width) {
            unit.reverse();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mapping() {
        assert_eq!(from_tf(1), DType::F32);
        assert_eq!(from_tf(14), DType::BF16);
        assert_eq!(from_tf(19), DType::F16);
        assert_eq!(from_tf(25), DType::Float8(25));
        assert_eq!(from_tf(0), DType::Opaque(0));
        assert_eq!(from_tf(20), DType::Opaque(20));
        assert_eq!(from_tf(101), DType::Opaque(101));
        assert_eq!(swap_width(DType::C128), 8);
        assert_eq!(swap_width(DType::Bool), 1);
        let mut b = [1u8, 2, 3, 4, 5, 6, 7, 8];
        swap_in_place(&mut b, 4);
        assert_eq!(b, [4, 3, 2, 1, 8, 7, 6, 5]);
    }
}
