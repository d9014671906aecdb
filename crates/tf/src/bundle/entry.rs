//! One `BundleEntryProto` validated into what a tensor needs (§4.2). An entry that fails a
//! check keeps whatever metadata could be read and carries the reason in `problem`: it is
//! still listed, its data reads fail.

use prost::Message;

use crate::dtype;
use crate::model::DType;
use crate::proto::{BundleEntryProto, TensorSliceProto};

/// Where a plain entry's bytes are.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct DataLoc {
    pub shard: u32,
    pub offset: u64,
    pub size: u64,
    /// Masked CRC32C as stored.
    pub crc: u32,
}

#[derive(Clone, Debug)]
pub struct Entry {
    pub dtype: DType,
    pub shape: Vec<u64>,
    /// `None` for partitioned full entries and entries with a bad location.
    pub loc: Option<DataLoc>,
    /// Non-empty ⇒ a partitioned full entry (§7).
    pub slices: Vec<TensorSliceProto>,
    pub problem: Option<String>,
    /// A dtype modelfs does not decode (`resource`, a `_ref` or future code): a note of the
    /// verdicts, not damage (`modelfs_model::verdict`).
    pub note: Option<String>,
}

impl Entry {
    pub fn num_elements(&self) -> Option<u64> {
        self.shape.iter().try_fold(1u64, |a, &d| a.checked_mul(d))
    }
}

/// Longest rank TF accepts.
const MAX_RANK: usize = 254;

pub fn parse_entry(value: &[u8], num_shards: u32) -> Entry {
    let mut entry = Entry {
        dtype: DType::Opaque(0),
        shape: Vec::new(),
        loc: None,
        slices: Vec::new(),
        problem: None,
        note: None,
    };
    let proto = match BundleEntryProto::decode(value) {
        Ok(p) => p,
        Err(e) => {
            entry.problem = Some(format!("unreadable index entry: {e}"));
            return entry;
        }
    };
    entry.dtype = dtype::from_tf(proto.dtype);
    entry.slices = proto.slices;
    let shape = proto.shape.unwrap_or_default();
    if let Err(m) = check_shape(&shape, &mut entry.shape) {
        entry.problem = Some(m);
        return entry;
    }
    match entry.dtype {
        // Code 0 is no dtype at all: an index entry no writer makes.
        DType::Opaque(0) => {
            entry.problem = Some("dtype invalid (code 0)".into());
            return entry;
        }
        DType::Opaque(code) => {
            entry.note = Some(format!(
                "dtype {} (code {code}) is not decoded here",
                entry.dtype.name()
            ));
            return entry;
        }
        _ => {}
    }
    let Some(n) = entry.num_elements() else {
        entry.problem = Some("element count overflows".into());
        return entry;
    };
    if !entry.slices.is_empty() {
        return entry; // partitioned: fields 3–6 are ignored (§7.4)
    }
    if proto.shard_id < 0 || proto.shard_id as u32 >= num_shards {
        entry.problem = Some(format!(
            "shard_id {} out of range (the bundle has {num_shards} shards)",
            proto.shard_id
        ));
        return entry;
    }
    if proto.offset < 0 || proto.size < 0 || proto.offset.checked_add(proto.size).is_none() {
        entry.problem = Some(format!("bad offset {} / size {}", proto.offset, proto.size));
        return entry;
    }
    let size = proto.size as u64;
    match entry.dtype.elem_size() {
        Some(elem) if n.checked_mul(elem as u64) != Some(size) => {
            entry.problem = Some(format!(
                "size {size} does not match {n} elements of {}",
                entry.dtype.name()
            ));
            return entry;
        }
        Some(_) => {}
        None if entry.dtype == DType::Str && size < n => {
            entry.problem = Some(format!("size {size} too small for {n} strings"));
            return entry;
        }
        None => {}
    }
    entry.loc = Some(DataLoc {
        shard: proto.shard_id as u32,
        offset: proto.offset as u64,
        size,
        crc: proto.crc32c,
    });
    entry
}

fn check_shape(shape: &crate::proto::TensorShapeProto, out: &mut Vec<u64>) -> Result<(), String> {
    if shape.unknown_rank {
        return Err("shape has unknown rank".into());
    }
    if shape.dim.len() > MAX_RANK {
        return Err(format!("rank {} exceeds {MAX_RANK}", shape.dim.len()));
    }
    for d in &shape.dim {
        if d.size < 0 {
            return Err(format!("negative dimension {}", d.size));
        }
        out.push(d.size as u64);
    }
    if out
        .iter()
        .try_fold(1u64, |a, &d| a.checked_mul(d))
        .is_none_or(|n| n > i64::MAX as u64)
    {
        return Err("element count overflows".into());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn checks() {
        let e = parse_entry(
            &[
                0x08, 0x01, 0x12, 0x00, 0x28, 0x04, 0x35, 0xa6, 0x7b, 0x11, 0x3a,
            ],
            1,
        );
        assert!(e.problem.is_none());
        assert_eq!(e.loc.unwrap().crc, 0x3a11_7ba6);
        // size 5 for one float.
        assert!(parse_entry(&[0x08, 0x01, 0x12, 0x00, 0x28, 0x05], 1)
            .problem
            .is_some());
        // shard 1 of 1.
        assert!(
            parse_entry(&[0x08, 0x01, 0x12, 0x00, 0x18, 0x01, 0x28, 0x04], 1)
                .problem
                .is_some()
        );
        // Resource dtype: listed with a note (not decoded), not a problem (not damage).
        let r = parse_entry(&[0x08, 0x14, 0x12, 0x00], 1);
        assert_eq!(r.dtype, DType::Opaque(20));
        assert!(r.problem.is_none() && r.note.is_some(), "{r:?}");
        // Code 0 is no dtype: damage.
        let z = parse_entry(&[0x08, 0x00, 0x12, 0x00], 1);
        assert!(z.problem.is_some() && z.note.is_none(), "{z:?}");
        // Unknown rank.
        assert!(parse_entry(&[0x08, 0x01, 0x12, 0x02, 0x18, 0x01], 1)
            .problem
            .is_some());
        // Negative dim: shape { dim { size: -1 } }.
        let mut v = vec![0x08, 0x01, 0x12, 0x0d, 0x12, 0x0b, 0x08];
        crate::codec::put_varint64(&mut v, u64::MAX);
        assert!(parse_entry(&v, 1).problem.unwrap().contains("negative"));
        // Zero dim [3, 0]: 0 elements, size 0.
        let z = parse_entry(
            &[0x08, 0x01, 0x12, 0x06, 0x12, 0x02, 0x08, 0x03, 0x12, 0x00],
            1,
        );
        assert!(z.problem.is_none(), "{:?}", z.problem);
        assert_eq!(z.shape, [3, 0]);
        // Garbage.
        assert!(parse_entry(&[0x12, 0x7f], 1).problem.is_some());
    }
}
