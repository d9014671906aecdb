//! The fast read of the line most of an LR's text is made of: `<id><sep>[-]<int>.<frac>` then
//! LF or CR LF (formats/angel.md §6, `ColIdValueTextRowFormat`).
//!
//! The first 32 bytes of the line are classified digit / non-digit in one step, and the ends
//! of the id, the integer part and the fraction are the positions of the mask's set bits:
//! reading the line byte by byte (or eight at a time, finding each end anew) was a third of
//! the parse. Every end found is checked to be the byte the shape wants there (the separator,
//! `.`, the line end), so a line of any other shape — or a mask that flagged a digit — is
//! refused, and the caller reads it the general way. What is accepted reads as `str::parse`
//! reads it: the id's digits exactly, the value through `decimal`.

use super::decimal::{self, first_digits};
use super::rowtype::ValueType;
use super::text;

/// The fast read of an `id<sep>value` line at the start of `rest` whose value is a plain
/// float (`decimal`) of type `value`, its id fitting `key_width` bytes: the id, with the value
/// appended to `values`, and the bytes the line took; `None` for any other line (nothing
/// appended), which the general read takes (and says what is wrong with).
#[inline]
pub(crate) fn id_value(
    rest: &[u8],
    sep: u8,
    key_width: usize,
    value: ValueType,
    values: &mut Vec<u8>,
) -> Option<(i64, usize)> {
    let fits = |id: i64| key_width == 8 || i32::try_from(id).is_ok();
    if let Some(l) = id_decimal(rest, sep).filter(|l| fits(l.id)) {
        let read =
            match value {
                ValueType::Float => decimal::f32_of(l.neg, l.m, l.k)
                    .map(|v| values.extend_from_slice(&v.to_le_bytes())),
                ValueType::Double => decimal::f64_of(l.neg, l.m, l.k)
                    .map(|v| values.extend_from_slice(&v.to_le_bytes())),
                ValueType::Long | ValueType::Int => return None,
            };
        if read.is_some() {
            return Some((l.id, l.used));
        }
    }
    // The shapes the window does not take: a signed id, a value without a fraction, a line
    // near the end of the data or longer than the window.
    let (id, after) = text::split_id(rest, sep)?;
    if !fits(id) {
        return None;
    }
    // The value's length with the line end after it (LF or CR LF).
    let ended = |len: usize| match after.get(len..) {
        Some([b'\n', ..]) => Some(len + 1),
        Some([b'\r', b'\n', ..]) => Some(len + 2),
        _ => None,
    };
    let used = match value {
        ValueType::Float => {
            let (v, len) = decimal::simple_f32_prefix(after)?;
            let used = ended(len)?;
            values.extend_from_slice(&v.to_le_bytes());
            used
        }
        ValueType::Double => {
            let (v, len) = decimal::simple_f64_prefix(after)?;
            let used = ended(len)?;
            values.extend_from_slice(&v.to_le_bytes());
            used
        }
        ValueType::Long | ValueType::Int => return None,
    };
    Some((id, rest.len() - after.len() + used))
}

/// Bytes a line must have after its start for this read: the window and the widest load at
/// its end (an eight-byte word from byte 31).
const NEED: usize = 48;

/// 10^0 ..= 10^16.
const POW10: [u64; 17] = {
    let mut p = [1u64; 17];
    let mut i = 1;
    while i < 17 {
        p[i] = p[i - 1] * 10;
        i += 1;
    }
    p
};

/// A line read: its id, its value as `(-1)^neg × m × 10^-k`, and the bytes it took with its
/// line end.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct IdDecimal {
    pub(crate) id: i64,
    pub(crate) neg: bool,
    pub(crate) m: u64,
    pub(crate) k: usize,
    pub(crate) used: usize,
}

/// The line at the start of `rest` when it is shaped `<id><sep>[-]<int>.<frac>` + line end,
/// with an id of 1 to 16 digits, an integer part and a fraction of 1 to 16 digits each, 19 at
/// most together, and the whole line within 32 bytes; `None` otherwise (nothing is wrong with
/// such a line: it is the caller's to read), and when fewer than `NEED` bytes are left.
///
/// `sep` must be a byte no number contains (`text::plain_separator`).
#[inline]
pub(crate) fn id_decimal(rest: &[u8], sep: u8) -> Option<IdDecimal> {
    let b: &[u8; NEED] = rest.first_chunk()?;
    let mask = nondigits(b.first_chunk().expect("NEED >= 32"));
    // Each position below is at most 32 (a zero mask has 32 trailing zeros) and is checked
    // against 31 before a byte at it is read.
    let id_len = mask.trailing_zeros() as usize;
    if id_len == 0 || id_len > 16 || b[id_len] != sep {
        return None;
    }
    let neg = b[id_len + 1] == b'-';
    let int_at = id_len + 1 + neg as usize;
    let int_len = (mask >> int_at).trailing_zeros() as usize;
    let dot = int_at + int_len;
    if int_len == 0 || int_len > 16 || dot > 30 || b[dot] != b'.' {
        return None;
    }
    let k = (mask >> (dot + 1)).trailing_zeros() as usize;
    let end = dot + 1 + k;
    if k == 0 || k > 16 || end > 31 || int_len + k > 19 {
        return None;
    }
    let used = match (b[end], b[end + 1]) {
        (b'\n', _) => end + 1,
        (b'\r', b'\n') => end + 2,
        _ => return None,
    };
    debug_assert!(end + 1 < NEED && used <= 33);
    let id = digits(b, 0, id_len) as i64;
    // Below 10^19 < 2^64 (19 digits at most): no overflow.
    let m = digits(b, int_at, int_len) * POW10[k] + digits(b, dot + 1, k);
    Some(IdDecimal {
        id,
        neg,
        m,
        k,
        used,
    })
}

