use super::*;
use crate::source::MemSource as MemFile;
use crate::source::ReadCtx;

/// A minimal protobuf writer for tests.
#[derive(Default)]
pub(crate) struct Pb(pub(crate) Vec<u8>);

impl Pb {
    fn varint(&mut self, mut v: u64) {
        while v >= 0x80 {
            self.0.push(v as u8 | 0x80);
            v >>= 7;
        }
        self.0.push(v as u8);
    }
    pub(crate) fn int(mut self, field: u32, v: u64) -> Self {
        self.varint(u64::from(field) << 3);
        self.varint(v);
        self
    }
    pub(crate) fn bytes(mut self, field: u32, b: &[u8]) -> Self {
        self.varint(u64::from(field) << 3 | 2);
        self.varint(b.len() as u64);
        self.0.extend_from_slice(b);
        self
    }
    pub(crate) fn f32(mut self, field: u32, v: f32) -> Self {
        self.varint(u64::from(field) << 3 | 5);
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }
    pub(crate) fn shape(self, dims: &[i64]) -> Self {
        let mut s = Pb::default();
        for &d in dims {
            s = s.bytes(2, &Pb::default().int(1, d as u64).0);
        }
        self.bytes(2, &s.0)
    }
}

fn tensor(proto: &[u8]) -> ProtoTensor {
    let info = scan(proto, 0..proto.len(), 0).unwrap();
    let file: Arc<dyn ReadAt> = Arc::new(MemFile::new("graph.pb", proto.to_vec()));
    let meta = ProtoTensor::graph_meta("c", "Const", &*file);
    ProtoTensor::new(file, info, meta)
}

fn read(t: &ProtoTensor, first: u64, n: usize) -> Vec<u8> {
    let mut out = vec![0xaa; n * t.meta().dtype.elem_size().unwrap()];
    crate::model::read_elements(t, ReadCtx::none(), first, &mut out).unwrap();
    out
}

use crate::testing::f32s;

#[test]
fn tensor_content_is_read_in_place() {
    let raw: Vec<u8> = [1.5f32, -2.0, 3.25, 0.0]
        .iter()
        .flat_map(|v| v.to_le_bytes())
        .collect();
    let p = Pb::default().int(1, 1).shape(&[2, 2]).bytes(4, &raw);
    let t = tensor(&p.0);
    assert_eq!(t.meta().shape, [2, 2]);
    assert_eq!(f32s(&read(&t, 1, 2)), [-2.0, 3.25]);
    // A content shorter than the shape needs is a problem, not a short read.
    let p = Pb::default().int(1, 1).shape(&[3]).bytes(4, &raw[..8]);
    let t = tensor(&p.0);
    assert!(t.meta().problem.is_some());
    let mut out = [0u8; 4];
    assert!(crate::model::read_elements(&t, ReadCtx::none(), 0, &mut out).is_err());
}

#[test]
fn typed_values_repeat_the_last_one() {
    // float_val unpacked 1.0, 2.0 for 5 elements → 1 2 2 2 2
    let p = Pb::default().int(1, 1).shape(&[5]).f32(5, 1.0).f32(5, 2.0);
    let t = tensor(&p.0);
    assert_eq!(f32s(&read(&t, 0, 5)), [1.0, 2.0, 2.0, 2.0, 2.0]);
    assert_eq!(f32s(&read(&t, 3, 2)), [2.0, 2.0]);
    // Packed float_val.
    let packed: Vec<u8> = [7.0f32, 8.0].iter().flat_map(|v| v.to_le_bytes()).collect();
    let t = tensor(&Pb::default().int(1, 1).shape(&[3]).bytes(5, &packed).0);
    assert_eq!(f32s(&read(&t, 0, 3)), [7.0, 8.0, 8.0]);
    // No value at all: zeros.
    let t = tensor(&Pb::default().int(1, 1).shape(&[2]).0);
    assert_eq!(f32s(&read(&t, 0, 2)), [0.0, 0.0]);
}

