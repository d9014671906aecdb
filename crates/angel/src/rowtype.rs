//! Angel `rowType` (formats/angel.md §5): value type = `rowType / 7`, variant = `rowType % 7`.
//! Only 0..28 are supported; 28 and above are `ANY` types the eight formats cannot hold.

use crate::model::DType;

/// The element type of a matrix, as stored on disk.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ValueType {
    Double,
    Float,
    Long,
    Int,
}

impl ValueType {
    /// Bytes per value in the binary formats (and in `read_elements` output).
    pub fn width(self) -> usize {
        match self {
            ValueType::Double | ValueType::Long => 8,
            ValueType::Float | ValueType::Int => 4,
        }
    }

    pub(crate) fn dtype(self) -> DType {
        match self {
            ValueType::Double => DType::F64,
            ValueType::Float => DType::F32,
            ValueType::Long => DType::I64,
            ValueType::Int => DType::I32,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RowType {
    pub code: i32,
    pub value: ValueType,
    /// 8 for long-key variants (`% 7 ∈ {2, 5, 6}`), else 4.
    pub key_width: usize,
    /// Dense storage (`% 7 < 3`); sparse types may still be stored densely.
    pub dense: bool,
}

impl RowType {
    /// Decodes `code`; `None` for negative codes and the unsupported `ANY` types (≥ 28).
    pub fn from_code(code: i64) -> Option<RowType> {
        if !(0..28).contains(&code) {
            return None;
        }
        let value = match code / 7 {
            0 => ValueType::Double,
            1 => ValueType::Float,
            2 => ValueType::Long,
            _ => ValueType::Int,
        };
        let variant = code % 7;
        Some(RowType {
            code: code as i32,
            value,
            key_width: if matches!(variant, 2 | 5 | 6) { 8 } else { 4 },
            dense: variant < 3,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_the_table() {
        let t = RowType::from_code(12).unwrap(); // T_FLOAT_SPARSE_LONGKEY
        assert_eq!(
            (t.value, t.key_width, t.dense),
            (ValueType::Float, 8, false)
        );
        let t = RowType::from_code(7).unwrap(); // T_FLOAT_DENSE
        assert_eq!((t.value, t.key_width, t.dense), (ValueType::Float, 4, true));
        let t = RowType::from_code(2).unwrap(); // T_DOUBLE_DENSE_LONGKEY_COMPONENT
        assert_eq!(
            (t.value, t.key_width, t.dense),
            (ValueType::Double, 8, true)
        );
        let t = RowType::from_code(21).unwrap(); // T_INT_DENSE
        assert_eq!((t.value, t.key_width, t.dense), (ValueType::Int, 4, true));
        let t = RowType::from_code(17).unwrap(); // T_LONG_SPARSE
        assert_eq!((t.value, t.key_width, t.dense), (ValueType::Long, 4, false));
        assert!(RowType::from_code(28).is_none());
        assert!(RowType::from_code(-1).is_none());
    }
}