/// The value of the `n` (1..=16) digits at `b[at..]`, `at + n <= 32`.
#[inline(always)]
fn digits(b: &[u8; NEED], at: usize, n: usize) -> u64 {
    debug_assert!((1..=16).contains(&n) && at + n <= 32);
    let word = |i: usize| u64::from_le_bytes(b[i..i + 8].try_into().expect("i + 8 <= NEED"));
    if n <= 8 {
        first_digits(word(at), n)
    } else {
        first_digits(word(at), n - 8) * 100_000_000 + first_digits(word(at + n - 8), 8)
    }
}

/// Bit `i` set when `w[i]` is not an ASCII digit.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn nondigits(w: &[u8; 32]) -> u32 {
    use std::arch::x86_64::{
        _mm_cmplt_epi8, _mm_loadu_si128, _mm_movemask_epi8, _mm_set1_epi8, _mm_sub_epi8,
    };
    // A digit is `x - b'0' < 10` unsigned; shifted by 128 that is a signed comparison, which
    // SSE2 (part of every x86_64) has.
    // SAFETY: SSE2 is enabled on every x86_64 target; the loads read `w[0..16]` and
    // `w[16..32]`, unaligned.
    let digits = unsafe {
        let shift = _mm_set1_epi8((b'0' as i8).wrapping_sub(-128));
        let ten = _mm_set1_epi8(-128 + 10);
        let lo = _mm_sub_epi8(_mm_loadu_si128(w.as_ptr().cast()), shift);
        let hi = _mm_sub_epi8(_mm_loadu_si128(w.as_ptr().add(16).cast()), shift);
        let lo = _mm_movemask_epi8(_mm_cmplt_epi8(lo, ten)) as u32 & 0xffff;
        let hi = _mm_movemask_epi8(_mm_cmplt_epi8(hi, ten)) as u32 & 0xffff;
        lo | hi << 16
    };
    !digits
}

#[cfg(not(target_arch = "x86_64"))]
#[inline(always)]
fn nondigits(w: &[u8; 32]) -> u32 {
    nondigits_swar(w)
}

