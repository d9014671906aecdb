//! Angel's four value types and how one value is written in text and in binary
//! (formats/angel.md §6–§8, SPEC §3 "Angel layouts").

use crate::elements::Value;
use crate::model::DType;
use crate::num::{write_f32_java, write_f64_java, write_i64};

/// Angel value type a dtype is written as (SPEC §3).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AngelValue {
    Float,
    Double,
    Int,
    Long,
}

impl AngelValue {
    /// float16/bfloat16 → float; 8/16-bit ints, bool and quantized → int; uint32, int64 and
    /// uint64 → long (uint64 keeps its bit pattern: values ≥ 2^63 read back negative);
    /// complex, strings, float8 and opaque types have no Angel form.
    pub fn of(dtype: DType) -> Option<AngelValue> {
        use DType::*;
        Some(match dtype {
            F16 | BF16 | F32 => AngelValue::Float,
            F64 => AngelValue::Double,
            I8 | I16 | I32 | U8 | U16 | Bool | QInt8 | QUInt8 | QInt16 | QUInt16 | QInt32
            | Int4 | UInt4 | Int2 | UInt2 => AngelValue::Int,
            U32 | I64 | U64 => AngelValue::Long,
            _ => return None,
        })
    }

    /// Bytes of one binary value.
    pub fn width(self) -> usize {
        match self {
            AngelValue::Float | AngelValue::Int => 4,
            AngelValue::Double | AngelValue::Long => 8,
        }
    }

    /// An element as this Angel type. Only dtypes `of` maps to `self` reach here, so floats
    /// widen exactly (float16/bfloat16 → f32) and integers fit (uint64 by bit pattern).
    #[inline]
    pub fn num(self, v: Value) -> AngelNum {
        match self {
            AngelValue::Float => AngelNum::Float(v.to_f32()),
            AngelValue::Double => AngelNum::Double(v.to_f64()),
            AngelValue::Int => AngelNum::Int(int_bits(v) as i32),
            AngelValue::Long => AngelNum::Long(int_bits(v)),
        }
    }

    /// The zero a column record writes for an absent sparse entry.
    pub(crate) fn zero(self) -> AngelNum {
        match self {
            AngelValue::Float => AngelNum::Float(0.0),
            AngelValue::Double => AngelNum::Double(0.0),
            AngelValue::Int => AngelNum::Int(0),
            AngelValue::Long => AngelNum::Long(0),
        }
    }
}

/// An integer element as i64 (uint64 by its bit pattern, bool as 0/1).
#[inline]
fn int_bits(v: Value) -> i64 {
    match v {
        Value::I64(x) => x,
        Value::U64(x) => x as i64,
        Value::Bool(b) => b as i64,
        other => other.to_f64() as i64,
    }
}

/// One value of an Angel type.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum AngelNum {
    Float(f32),
    Double(f64),
    Int(i32),
    Long(i64),
}

impl AngelNum {
    /// Java `Float.toString` / `Double.toString` / decimal integers (§6; doubles are never
    /// written in Angel's lossy DecimalFormat, SPEC §3).
    #[inline]
    pub(crate) fn write_text(self, out: &mut Vec<u8>) {
        match self {
            AngelNum::Float(x) => write_f32_java(x, out),
            AngelNum::Double(x) => write_f64_java(x, out),
            AngelNum::Int(x) => write_i64(x as i64, out),
            AngelNum::Long(x) => write_i64(x, out),
        }
    }

    /// Big-endian bytes (NaN payloads kept).
    #[inline]
    pub fn write_binary(self, out: &mut Vec<u8>) {
        match self {
            AngelNum::Float(x) => out.extend_from_slice(&x.to_bits().to_be_bytes()),
            AngelNum::Double(x) => out.extend_from_slice(&x.to_bits().to_be_bytes()),
            AngelNum::Int(x) => out.extend_from_slice(&x.to_be_bytes()),
            AngelNum::Long(x) => out.extend_from_slice(&x.to_be_bytes()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conversions_and_encodings() {
        let text = |n: AngelNum| {
            let mut v = Vec::new();
            n.write_text(&mut v);
            String::from_utf8(v).unwrap()
        };
        let bin = |n: AngelNum| {
            let mut v = Vec::new();
            n.write_binary(&mut v);
            v
        };
        let f = AngelValue::Float;
        assert_eq!(text(f.num(Value::F16(0x3555))), "0.33325195");
        assert_eq!(text(f.num(Value::BF16(0x0001))), "9.1835E-41");
        assert_eq!(bin(f.num(Value::F32(-2.5))), [0xc0, 0x20, 0, 0]);
        assert_eq!(text(AngelValue::Long.num(Value::U64(u64::MAX))), "-1");
        assert_eq!(text(AngelValue::Int.num(Value::Bool(true))), "1");
        assert_eq!(
            bin(AngelValue::Int.num(Value::I64(-2))),
            [0xff, 0xff, 0xff, 0xfe]
        );
        assert_eq!(bin(AngelValue::Double.zero()), [0; 8]);
        let nan = f32::from_bits(0x7fa0_0001);
        assert_eq!(bin(f.num(Value::F32(nan))), [0x7f, 0xa0, 0, 1]);
        assert_eq!(text(f.num(Value::F32(nan))), "NaN");
    }
}
