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

/// The name TF gives dtype `code` in Python (`float32`, `resource`), and to a reference type
/// (base code + 100: `DT_FLOAT_REF` = 101) its base's name with `_ref` (`float32_ref`).
pub(crate) fn name(code: i32) -> std::borrow::Cow<'static, str> {
    match code {
        101..=199 => match from_tf(code - 100) {
            DType::Opaque(_) => from_tf(code).name(),
            base => format!("{}_ref", base.name()).into(),
        },
        _ => from_tf(code).name(),
    }
}

/// TF's `DataType` enum names by code (`types.proto`), the `_REF` variants at code + 100.
const ENUM_NAMES: [&str; 34] = [
    "DT_INVALID",
    "DT_FLOAT",
    "DT_DOUBLE",
    "DT_INT32",
    "DT_UINT8",
    "DT_INT16",
    "DT_INT8",
    "DT_STRING",
    "DT_COMPLEX64",
    "DT_INT64",
    "DT_BOOL",
    "DT_QINT8",
    "DT_QUINT8",
    "DT_QINT32",
    "DT_BFLOAT16",
    "DT_QINT16",
    "DT_QUINT16",
    "DT_UINT16",
    "DT_COMPLEX128",
    "DT_HALF",
    "DT_RESOURCE",
    "DT_VARIANT",
    "DT_UINT32",
    "DT_UINT64",
    "DT_FLOAT8_E5M2",
    "DT_FLOAT8_E4M3FN",
    "DT_FLOAT8_E4M3FNUZ",
    "DT_FLOAT8_E4M3B11FNUZ",
    "DT_FLOAT8_E5M2FNUZ",
    "DT_INT4",
    "DT_UINT4",
    "DT_INT2",
    "DT_UINT2",
    "DT_FLOAT4_E2M1FN",
];

/// The enum name of a `DataType` code (`DT_FLOAT`, `DT_FLOAT_REF`), `None` for codes TF does
/// not name (printed as numbers).
pub(crate) fn enum_name(code: i64) -> Option<std::borrow::Cow<'static, str>> {
    let (base, is_ref) = match code {
        0..=33 => (code, false),
        101..=133 => (code - 100, true),
        _ => return None,
    };
    let name = ENUM_NAMES[usize::try_from(base).ok()?];
    Some(if is_ref {
        format!("{name}_REF").into()
    } else {
        name.into()
    })
}

/// The TF `DataType` code of `dtype` (inverse of `from_tf`); `None` for types TF cannot
/// store in a bundle as they are here.
pub fn to_tf(dtype: DType) -> Option<i32> {
    use DType::*;
    Some(match dtype {
        F32 => 1,
        F64 => 2,
        I32 => 3,
        U8 => 4,
        I16 => 5,
        I8 => 6,
        Str => 7,
        C64 => 8,
        I64 => 9,
        Bool => 10,
        QInt8 => 11,
        QUInt8 => 12,
        QInt32 => 13,
        BF16 => 14,
        QInt16 => 15,
        QUInt16 => 16,
        U16 => 17,
        C128 => 18,
        F16 => 19,
        U32 => 22,
        U64 => 23,
        Float8(c) => i32::from(c),
        Int4 => 29,
        UInt4 => 30,
        Int2 => 31,
        UInt2 => 32,
        Variant | Opaque(_) | Blocks(_) => return None,
    })
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

#[cfg(test)]
mod name_tests {
    use super::name;

    #[test]
    fn reference_and_invalid_dtypes_as_tf_names_them() {
        assert_eq!(name(101), "float32_ref");
        assert_eq!(name(109), "int64_ref");
        assert_eq!(name(107), "string_ref");
        assert_eq!(name(0), "invalid");
        assert_eq!(name(1), "float32");
        assert_eq!(name(20), "resource");
        assert_eq!(name(150), "dtype_150");
    }
}
