//! Protobuf messages of the bundle (§4, §7.2, §9.2), derived by hand for prost (no protoc).
//! Enums are kept as raw `int32` so unknown values reach our own validation instead of being
//! dropped. prost skips unknown fields, accepts any field order and packed or unpacked
//! repeated scalars, and merges a repeated non-repeated message field (§2).

#[derive(Clone, PartialEq, prost::Message)]
pub struct VersionDef {
    #[prost(int32, tag = "1")]
    pub producer: i32,
    #[prost(int32, tag = "2")]
    pub min_consumer: i32,
    #[prost(int32, repeated, tag = "3")]
    pub bad_consumers: Vec<i32>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct BundleHeaderProto {
    #[prost(int32, tag = "1")]
    pub num_shards: i32,
    /// 0 = little, 1 = big.
    #[prost(int32, tag = "2")]
    pub endianness: i32,
    #[prost(message, optional, tag = "3")]
    pub version: Option<VersionDef>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct Dim {
    #[prost(int64, tag = "1")]
    pub size: i64,
    #[prost(string, tag = "2")]
    pub name: String,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct TensorShapeProto {
    #[prost(message, repeated, tag = "2")]
    pub dim: Vec<Dim>,
    #[prost(bool, tag = "3")]
    pub unknown_rank: bool,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct Extent {
    #[prost(int64, tag = "1")]
    pub start: i64,
    /// Absent ⇒ the whole dimension (a oneof in TF's proto).
    #[prost(int64, optional, tag = "2")]
    pub length: Option<i64>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct TensorSliceProto {
    #[prost(message, repeated, tag = "1")]
    pub extent: Vec<Extent>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct BundleEntryProto {
    #[prost(int32, tag = "1")]
    pub dtype: i32,
    #[prost(message, optional, tag = "2")]
    pub shape: Option<TensorShapeProto>,
    #[prost(int32, tag = "3")]
    pub shard_id: i32,
    #[prost(int64, tag = "4")]
    pub offset: i64,
    #[prost(int64, tag = "5")]
    pub size: i64,
    #[prost(fixed32, tag = "6")]
    pub crc32c: u32,
    #[prost(message, repeated, tag = "7")]
    pub slices: Vec<TensorSliceProto>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct ObjectReference {
    #[prost(int32, tag = "1")]
    pub node_id: i32,
    #[prost(string, tag = "2")]
    pub local_name: String,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct SerializedTensor {
    #[prost(string, tag = "1")]
    pub name: String,
    #[prost(string, tag = "2")]
    pub full_name: String,
    #[prost(string, tag = "3")]
    pub checkpoint_key: String,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct SlotVariableReference {
    #[prost(int32, tag = "1")]
    pub original_variable_node_id: i32,
    #[prost(string, tag = "2")]
    pub slot_name: String,
    #[prost(int32, tag = "3")]
    pub slot_variable_node_id: i32,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct TrackableObject {
    #[prost(message, repeated, tag = "1")]
    pub children: Vec<ObjectReference>,
    #[prost(message, repeated, tag = "2")]
    pub attributes: Vec<SerializedTensor>,
    #[prost(message, repeated, tag = "3")]
    pub slot_variables: Vec<SlotVariableReference>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct TrackableObjectGraph {
    #[prost(message, repeated, tag = "1")]
    pub nodes: Vec<TrackableObject>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use prost::Message;

    #[test]
    fn decodes_spec_examples() {
        let h = BundleHeaderProto::decode(&[0x08, 0x01, 0x10, 0x01, 0x1a, 0x02, 0x08, 0x01][..])
            .unwrap();
        assert_eq!(
            (h.num_shards, h.endianness, h.version.unwrap().producer),
            (1, 1, 1)
        );
        let e = BundleEntryProto::decode(
            &[
                0x08, 0x01, 0x12, 0x00, 0x28, 0x04, 0x35, 0x06, 0x38, 0x27, 0x1f,
            ][..],
        )
        .unwrap();
        assert_eq!((e.dtype, e.size, e.crc32c), (1, 4, 0x1f27_3806));
        assert_eq!(e.shape.unwrap().dim.len(), 0);
        let full = [
            0x08, 0x01, 0x12, 0x08, 0x12, 0x02, 0x08, 0x0a, 0x12, 0x02, 0x08, 0x04, 0x3a, 0x06,
            0x0a, 0x02, 0x10, 0x05, 0x0a, 0x00, 0x3a, 0x08, 0x0a, 0x04, 0x08, 0x05, 0x10, 0x05,
            0x0a, 0x00,
        ];
        let e = BundleEntryProto::decode(&full[..]).unwrap();
        assert_eq!(e.slices.len(), 2);
        assert_eq!(
            e.slices[1].extent[0],
            Extent {
                start: 5,
                length: Some(5)
            }
        );
        assert_eq!(
            e.slices[1].extent[1],
            Extent {
                start: 0,
                length: None
            }
        );
        // Descending field order and an unknown field.
        let e = BundleEntryProto::decode(&[0x28, 0x04, 0x78, 0x01, 0x08, 0x01][..]).unwrap();
        assert_eq!((e.dtype, e.size), (1, 4));
        // Truncated.
        assert!(BundleEntryProto::decode(&[0x12, 0x05, 0x00][..]).is_err());
        // Negative int32 as a 10-byte varint.
        let mut neg = vec![0x18];
        crate::codec::put_varint64(&mut neg, (-3i64) as u64);
        assert_eq!(BundleEntryProto::decode(&neg[..]).unwrap().shard_id, -3);
    }
}
