//! Slice keys of partitioned variables (§7.3): TF's OrderedCode encoding of
//! `(0, name, rank, start_0, length_0, …)`, where a whole dimension is `(0, -1)`.

use crate::proto::TensorSliceProto;

/// `num_inc`: a length byte, then the value big-endian without leading zero bytes.
fn put_num_inc(out: &mut Vec<u8>, v: u64) {
    let bytes = v.to_be_bytes();
    let skip = bytes.iter().take_while(|&&b| b == 0).count();
    out.push((8 - skip) as u8);
    out.extend_from_slice(&bytes[skip..]);
}

/// `ordered_string`: `00 → 00 ff`, `ff → ff 00`, terminated by `00 01`.
fn put_ordered_string(out: &mut Vec<u8>, s: &[u8]) {
    for &b in s {
        match b {
            0x00 => out.extend_from_slice(&[0x00, 0xff]),
            0xff => out.extend_from_slice(&[0xff, 0x00]),
            _ => out.push(b),
        }
    }
    out.extend_from_slice(&[0x00, 0x01]);
}

/// `signed_inc`: n-byte two's complement with the top n bits inverted (n = 1..=10).
fn put_signed_inc(out: &mut Vec<u8>, v: i64) {
    let n = (1..=10usize)
        .find(|&n| {
            let bits = 7 * n as u32 - 1;
            bits >= 64 || (v >= -(1i128 << bits) as i64 && (v as i128) < (1i128 << bits))
        })
        .unwrap_or(10);
    // 10-byte sign-extended big-endian representation.
    let mut buf = [if v < 0 { 0xffu8 } else { 0 }; 10];
    buf[2..].copy_from_slice(&v.to_be_bytes());
    let bytes = &mut buf[10 - n..];
    // Invert the top n bits.
    for bit in 0..n {
        bytes[bit / 8] ^= 0x80 >> (bit % 8);
    }
    out.extend_from_slice(bytes);
}

/// The key of one slice of tensor `name` (the proto as stored: explicit extents kept).
pub(crate) fn slice_key(name: &[u8], slice: &TensorSliceProto) -> Vec<u8> {
    let mut out = Vec::with_capacity(name.len() + 8 + 4 * slice.extent.len());
    put_num_inc(&mut out, 0);
    put_ordered_string(&mut out, name);
    put_num_inc(&mut out, slice.extent.len() as u64);
    for e in &slice.extent {
        match e.length {
            Some(len) => {
                put_signed_inc(&mut out, e.start);
                put_signed_inc(&mut out, len);
            }
            None => {
                put_signed_inc(&mut out, 0);
                put_signed_inc(&mut out, -1);
            }
        }
    }
    out
}

/// Decoding side, for listing: the tensor name a slice key refers to, or `None` if `key` is
/// not a well-formed slice key.
pub(crate) fn slice_key_name(key: &[u8]) -> Option<Vec<u8>> {
    let rest = key.strip_prefix(&[0x00])?;
    let mut name = Vec::new();
    let mut i = 0;
    loop {
        let b = *rest.get(i)?;
        match b {
            0x00 => match *rest.get(i + 1)? {
                0xff => name.push(0),
                0x01 => break,
                _ => return None,
            },
            0xff => {
                if *rest.get(i + 1)? != 0x00 {
                    return None;
                }
                name.push(0xff)
            }
            _ => {
                name.push(b);
                i += 1;
                continue;
            }
        }
        i += 2;
    }
    Some(name)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::Extent;

    fn signed(v: i64) -> Vec<u8> {
        let mut o = Vec::new();
        put_signed_inc(&mut o, v);
        o
    }

    #[test]
    fn signed_vectors() {
        let cases: &[(i64, &[u8])] = &[
            (0, &[0x80]),
            (5, &[0x85]),
            (63, &[0xbf]),
            (-1, &[0x7f]),
            (-64, &[0x40]),
            (64, &[0xc0, 0x40]),
            (255, &[0xc0, 0xff]),
            (256, &[0xc1, 0x00]),
            (16777216, &[0xf1, 0, 0, 0]),
            (1 << 32, &[0xf9, 0, 0, 0, 0]),
            (
                i64::MAX,
                &[0xff, 0xc0, 0x7f, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff],
            ),
            (-65, &[0x3f, 0xbf]),
            (-8193, &[0x1f, 0xdf, 0xff]),
            (-1048577, &[0x0f, 0xef, 0xff, 0xff]),
            (-i64::MAX, &[0x00, 0x3f, 0x80, 0, 0, 0, 0, 0, 0, 0x01]),
        ];
        for (v, want) in cases {
            assert_eq!(&signed(*v), want, "{v}");
        }
        let mut o = Vec::new();
        put_num_inc(&mut o, 256);
        assert_eq!(o, [0x02, 0x01, 0x00]);
    }

    fn ext(s: i64, l: Option<i64>) -> Extent {
        Extent {
            start: s,
            length: l,
        }
    }

    #[test]
    fn key_examples() {
        let foo = TensorSliceProto {
            extent: vec![ext(0, None), ext(0, None), ext(1, Some(3)), ext(4, Some(5))],
        };
        assert_eq!(
            slice_key(b"foo", &foo),
            [0, 0x66, 0x6f, 0x6f, 0, 1, 1, 4, 0x80, 0x7f, 0x80, 0x7f, 0x81, 0x83, 0x84, 0x85]
        );
        let a = TensorSliceProto {
            extent: vec![ext(0, Some(5)), ext(0, None)],
        };
        assert_eq!(
            slice_key(b"emb", &a),
            [0, 0x65, 0x6d, 0x62, 0, 1, 1, 2, 0x80, 0x85, 0x80, 0x7f]
        );
        let b = TensorSliceProto {
            extent: vec![ext(5, Some(5)), ext(0, None)],
        };
        assert_eq!(
            slice_key(b"emb", &b),
            [0, 0x65, 0x6d, 0x62, 0, 1, 1, 2, 0x85, 0x85, 0x80, 0x7f]
        );
        assert_eq!(
            slice_key(b"a", &TensorSliceProto { extent: vec![] }),
            [0, 0x61, 0, 1, 0]
        );
        let odd = slice_key(&[b'x', 0, 0xff], &a);
        assert_eq!(slice_key_name(&odd).unwrap(), [b'x', 0, 0xff]);
        assert_eq!(slice_key_name(&slice_key(b"emb", &b)).unwrap(), b"emb");
        assert_eq!(slice_key_name(b"\x00abc"), None);
        assert_eq!(slice_key_name(b"abc"), None);
    }
}