/// `nondigits` eight bytes at a time in a word, for any target. It may also flag a digit right
/// after a byte >= 0xfa (a carry); `id_decimal` checks the byte at every end it finds.
#[cfg_attr(target_arch = "x86_64", allow(dead_code))]
#[inline(always)]
fn nondigits_swar(w: &[u8; 32]) -> u32 {
    const HIGH: u64 = 0xf0f0_f0f0_f0f0_f0f0;
    const THREES: u64 = 0x3030_3030_3030_3030;
    const LOW7: u64 = 0x7f7f_7f7f_7f7f_7f7f;
    let mut mask = 0u32;
    for (i, c) in w.chunks_exact(8).enumerate() {
        let x = u64::from_le_bytes(c.try_into().expect("chunks of 8"));
        // Non-zero bytes where the high nibble is not 3, or not 3 any more with 6 added.
        let other =
            ((x & HIGH) ^ THREES) | ((x.wrapping_add(0x0606_0606_0606_0606) & HIGH) ^ THREES);
        // Each non-zero byte to its top bit, then the eight top bits gathered into a byte.
        let top = (((other & LOW7).wrapping_add(LOW7)) | other) & !LOW7;
        mask |= (((top >> 7).wrapping_mul(0x0102_0408_1020_4080) >> 56) as u32) << (8 * i);
    }
    mask
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What `id_decimal` must give for `line` (padded), by plain byte-at-a-time reading.
    fn slow(line: &[u8], sep: u8) -> Option<IdDecimal> {
        let is_digit = |b: &u8| b.is_ascii_digit();
        let id_len = line.iter().take_while(|b| is_digit(b)).count();
        if !(1..=16).contains(&id_len) || line.get(id_len) != Some(&sep) {
            return None;
        }
        let mut at = id_len + 1;
        let neg = line.get(at) == Some(&b'-');
        at += neg as usize;
        let int_len = line[at..].iter().take_while(|b| is_digit(b)).count();
        let dot = at + int_len;
        if !(1..=16).contains(&int_len) || line.get(dot) != Some(&b'.') {
            return None;
        }
        let k = line[dot + 1..].iter().take_while(|b| is_digit(b)).count();
        let end = dot + 1 + k;
        if !(1..=16).contains(&k) || int_len + k > 19 || end > 31 {
            return None;
        }
        let used = match &line[end..] {
            [b'\n', ..] => end + 1,
            [b'\r', b'\n', ..] => end + 2,
            _ => return None,
        };
        let num = |s: &[u8]| std::str::from_utf8(s).unwrap().parse::<u64>().unwrap();
        let frac = &line[dot + 1..end];
        Some(IdDecimal {
            id: num(&line[..id_len]) as i64,
            neg,
            m: num(&line[at..dot]) * 10u64.pow(k as u32) + num(frac),
            k,
            used,
        })
    }

    fn padded(line: &[u8]) -> Vec<u8> {
        let mut v = line.to_vec();
        v.resize(line.len().max(NEED) + 8, b'7');
        v
    }

    #[test]
    fn reads_lines_of_the_shape_and_refuses_the_rest() {
        let sep = b',';
        for (line, want) in [
            (
                &b"47,804.923975\n"[..],
                Some((47, false, 804_923_975, 6, 14)),
            ),
            (
                b"2147483647,-908.504623\r\n",
                Some((2_147_483_647, true, 908_504_623, 6, 24)),
            ),
            (b"0,0.0\n", Some((0, false, 0, 1, 6))),
            (
                b"1234567890123456,1.5\n",
                Some((1_234_567_890_123_456, false, 15, 1, 21)),
            ),
            (
                b"1,1234567890123456.123\n",
                Some((1, false, 1_234_567_890_123_456_123, 3, 23)),
            ),
        ] {
            let got = id_decimal(&padded(line), sep).map(|r| (r.id, r.neg, r.m, r.k, r.used));
            assert_eq!(got, want, "{}", String::from_utf8_lossy(line));
        }
        for line in [
            &b"12345678901234567,1.5\n"[..], // id of 17 digits
            b"-7,1.5\n",
            b"+7,1.5\n",
            b",1.5\n",
            b"7;1.5\n",
            b"7,5\n",
            b"7,5.\n",
            b"7,.5\n",
            b"7,--5.5\n",
            b"7,1.5e3\n",
            b"7,1.5 \n",
            b"7,1.5\r\r\n",
            b"7,1.5",
            b"7,12345678901.123456789\n",          // 20 digits
            b"1234567890123456,123456789.12345\n", // past 32 bytes
            b"1,0.123456789012345678\n",           // a fraction of 18 digits
        ] {
            assert_eq!(
                id_decimal(&padded(line), sep),
                None,
                "{}",
                String::from_utf8_lossy(line)
            );
        }
        // Too little left after the line start.
        assert_eq!(id_decimal(b"7,1.5\n", sep), None);
    }

    #[test]
    fn agrees_with_a_byte_at_a_time_read_on_random_lines() {
        let mut s = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = || {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            s
        };
        let alphabet = b"0123456789012345678901234567890123456789,.-\n\r/:\xfa\xff ";
        let mut accepted = 0;
        for _ in 0..300_000 {
            let len = (next() % 40) as usize;
            let mut line: Vec<u8> = (0..len)
                .map(|_| alphabet[(next() % alphabet.len() as u64) as usize])
                .collect();
            // Mostly well-shaped lines, some with one byte changed.
            if next() % 2 == 0 {
                let r = next();
                line = format!(
                    "{},{}{}.{}\n",
                    r % 10u64.pow((r % 12) as u32 + 1),
                    if r & (1 << 40) != 0 { "-" } else { "" },
                    (r >> 8) % 1000,
                    (r >> 20) % 10u64.pow((r >> 50) as u32 % 9 + 1)
                )
                .into_bytes();
                if next() % 4 == 0 {
                    let at = (next() % line.len() as u64) as usize;
                    line[at] = alphabet[(next() % alphabet.len() as u64) as usize];
                }
            }
            let p = padded(&line);
            let got = id_decimal(&p, b',');
            assert_eq!(got, slow(&p, b','), "{}", String::from_utf8_lossy(&line));
            accepted += got.is_some() as u32;
            let mut w = [0u8; 32];
            w.copy_from_slice(&p[..32]);
            let exact: u32 = (0..32)
                .filter(|&i| !w[i].is_ascii_digit())
                .map(|i| 1 << i)
                .sum();
            assert_eq!(nondigits(&w), exact);
            // The word-at-a-time mask flags every non-digit, and digits only after a byte
            // >= 0xfa.
            let swar = nondigits_swar(&w);
            assert_eq!(swar & exact, exact);
            for i in 0..32 {
                if swar & !exact & (1 << i) != 0 {
                    assert!(i > 0 && w[i - 1] >= 0xfa, "{w:?} {i}");
                }
            }
        }
        assert!(accepted > 100_000, "{accepted}");
    }
}