#[test]
fn a_huge_constant_of_one_value_is_never_materialised() {
    // 2^40 elements stored as one 0: a small read far in works, nothing big is allocated.
    let p = Pb::default()
        .int(1, 1)
        .shape(&[1 << 20, 1 << 20])
        .f32(5, 0.5);
    let t = tensor(&p.0);
    assert_eq!(t.meta().num_elements(), Some(1 << 40));
    assert_eq!(f32s(&read(&t, (1 << 40) - 3, 3)), [0.5, 0.5, 0.5]);
}

#[test]
fn integer_fields_narrow_like_tf() {
    // int8 from int_val: -3 is a 10-byte varint; uint8 255; int16 packed.
    let t = tensor(
        &Pb::default()
            .int(1, 6)
            .shape(&[2])
            .int(7, -3i64 as u64)
            .int(7, 4)
            .0,
    );
    assert_eq!(read(&t, 0, 2), [0xfd, 4]);
    let mut vals = Vec::new();
    for v in [300u64, (-2i64) as u64] {
        let mut q = Pb::default();
        q.varint(v);
        vals.extend_from_slice(&q.0);
    }
    let t = tensor(&Pb::default().int(1, 5).shape(&[3]).bytes(7, &vals).0);
    assert_eq!(read(&t, 0, 3), [44, 1, 0xfe, 0xff, 0xfe, 0xff]);
    // bool_val, int64_val, half_val (bits of 1.0 in float16 = 0x3c00)
    let t = tensor(&Pb::default().int(1, 10).shape(&[2]).int(11, 1).int(11, 0).0);
    assert_eq!(read(&t, 0, 2), [1, 0]);
    let t = tensor(&Pb::default().int(1, 9).shape(&[1]).int(10, u64::MAX).0);
    assert_eq!(read(&t, 0, 1), [0xff; 8]);
    let t = tensor(&Pb::default().int(1, 19).shape(&[2]).int(13, 0x3c00).0);
    assert_eq!(read(&t, 0, 2), [0x00, 0x3c, 0x00, 0x3c]);
    // complex64: pairs, the last pair repeats.
    let t = tensor(
        &Pb::default()
            .int(1, 8)
            .shape(&[2])
            .f32(9, 1.0)
            .f32(9, -1.0)
            .0,
    );
    assert_eq!(f32s(&read(&t, 0, 2)), [1.0, -1.0, 1.0, -1.0]);
}

#[test]
fn strings_repeat_too() {
    let t = tensor(
        &Pb::default()
            .int(1, 7)
            .shape(&[3])
            .bytes(8, b"a")
            .bytes(8, b"bc")
            .0,
    );
    let mut got = Vec::new();
    t.for_each_string(ReadCtx::none(), 0, 3, &mut |s| got.push(s.to_vec()))
        .unwrap();
    assert_eq!(got, [b"a".to_vec(), b"bc".to_vec(), b"bc".to_vec()]);
}

#[test]
fn nonsense_is_a_problem_or_an_error_never_a_panic() {
    for p in [
        Pb::default().int(1, 1).shape(&[-1]).0,
        Pb::default().int(1, 1).shape(&[1 << 40, 1 << 40]).0,
        Pb::default().int(1, 20).shape(&[1]).0,
        Pb::default().int(1, 1).shape(&[1]).bytes(5, &[1, 2, 3]).0,
    ] {
        let info = scan(&p, 0..p.len(), 0).unwrap();
        let file: Arc<dyn ReadAt> = Arc::new(MemFile::new("g", p.clone()));
        let meta = ProtoTensor::graph_meta("c", "Const", &*file);
        let t = ProtoTensor::new(file, info, meta);
        let mut out = [0u8; 4];
        if t.meta().problem.is_none() {
            assert!(
                crate::model::read_elements(&t, ReadCtx::none(), 0, &mut out).is_err(),
                "{p:?}"
            );
        }
    }
    assert!(scan(&[0x12, 9], 0..2, 0).is_err());
}
