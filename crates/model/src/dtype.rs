//! Element types (`DType`): names, widths, and what each decodes to.

use std::borrow::Cow;

/// Element types. The first group is what SPEC §2 names; the rest are TF's rarer types,
/// stored as fixed-width integers or raw bytes, or not decodable at all.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DType {
    F16,
    BF16,
    F32,
    F64,
    I8,
    I16,
    I32,
    I64,
    U8,
    U16,
    U32,
    U64,
    Bool,
    C64,
    C128,
    Str,
    /// Quantized integers (raw, no scale): qint8, quint8, qint16, quint16, qint32.
    QInt8,
    QUInt8,
    QInt16,
    QUInt16,
    QInt32,
    /// One element per byte, low 4 (or 2) bits, sign-extended for the signed variants.
    Int4,
    UInt4,
    Int2,
    UInt2,
    /// float8 variants by TF code (24..=28), and float4_e2m1fn (33, one per byte): raw bytes.
    Float8(u8),
    /// DT_VARIANT: opaque per-element bytes.
    Variant,
    /// Anything else (resource, `_ref` types, future codes): listed, never decoded.
    Opaque(i32),
    /// Elements stored in blocks of an encoding of their own that no layout decodes (GGUF's
    /// `iq4_nl`, `tq1_0`, …), by the encoding's name: listed, served as stored (`.bin`).
    Blocks(&'static str),
}

impl DType {
    /// Width of one element in `read_elements` output; `None` for variable-size or opaque types.
    pub fn elem_size(self) -> Option<usize> {
        use DType::*;
        Some(match self {
            I8 | U8 | Bool | QInt8 | QUInt8 | Int4 | UInt4 | Int2 | UInt2 | Float8(_) => 1,
            F16 | BF16 | I16 | U16 | QInt16 | QUInt16 => 2,
            F32 | I32 | U32 | QInt32 => 4,
            F64 | I64 | U64 | C64 => 8,
            C128 => 16,
            Str | Variant | Opaque(_) | Blocks(_) => return None,
        })
    }

    /// The name shown in `.json` and xattrs (SPEC §2).
    pub fn name(self) -> Cow<'static, str> {
        use DType::*;
        Cow::Borrowed(match self {
            F16 => "float16",
            BF16 => "bfloat16",
            F32 => "float32",
            F64 => "float64",
            I8 => "int8",
            I16 => "int16",
            I32 => "int32",
            I64 => "int64",
            U8 => "uint8",
            U16 => "uint16",
            U32 => "uint32",
            U64 => "uint64",
            Bool => "bool",
            C64 => "complex64",
            C128 => "complex128",
            Str => "string",
            QInt8 => "qint8",
            QUInt8 => "quint8",
            QInt16 => "qint16",
            QUInt16 => "quint16",
            QInt32 => "qint32",
            Int4 => "int4",
            UInt4 => "uint4",
            Int2 => "int2",
            UInt2 => "uint2",
            Float8(24) => "float8_e5m2",
            Float8(25) => "float8_e4m3fn",
            Float8(26) => "float8_e4m3fnuz",
            Float8(27) => "float8_e4m3b11fnuz",
            Float8(28) => "float8_e5m2fnuz",
            Float8(33) => "float4_e2m1fn",
            Float8(_) => "float8",
            Variant => "variant",
            Opaque(0) => "invalid",
            Opaque(20) => "resource",
            Opaque(code) => return Cow::Owned(format!("dtype_{code}")),
            Blocks(name) => name,
        })
    }
}
