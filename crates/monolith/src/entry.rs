//! `EntryDump` (proto2, package `monolith.hash_table`; formats/monolith.md): field 1 `id`
//! (sfixed64), field 2 `num` (repeated float, unpacked or packed), others skipped by wire type.

use crate::codec::wire::{Fields, Value, WireError};

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum EntryError {
    #[error("entry: truncated field")]
    Truncated,
    #[error("entry: field {field} has wire type {wire}, not what EntryDump gives it")]
    WireType { field: u64, wire: u8 },
    #[error("entry: unsupported wire type {0} (groups)")]
    Group(u8),
    #[error("entry: no id")]
    NoId,
}

impl From<WireError> for EntryError {
    fn from(e: WireError) -> Self {
        match e {
            WireError::Malformed(_) => EntryError::Truncated,
            WireError::WireType(w, _) => EntryError::Group(w),
        }
    }
}

/// The entry's id; its `num` values are appended to `nums` (little-endian f32 bytes, as read).
/// The last `id` wins, as in protobuf; `num`s accumulate in order.
pub(crate) fn parse_entry(data: &[u8], nums: &mut Vec<u8>) -> Result<i64, EntryError> {
    let mut id = None;
    for field in Fields::new(data) {
        let field = field?;
        match (field.number, field.value) {
            (1, Value::Fixed64(v)) => id = Some(v as i64),
            (2, Value::Fixed32(v)) => nums.extend_from_slice(&v.to_le_bytes()),
            (2, Value::Bytes { start, end }) => {
                let b = &data[start..end];
                if b.len() % 4 != 0 {
                    return Err(EntryError::Truncated);
                }
                nums.extend_from_slice(b);
            }
            (1 | 2, v) => {
                let wire = match v {
                    Value::Varint(_) => 0,
                    Value::Fixed64(_) => 1,
                    Value::Bytes { .. } => 2,
                    Value::Fixed32(_) => 5,
                };
                return Err(EntryError::WireType {
                    field: u64::from(field.number),
                    wire,
                });
            }
            _ => {}
        }
    }
    id.ok_or(EntryError::NoId)
}

/// An `EntryDump` of `id` and `nums` (packed when `packed`), with an optimizer dump and a
/// timestamp to be skipped (the test writer's).
#[cfg(any(test, feature = "testkit"))]
pub fn write_entry(id: i64, nums: &[f32], packed: bool, out: &mut Vec<u8>) {
    out.push(0x09);
    out.extend_from_slice(&id.to_le_bytes());
    if packed {
        out.push(0x12);
        let mut n = nums.len() as u64 * 4;
        while n >= 0x80 {
            out.push(n as u8 | 0x80);
            n >>= 7;
        }
        out.push(n as u8);
        nums.iter()
            .for_each(|v| out.extend_from_slice(&v.to_le_bytes()));
    } else {
        for v in nums {
            out.push(0x15);
            out.extend_from_slice(&v.to_le_bytes());
        }
    }
    // opt (field 3, a message) and last_update_ts_sec (field 4, varint): skipped.
    out.extend_from_slice(&[0x1a, 0x03, 0x0d, 0x01, 0x02]);
    out.extend_from_slice(&[0x20, 0xd2, 0x85, 0xd8, 0xcc, 0x04]);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_read_packed_or_not_and_skip_unknown_fields() {
        for packed in [false, true] {
            let mut b = Vec::new();
            write_entry(-(5 << 48) | 77, &[1.5, -2.0, 0.25], packed, &mut b);
            let mut nums = Vec::new();
            assert_eq!(parse_entry(&b, &mut nums), Ok(-(5 << 48) | 77));
            let v: Vec<f32> = crate::testing::f32s(&nums);
            assert_eq!(v, [1.5, -2.0, 0.25]);
            // A cut inside a field is an error; one between fields is a valid shorter entry
            // (protobuf is not self-delimiting: the record's CRC guards the length), whose
            // values are a prefix of the whole's, never other bytes.
            let whole = nums.clone();
            for cut in 0..b.len() {
                let mut got = Vec::new();
                if parse_entry(&b[..cut], &mut got).is_ok() {
                    assert!(whole.starts_with(&got), "cut {cut}");
                }
            }
        }
        assert_eq!(
            parse_entry(&[0x15, 0, 0, 0, 0], &mut Vec::new()),
            Err(EntryError::NoId)
        );
        assert!(parse_entry(&[0x0a, 0x00], &mut Vec::new()).is_err()); // id as bytes
        assert!(parse_entry(&[0x0b], &mut Vec::new()).is_err()); // a group
    }
}
